//! `ServiceError`: every way installing or driving the service can fail,
//! each displayed as a sentence that says what to do next.

use std::path::PathBuf;

/// An error of the service crate.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No service manager to talk to (no session bus, or no systemd on it).
    #[error(
        "no systemd user manager is reachable ({why}); this is usual in a container or in WSL without systemd"
    )]
    NoManager { why: String },
    /// A path that cannot go into a definition file.
    #[error("cannot use {} in a service definition: {why}", path.display())]
    UnusablePath { path: PathBuf, why: &'static str },
    /// The definition file exists and is not ours.
    #[error(
        "{} exists and was not written by `pincer service install`; leaving it alone (run again with --force to replace it)",
        path.display()
    )]
    Foreign { path: PathBuf },
    /// `pincerd` is neither next to `pincer` nor on PATH.
    #[error(
        "cannot find pincerd next to pincer or on PATH; install the binaries together (cargo install --path daemon, and --path daemon/sandbox for the exec sandbox's launcher)"
    )]
    NoPincerd,
    /// A file could not be read, written or removed.
    #[error("cannot {doing} {}: {source}", path.display())]
    Io {
        doing: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The manager answered a call with an error.
    #[error("the {manager} could not {doing}: {why}")]
    Call {
        manager: &'static str,
        doing: String,
        why: String,
    },
    /// The service was started and did not come up.
    #[error("{0}")]
    Failed(String),
}

impl ServiceError {
    pub(crate) fn io(
        doing: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            doing,
            path: path.into(),
            source,
        }
    }
}
