//! Append-only JSONL transcripts, one file per session
//! (`sessions/<agent>/<session-id>.jsonl`).
//!
//! Every entry is one line written with a single `write` on an `O_APPEND`
//! file; the agent fsyncs at the end of each turn. A crash can therefore
//! leave at most one torn line at the end: [`Transcript::open`] detects it,
//! moves its bytes to `<file>.torn` for inspection, and truncates the file to
//! the last complete entry so that nothing before it is lost and new entries
//! start on a clean line.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One transcript line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// RFC 3339 time of writing.
    pub ts: String,
    /// The turn this entry belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    #[serde(flatten)]
    pub body: Body,
}

/// Token usage reported by the provider for one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    User {
        text: String,
        /// Images sent with the message (a photo from a chat), as paths
        /// relative to the agent's workspace; each request to a model with
        /// vision reads them again (`context::images`). Absent in older
        /// transcripts and for messages without images.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    Assistant {
        text: String,
        model: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Why the model stopped: `stop`, `tool_calls`, `length`, `aborted`.
        stop: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        /// The arguments exactly as the model produced them.
        arguments: String,
    },
    ToolResult {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
        duration_ms: u64,
    },
    /// Older history summarised (SPEC §9): the model sees `summary` in
    /// place of everything before `first_kept`.
    Compaction {
        summary: String,
        tokens_before: u64,
        #[serde(default)]
        tokens_after: u64,
        /// The first entry kept verbatim; `None`: none before this entry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_kept: Option<String>,
        /// `threshold`, `overflow` or `manual`.
        #[serde(default)]
        reason: String,
    },
    Meta {
        event: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
}

impl Body {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::User { .. } => "user",
            Self::Assistant { .. } => "assistant",
            Self::ToolCall { .. } => "tool_call",
            Self::ToolResult { .. } => "tool_result",
            Self::Compaction { .. } => "compaction",
            Self::Meta { .. } => "meta",
        }
    }
}

/// What loading found besides the entries.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovery {
    /// A torn last line was cut off (its bytes saved to `<file>.torn`).
    pub torn_tail: bool,
    /// Complete lines in the middle that did not parse (skipped).
    pub corrupt_lines: usize,
}

/// An open transcript.
pub struct Transcript {
    path: PathBuf,
    file: File,
    last_id: Option<String>,
}

impl Transcript {
    /// Opens (creating) a transcript and returns it with its entries.
    pub fn open(path: &Path) -> io::Result<(Self, Vec<Entry>, Recovery)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (entries, recovery, good_len) = parse(&bytes);
        if recovery.torn_tail {
            let mut torn = path.as_os_str().to_owned();
            torn.push(".torn");
            std::fs::write(PathBuf::from(torn), &bytes[good_len as usize..])?;
            let f = OpenOptions::new().write(true).open(path)?;
            f.set_len(good_len)?;
            f.sync_all()?;
            tracing::warn!(path = %path.display(), "transcript had a torn last line (crash mid-write); it was cut off and saved beside it as .torn");
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let last_id = entries.last().map(|e| e.id.clone());
        Ok((
            Self {
                path: path.to_path_buf(),
                file,
                last_id,
            },
            entries,
            recovery,
        ))
    }

    /// Reads a transcript without opening it for writing.
    pub fn read(path: &Path) -> io::Result<(Vec<Entry>, Recovery)> {
        match std::fs::read(path) {
            Ok(bytes) => {
                let (entries, recovery, _) = parse(&bytes);
                Ok((entries, recovery))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((Vec::new(), Recovery::default())),
            Err(e) => Err(e),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry (one `write`), chaining it to the previous entry.
    pub fn append(&mut self, turn: Option<&str>, body: Body) -> io::Result<Entry> {
        let entry = Entry {
            id: uuid::Uuid::now_v7().to_string(),
            parent: self.last_id.clone(),
            ts: crate::util::now_rfc3339(),
            turn: turn.map(str::to_string),
            body,
        };
        let mut line = serde_json::to_vec(&entry).map_err(io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.last_id = Some(entry.id.clone());
        Ok(entry)
    }

    /// Makes everything appended so far durable (end of a turn).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// Splits file bytes into entries; returns the byte length of the good prefix.
fn parse(bytes: &[u8]) -> (Vec<Entry>, Recovery, u64) {
    let mut entries = Vec::new();
    let mut recovery = Recovery::default();
    let mut good_len = 0usize;
    let mut start = 0usize;
    while start < bytes.len() {
        match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(rel) => {
                let line = &bytes[start..start + rel];
                if !line.iter().all(u8::is_ascii_whitespace) {
                    match serde_json::from_slice::<Entry>(line) {
                        Ok(entry) => entries.push(entry),
                        Err(_) => recovery.corrupt_lines += 1,
                    }
                }
                start += rel + 1;
                good_len = start;
            }
            None => {
                // No newline: the write of this entry never finished.
                recovery.torn_tail = true;
                break;
            }
        }
    }
    (entries, recovery, good_len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Body {
        Body::User {
            text: text.into(),
            images: Vec::new(),
        }
    }

    #[test]
    fn appends_chain_parents_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let (mut t, entries, _) = Transcript::open(&path).unwrap();
        assert!(entries.is_empty());
        let a = t.append(Some("t1"), user("hello")).unwrap();
        let b = t
            .append(
                Some("t1"),
                Body::Meta {
                    event: "x".into(),
                    detail: String::new(),
                },
            )
            .unwrap();
        assert_eq!(b.parent.as_deref(), Some(a.id.as_str()));
        t.sync().unwrap();
        drop(t);
        let (t2, entries, rec) = Transcript::open(&path).unwrap();
        assert_eq!(entries, vec![a, b.clone()]);
        assert_eq!(rec, Recovery::default());
        assert_eq!(t2.last_id.as_deref(), Some(b.id.as_str()));
    }

    #[test]
    fn torn_last_line_is_cut_and_nothing_before_it_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let (mut t, _, _) = Transcript::open(&path).unwrap();
        let first = t.append(None, user("one")).unwrap();
        let second = t.append(None, user("two")).unwrap();
        drop(t);
        // A crash in the middle of writing the third entry.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"id":"x","ts":"2026","kind":"user","te"#)
            .unwrap();
        drop(f);

        let (mut t, entries, rec) = Transcript::open(&path).unwrap();
        assert!(rec.torn_tail);
        assert_eq!(entries, vec![first, second.clone()]);
        assert!(dir.path().join("s.jsonl.torn").exists());
        // The next entry starts on a clean line and chains to the last good one.
        let third = t.append(None, user("three")).unwrap();
        assert_eq!(third.parent.as_deref(), Some(second.id.as_str()));
        let (entries, rec) = Transcript::read(&path).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(rec, Recovery::default());
    }

    #[test]
    fn torn_line_cut_inside_a_multibyte_character() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let (mut t, _, _) = Transcript::open(&path).unwrap();
        t.append(None, user("ok")).unwrap();
        drop(t);
        let line = serde_json::to_vec(&Entry {
            id: "i".into(),
            parent: None,
            ts: "t".into(),
            turn: None,
            body: user("数据"),
        })
        .unwrap();
        let cut = line.iter().position(|&b| b >= 0x80).unwrap() + 1;
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&line[..cut]).unwrap();
        drop(f);
        let (_, entries, rec) = Transcript::open(&path).unwrap();
        assert!(rec.torn_tail);
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn corrupt_middle_line_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let (mut t, _, _) = Transcript::open(&path).unwrap();
        t.append(None, user("a")).unwrap();
        drop(t);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"not json\n").unwrap();
        drop(f);
        let (mut t, _, _) = Transcript::open(&path).unwrap();
        t.append(None, user("b")).unwrap();
        let (entries, rec) = Transcript::read(&path).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(rec.corrupt_lines, 1);
        assert!(!rec.torn_tail);
    }
}
