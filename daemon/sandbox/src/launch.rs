//! The launcher's `main`: confine this process — capabilities dropped,
//! Landlock, then seccomp, which also sets `no_new_privs` — and `exec`
//! the command, which inherits all of it, as do its children, detached or
//! not. It never runs the command unconfined: any failure exits
//! [`EXIT_NO_SANDBOX`] with one line on stdout (where `exec` reads the
//! command's output) and stderr.
//!
//! It must stay single-threaded (Landlock and seccomp confine the calling
//! thread) and it closes no descriptor: the command inherits what pincerd
//! gave the launcher (the exec tool's lifeline on fd 3).

use std::ffi::OsString;
use std::io::Write;

use crate::EXIT_NO_SANDBOX;
use crate::args::{ArgsError, Invocation};

const USAGE: &str = "usage: pincer-sandbox [--read PATH]... [--write PATH]... [--device PATH]... [--no-network] -- PROGRAM [ARG]...

The exec sandbox's launcher, started by pincerd for every sandboxed command:
it confines itself (every capability dropped; Landlock: read-only on each
--read, read-write on each --write, the --device files, nothing else;
seccomp: no Unix-domain sockets, no io_uring, no sockets at all with
--no-network) and then becomes PROGRAM. Exit 125 when it cannot: the
command is then not run.";

/// Why the launcher could not confine itself (it then runs nothing).
#[derive(Debug, thiserror::Error)]
enum ConfineError {
    #[error(transparent)]
    Args(#[from] ArgsError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Seccomp(#[from] crate::seccomp::SeccompError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Landlock(#[from] crate::landlock::LandlockError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Caps(#[from] crate::caps::CapsError),
    #[cfg(not(target_os = "linux"))]
    #[error("the sandbox needs Linux")]
    NotLinux,
}

/// Reads the command line, confines this process and replaces it with the
/// command; returns (the exit status) only on failure, or after `--help`.
pub fn main() -> u8 {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("--help" | "-h") if args.len() == 1 => {
            println!("{USAGE}");
            return 0;
        }
        Some("--version" | "-V") if args.len() == 1 => {
            println!("pincer-sandbox {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        _ => {}
    }
    let invocation = match Invocation::parse(args) {
        Ok(i) => i,
        Err(e) => return fail(&e.to_string()),
    };
    run(&invocation)
}

/// Confines this process under `invocation`'s plan and `exec`s its
/// command; returns (the exit status) only on failure.
pub fn run(invocation: &Invocation) -> u8 {
    if let Err(e) = confine(invocation) {
        return fail(&e.to_string());
    }
    let Some((program, rest)) = invocation.command.split_first() else {
        return fail(&ArgsError::NoCommand.to_string());
    };
    let e = exec(program, rest);
    if e.kind() == std::io::ErrorKind::NotFound {
        // The shell's code for "command not found".
        let _ = writeln!(
            std::io::stdout(),
            "{}: command not found",
            program.to_string_lossy()
        );
        return 127;
    }
    fail(&format!("cannot run {}: {e}", program.to_string_lossy()))
}

#[cfg(unix)]
fn exec(program: &OsString, args: &[OsString]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(program).args(args).exec()
}

fn fail(why: &str) -> u8 {
    let line = format!("pincer sandbox: {why}; the command was not run");
    let _ = writeln!(std::io::stdout(), "{line}");
    let _ = writeln!(std::io::stderr(), "{line}");
    EXIT_NO_SANDBOX
}

#[cfg(target_os = "linux")]
fn confine(invocation: &Invocation) -> Result<(), ConfineError> {
    let plan = &invocation.plan;
    // Built before anything is restricted (it allocates, and reads nothing).
    let filter = crate::seccomp::filter(plan.network)?;
    crate::caps::drop_all()?;
    crate::landlock::restrict(&plan.read, &plan.write, &plan.devices)?;
    Ok(crate::seccomp::apply(&filter)?)
}

#[cfg(not(target_os = "linux"))]
fn confine(_: &Invocation) -> Result<(), ConfineError> {
    Err(ConfineError::NotLinux)
}
