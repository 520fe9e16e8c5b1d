//! Opening a path beneath an opened folder without following a symbolic
//! link: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the
//! kernel has it, else a walk that opens one component at a time with
//! `O_NOFOLLOW`, each relative to the folder opened before it. Both refuse
//! a link anywhere in the path (`ELOOP`, or `ENOTDIR` for a link where a
//! folder was expected); which component it was is found afterwards by
//! [`find_link`], for the sentence only: the refusal itself never depends
//! on a check made before the open.
//!
//! The paths given here have been checked by the caller: relative, plain
//! names only (no `..`, no `.`, no root), so the walk never meets a
//! component that could lead out.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// How paths are resolved beneath a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolver {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (Linux 5.6+).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Kernel,
    /// `openat(O_NOFOLLOW)` component by component.
    Walk,
}

impl Resolver {
    /// `Kernel` when `openat2` works here, asked once per process: kernels
    /// before 5.6 answer `ENOSYS`, and some container seccomp profiles
    /// refuse the call with `EPERM`.
    pub(crate) fn detect() -> Self {
        #[cfg(target_os = "linux")]
        {
            static KERNEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            let works = *KERNEL.get_or_init(|| {
                !matches!(
                    rustix::fs::openat2(
                        rustix::fs::CWD,
                        ".",
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                        Mode::empty(),
                        beneath(),
                    ),
                    Err(Errno::NOSYS | Errno::PERM | Errno::INVAL | Errno::TOOBIG)
                )
            });
            if works {
                return Self::Kernel;
            }
        }
        Self::Walk
    }
}

#[cfg(target_os = "linux")]
fn beneath() -> rustix::fs::ResolveFlags {
    use rustix::fs::ResolveFlags;
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// Opens `names` (plain names, checked by the caller) beneath `dir` with
/// `flags`; `O_NOFOLLOW` and `O_CLOEXEC` are always added. No names opens
/// `dir` itself again.
pub(crate) fn open_beneath(
    dir: BorrowedFd<'_>,
    names: &[&OsStr],
    flags: OFlags,
    mode: Mode,
    resolver: Resolver,
) -> Result<OwnedFd, Errno> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    #[cfg(target_os = "linux")]
    if resolver == Resolver::Kernel {
        let path = joined(names);
        match rustix::fs::openat2(dir, path.as_os_str(), flags, mode, beneath()) {
            // Refused after the probe (a filter installed since): walk.
            Err(Errno::NOSYS) => {}
            other => return other,
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = resolver;
    walk(dir, names, flags, mode)
}

/// The walk: every folder on the way opened with `O_NOFOLLOW |
/// O_DIRECTORY` relative to the one before, the last name with `flags`.
fn walk(
    dir: BorrowedFd<'_>,
    names: &[&OsStr],
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let Some((last, folders)) = names.split_last() else {
        return rustix::fs::openat(dir, ".", flags, mode);
    };
    let mut held: Option<OwnedFd> = None;
    for name in folders {
        let at = held.as_ref().map_or(dir, AsFd::as_fd);
        let next = rustix::fs::openat(
            at,
            *name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        held = Some(next);
    }
    let at = held.as_ref().map_or(dir, AsFd::as_fd);
    rustix::fs::openat(at, *last, flags, mode)
}

/// The index of the first of `names` beneath `dir` that is a symbolic
/// link, if any: asked after an open failed, to name the link.
pub(crate) fn find_link(dir: BorrowedFd<'_>, names: &[&OsStr]) -> Option<usize> {
    let mut held: Option<OwnedFd> = None;
    for (i, name) in names.iter().enumerate() {
        let at = held.as_ref().map_or(dir, AsFd::as_fd);
        let stat = rustix::fs::statat(at, *name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if file_type(&stat) == FileType::Symlink {
            return Some(i);
        }
        if i + 1 < names.len() {
            held = Some(
                rustix::fs::openat(
                    at,
                    *name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()?,
            );
        }
    }
    None
}

/// What `name` in `dir` is, without following a link; `None` when it is
/// not there (or cannot be seen).
pub(crate) fn kind_at(dir: BorrowedFd<'_>, name: &OsStr) -> Option<FileType> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|s| file_type(&s))
}

/// The type of what `stat` describes.
// `st_mode`'s width differs between platforms: the cast is needed on some.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn file_type(stat: &rustix::fs::Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode as rustix::fs::RawMode)
}

/// `a/b/c` from plain names.
#[cfg(target_os = "linux")]
fn joined(names: &[&OsStr]) -> std::path::PathBuf {
    if names.is_empty() {
        return ".".into();
    }
    names.iter().collect()
}

/// A file type as a sentence fragment: "a named pipe (FIFO)".
pub(crate) fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "a folder",
        FileType::Fifo => "a named pipe (FIFO)",
        FileType::Socket => "a socket",
        FileType::BlockDevice | FileType::CharacterDevice => "a device",
        FileType::Symlink => "a symbolic link",
        FileType::RegularFile => "a regular file",
        _ => "a special file",
    }
}
