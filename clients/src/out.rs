//! Everything the CLI prints goes through here. A closed stdout (`pincer
//! tools list | head -1`) ends the process the way `ls` ends: killed by
//! SIGPIPE, nothing on stderr. SIGPIPE itself stays ignored (Rust's
//! default), so a write to pincerd's socket after it died is an error we
//! can explain, not a silent death; only stdout's EPIPE is turned into it.
//! Messages for people go to stderr and never fail the command.
//!
//! Everything printed for people, on stdout and stderr, passes `sanitize`
//! here, whoever formats it: most of it is model, tool, transcript, log or
//! server text, and a command cannot forget the filter when it cannot
//! print around it (clippy.toml denies the print macros and
//! `std::io::stdout`/`stderr` elsewhere). Only `json` writes as it is: it
//! is the data, and JSON escapes the C0 controls itself. Colours are
//! written only here and in `markdown.rs`, around or after the sanitized
//! text, never inside the format arguments, where the filter would show
//! them as `\u{1b}[…`; they appear only on a terminal, never with
//! `NO_COLOR` set or `TERM=dumb`.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::sync::OnceLock;

use termimad::StrFit;

use crate::markdown::{Look, Reply};

use crate::sanitize::sanitize;

/// `println!` that ends quietly on a closed pipe.
macro_rules! outln {
    () => { $crate::out::line(format_args!("")) };
    ($($arg:tt)*) => { $crate::out::line(format_args!($($arg)*)) };
}

/// `print!` that ends quietly on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::text(format_args!($($arg)*)) };
}

/// `eprintln!` that never panics (a closed stderr loses the message).
macro_rules! errln {
    () => { $crate::out::err_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::out::err_line(format_args!($($arg)*)) };
}

/// `eprint!` that never panics.
macro_rules! err {
    ($($arg:tt)*) => { $crate::out::err_text(format_args!($($arg)*)) };
}

pub(crate) use {err, errln, out, outln};

/// A line on stdout, its control characters shown (see `sanitize.rs`).
pub fn line(args: fmt::Arguments) {
    write_out(&for_people(args), true);
}

/// Text on stdout without a line end, flushed, its control characters shown.
pub fn text(args: fmt::Arguments) {
    write_out(&for_people(args), false);
}

/// A line on stderr, its control characters shown.
pub fn err_line(args: fmt::Arguments) {
    write_err(&for_people(args), true);
}

/// Text on stderr without a line end, flushed, its control characters shown.
pub fn err_text(args: fmt::Arguments) {
    write_err(&for_people(args), false);
}

/// What a person sees of `args`: the whole formatted text sanitized, so
/// neither an argument nor the format string gets a sequence past it.
fn for_people(args: fmt::Arguments) -> String {
    let text = fmt::format(args);
    match sanitize(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(shown) => shown,
    }
}

/// One JSON document (or one line of a JSON stream) on stdout, as
/// serde_json wrote it: the data must reach a program unchanged, and JSON
/// escapes the C0 controls (ESC is `\u001b`) itself.
pub fn json(value: &serde_json::Value) {
    write_out(&crate::sanitize::json_escape(&value.to_string()), true);
}

/// A reply streamed to stdout piece by piece: rendered as Markdown when
/// stdout is a terminal that may have colours, the model's text as it is
/// otherwise (`markdown.rs`). Either way its control characters are shown
/// first (`sanitize::Pieces`: a `\r\n` split between pieces stays a line
/// end, a `\r` it ended on is shown when it is dropped).
pub struct Stream {
    reply: Reply,
    /// stdout is a terminal (plain or not): a note on stderr shares it.
    tty: bool,
}

impl Default for Stream {
    fn default() -> Self {
        let tty = stdout_is_terminal();
        let look = if tty && may_style() {
            Look::Terminal {
                width: terminal_width(),
                live: true,
            }
        } else {
            Look::Plain
        };
        Stream {
            reply: Reply::new(look),
            tty,
        }
    }
}

impl Stream {
    pub fn text(&mut self, piece: &str) {
        let shown = self.reply.text(piece);
        if !shown.is_empty() {
            write_out(&shown, false);
        }
    }

    /// The model call that wrote the text so far ended: the next text is
    /// another call's, after a blank line (`markdown.rs`).
    pub fn next_segment(&mut self) {
        self.reply.next_segment();
    }

    /// Before a note on stderr: the answer so far is put on screen, and
    /// when it stopped inside a line of the terminal the note shares, the
    /// line is ended on stderr so the note starts a line of its own.
    pub fn before_note(&mut self) {
        let (shown, mid_line) = self.reply.break_for_note();
        if !shown.is_empty() {
            write_out(&shown, false);
        }
        if mid_line && self.tty {
            write_err("", true);
        }
    }

    /// The turn ended: the rest of the answer and its last line end.
    pub fn end(&mut self) {
        let shown = self.reply.end();
        if !shown.is_empty() {
            write_out(&shown, false);
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let rest = self.reply.finish();
        if !rest.is_empty() {
            write_out(&rest, false);
        }
    }
}

/// A one-line note on stderr (a tool call starting or ending): on a
/// terminal that may have colours, dim and cut to the terminal's width;
/// elsewhere plain text. Its control characters are shown first.
pub fn err_brief(args: fmt::Arguments) {
    static STYLED: OnceLock<Option<usize>> = OnceLock::new();
    let width = *STYLED.get_or_init(|| (stderr_is_terminal() && may_style()).then(terminal_width));
    let text = for_people(args);
    match width {
        Some(width) => write_err(&format!("\x1b[2m{}\x1b[0m", cut(&text, width)), true),
        None => write_err(&text, true),
    }
}

/// `text` cut to `width` columns, an ellipsis marking the cut.
fn cut(text: &str, width: usize) -> String {
    let (bytes, _) = StrFit::count_fitting(text, width);
    if bytes == text.len() {
        return text.to_string();
    }
    let (bytes, _) = StrFit::count_fitting(text, width.saturating_sub(1));
    format!("{}…", &text[..bytes])
}

/// Whether a terminal may get colours and attributes: not when the user
/// set `NO_COLOR` (no-color.org: any non-empty value) or the terminal is
/// `TERM=dumb`.
fn may_style() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    !no_color && !dumb
}

/// The terminal's width in columns (80 when it cannot be read or says 0,
/// as a pseudo-terminal nobody sized does; at least 20).
fn terminal_width() -> usize {
    match termimad::terminal_size().0 {
        0 => 80,
        cols => usize::from(cols).max(20),
    }
}

#[allow(clippy::disallowed_methods, reason = "out.rs owns stdout and stderr")]
fn stdout_is_terminal() -> bool {
    io::stdout().is_terminal()
}

#[allow(clippy::disallowed_methods, reason = "out.rs owns stdout and stderr")]
fn stderr_is_terminal() -> bool {
    io::stderr().is_terminal()
}

/// Writes `text` (and a line end, else a flush) to stderr as it is; a
/// closed stderr loses it.
#[allow(
    clippy::disallowed_methods,
    reason = "the one place that writes to stderr"
)]
fn write_err(text: &str, newline: bool) {
    let mut e = io::stderr().lock();
    let _ = e.write_all(text.as_bytes()).and_then(|()| {
        if newline {
            e.write_all(b"\n")
        } else {
            e.flush()
        }
    });
}

/// Writes `text` (and a line end, else a flush) to stdout as it is.
#[allow(
    clippy::disallowed_methods,
    reason = "the one place that writes to stdout"
)]
fn write_out(text: &str, newline: bool) {
    let mut o = io::stdout().lock();
    let written = o.write_all(text.as_bytes()).and_then(|()| {
        if newline {
            o.write_all(b"\n")
        } else {
            o.flush()
        }
    });
    if let Err(e) = written {
        stdout_failed(e);
    }
}

/// A closed pipe ends the process as SIGPIPE ends `ls`; any other write
/// error is said once, on stderr.
fn stdout_failed(e: io::Error) -> ! {
    if e.kind() == io::ErrorKind::BrokenPipe {
        die_of_sigpipe();
    }
    err_line(format_args!("pincer: cannot write to stdout: {e}"));
    std::process::exit(1);
}

fn die_of_sigpipe() -> ! {
    // SAFETY: restores the default disposition of SIGPIPE for this process
    // and raises it; no other thread relies on SIGPIPE being ignored from
    // here on, because the process ends.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached: the default action of SIGPIPE terminates the process.
    std::process::exit(141)
}

#[cfg(test)]
mod tests {
    use super::for_people;

    #[test]
    fn the_whole_formatted_text_is_shown_for_people() {
        let result = "\x1b]0;PWNED\x07\x1b[2J";
        assert_eq!(
            for_people(format_args!("  ✓ read (3 ms) {result}")),
            "  ✓ read (3 ms) \\u{1b}]0;PWNED\\u{7}\\u{1b}[2J"
        );
        assert_eq!(
            for_people(format_args!("\x1b[1mbold\x1b[0m {}", "日本語")),
            "\\u{1b}[1mbold\\u{1b}[0m 日本語"
        );
        assert_eq!(for_people(format_args!("plain ✓")), "plain ✓");
    }
}
