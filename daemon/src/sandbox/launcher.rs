//! The launcher every sandboxed command starts as: `pincer-sandbox`, the
//! `pincer-sandbox` crate's binary, found beside pincerd and opened once,
//! when the daemon starts.
//!
//! Opened rather than named, because a package upgrade replaces the files
//! under a running daemon: the daemon keeps the descriptor of the launcher
//! it started with (an `O_PATH` one, close-on-exec, numbered above the
//! descriptors a child is given by number) and starts it as
//! `/proc/self/fd/N`, which the kernel resolves to that very file even
//! after the name was replaced or removed. Close-on-exec means the
//! descriptor ends at the `exec` of the launcher itself: no command sees
//! it, and children started without the sandbox never had it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The lowest descriptor the launcher's may have: above 0–2 and the exec
/// tool's lifeline (3), which a child gets with `dup2` onto those numbers
/// between fork and exec, and would then replace the launcher.
const MIN_FD: libc::c_int = 10;

/// The launcher pincerd starts sandboxed commands with.
#[derive(Debug)]
pub struct Launcher {
    /// Where it was found (for sentences and the log).
    path: PathBuf,
    /// Holds the file open; `program` names it.
    _fd: OwnedFd,
    /// `/proc/self/fd/N`: what the forked child `exec`s.
    program: PathBuf,
}

/// Why there is no launcher; exec is then refused unless the sandbox is
/// off.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    #[error("cannot tell where pincerd is, so not where its sandbox launcher is: {0}")]
    NoOwnPath(std::io::Error),
    #[error(
        "the sandbox's launcher {} is missing (it ships beside pincerd: reinstall pincer, or copy {} there)",
        .path.display(), pincer_sandbox::BINARY
    )]
    Missing { path: PathBuf },
    #[error("the sandbox's launcher {} is not an executable file", .path.display())]
    NotExecutable { path: PathBuf },
    #[error("cannot open the sandbox's launcher {}: {source}", .path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Launcher {
    /// Opens the launcher at `path`.
    pub fn open(path: &Path) -> Result<Self, LauncherError> {
        let open_err = |source: std::io::Error| {
            if source.kind() == std::io::ErrorKind::NotFound {
                LauncherError::Missing {
                    path: path.to_path_buf(),
                }
            } else {
                LauncherError::Open {
                    path: path.to_path_buf(),
                    source,
                }
            }
        };
        // O_PATH: nothing is read through it (an execute-only file works);
        // std adds O_CLOEXEC.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
            .map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(LauncherError::NotExecutable {
                path: path.to_path_buf(),
            });
        }
        // SAFETY: F_DUPFD_CLOEXEC with an integer argument only makes a
        // new descriptor, which is owned below.
        let fd = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, MIN_FD) };
        if fd < 0 {
            return Err(open_err(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just made by fcntl and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            path: path.to_path_buf(),
            program: PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
            _fd: fd,
        })
    }

    /// The program to run: the opened file, through `/proc/self/fd`.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Where it was found.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Where pincerd looks for its launcher: beside its own executable.
pub fn beside_pincerd() -> Result<PathBuf, LauncherError> {
    let exe = std::env::current_exe().map_err(LauncherError::NoOwnPath)?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    Ok(dir.join(pincer_sandbox::BINARY))
}

/// The launcher beside pincerd, opened the first time this is called (at
/// the daemon's start) and kept for the life of the process.
pub fn at_start() -> &'static Result<Arc<Launcher>, LauncherError> {
    static LAUNCHER: OnceLock<Result<Arc<Launcher>, LauncherError>> = OnceLock::new();
    LAUNCHER.get_or_init(|| beside_pincerd().and_then(|p| Launcher::open(&p).map(Arc::new)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_plain_file_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join(pincer_sandbox::BINARY);
        let e = Launcher::open(&missing).unwrap_err();
        assert!(matches!(e, LauncherError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("is missing"), "{e}");
        std::fs::write(&missing, "not a program").unwrap();
        let e = Launcher::open(&missing).unwrap_err();
        assert!(matches!(e, LauncherError::NotExecutable { .. }), "{e}");
    }

    /// The launcher is run through its descriptor: the file that was
    /// opened, whatever its name holds by then.
    #[test]
    fn the_opened_file_runs_after_its_name_was_replaced_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("launcher");
        let write_script = |at: &Path, text: &str| {
            std::fs::write(at, format!("#!/bin/sh\necho {text}\n")).unwrap();
            std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        // A script would be run by its interpreter through the path, which
        // a close-on-exec descriptor no longer has after the exec; a copy
        // of a real program shows the same without that detail.
        std::fs::copy("/bin/echo", &path).unwrap();
        let launcher = Launcher::open(&path).unwrap();
        assert!(launcher.program().starts_with("/proc/self/fd/"));
        let fd: i32 = launcher
            .program()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(fd >= MIN_FD, "{fd}");
        // Replaced the way a package manager does it: a new file renamed
        // over the old name.
        let new = dir.path().join("launcher.new");
        write_script(&new, "replaced");
        std::fs::rename(&new, &path).unwrap();
        let run = || {
            std::process::Command::new(launcher.program())
                .arg("the original")
                .output()
                .unwrap()
        };
        assert_eq!(String::from_utf8_lossy(&run().stdout), "the original\n");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(String::from_utf8_lossy(&run().stdout), "the original\n");
    }
}
