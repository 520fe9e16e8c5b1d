//! The launcher's command line, in one place for both sides: pincerd
//! writes it ([`Plan::args`]), the launcher reads it
//! ([`Invocation::parse`]).
//!
//! ```text
//! pincer-sandbox [--read PATH]… [--write PATH]… [--device PATH]… [--no-network] -- PROGRAM [ARG]…
//! ```
//!
//! Read by hand rather than with clap: the launcher runs once per command
//! and a parser generator's start-up is paid every time. Strict on
//! purpose: an argument it does not know (a pincerd newer than its
//! launcher) is an error, so nothing runs with less confinement than
//! pincerd asked for.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// What one command may reach: the folders and devices Landlock allows,
/// and whether seccomp lets it open network sockets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Folders (or files) it may read and execute.
    pub read: Vec<PathBuf>,
    /// Folders it may read, write and execute in.
    pub write: Vec<PathBuf>,
    /// Device files it may read and write.
    pub devices: Vec<PathBuf>,
    /// Whether sockets other than Unix-domain ones are allowed.
    pub network: bool,
}

/// A parsed command line: the plan and the command to run under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub plan: Plan,
    /// The program (looked up on `PATH` as a shell would) and its
    /// arguments; never empty.
    pub command: Vec<OsString>,
}

/// Why a command line is not one pincerd writes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    #[error("{flag} needs a path")]
    MissingValue { flag: &'static str },
    #[error("unknown argument `{0}` (is this launcher older than pincerd?)")]
    Unknown(String),
    #[error("no command given after `--`")]
    NoCommand,
}

const READ: &str = "--read";
const WRITE: &str = "--write";
const DEVICE: &str = "--device";
const NO_NETWORK: &str = "--no-network";
const END: &str = "--";

impl Plan {
    /// The launcher's arguments for this plan, ending with `--`: the caller
    /// appends the program and its arguments.
    pub fn args(&self) -> Vec<OsString> {
        let mut out =
            Vec::with_capacity(2 * (self.read.len() + self.write.len() + self.devices.len()) + 2);
        for (flag, paths) in [
            (READ, &self.read),
            (WRITE, &self.write),
            (DEVICE, &self.devices),
        ] {
            for path in paths {
                out.push(flag.into());
                out.push(path.into());
            }
        }
        if !self.network {
            out.push(NO_NETWORK.into());
        }
        out.push(END.into());
        out
    }
}

impl Invocation {
    /// Reads the arguments after the program name.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, ArgsError> {
        let mut plan = Plan {
            network: true,
            ..Plan::default()
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, list) = match arg.to_str() {
                Some(END) => {
                    let command: Vec<OsString> = args.collect();
                    if command.is_empty() {
                        return Err(ArgsError::NoCommand);
                    }
                    return Ok(Self { plan, command });
                }
                Some(NO_NETWORK) => {
                    plan.network = false;
                    continue;
                }
                Some(READ) => (READ, &mut plan.read),
                Some(WRITE) => (WRITE, &mut plan.write),
                Some(DEVICE) => (DEVICE, &mut plan.devices),
                _ => return Err(ArgsError::Unknown(lossy(&arg))),
            };
            let path = args.next().ok_or(ArgsError::MissingValue { flag })?;
            list.push(PathBuf::from(path));
        }
        Err(ArgsError::NoCommand)
    }
}

fn lossy(arg: &OsStr) -> String {
    arg.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn what_pincerd_writes_the_launcher_reads_back() {
        for network in [true, false] {
            let plan = Plan {
                read: vec!["/usr".into(), "/etc".into()],
                write: vec!["/home/ann/ws".into(), "/tmp/x y".into()],
                devices: vec!["/dev/null".into()],
                network,
            };
            let mut line = plan.args();
            assert_eq!(line.last().map(OsString::as_os_str), Some(OsStr::new("--")));
            line.extend(os(&["sh", "-c", "echo --read"]));
            let parsed = Invocation::parse(line).unwrap();
            assert_eq!(parsed.plan, plan);
            assert_eq!(parsed.command, os(&["sh", "-c", "echo --read"]));
        }
    }

    #[test]
    fn the_exact_command_line() {
        let plan = Plan {
            read: vec!["/usr".into()],
            write: vec!["/ws".into()],
            devices: vec!["/dev/null".into()],
            network: false,
        };
        assert_eq!(
            plan.args(),
            os(&[
                "--read",
                "/usr",
                "--write",
                "/ws",
                "--device",
                "/dev/null",
                "--no-network",
                "--"
            ])
        );
    }

    #[test]
    fn anything_else_is_refused() {
        assert_eq!(
            Invocation::parse(os(&["--read", "/usr", "--net", "--", "true"])),
            Err(ArgsError::Unknown("--net".into()))
        );
        assert_eq!(
            Invocation::parse(os(&["--write"])),
            Err(ArgsError::MissingValue { flag: "--write" })
        );
        assert_eq!(
            Invocation::parse(os(&["--read", "/usr", "--"])),
            Err(ArgsError::NoCommand)
        );
        assert_eq!(
            Invocation::parse(os(&["--read", "/usr"])),
            Err(ArgsError::NoCommand)
        );
        assert_eq!(
            Invocation::parse(os(&["true"])),
            Err(ArgsError::Unknown("true".into()))
        );
    }
}
