//! The home's run folder and the socket in it: neither open to other
//! users.

use std::os::unix::fs::PermissionsExt;

use super::{Finding, Level, finding};
use crate::home::Home;

/// Whether the run folder and the socket let other users in.
pub(super) fn check_dirs(home: &Home) -> Vec<Finding> {
    let mut out = Vec::new();
    let run = home.run_dir();
    match std::fs::metadata(&run) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => out.push(finding(
            Level::Error,
            "socket",
            format!(
                "{} is readable by other users (mode {:o}); run `chmod 700 {}`",
                run.display(),
                m.permissions().mode() & 0o777,
                run.display()
            ),
        )),
        _ => {}
    }
    let sock = home.socket_path();
    if let Ok(m) = std::fs::metadata(&sock)
        && m.permissions().mode() & 0o077 != 0
    {
        out.push(finding(
            Level::Error,
            "socket",
            format!(
                "{} allows other users (mode {:o}); restart pincerd to recreate it as 0600",
                sock.display(),
                m.permissions().mode() & 0o777
            ),
        ));
    }
    out
}
