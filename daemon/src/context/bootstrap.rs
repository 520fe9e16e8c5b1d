//! The bootstrap files of an agent's workspace (SPEC §9): `SOUL.md` and
//! `IDENTITY.md` feed the identity section, `AGENTS.md`, `TOOLS.md`,
//! `USER.md` and `MEMORY.md` the project context. Each file is capped, and
//! all of them together; a file over its cap keeps its first 70 % and last
//! 20 % with a marker between, so the model sees both how it starts and
//! what was added last.

use std::path::Path;

/// Every bootstrap file, in the order the prompt shows them.
pub const FILES: [&str; 6] = [
    "SOUL.md",
    "IDENTITY.md",
    "AGENTS.md",
    "TOOLS.md",
    "USER.md",
    "MEMORY.md",
];

/// The files a `minimal` prompt keeps.
pub const MINIMAL_FILES: [&str; 2] = ["AGENTS.md", "TOOLS.md"];

/// One file as it goes into the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapFile {
    pub name: &'static str,
    pub content: String,
    /// Set when the file was over its cap.
    pub trimmed: Option<Trimmed>,
}

/// How a file was cut to fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trimmed {
    /// Characters of the file on disk.
    pub from: usize,
    /// The cap it was cut to (its own, or what the total left).
    pub cap: usize,
}

/// Bytes of a bootstrap file read at most (far above any cap in chars).
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Which files to read and how much of them.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub file_chars: usize,
    pub total_chars: usize,
}

/// Reads the bootstrap files of `workspace` named in `names` (in
/// [`FILES`] order). Missing, empty and unreadable files are skipped: a
/// workspace without them is normal. Files that are not regular files
/// (a link out of the workspace, a folder) are skipped too.
pub fn load(workspace: &Path, names: &[&str], caps: Caps) -> Vec<BootstrapFile> {
    let mut out = Vec::new();
    let mut left = caps.total_chars;
    for name in FILES.iter().copied().filter(|n| names.contains(n)) {
        if left == 0 {
            break;
        }
        let path = workspace.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        // A FIFO swapped in after the check is refused, not waited on; a
        // file of gigabytes is read no further than MAX_FILE_BYTES.
        let Ok(bytes) = crate::util::read_regular(&path, MAX_FILE_BYTES) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let cap = caps.file_chars.min(left);
        let chars = text.chars().count();
        let file = if chars > cap {
            BootstrapFile {
                name,
                content: trim(text, chars, cap),
                trimmed: Some(Trimmed { from: chars, cap }),
            }
        } else {
            BootstrapFile {
                name,
                content: text.to_string(),
                trimmed: None,
            }
        };
        left = left.saturating_sub(file.content.chars().count());
        out.push(file);
    }
    out
}

/// The first 70 % and the last 20 % of `cap` characters of `text` (which
/// has `chars` characters), with a marker that says what was left out.
pub fn trim(text: &str, chars: usize, cap: usize) -> String {
    let head = cap * 7 / 10;
    let tail = cap * 2 / 10;
    let mut head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let mut tail_start = text
        .char_indices()
        .nth(chars - tail)
        .map_or(text.len(), |(i, _)| i);
    // Cut at line ends when one is near, so no line is left half.
    if let Some(nl) = text[..head_end].rfind('\n')
        && nl >= head_end - head_end / 5
    {
        head_end = nl;
    }
    if let Some(nl) = text[tail_start..].find('\n')
        && nl <= (text.len() - tail_start) / 5
    {
        tail_start += nl + 1;
    }
    let omitted = text[head_end..tail_start].chars().count();
    format!(
        "{}\n\n[... {omitted} characters omitted: the file is longer than the {cap}-character cap; read it with the read tool for the rest ...]\n\n{}",
        text[..head_end].trim_end(),
        text[tail_start..].trim_start()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(file: usize, total: usize) -> Caps {
        Caps {
            file_chars: file,
            total_chars: total,
        }
    }

    #[test]
    fn trim_keeps_seventy_percent_head_and_twenty_percent_tail() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let out = trim(&text, 1000, 100);
        let (head, rest) = out.split_once("\n\n[...").unwrap();
        let tail = rest.rsplit_once("]\n\n").unwrap().1;
        assert_eq!(head, &text[..70]);
        assert_eq!(tail, &text[980..]);
        assert!(out.contains("910 characters omitted"), "{out}");
    }

    #[test]
    fn trim_counts_characters_not_bytes() {
        let text = "记".repeat(500);
        let out = trim(&text, 500, 100);
        assert!(out.starts_with(&"记".repeat(70)));
        assert!(out.ends_with(&"记".repeat(20)));
    }

    #[test]
    fn files_load_in_prompt_order_and_share_the_total() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("USER.md"), "u".repeat(300)).unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "a".repeat(300)).unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "  \n").unwrap();
        std::fs::create_dir(dir.path().join("TOOLS.md")).unwrap();
        let files = load(dir.path(), &FILES, caps(1000, 500));
        let names: Vec<&str> = files.iter().map(|f| f.name).collect();
        assert_eq!(names, ["AGENTS.md", "USER.md"]);
        assert_eq!(files[0].trimmed, None);
        // 200 characters were left for USER.md.
        assert_eq!(
            files[1].trimmed,
            Some(Trimmed {
                from: 300,
                cap: 200
            })
        );
        assert!(files[1].content.starts_with(&"u".repeat(140)));
    }

    #[test]
    fn only_the_named_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "secret notes").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "rules").unwrap();
        let files = load(dir.path(), &MINIMAL_FILES, caps(1000, 1000));
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].name, "AGENTS.md");
    }

    #[test]
    fn a_link_out_of_the_workspace_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x"), "outside").unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), dir.path().join("AGENTS.md")).unwrap();
        assert!(load(dir.path(), &FILES, caps(1000, 1000)).is_empty());
    }
}
