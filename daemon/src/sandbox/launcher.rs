//! `pincerd sandbox-exec`: the launcher every sandboxed command starts as.
//!
//! It runs as a fresh single-threaded process (the daemon forks and
//! `exec`s `/proc/self/exe`), confines itself — capabilities dropped,
//! Landlock, then seccomp, which also sets `no_new_privs` — and `exec`s
//! the command, which inherits all of it, as do its children, detached or
//! not. It never runs the command unconfined: any failure exits 125 with
//! one line on stdout (where `exec` reads the command's output) and
//! stderr.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status when the sandbox could not be set up.
pub const EXIT_NO_SANDBOX: u8 = 125;

/// The launcher's arguments (the daemon writes them; see
/// [`super::rules::Plan::push_args`]).
#[derive(clap::Args, Debug)]
pub struct LauncherArgs {
    /// A folder (or file) the command may read.
    #[arg(long = "read", value_name = "PATH")]
    read: Vec<PathBuf>,
    /// A folder the command may read and write.
    #[arg(long = "write", value_name = "PATH")]
    write: Vec<PathBuf>,
    /// A device file the command may read and write.
    #[arg(long = "device", value_name = "PATH")]
    devices: Vec<PathBuf>,
    /// Refuse every socket, not only Unix ones.
    #[arg(long)]
    no_network: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// Confines this process and replaces it with the command; returns only
/// on failure.
pub fn run(args: LauncherArgs) -> ExitCode {
    let err = match confine(&args) {
        Ok(()) => {
            let (program, rest) = match args.command.split_first() {
                Some(split) => split,
                None => return fail("no command given"),
            };
            let e = std::process::Command::new(program).args(rest).exec();
            if e.kind() == std::io::ErrorKind::NotFound {
                // The shell's code for "command not found".
                let _ = writeln!(
                    std::io::stdout(),
                    "{}: command not found",
                    program.to_string_lossy()
                );
                return ExitCode::from(127);
            }
            format!("cannot run {}: {e}", program.to_string_lossy())
        }
        Err(e) => e.to_string(),
    };
    fail(&err)
}

fn fail(why: &str) -> ExitCode {
    let line = format!("pincer sandbox: {why}; the command was not run");
    let _ = writeln!(std::io::stdout(), "{line}");
    let _ = writeln!(std::io::stderr(), "{line}");
    ExitCode::from(EXIT_NO_SANDBOX)
}

/// Why the launcher could not confine itself (it then runs nothing).
#[derive(Debug, thiserror::Error)]
enum ConfineError {
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Seccomp(#[from] super::seccomp::SeccompError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Landlock(#[from] super::landlock::LandlockError),
    #[cfg(target_os = "linux")]
    #[error("cannot drop capability {cap}: {source}")]
    DropCapability {
        cap: libc::c_ulong,
        source: std::io::Error,
    },
    #[cfg(target_os = "linux")]
    #[error("cannot drop capabilities: {0}")]
    ClearCapabilities(std::io::Error),
    #[cfg(not(target_os = "linux"))]
    #[error("the sandbox needs Linux")]
    NotLinux,
}

#[cfg(target_os = "linux")]
fn confine(args: &LauncherArgs) -> Result<(), ConfineError> {
    // Built before anything is restricted (it allocates, and reads nothing).
    let filter = super::seccomp::filter(!args.no_network)?;
    drop_capabilities()?;
    super::landlock::restrict(&args.read, &args.write, &args.devices)?;
    Ok(super::seccomp::apply(&filter)?)
}

#[cfg(not(target_os = "linux"))]
fn confine(_: &LauncherArgs) -> Result<(), ConfineError> {
    Err(ConfineError::NotLinux)
}

/// Empties the capability bounding set (so no later `exec`, not even of a
/// root-owned program by a root daemon, gains a capability), the ambient
/// set, and the process's own sets.
#[cfg(target_os = "linux")]
fn drop_capabilities() -> Result<(), ConfineError> {
    // SAFETY: prctl with integer arguments only changes this process's
    // capability sets.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    let mut cap: libc::c_ulong = 0;
    loop {
        // SAFETY: as above.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Past the last capability this kernel knows.
                Some(libc::EINVAL) => break,
                // No CAP_SETPCAP: an unprivileged process, whose bounding
                // set cannot matter (it has nothing to gain on exec).
                Some(libc::EPERM) => break,
                _ => return Err(ConfineError::DropCapability { cap, source: e }),
            }
        }
        cap += 1;
    }
    clear_capability_sets()
}

/// Empties the effective, permitted and inheritable sets now (a root
/// process keeps its capabilities until the next `exec` otherwise).
#[cfg(target_os = "linux")]
fn clear_capability_sets() -> Result<(), ConfineError> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data are the layout capset(2) documents for
    // version 3 (two data structs), and live across the call.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r != 0 {
        return Err(ConfineError::ClearCapabilities(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}
