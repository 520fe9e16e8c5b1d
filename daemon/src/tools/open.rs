//! How the file tools open workspace files. [`confine`](super::paths::confine)
//! checks a path's *name*; this checks the *file* the name leads to, so a
//! hostile model cannot turn a confined name into something else:
//!
//! - only regular files: a FIFO would block `open()` or a read until
//!   someone writes it (a thread stuck past every timeout, and a shutdown
//!   that waits for it), and a device or socket is no text to read. The
//!   type is checked with `lstat` before opening, and again with `fstat`
//!   on the descriptor, opened with `O_NONBLOCK` (so even a FIFO swapped in
//!   between returns at once) and `O_NOFOLLOW` (so a symlink swapped in
//!   after `confine` is not followed), and the descriptor's own path must
//!   be the confined one (a folder on the way swapped for a link is);
//! - no hard links unless `[tools.fs] allow_hard_links`: another name of
//!   the same file may be outside the workspace, where `confine` cannot
//!   see it, and reading or writing the workspace's name would read or
//!   change that file.

use std::fs::{File, FileType, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::config::FsSettings;

/// Size of the largest file `edit` and `apply_patch` change: they hold it
/// in memory, twice.
pub const MAX_CHANGE_BYTES: u64 = 16 << 20;

/// Why a workspace file was not opened, read or replaced; `shown` is the
/// path as the model wrote it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read `{shown}`: {source}")]
    CannotRead {
        shown: String,
        source: std::io::Error,
    },
    #[error("cannot write `{shown}`: {source}")]
    CannotWrite {
        shown: String,
        source: std::io::Error,
    },
    #[error("`{shown}` became a symbolic link while it was being opened; it was not read")]
    BecameLink { shown: String },
    #[error("`{shown}` was replaced while it was being opened; it was not read")]
    Replaced { shown: String },
    #[error("`{shown}` is {kind}, not a regular file; file tools only open regular files")]
    NotRegular { shown: String, kind: &'static str },
    #[error(
        "`{shown}` has {links} hard links: another name of the same file may be outside the workspace, so file tools neither read nor write it (the owner can allow hard-linked files with [tools.fs] allow_hard_links = true)"
    )]
    HardLinked { shown: String, links: u64 },
    #[error(
        "`{shown}` is {len} bytes; edit and apply_patch change files of up to {max} bytes (use exec for larger ones)"
    )]
    TooBig { shown: String, len: u64, max: u64 },
    #[error("`{shown}` is not UTF-8 text; it can only be changed with exec")]
    NotText { shown: String },
}

/// Opens the confined `path` for reading; `shown` is the path as the model
/// wrote it, for the refusal.
pub fn open_regular(path: &Path, shown: &str, fs: FsSettings) -> Result<File, OpenError> {
    let before = std::fs::symlink_metadata(path).map_err(|e| cannot_read(shown, e))?;
    check(&before, shown, fs)?;
    let file = crate::util::open_without_blocking(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => OpenError::BecameLink {
            shown: shown.to_string(),
        },
        _ => cannot_read(shown, e),
    })?;
    let opened = file.metadata().map_err(|e| cannot_read(shown, e))?;
    check(&opened, shown, fs)?;
    if (opened.dev(), opened.ino()) != (before.dev(), before.ino()) {
        return Err(OpenError::Replaced {
            shown: shown.to_string(),
        });
    }
    if !opened_at(&file, path) {
        return Err(OpenError::BecameLink {
            shown: shown.to_string(),
        });
    }
    Ok(file)
}

/// Whether `file` is the file at `path` (confined: absolute, no link in
/// it), by the path the kernel reports for the descriptor. `O_NOFOLLOW`
/// guards the last component only: a folder on the way swapped for a
/// link after [`confine`](super::paths::confine) checked the name leads
/// the `lstat` and the open alike elsewhere, so their inodes agree (the
/// attack suite's race read a file outside the workspace so). Nothing has
/// been read from the file yet when this refuses it.
fn opened_at(file: &File, path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .is_ok_and(|real| real == path)
    }
    #[cfg(target_os = "macos")]
    {
        use std::os::fd::AsRawFd;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: F_GETPATH writes at most PATH_MAX bytes, NUL-terminated,
        // into `buf`, which holds PATH_MAX.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buf.as_mut_ptr()) };
        if rc == -1 {
            return false;
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        use std::os::unix::ffi::OsStrExt;
        Path::new(std::ffi::OsStr::from_bytes(&buf[..end])) == path
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (file, path);
        true
    }
}

/// Reads a whole text file of at most `max_bytes` (edit and apply_patch
/// change files in memory, so their size is bounded).
pub fn read_text(
    path: &Path,
    shown: &str,
    fs: FsSettings,
    max_bytes: u64,
) -> Result<String, OpenError> {
    let file = open_regular(path, shown, fs)?;
    let len = file.metadata().map_err(|e| cannot_read(shown, e))?.len();
    if len > max_bytes {
        return Err(too_big(shown, len, max_bytes));
    }
    let mut bytes = Vec::new();
    // `take`: the file may grow after the size was read.
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| cannot_read(shown, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big(shown, bytes.len() as u64, max_bytes));
    }
    String::from_utf8(bytes).map_err(|_| OpenError::NotText {
        shown: shown.to_string(),
    })
}

/// Checks that writing `path` (by replacing it) is allowed: nothing there
/// yet, or a regular file with one link.
pub fn check_replaceable(path: &Path, shown: &str, fs: FsSettings) -> Result<(), OpenError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check(&meta, shown, fs),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(OpenError::CannotWrite {
            shown: shown.to_string(),
            source,
        }),
    }
}

/// Whether a file the walk found may be read: a regular file, and not
/// hard-linked unless allowed (grep skips the others).
pub fn readable(meta: &Metadata, fs: FsSettings) -> bool {
    meta.file_type().is_file() && (meta.nlink() <= 1 || fs.allow_hard_links)
}

/// The refusal for anything but a regular file with one link (or more,
/// when allowed).
fn check(meta: &Metadata, shown: &str, fs: FsSettings) -> Result<(), OpenError> {
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(OpenError::NotRegular {
            shown: shown.to_string(),
            kind: describe(kind),
        });
    }
    if meta.nlink() > 1 && !fs.allow_hard_links {
        return Err(OpenError::HardLinked {
            shown: shown.to_string(),
            links: meta.nlink(),
        });
    }
    Ok(())
}

fn describe(kind: FileType) -> &'static str {
    if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

fn cannot_read(shown: &str, source: std::io::Error) -> OpenError {
    OpenError::CannotRead {
        shown: shown.to_string(),
        source,
    }
}

fn too_big(shown: &str, len: u64, max: u64) -> OpenError {
    OpenError::TooBig {
        shown: shown.to_string(),
        len,
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A confined path whose folder is a link to the outside by the time
    /// it is opened (the race, made to happen every time): refused.
    #[test]
    fn a_folder_that_became_a_link_after_the_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (ws, outside) = (root.join("ws"), root.join("outside"));
        std::fs::create_dir_all(ws.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(ws.join("d/f.txt"), "inside").unwrap();
        std::fs::write(outside.join("f.txt"), "outside").unwrap();
        let confined = ws.join("d/f.txt");
        let fs = FsSettings::default();
        assert!(open_regular(&confined, "d/f.txt", fs).is_ok());

        std::fs::remove_dir_all(ws.join("d")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("d")).unwrap();
        let refused = open_regular(&confined, "d/f.txt", fs).unwrap_err();
        assert!(matches!(refused, OpenError::BecameLink { .. }), "{refused}");
    }
}
