//! File tools: `read`, `write`, `edit`, `ls`, `glob`, `grep`. Every path goes
//! through [`confine`], every file is opened through [`super::open`] (regular
//! files only, never blocking, hard links refused unless allowed) and
//! written through [`super::write`] (beneath the workspace root, no link
//! followed); `read` and `grep` stream files in bounded memory; walks
//! respect `.gitignore` and are capped so a huge tree cannot flood the
//! model's context.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::access::FileAccess;
use super::lines::LineReader;
use super::open::{MAX_CHANGE_BYTES, check_replaceable, open_regular, read_text, readable};
use super::paths::display_relative;
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::config::FsSettings;

const FS: &[&str] = &["fs"];
/// Lines `read` returns when no limit is given.
const DEFAULT_READ_LINES: usize = 2000;
/// Characters kept of one very long line.
const MAX_LINE_CHARS: usize = 2000;
/// Results `glob` and `grep` return at most.
const MAX_MATCHES: usize = 500;
/// Output `read` returns at least, even under a smaller result cap.
const MIN_READ_OUTPUT: usize = 4096;
/// Bytes of one line `grep` matches against; the rest of the line is skipped.
const MAX_GREP_LINE_BYTES: usize = 64 * 1024;
/// Bytes of one file `grep` searches (a log of gigabytes is not searched
/// whole within a tool's time limit anyway).
const MAX_GREP_FILE_BYTES: u64 = 64 << 20;

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
    let path = match ctx.files.read(&args.path) {
        Ok(p) => p,
        Err(e) => return e.output(),
    };
    let window = Window {
        start: args.offset.unwrap_or(1).max(1),
        limit: args.limit.unwrap_or(DEFAULT_READ_LINES).max(1),
        // Stopping where the result cap would cut anyway gives the model a
        // clean place to go on from instead of a hole in the middle.
        max_output: ctx.settings.max_result_chars.max(MIN_READ_OUTPUT),
    };
    let fs = ctx.settings.fs;
    let cancel = ctx.cancel.clone();
    let shown = args.path;
    match tokio::task::spawn_blocking(move || read_window(&path, &shown, fs, window, &cancel)).await
    {
        Ok(Ok(text)) => ToolOutput::ok(text),
        Ok(Err(e)) => ToolOutput::error(e),
        Err(e) => ToolOutput::error(format!("read failed: {e}")),
    }
}

/// Which lines `read` returns.
#[derive(Clone, Copy)]
struct Window {
    /// First line (1-based).
    start: usize,
    limit: usize,
    /// Bytes of output after which no further line is added.
    max_output: usize,
}

/// Streams the file to the lines asked for: nothing before them is kept,
/// nothing after them is read (but one line, to tell whether more follow).
fn read_window(
    path: &Path,
    shown: &str,
    fs: FsSettings,
    w: Window,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let file = open_regular(path, shown, fs).map_err(|e| e.to_string())?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let failed = |e: std::io::Error| format!("cannot read `{shown}`: {e}");
    let mut lines = LineReader::new(file, MAX_LINE_CHARS * 4, cancel.clone());
    if lines.looks_binary().map_err(failed)? {
        return Err(format!(
            "`{shown}` is a binary file ({size} bytes); read only reads text"
        ));
    }
    let mut out = String::new();
    let mut seen = 0usize;
    let mut more = false;
    while let Some(line) = lines.next_line().map_err(failed)? {
        seen += 1;
        if seen < w.start {
            continue;
        }
        let text = String::from_utf8_lossy(line.bytes);
        let entry = if line.cut || text.chars().count() > MAX_LINE_CHARS {
            let kept: String = text.chars().take(MAX_LINE_CHARS).collect();
            format!("{seen:>6}\t{kept}… [line cut]\n")
        } else {
            format!("{seen:>6}\t{text}\n")
        };
        if seen >= w.start + w.limit || (!out.is_empty() && out.len() + entry.len() > w.max_output)
        {
            seen -= 1;
            more = true;
            break;
        }
        out.push_str(&entry);
    }
    if seen == 0 {
        return Ok(format!("`{shown}` is empty"));
    }
    if w.start > seen {
        return Err(format!(
            "offset {} is past the end of `{shown}` ({seen} lines)",
            w.start
        ));
    }
    if more {
        out.push_str(&format!(
            "[lines {}-{seen} of a {size}-byte file, {} bytes read so far; use offset={} to read on]\n",
            w.start,
            lines.consumed,
            seen + 1
        ));
    }
    Ok(out)
}

async fn write(args: WriteArgs, ctx: ToolContext) -> ToolOutput {
    let path = match ctx.files.write(&args.path) {
        Ok(p) => p,
        Err(e) => return e.output(),
    };
    let len = args.content.len();
    let fs = ctx.settings.fs;
    let shown = args.path.clone();
    let files = ctx.files.clone();
    let result = tokio::task::spawn_blocking(move || {
        check_replaceable(&path, &shown, fs).map_err(|e| e.to_string())?;
        super::write::replace(&files, &path, args.content.as_bytes())
            .map_err(|e| format!("cannot write `{shown}`: {e}"))
    })
    .await;
    match result {
        Ok(Ok(())) => ToolOutput::ok(format!("wrote {len} bytes to `{}`", args.path)),
        Ok(Err(e)) => ToolOutput::error(e),
        Err(e) => ToolOutput::error(format!("cannot write `{}`: {e}", args.path)),
    }
}

async fn edit(args: EditArgs, ctx: ToolContext) -> ToolOutput {
    let path = match ctx.files.write(&args.path) {
        Ok(p) => p,
        Err(e) => return e.output(),
    };
    if args.old_string.is_empty() {
        return ToolOutput::error(
            "old_string is empty; give the exact text to replace (use write to create a file)",
        );
    }
    let fs = ctx.settings.fs;
    let files = ctx.files.clone();
    match tokio::task::spawn_blocking(move || replace_in(&files, &path, &args, fs)).await {
        Ok(Ok(done)) => ToolOutput::ok(done),
        Ok(Err(e)) => ToolOutput::error(e),
        Err(e) => ToolOutput::error(format!("edit failed: {e}")),
    }
}

/// The edit itself, on the blocking pool: read, replace, write back.
fn replace_in(
    files: &FileAccess,
    path: &Path,
    args: &EditArgs,
    fs: FsSettings,
) -> Result<String, String> {
    let text = read_text(path, &args.path, fs, MAX_CHANGE_BYTES).map_err(|e| e.to_string())?;
    let count = text.matches(&args.old_string).count();
    let new_text = match (count, args.replace_all) {
        (0, _) => {
            return Err(format!(
                "old_string was not found in `{}`; read the file and copy the text exactly (whitespace included)",
                args.path
            ));
        }
        (1, _) | (_, true) => text.replace(&args.old_string, &args.new_string),
        (n, false) => {
            return Err(format!(
                "old_string occurs {n} times in `{}`; include more surrounding text so it is unique, or set replace_all",
                args.path
            ));
        }
    };
    super::write::replace(files, path, new_text.as_bytes())
        .map_err(|e| format!("cannot write `{}`: {e}", args.path))?;
    Ok(format!("replaced {count} occurrence(s) in `{}`", args.path))
}

async fn ls(args: LsArgs, ctx: ToolContext) -> ToolOutput {
    let requested = args.path.unwrap_or_else(|| ".".into());
    let path = match ctx.files.read(&requested) {
        Ok(p) => p,
        Err(e) => return e.output(),
    };
    let mut dir = match tokio::fs::read_dir(&path).await {
        Ok(d) => d,
        Err(e) => return ToolOutput::error(format!("cannot list `{requested}`: {e}")),
    };
    let mut entries = Vec::new();
    while let Ok(Some(entry)) = dir.next_entry().await {
        if ctx.files.hides(&entry.path()) {
            continue;
        }
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
    let base = match ctx.files.read(&requested) {
        Ok(p) => p,
        Err(e) => return e.output(),
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
        let files = ctx.files.clone();
        for entry in ignore::WalkBuilder::new(&base)
            .hidden(false)
            // What the data boundary hides is not walked into.
            .filter_entry(move |e| !files.hides(e.path()))
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
    let base = match ctx.files.read(&requested) {
        Ok(p) => p,
        Err(e) => return e.output(),
    };
    let regex = match regex::bytes::RegexBuilder::new(&args.pattern)
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
    let fs = ctx.settings.fs;
    let result = tokio::task::spawn_blocking(move || {
        let mut found = Found::default();
        let files = ctx.files.clone();
        for entry in ignore::WalkBuilder::new(&base)
            .hidden(false)
            // What the data boundary hides is not walked into.
            .filter_entry(move |e| !files.hides(e.path()))
            .build()
            .flatten()
        {
            if ctx.cancel.is_cancelled() || found.truncated {
                break;
            }
            // The walk does not follow symlinks: this is the entry itself.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if !meta.file_type().is_file() {
                continue;
            }
            if let Some(f) = &filter
                && !f.is_match(entry.path().file_name().unwrap_or_default())
                && !f.is_match(entry.path())
            {
                continue;
            }
            if !readable(&meta, fs) {
                found.hard_linked += 1;
                continue;
            }
            let shown = display_relative(&root, entry.path());
            // Opened like `read` opens: a file swapped for a FIFO since the
            // walk saw it is refused, not waited on.
            let Ok(file) = open_regular(entry.path(), &shown, fs) else {
                continue;
            };
            search_file(file, &shown, &regex, &ctx.cancel, &mut found);
        }
        found
    })
    .await;
    match result {
        Ok(found) => found.report(&args.pattern),
        Err(e) => ToolOutput::error(format!("grep failed: {e}")),
    }
}

/// What grep found, and what it left out.
#[derive(Default)]
struct Found {
    lines: Vec<String>,
    truncated: bool,
    /// Files skipped because they have several hard links.
    hard_linked: usize,
    /// Files read only up to [`MAX_GREP_FILE_BYTES`].
    stopped_in: Vec<String>,
}

impl Found {
    fn report(self, pattern: &str) -> ToolOutput {
        let mut notes = Vec::new();
        if self.truncated {
            notes.push(format!(
                "[stopped at {MAX_MATCHES} matches; narrow the search]"
            ));
        }
        if !self.stopped_in.is_empty() {
            notes.push(format!(
                "[searched only the first {} MiB of {}]",
                MAX_GREP_FILE_BYTES >> 20,
                self.stopped_in.join(", ")
            ));
        }
        if self.hard_linked > 0 {
            notes.push(format!(
                "[skipped {} file(s) with several hard links; [tools.fs] allow_hard_links lets file tools read them]",
                self.hard_linked
            ));
        }
        let mut out = if self.lines.is_empty() {
            format!("no matches for `{pattern}`")
        } else {
            self.lines.join("\n")
        };
        for note in notes {
            out.push('\n');
            out.push_str(&note);
        }
        ToolOutput::ok(out)
    }
}

/// Searches one file line by line, in bounded memory and time: binary
/// files (a NUL early on, or later: the rest is not text) and the bytes
/// past [`MAX_GREP_FILE_BYTES`] are skipped.
fn search_file(
    file: std::fs::File,
    shown: &str,
    regex: &regex::bytes::Regex,
    cancel: &CancellationToken,
    found: &mut Found,
) {
    use std::io::Read;
    let mut lines = LineReader::new(
        file.take(MAX_GREP_FILE_BYTES),
        MAX_GREP_LINE_BYTES,
        cancel.clone(),
    );
    if lines.looks_binary().unwrap_or(true) {
        return;
    }
    let mut n = 0usize;
    while let Ok(Some(line)) = lines.next_line() {
        n += 1;
        if line.bytes.contains(&0) {
            return;
        }
        if regex.is_match(line.bytes) {
            if found.lines.len() >= MAX_MATCHES {
                found.truncated = true;
                return;
            }
            let text = String::from_utf8_lossy(line.bytes);
            found.lines.push(format!(
                "{shown}:{n}: {}",
                crate::util::preview(text.trim_end(), 300)
            ));
        }
    }
    if lines.consumed >= MAX_GREP_FILE_BYTES {
        found.stopped_in.push(shown.to_string());
    }
}
