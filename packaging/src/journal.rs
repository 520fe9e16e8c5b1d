//! Where `pincer service logs` reads: the user journal through
//! `journalctl` when the service runs under systemd and the journal
//! answers; otherwise the caller shows `PINCER_HOME/logs/pincerd.log`,
//! which pincerd writes wherever it runs.

use std::ffi::OsString;
use std::process::{Command, Stdio};

use crate::render::UNIT_NAME;

/// `journalctl --user-unit pincer.service -n N [-f] --no-pager`.
pub fn command_line(lines: usize, follow: bool) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "journalctl".into(),
        "--user-unit".into(),
        UNIT_NAME.into(),
        "-n".into(),
        lines.to_string().into(),
        "--no-pager".into(),
    ];
    if follow {
        args.push("-f".into());
    }
    args
}

/// Whether `journalctl` exists and has a journal to read: it runs, exits
/// 0 and does not say that no journal files were found.
pub fn usable() -> bool {
    Command::new("journalctl")
        .args(["--user-unit", UNIT_NAME, "-n", "0", "--no-pager", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .is_ok_and(|out| {
            out.status.success()
                && !String::from_utf8_lossy(&out.stderr).contains("No journal files")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_command_names_the_unit() {
        let words = |v: Vec<OsString>| {
            v.into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            words(command_line(20, false)),
            [
                "journalctl",
                "--user-unit",
                "pincer.service",
                "-n",
                "20",
                "--no-pager"
            ]
        );
        assert_eq!(
            words(command_line(5, true)).last().map(String::as_str),
            Some("-f")
        );
    }
}
