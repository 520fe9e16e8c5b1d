//! Child processes die with pincerd, even with `kill -9` (which no
//! shutdown code sees).
//!
//! Two mechanisms, because neither covers everything alone:
//! - On Linux every child gets `PR_SET_PDEATHSIG = SIGKILL`. The kernel
//!   sends it when the *thread* that forked the child exits, not the
//!   process, and tokio forks on whichever thread calls `spawn` (blocking
//!   pool threads exit after 10 s idle, and `block_in_place` can retire a
//!   worker). So every child is forked by [`spawn`] on one thread that
//!   lives as long as the daemon. The signal reaches only the direct child.
//! - A shell command's whole process group is covered by a lifeline: a
//!   pipe whose write end only pincerd holds. [`shell_script`] starts, in
//!   the command's group, a detached `read` on the read end that kills the
//!   group (`kill -KILL 0`) when the read ends, which is when pincerd is
//!   gone. This also works on macOS, which has no parent-death signal.
//!
//! Hooks and MCP stdio servers get the first only: on macOS they outlive a
//! `kill -9`ed pincerd until their own end (hooks have a time limit; an
//! MCP stdio server is expected to exit when its stdin closes).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::sync::mpsc;

/// The descriptor the lifeline's read end has in a shell command.
const LIFELINE_FD: RawFd = 3;

type Job = Box<dyn FnOnce() + Send>;

/// Runs `f` (a `spawn` of a `tokio::process::Command`) on the forking
/// thread, with the caller's runtime entered, and returns its result.
pub async fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _runtime = handle.enter();
        let _ = tx.send(f());
    });
    let job = match forker() {
        Some(forker) => match forker.send(job) {
            Ok(()) => {
                return rx.await.unwrap_or_else(|_| {
                    Err(std::io::Error::other("the process spawner panicked"))
                });
            }
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    // No forking thread (it could not be started): spawn here; the child
    // may then die early with this thread, which is still better than none.
    job();
    rx.await
        .unwrap_or_else(|_| Err(std::io::Error::other("the process spawner panicked")))
}

fn forker() -> Option<&'static mpsc::Sender<Job>> {
    static FORKER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    FORKER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("pincer-forker".into())
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        // A panicking job must not end the thread: its
                        // children would get their death signal.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::error!("cannot start the process spawner thread: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// Makes `cmd`'s process die when pincerd does (Linux; nothing elsewhere).
pub fn die_with_daemon(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpid is async-signal-safe and called before the fork.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe functions (prctl, getppid).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // pincerd died between the fork and the prctl: the signal
                // will never come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("pincerd is gone"));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// The read end of the lifeline, if it could be made.
fn lifeline() -> Option<RawFd> {
    static LIFELINE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
    LIFELINE
        .get_or_init(|| match std::io::pipe() {
            // Both ends are close-on-exec: no child holds the write end, so
            // it closes exactly when pincerd exits.
            Ok((read, write)) => Some((OwnedFd::from(read), OwnedFd::from(write))),
            Err(e) => {
                tracing::error!("cannot make the lifeline pipe for commands: {e}");
                None
            }
        })
        .as_ref()
        .map(|(read, _)| read.as_raw_fd())
}

/// The `sh -c` script for `command` with its output joined, and, when the
/// lifeline exists, a guard that kills the command's process group when
/// pincerd is gone; sets up `cmd` to hand the guard the lifeline.
pub fn shell_script(cmd: &mut tokio::process::Command, command: &str) -> String {
    let Some(read) = lifeline() else {
        return format!("exec 2>&1\n{command}");
    };
    // SAFETY: runs between fork and exec; dup2 and fcntl are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if read == LIFELINE_FD {
                // dup2 onto itself would keep close-on-exec set.
                if libc::fcntl(read, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(read, LIFELINE_FD) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // The guard is detached (a background job of a subshell that exits),
    // so the command's own `wait` does not wait for it; it holds none of
    // the command's output; the command itself does not see fd 3.
    format!(
        "exec 2>&1\n( (read _ <&{LIFELINE_FD}; kill -KILL 0) </dev/null >/dev/null 2>&1 & )\nexec {LIFELINE_FD}<&-\n{command}"
    )
}
