//! pincer-sandbox: the exec sandbox's launcher, and the argument format
//! pincerd writes for it.
//!
//! Every command pincerd sandboxes starts as `pincer-sandbox --read … --write
//! … --device … [--no-network] -- PROGRAM ARGS…`: a fresh single-threaded
//! process that confines itself and then `exec`s the program, which
//! inherits the confinement, as do its children (the design of Codex CLI's
//! Linux sandbox). Landlock and seccomp apply to the calling thread, and
//! building a ruleset allocates, which a forked child of the multi-threaded
//! daemon must not do; hence a process of its own rather than code between
//! fork and exec.
//!
//! It is a binary of its own, not a subcommand of pincerd, because it is
//! started once per command: re-executing pincerd (34 MB, 61,700 pointers
//! for the dynamic loader to relocate, the address space to tear down
//! again at the next `exec`) added 1.4 ms to every command, this launcher
//! (0.4 MB, 300 relocations) adds under 0.5 ms, 0.12 ms of it the
//! confining (`cargo bench -p pincer-daemon --bench exec_sandbox`). So it
//! depends on nothing but what confining needs.
//!
//! - [`args`]: the command line, written by pincerd ([`Plan::args`]) and
//!   read here ([`Invocation::parse`]); an argument it does not know makes
//!   the launcher refuse, so a daemon and a launcher of different versions
//!   never run a command half-confined.
//! - [`launch`]: the launcher's `main`: capabilities dropped, Landlock
//!   (`landlock.rs`), seccomp (`seccomp.rs`), `exec`. Any failure exits 125
//!   with one line, and the command is not run.
//!
//! What the rules are (which folders, which devices) is pincerd's to decide
//! (`daemon/src/sandbox/rules.rs`); this crate only enforces them.

pub mod args;
#[cfg(target_os = "linux")]
mod caps;
#[cfg(target_os = "linux")]
mod landlock;
pub mod launch;
#[cfg(target_os = "linux")]
mod seccomp;

pub use args::{ArgsError, Invocation, Plan};

/// The launcher's file name; pincerd looks for it beside itself.
pub const BINARY: &str = "pincer-sandbox";

/// Exit status when the sandbox could not be set up (the command was not
/// run).
pub const EXIT_NO_SANDBOX: u8 = 125;
