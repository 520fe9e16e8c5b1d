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
//! is the data, and JSON escapes the C0 controls itself. The CLI has no
//! colours of its own; one it gets would be written by a function here
//! around the sanitized text, never inside the format arguments, where
//! the filter would show it as `\u{1b}[…`.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

use crate::sanitize::{Pieces, sanitize};

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

/// A reply streamed to stdout piece by piece (`sanitize::Pieces`: a `\r\n`
/// split between pieces stays a line end). A `\r` it ended on is shown when
/// it is dropped.
#[derive(Default)]
pub struct Stream(Pieces);

impl Stream {
    pub fn text(&mut self, piece: &str) {
        write_out(&self.0.next(piece), false);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let rest = self.0.finish();
        if !rest.is_empty() {
            write_out(&rest, false);
        }
    }
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
