//! File tools: `read`, `write`, `edit`, `ls`, `glob`, `grep`. Every path goes
//! through [`confine`]; walks respect `.gitignore` and are capped so a huge
//! tree cannot flood the model's context.

use std::io::Write;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::paths::{confine, display_relative};
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};

const FS: &[&str] = &["fs"];
/// Lines `read` returns when no limit is given.
const DEFAULT_READ_LINES: usize = 2000;
/// Characters kept of one very long line.
const MAX_LINE_CHARS: usize = 2000;
/// Results `glob` and `grep` return at most.
const MAX_MATCHES: usize = 500;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File path, relative to the workspace.
    pub path: String,
    /// First line to return (1-based).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Number of lines to return (default 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File path, relative to the workspace; parent folders are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// File path, relative to the workspace.
    pub path: String,
    /// Exact text to replace; must occur exactly once unless replace_all is true.
    pub old_string: String,
    /// Replacement text.
    pub new_string: String,
    /// Replace every occurrence instead of requiring a unique one.
    #[serde(default)]
    pub replace_all: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsArgs {
    /// Folder to list, relative to the workspace (default: the workspace).
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern such as `**/*.md` or `src/*.rs`.
    pub pattern: String,
    /// Folder to search in (default: the workspace).
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax).
    pub pattern: String,
    /// File or folder to search (default: the workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files whose path matches this glob, e.g. `*.md`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match case-insensitively.
    #[serde(default)]
    pub ignore_case: bool,
}

pub fn tools() -> Vec<ToolDef> {
    let plain = ToolFlags::default();
    vec![
        ToolDef::typed(
            "read",
            "Read a text file of the workspace; returns numbered lines. Use offset/limit for long files.",
            FS,
            plain,
            read,
        )
        .with_aliases(&[("file_path", "path"), ("filepath", "path"), ("file", "path")]),
        ToolDef::typed(
            "write",
            "Create or overwrite a file in the workspace with the given content.",
            FS,
            plain,
            write,
        )
        .with_aliases(&[("file_path", "path"), ("filepath", "path"), ("file", "path")]),
        ToolDef::typed(
            "edit",
            "Replace an exact string in a workspace file. old_string must match exactly once (or set replace_all).",
            FS,
            plain,
            edit,
        )
        .with_aliases(&[("file_path", "path"), ("filepath", "path"), ("file", "path"), ("old_str", "old_string"), ("new_str", "new_string"), ("old", "old_string"), ("new", "new_string")]),
        ToolDef::typed(
            "ls",
            "List a folder of the workspace (folders end with /, files show their size).",
            FS,
            plain,
            ls,
        )
        .with_aliases(&[("dir", "path"), ("directory", "path")]),
        ToolDef::typed(
            "glob",
            "Find files in the workspace whose paths match a glob pattern.",
            FS,
            plain,
            glob,
        )
        .with_aliases(&[("glob", "pattern")]),
        ToolDef::typed(
            "grep",
            "Search file contents in the workspace with a regular expression; returns path:line: text.",
            FS,
            plain,
            grep,
        )
        .with_aliases(&[("regex", "pattern"), ("query", "pattern")]),
    ]
}

async fn read(args: ReadArgs, ctx: ToolContext) -> ToolOutput {
    let path = match confine(&ctx.workspace, &args.path) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let bytes = match tokio::fs::read(&path).await {
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("cannot read `{}`: {e}", args.path)),
    };
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return ToolOutput::error(format!(
            "`{}` is a binary file ({} bytes); read only reads text",
            args.path,
            bytes.len()
        ));
    }
    let text = String::from_utf8_lossy(&bytes);
    let start = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES).max(1);
    let total = text.lines().count();
    let mut out = String::new();
    for (n, line) in text.lines().enumerate().skip(start - 1).take(limit) {
        let line = if line.chars().count() > MAX_LINE_CHARS {
            format!(
                "{}… [line cut]",
                line.chars().take(MAX_LINE_CHARS).collect::<String>()
            )
        } else {
            line.to_string()
        };
        out.push_str(&format!("{:>6}\t{line}\n", n + 1));
    }
    if total == 0 {
        return ToolOutput::ok(format!("`{}` is empty", args.path));
    }
    if start > total {
        return ToolOutput::error(format!(
            "offset {start} is past the end of `{}` ({total} lines)",
            args.path
        ));
    }
    let last = (start - 1 + limit).min(total);
    if last < total {
        out.push_str(&format!(
            "[lines {start}-{last} of {total}; use offset={} to read on]\n",
            last + 1
        ));
    }
    ToolOutput::ok(out)
}

async fn write(args: WriteArgs, ctx: ToolContext) -> ToolOutput {
    let path = match confine(&ctx.workspace, &args.path) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let len = args.content.len();
    match tokio::task::spawn_blocking(move || write_atomic(&path, args.content.as_bytes())).await {
        Ok(Ok(())) => ToolOutput::ok(format!("wrote {len} bytes to `{}`", args.path)),
        Ok(Err(e)) => ToolOutput::error(format!("cannot write `{}`: {e}", args.path)),
        Err(e) => ToolOutput::error(format!("cannot write `{}`: {e}", args.path)),
    }
}

/// Writes via a temporary file and rename, so a crash never leaves half a file.
pub(crate) fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent folder"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile_in(dir)?;
    tmp.1.write_all(content)?;
    tmp.1.sync_all()?;
    std::fs::rename(&tmp.0, path)
}

fn tempfile_in(dir: &Path) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let name = dir.join(format!(".pincer-write-{}", uuid::Uuid::new_v4()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&name)?;
    Ok((name, file))
}

async fn edit(args: EditArgs, ctx: ToolContext) -> ToolOutput {
    let path = match confine(&ctx.workspace, &args.path) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    if args.old_string.is_empty() {
        return ToolOutput::error(
            "old_string is empty; give the exact text to replace (use write to create a file)",
        );
    }
    let text = match tokio::fs::read_to_string(&path).await {
        Ok(t) => t,
        Err(e) => return ToolOutput::error(format!("cannot read `{}`: {e}", args.path)),
    };
    let count = text.matches(&args.old_string).count();
    let new_text = match (count, args.replace_all) {
        (0, _) => {
            return ToolOutput::error(format!(
                "old_string was not found in `{}`; read the file and copy the text exactly (whitespace included)",
                args.path
            ));
        }
        (1, _) | (_, true) => text.replace(&args.old_string, &args.new_string),
        (n, false) => {
            return ToolOutput::error(format!(
                "old_string occurs {n} times in `{}`; include more surrounding text so it is unique, or set replace_all",
                args.path
            ));
        }
    };
    match tokio::task::spawn_blocking(move || write_atomic(&path, new_text.as_bytes())).await {
        Ok(Ok(())) => ToolOutput::ok(format!("replaced {count} occurrence(s) in `{}`", args.path)),
        Ok(Err(e)) => ToolOutput::error(format!("cannot write `{}`: {e}", args.path)),
        Err(e) => ToolOutput::error(format!("cannot write `{}`: {e}", args.path)),
    }
}

async fn ls(args: LsArgs, ctx: ToolContext) -> ToolOutput {
    let requested = args.path.unwrap_or_else(|| ".".into());
    let path = match confine(&ctx.workspace, &requested) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let mut dir = match tokio::fs::read_dir(&path).await {
        Ok(d) => d,
        Err(e) => return ToolOutput::error(format!("cannot list `{requested}`: {e}")),
    };
    let mut entries = Vec::new();
    while let Ok(Some(entry)) = dir.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        let line = match entry.metadata().await {
            Ok(m) if m.is_dir() => format!("{name}/"),
            Ok(m) => format!("{name}\t{} bytes", m.len()),
            Err(_) => name,
        };
        entries.push(line);
    }
    entries.sort();
    if entries.is_empty() {
        return ToolOutput::ok(format!("`{requested}` is empty"));
    }
    ToolOutput::ok(entries.join("\n"))
}

async fn glob(args: GlobArgs, ctx: ToolContext) -> ToolOutput {
    let requested = args.path.clone().unwrap_or_else(|| ".".into());
    let base = match confine(&ctx.workspace, &requested) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let matcher = match globset::GlobBuilder::new(&args.pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return ToolOutput::error(format!("invalid glob `{}`: {e}", args.pattern)),
    };
    let root = ctx.workspace.clone();
    let result = tokio::task::spawn_blocking(move || {
        let mut found = Vec::new();
        let mut truncated = false;
        for entry in ignore::WalkBuilder::new(&base)
            .hidden(false)
            .build()
            .flatten()
        {
            if ctx.cancel.is_cancelled() {
                break;
            }
            let Ok(rel) = entry.path().strip_prefix(&base) else {
                continue;
            };
            if entry.file_type().is_some_and(|t| t.is_file()) && matcher.is_match(rel) {
                if found.len() >= MAX_MATCHES {
                    truncated = true;
                    break;
                }
                found.push(display_relative(&root, entry.path()));
            }
        }
        found.sort();
        (found, truncated)
    })
    .await;
    match result {
        Ok((found, _)) if found.is_empty() => {
            ToolOutput::ok(format!("no files match `{}`", args.pattern))
        }
        Ok((found, truncated)) => {
            let mut out = found.join("\n");
            if truncated {
                out.push_str(&format!(
                    "\n[stopped at {MAX_MATCHES} files; narrow the pattern]"
                ));
            }
            ToolOutput::ok(out)
        }
        Err(e) => ToolOutput::error(format!("glob failed: {e}")),
    }
}

async fn grep(args: GrepArgs, ctx: ToolContext) -> ToolOutput {
    let requested = args.path.clone().unwrap_or_else(|| ".".into());
    let base = match confine(&ctx.workspace, &requested) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let regex = match regex::RegexBuilder::new(&args.pattern)
        .case_insensitive(args.ignore_case)
        .size_limit(1 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(format!("invalid regular expression: {e}")),
    };
    let filter = match args.glob.as_deref().map(globset::Glob::new) {
        Some(Ok(g)) => Some(g.compile_matcher()),
        Some(Err(e)) => return ToolOutput::error(format!("invalid glob: {e}")),
        None => None,
    };
    let root = ctx.workspace.clone();
    let result = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut truncated = false;
        'walk: for entry in ignore::WalkBuilder::new(&base)
            .hidden(false)
            .build()
            .flatten()
        {
            if ctx.cancel.is_cancelled() {
                break;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if let Some(f) = &filter
                && !f.is_match(entry.path().file_name().unwrap_or_default())
                && !f.is_match(entry.path())
            {
                continue;
            }
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            if bytes.iter().take(8192).any(|&b| b == 0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            let shown = display_relative(&root, entry.path());
            for (n, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if out.len() >= MAX_MATCHES {
                        truncated = true;
                        break 'walk;
                    }
                    out.push(format!(
                        "{shown}:{}: {}",
                        n + 1,
                        crate::util::preview(line.trim_end(), 300)
                    ));
                }
            }
        }
        (out, truncated)
    })
    .await;
    match result {
        Ok((lines, _)) if lines.is_empty() => {
            ToolOutput::ok(format!("no matches for `{}`", args.pattern))
        }
        Ok((lines, truncated)) => {
            let mut out = lines.join("\n");
            if truncated {
                out.push_str(&format!(
                    "\n[stopped at {MAX_MATCHES} matches; narrow the search]"
                ));
            }
            ToolOutput::ok(out)
        }
        Err(e) => ToolOutput::error(format!("grep failed: {e}")),
    }
}
