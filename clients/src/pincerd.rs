//! Running the `pincerd` binary for the checks that must not need a
//! running daemon (`config check`, `doctor` while it is down).

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

/// Runs `pincerd ARGS --home HOME` to completion.
pub fn run(home: &Path, args: &[&str]) -> Result<std::process::Output, CliError> {
    Command::new(binary())
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .map_err(|e| CliError::failed(format!("cannot run pincerd (needed for this check): {e}; is it installed next to pincer or on PATH?")))
}
