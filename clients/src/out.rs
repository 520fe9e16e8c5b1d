//! Everything the CLI prints goes through here. A closed stdout (`pincer
//! tools list | head -1`) ends the process the way `ls` ends: killed by
//! SIGPIPE, nothing on stderr. SIGPIPE itself stays ignored (Rust's
//! default), so a write to pincerd's socket after it died is an error we
//! can explain, not a silent death; only stdout's EPIPE is turned into it.
//! Messages for people go to stderr and never fail the command.

use std::fmt;
use std::io::{self, Write};

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

/// stdout as a writer whose failures end the process (see the module doc).
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match io::stdout().write(buf) {
            Ok(n) => Ok(n),
            Err(e) => stdout_failed(e),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match io::stdout().flush() {
            Ok(()) => Ok(()),
            Err(e) => stdout_failed(e),
        }
    }
}

pub fn line(args: fmt::Arguments) {
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.write_all(b"\n")) {
        stdout_failed(e);
    }
}

pub fn text(args: fmt::Arguments) {
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        stdout_failed(e);
    }
}

pub fn err_line(args: fmt::Arguments) {
    let mut e = io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.write_all(b"\n"));
}

pub fn err_text(args: fmt::Arguments) {
    let mut e = io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.flush());
}

/// One JSON document (or one line of a JSON stream) on stdout.
pub fn json(value: &serde_json::Value) {
    line(format_args!("{value}"));
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
