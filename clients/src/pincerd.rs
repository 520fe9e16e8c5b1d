//! Running the `pincerd` binary for the checks that must not need a
//! running daemon (`config check`, `doctor` while it is down), and for what
//! only it can do (`models fetch`: it has the HTTP client).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::CliError;

/// `pincerd` next to this binary, else on PATH.
fn binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("pincerd")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("pincerd"))
}

/// Runs `pincerd ARGS --home HOME` on this terminal (its lines appear as
/// it works); returns its exit code.
pub fn run_attached(home: &Path, args: &[&std::ffi::OsStr]) -> Result<u8, CliError> {
    let status = Command::new(binary())
        .args(args)
        .arg("--home")
        .arg(home)
        .status()
        .map_err(|e| {
            CliError::failed(format!(
                "cannot run pincerd (it does this): {e}; is it installed next to pincer or on PATH?"
            ))
        })?;
    Ok(status.code().unwrap_or(1).clamp(0, 255) as u8)
}

/// Runs `pincerd ARGS --home HOME` to completion.
pub fn run<S: AsRef<std::ffi::OsStr>>(
    home: &Path,
    args: &[S],
) -> Result<std::process::Output, CliError> {
    Command::new(binary())
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .map_err(|e| CliError::failed(format!("cannot run pincerd (needed for this check): {e}; is it installed next to pincer or on PATH?")))
}
