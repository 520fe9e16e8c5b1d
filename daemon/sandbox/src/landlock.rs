//! The launcher's Landlock ruleset: every file-system right is handled
//! (so anything not allowed is denied), the plan's folders get read or
//! read-write rights, and, where the kernel has them (ABI 6), signals and
//! abstract Unix sockets are scoped to the sandbox.
//!
//! Rights are asked for as of ABI 9 in best-effort mode, so a newer kernel
//! also denies `connect()` to pathname sockets (ABI 9) while an older one
//! enforces what it knows; the launcher refuses to go on when nothing at
//! all is enforced.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetError, RulesetStatus, Scope,
};

/// The newest ABI this ruleset was written and tested against.
const ABI_WANTED: ABI = ABI::V9;

/// Why the process could not be confined; the launcher then runs nothing.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("cannot make the Landlock ruleset: {0}")]
    Ruleset(RulesetError),
    #[error("cannot allow {}: {source}", .path.display())]
    Allow { path: PathBuf, source: RulesetError },
    #[error("cannot enforce the Landlock ruleset: {0}")]
    Enforce(RulesetError),
    #[error("the kernel enforced none of the Landlock ruleset")]
    NotEnforced,
}

/// Confines the calling (single-threaded) process and its future children.
pub fn restrict(
    read: &[PathBuf],
    write: &[PathBuf],
    devices: &[PathBuf],
) -> Result<(), LandlockError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read_only = AccessFs::from_read(ABI_WANTED);
    let device = AccessFs::from_file(ABI_WANTED) & !AccessFs::Execute;
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .and_then(|r| r.scope(Scope::from_all(ABI_WANTED)))
        .and_then(|r| r.create())
        .map_err(LandlockError::Ruleset)?;
    for (paths, access) in [(read, read_only), (write, all), (devices, device)] {
        for path in paths {
            let fd = match PathFd::new(path) {
                Ok(fd) => fd,
                // Gone since the daemon looked: nothing to allow.
                Err(_) => continue,
            };
            // A plain file gets the file rights of `access` only.
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(ABI_WANTED)
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|source| LandlockError::Allow {
                    path: path.clone(),
                    source,
                })?;
        }
    }
    let status = ruleset.restrict_self().map_err(LandlockError::Enforce)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(LandlockError::NotEnforced);
    }
    Ok(())
}
