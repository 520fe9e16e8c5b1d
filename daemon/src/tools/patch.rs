//! `apply_patch` (SPEC §8.2): several file changes in one call, in the
//! patch format OpenAI's models are trained on:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: notes/new.md
//! +first line
//! *** Update File: src/main.rs
//! *** Move to: src/app.rs
//! @@ fn main() {
//!  context
//! -old line
//! +new line
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! All or nothing: every change is computed first, and files are written
//! only when all of them apply. Paths are confined to the workspace like
//! every file tool's, and written and removed through the workspace opener
//! ([`super::write`]).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::access::{FileAccess, Refusal};
use super::open::{MAX_CHANGE_BYTES, check_replaceable, read_text};
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::config::FsSettings;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The whole patch, from `*** Begin Patch` to `*** End Patch`.
    pub patch: String,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "apply_patch",
        "Apply a patch to workspace files: '*** Begin Patch', then '*** Add File: p' (lines prefixed +), '*** Delete File: p', or '*** Update File: p' (optional '*** Move to: q') with '@@' hunks of ' ' context, '-' removed and '+' added lines; '*** End Patch'. All changes apply or none.",
        &["fs"],
        ToolFlags::default(),
        apply_patch,
    )
    .with_aliases(&[("input", "patch"), ("diff", "patch")])
}

#[derive(Debug, PartialEq)]
pub enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

#[derive(Debug, PartialEq, Default)]
pub struct Hunk {
    /// The text after `@@`: a line to find before the change.
    pub anchor: Option<String>,
    pub old: Vec<String>,
    pub new: Vec<String>,
}

/// Why a patch could not be read; most name the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the patch must start with `*** Begin Patch` and end with `*** End Patch`")]
    NoMarkers,
    #[error("line {0}: every line of an added file starts with `+`")]
    AddedLine(usize),
    #[error("line {line}: a hunk line starts with ' ', '-' or '+', or is `@@`: {text:?}")]
    HunkLine { line: usize, text: String },
    #[error("line {line}: `*** Update File: {path}` changes nothing")]
    NoChange { line: usize, path: String },
    #[error(
        "line {line}: expected `*** Add File:`, `*** Update File:` or `*** Delete File:`, found {text:?}"
    )]
    Unexpected { line: usize, text: String },
    #[error("the patch has no changes")]
    Empty,
}

/// Why a file's hunks do not apply to its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HunkError {
    #[error("hunk {hunk} of `{path}`: the line `@@ {anchor}` is not in the file")]
    NoAnchor {
        hunk: usize,
        path: String,
        anchor: String,
    },
    #[error(
        "hunk {hunk} of `{path}`: these lines are not in the file (read it again and send the patch with the current text):\n{lines}"
    )]
    NoLines {
        hunk: usize,
        path: String,
        lines: String,
    },
}

/// Reads the patch text into operations; the error names the line.
pub fn parse(text: &str) -> Result<Vec<Op>, ParseError> {
    let lines: Vec<&str> = text.trim().lines().collect();
    let body = match (lines.first(), lines.last()) {
        (Some(first), Some(last))
            if first.trim() == "*** Begin Patch" && last.trim() == "*** End Patch" =>
        {
            &lines[1..lines.len() - 1]
        }
        _ => {
            return Err(ParseError::NoMarkers);
        }
    };
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        let n = i + 2; // 1-based, after the Begin line
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            i += 1;
            let mut content = String::new();
            while i < body.len() && !body[i].starts_with("*** ") {
                let Some(l) = body[i].strip_prefix('+') else {
                    return Err(ParseError::AddedLine(i + 2));
                };
                content.push_str(l);
                content.push('\n');
                i += 1;
            }
            ops.push(Op::Add {
                path: path.trim().to_string(),
                content,
            });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            ops.push(Op::Delete {
                path: path.trim().to_string(),
            });
            i += 1;
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            i += 1;
            let mut move_to = None;
            if let Some(to) = body.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_string());
                i += 1;
            }
            let mut hunks: Vec<Hunk> = Vec::new();
            while i < body.len() && !(body[i].starts_with("*** ") && body[i] != "*** End of File") {
                let l = body[i];
                if let Some(anchor) = l.strip_prefix("@@") {
                    let anchor = anchor.trim();
                    hunks.push(Hunk {
                        anchor: (!anchor.is_empty()).then(|| anchor.to_string()),
                        ..Hunk::default()
                    });
                } else if l == "*** End of File" {
                } else {
                    if hunks.is_empty() {
                        hunks.push(Hunk::default());
                    }
                    if let Some(h) = hunks.last_mut() {
                        match l.chars().next() {
                            Some('+') => h.new.push(l[1..].to_string()),
                            Some('-') => h.old.push(l[1..].to_string()),
                            Some(' ') => {
                                h.old.push(l[1..].to_string());
                                h.new.push(l[1..].to_string());
                            }
                            // An empty context line often loses its space.
                            None => {
                                h.old.push(String::new());
                                h.new.push(String::new());
                            }
                            Some(_) => {
                                return Err(ParseError::HunkLine {
                                    line: i + 2,
                                    text: l.to_string(),
                                });
                            }
                        }
                    }
                }
                i += 1;
            }
            if hunks.iter().all(|h| h.old == h.new) && move_to.is_none() {
                return Err(ParseError::NoChange {
                    line: n,
                    path: path.trim().to_string(),
                });
            }
            ops.push(Op::Update {
                path: path.trim().to_string(),
                move_to,
                hunks,
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(ParseError::Unexpected {
                line: n,
                text: line.to_string(),
            });
        }
    }
    if ops.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(ops)
}

/// Finds `needle` in `lines` at or after `from`: exactly, then ignoring
/// trailing whitespace, then ignoring surrounding whitespace.
fn find(lines: &[String], needle: &[String], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(lines.len());
    }
    if needle.len() > lines.len() {
        // Also keeps the range below from starting at 0 over an empty file.
        return None;
    }
    let tries: [fn(&str) -> &str; 3] = [|s| s, str::trim_end, str::trim];
    for norm in tries {
        let found = (from..=lines.len().saturating_sub(needle.len())).find(|&start| {
            needle
                .iter()
                .enumerate()
                .all(|(k, n)| norm(&lines[start + k]) == norm(n))
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Applies the hunks to `text`.
pub fn apply_hunks(text: &str, hunks: &[Hunk], path: &str) -> Result<String, HunkError> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut cursor = 0;
    for (n, h) in hunks.iter().enumerate() {
        if let Some(anchor) = &h.anchor {
            match find(&lines, std::slice::from_ref(anchor), cursor) {
                Some(at) => cursor = at + 1,
                None => {
                    return Err(HunkError::NoAnchor {
                        hunk: n + 1,
                        path: path.to_string(),
                        anchor: anchor.clone(),
                    });
                }
            }
        }
        let at = find(&lines, &h.old, cursor).ok_or_else(|| HunkError::NoLines {
            hunk: n + 1,
            path: path.to_string(),
            lines: h.old.join("\n"),
        })?;
        lines.splice(at..at + h.old.len(), h.new.iter().cloned());
        cursor = at + h.new.len();
    }
    let mut out = lines.join("\n");
    if !lines.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// What one operation does to the disk.
enum Change {
    Write(PathBuf, String),
    Remove(PathBuf),
}

fn invalid(why: impl ToString) -> Refusal {
    Refusal::Invalid(why.to_string())
}

/// Every change the patch makes, checked against the disk; nothing is
/// written yet. Files are opened as every file tool opens them.
fn plan(
    files: &FileAccess,
    ops: &[Op],
    fs: FsSettings,
) -> Result<(Vec<Change>, Vec<String>), Refusal> {
    let mut changes = Vec::new();
    let mut summary = Vec::new();
    for op in ops {
        match op {
            Op::Add { path, content } => {
                let p = files.write(path)?;
                if p.exists() {
                    return Err(invalid(format!(
                        "`{path}` already exists; use `*** Update File:` to change it"
                    )));
                }
                changes.push(Change::Write(p, content.clone()));
                summary.push(format!("added {path}"));
            }
            Op::Delete { path } => {
                let p = files.write(path)?;
                if !p.is_file() {
                    return Err(invalid(format!("`{path}` is not a file in the workspace")));
                }
                check_replaceable(&p, path, fs).map_err(invalid)?;
                changes.push(Change::Remove(p));
                summary.push(format!("deleted {path}"));
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                let p = files.write(path)?;
                let text = read_text(&p, path, fs, MAX_CHANGE_BYTES).map_err(invalid)?;
                let updated = apply_hunks(&text, hunks, path).map_err(invalid)?;
                match move_to {
                    Some(to) => {
                        let target = files.write(to)?;
                        check_replaceable(&target, to, fs).map_err(invalid)?;
                        changes.push(Change::Write(target, updated));
                        changes.push(Change::Remove(p));
                        summary.push(format!("updated {path} and moved it to {to}"));
                    }
                    None => {
                        changes.push(Change::Write(p, updated));
                        summary.push(format!("updated {path}"));
                    }
                }
            }
        }
    }
    Ok((changes, summary))
}

async fn apply_patch(args: ApplyPatchArgs, ctx: ToolContext) -> ToolOutput {
    let ops = match parse(&args.patch) {
        Ok(ops) => ops,
        Err(e) => return ToolOutput::error(format!("the patch cannot be read: {e}")),
    };
    let files = ctx.files.clone();
    let fs = ctx.settings.fs;
    let result = tokio::task::spawn_blocking(move || -> Result<Vec<String>, Refusal> {
        let (changes, summary) = plan(&files, &ops, fs)?;
        for change in changes {
            match change {
                Change::Write(p, content) => super::write::replace(&files, &p, content.as_bytes())
                    .map_err(|e| invalid(format!("cannot write {}: {e}", p.display())))?,
                Change::Remove(p) => super::write::remove(&files, &p)
                    .map_err(|e| invalid(format!("cannot delete {}: {e}", p.display())))?,
            }
        }
        Ok(summary)
    })
    .await;
    match result {
        Ok(Ok(summary)) => ToolOutput::ok(summary.join("\n")),
        Ok(Err(Refusal::Invalid(e))) => {
            ToolOutput::error(format!("the patch was not applied: {e}"))
        }
        Ok(Err(Refusal::Boundary(e))) => {
            ToolOutput::refused(format!("the patch was not applied: {e}"))
        }
        Err(e) => ToolOutput::error(format!("the patch was not applied: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operation() {
        let ops = parse("*** Begin Patch\n*** Add File: a.md\n+one\n+two\n*** Delete File: b.md\n*** Update File: c.md\n*** Move to: d.md\n@@ fn main\n ctx\n-old\n+new\n\n*** End of File\n*** End Patch\n").unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            Op::Add {
                path: "a.md".into(),
                content: "one\ntwo\n".into()
            }
        );
        let Op::Update { move_to, hunks, .. } = &ops[2] else {
            panic!()
        };
        assert_eq!(move_to.as_deref(), Some("d.md"));
        assert_eq!(hunks[0].anchor.as_deref(), Some("fn main"));
        assert_eq!(hunks[0].old, ["ctx", "old", ""]);
        assert_eq!(hunks[0].new, ["ctx", "new", ""]);
    }

    #[test]
    fn bad_patches_say_where() {
        for (text, want) in [
            ("no markers", "must start with"),
            ("*** Begin Patch\n*** End Patch", "no changes"),
            (
                "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
                "line 3",
            ),
            (
                "*** Begin Patch\nrandom\n*** End Patch",
                "expected `*** Add File:`",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n ctx\n*** End Patch",
                "changes nothing",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn hunks_apply_with_whitespace_tolerance_and_anchors() {
        let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
        let hunks = vec![Hunk {
            anchor: Some("fn b() {".into()),
            old: vec!["x();  ".into()],
            new: vec!["    y();".into()],
        }];
        let out = apply_hunks(text, &hunks, "f.rs").unwrap();
        assert_eq!(out, "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n");
        let missing = vec![Hunk {
            anchor: None,
            old: vec!["nope".into()],
            new: vec![],
        }];
        assert!(
            apply_hunks(text, &missing, "f.rs")
                .unwrap_err()
                .to_string()
                .contains("not in the file")
        );
    }

    #[test]
    fn a_hunk_against_an_empty_file_is_an_error_not_a_panic() {
        let hunks = vec![Hunk {
            anchor: None,
            old: vec!["a".into()],
            new: vec!["b".into()],
        }];
        let e = apply_hunks("", &hunks, "empty.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not in the file"), "{e}");
    }
}
