//! Why a write in a workspace was refused or failed ([`FsError`]): each
//! variant reads as a sentence for the log, a chat note or a tool result,
//! and names the path as the user finds it on disk.

use std::io;
use std::path::PathBuf;

/// A refusal or failure of the workspace opener.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A component of the path is a symbolic link (planted by a model or a
    /// command, or swapped in after a check). `link` is relative to the
    /// workspace `root`.
    #[error(
        "`{link}` in {root} is a symbolic link; pincerd does not write through links in a workspace"
    )]
    Link { root: PathBuf, link: PathBuf },
    /// The path is absolute or climbs out with `..`.
    #[error(
        "`{path}` does not stay beneath the workspace {root} (it is absolute or climbs out with `..`); pincerd writes only beneath it"
    )]
    NotBeneath { root: PathBuf, path: PathBuf },
    /// A file verb was given the folder itself (an empty path).
    #[error("no file name was given beneath {folder}")]
    NoFileName { folder: PathBuf },
    /// An append found a file with more than one name.
    #[error(
        "{path} has {links} hard links; pincerd does not append to a file that has another name, which may be outside the workspace"
    )]
    HardLinked { path: PathBuf, links: u64 },
    /// A folder, FIFO, socket or device where a regular file was expected.
    #[error(
        "{path} is {kind}, not a regular file; pincerd writes only regular files in a workspace"
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    /// An exclusive create found something there.
    #[error("{path} exists already; it is not overwritten")]
    Exists { path: PathBuf },
    /// The workspace itself cannot be resolved, created or opened.
    #[error("the workspace {path} cannot be opened: {source}")]
    Workspace { path: PathBuf, source: io::Error },
    /// Anything else the system refused.
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl FsError {
    /// Whether a symbolic link was refused (callers log these as
    /// warnings: something in the workspace tried to redirect pincerd).
    pub fn is_link(&self) -> bool {
        matches!(self, Self::Link { .. })
    }
}
