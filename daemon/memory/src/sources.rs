//! What an agent's memory is made of (SPEC §10): `MEMORY.md` and
//! `memory/**/*.md` in its workspace, configured workspace globs, and,
//! when asked for, its session transcripts. Every file has an index path:
//! relative to the workspace, or `sessions/<file>` for transcripts.
//!
//! Memory never reads outside the workspace and the sessions folder: the
//! walk does not follow symbolic links, paths with `..` are not sources,
//! and [`Sources::read`] refuses a file whose real path lies elsewhere (a
//! link named in a watcher event or asked for by `memory_get`).

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Files larger than this are skipped (with a warning in the status).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Where one agent's memory comes from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub workspace: PathBuf,
    /// Globs relative to the workspace (`notes/**/*.md`).
    pub extra_globs: Vec<String>,
    /// The agent's transcripts folder, when transcripts are indexed.
    pub sessions_dir: Option<PathBuf>,
    globs: GlobSet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `MEMORY.md` and `memory/**/*.md`.
    Memory,
    /// A configured workspace glob.
    Workspace,
    /// A session transcript.
    Sessions,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Workspace => "workspace",
            Self::Sessions => "sessions",
        }
    }
}

/// One file to index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub abs: PathBuf,
    /// The path stored in the index and shown in results.
    pub rel: String,
    pub kind: SourceKind,
}

impl Sources {
    /// Fails on a glob that does not parse, naming it.
    pub fn new(
        workspace: PathBuf,
        extra_globs: Vec<String>,
        sessions_dir: Option<PathBuf>,
    ) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for glob in &extra_globs {
            builder.add(Glob::new(glob)?);
        }
        Ok(Self {
            workspace,
            extra_globs,
            sessions_dir,
            globs: builder.build()?,
        })
    }

    /// Every source file present now, sorted by index path.
    pub fn list(&self) -> Vec<SourceFile> {
        let mut out = Vec::new();
        let mut files = Vec::new();
        walk(&self.workspace, 0, &mut files);
        for abs in files {
            if let Some(file) = self.classify(&abs) {
                out.push(file);
            }
        }
        if let Some(dir) = &self.sessions_dir
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            for entry in entries.flatten() {
                if let Some(file) = self.classify(&entry.path()) {
                    out.push(file);
                }
            }
        }
        out.sort_by(|a, b| a.rel.cmp(&b.rel));
        out.dedup_by(|a, b| a.rel == b.rel);
        out
    }

    /// The source file at `abs`, if it is one (whether or not it exists).
    pub fn classify(&self, abs: &Path) -> Option<SourceFile> {
        if let Some(dir) = &self.sessions_dir
            && abs.parent() == Some(dir.as_path())
        {
            let name = abs.file_name()?.to_str()?;
            return (name.ends_with(".jsonl") && !name.starts_with('.')).then(|| SourceFile {
                abs: abs.to_path_buf(),
                rel: format!("sessions/{name}"),
                kind: SourceKind::Sessions,
            });
        }
        let rel = abs.strip_prefix(&self.workspace).ok()?;
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return None;
        }
        let rel_str = rel.to_str()?.replace('\\', "/");
        if rel_str.split('/').any(|part| part.starts_with('.')) {
            return None;
        }
        let kind = if rel_str == "MEMORY.md"
            || (rel_str.starts_with("memory/") && rel_str.ends_with(".md"))
        {
            SourceKind::Memory
        } else if self.globs.is_match(rel) {
            SourceKind::Workspace
        } else {
            return None;
        };
        Some(SourceFile {
            abs: abs.to_path_buf(),
            rel: rel_str,
            kind,
        })
    }

    /// The path of an index path on disk.
    pub fn resolve(&self, rel: &str) -> Option<PathBuf> {
        let abs = match rel.strip_prefix("sessions/") {
            Some(name) if self.sessions_dir.is_some() => self.sessions_dir.as_ref()?.join(name),
            _ => self.workspace.join(rel),
        };
        self.classify(&abs).map(|f| f.abs)
    }

    /// The text of a source file as it is indexed, refusing a file whose
    /// real path (links resolved) is outside its root.
    pub fn read(&self, file: &SourceFile) -> std::io::Result<String> {
        let root = match file.kind {
            SourceKind::Sessions => self.sessions_dir.as_deref(),
            _ => Some(self.workspace.as_path()),
        };
        let real = std::fs::canonicalize(&file.abs)?;
        let inside = root
            .and_then(|r| std::fs::canonicalize(r).ok())
            .is_some_and(|r| real.starts_with(r));
        if !inside {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                OUTSIDE,
            ));
        }
        read_text(file)
    }
}

/// Why a linked file is not read.
pub const OUTSIDE: &str = "it is a link to a file outside the workspace";

/// Markdown as is, a transcript as one `role: text` line per message line.
fn read_text(file: &SourceFile) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Without blocking, and checked on the descriptor: a FIFO swapped in
    // for a note after the walk saw a file is refused, not waited on; and
    // no more than the size limit is read whatever the file grew to.
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&file.abs)?;
    if !handle.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut raw = Vec::new();
    handle.take(MAX_FILE_BYTES).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    Ok(match file.kind {
        SourceKind::Sessions => transcript_text(&text),
        _ => text,
    })
}

/// Keeps line numbers: line N of the result is message line N of the
/// transcript, or empty.
fn transcript_text(jsonl: &str) -> String {
    jsonl
        .lines()
        .map(|line| {
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
                return String::new();
            };
            match (entry["kind"].as_str(), entry["text"].as_str()) {
                (Some(role @ ("user" | "assistant")), Some(text)) if !text.trim().is_empty() => {
                    format!("{role}: {}", text.replace(['\n', '\r'], " "))
                }
                _ => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Regular files under `dir`, not following links, skipping hidden
/// entries and stopping at a sane depth.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(&entry.path(), depth + 1, out);
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_files_globs_and_transcripts_are_sources() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let sessions = dir.path().join("sessions");
        for (path, text) in [
            ("ws/MEMORY.md", "m"),
            ("ws/memory/2026-11-01.md", "d"),
            ("ws/memory/deep/topic.md", "t"),
            ("ws/memory/notes.txt", "no"),
            ("ws/notes/a.md", "n"),
            ("ws/AGENTS.md", "no"),
            ("ws/.hidden/MEMORY.md", "no"),
            ("sessions/abc.jsonl", "{}"),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let sources =
            Sources::new(ws.clone(), vec!["notes/**/*.md".into()], Some(sessions)).unwrap();
        let rels: Vec<(String, SourceKind)> = sources
            .list()
            .into_iter()
            .map(|f| (f.rel, f.kind))
            .collect();
        assert_eq!(
            rels,
            vec![
                ("MEMORY.md".into(), SourceKind::Memory),
                ("memory/2026-11-01.md".into(), SourceKind::Memory),
                ("memory/deep/topic.md".into(), SourceKind::Memory),
                ("notes/a.md".into(), SourceKind::Workspace),
                ("sessions/abc.jsonl".into(), SourceKind::Sessions),
            ]
        );
        assert_eq!(sources.resolve("notes/a.md"), Some(ws.join("notes/a.md")));
        assert_eq!(sources.resolve("AGENTS.md"), None);
        assert_eq!(sources.resolve("../x/MEMORY.md"), None);
    }

    #[test]
    fn a_transcript_keeps_its_line_numbers() {
        let jsonl = r#"{"kind":"meta","event":"x"}
{"kind":"user","text":"my cat is Miso"}
not json
{"kind":"assistant","text":"Nice\nname","model":"m","stop":"stop"}"#;
        assert_eq!(
            transcript_text(jsonl),
            "\nuser: my cat is Miso\n\nassistant: Nice name"
        );
    }
}
