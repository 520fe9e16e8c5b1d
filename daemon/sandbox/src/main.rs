//! `pincer-sandbox`: see the library's documentation (`lib.rs`).
//!
//! Entered from the C runtime's `main` rather than std's: std's wrapper
//! first finds the main thread's stack (glibc reads `/proc/self/maps` for
//! it) to install a stack-overflow handler, and ignores SIGPIPE — 0.05 ms
//! of the launcher's start, measured, for a process that `exec`s within
//! a tenth of a millisecond. Arguments still come from
//! `std::env::args_os` (std reads them at load time on Linux); a panic
//! cannot unwind out of this `extern "C"` function and aborts, so a
//! command is never run after one. SIGPIPE keeps the default pincerd's
//! spawn gave it, as the command gets it.
#![cfg_attr(not(test), no_main)]

use std::ffi::{c_char, c_int};

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    c_int::from(pincer_sandbox::launch::main())
}
