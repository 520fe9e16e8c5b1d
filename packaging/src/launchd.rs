//! macOS: the LaunchAgent `~/Library/LaunchAgents/dev.pincer.pincerd.plist`
//! driven with `launchctl bootstrap|bootout|kickstart|kill|print` in the
//! `gui/<uid>` domain. The command lines are data (`Launchctl`) so they are
//! tested everywhere; only running them needs macOS.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::ServiceError;
use crate::manager::{Manager, Status};
use crate::render::{self, LAUNCHD_LABEL, Spec};

const MANAGER: &str = "launchd";

/// The `launchctl` command lines for one user's GUI domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launchctl {
    pub uid: u32,
}

impl Launchctl {
    fn domain(&self) -> String {
        format!("gui/{}", self.uid)
    }

    fn target(&self) -> String {
        format!("gui/{}/{LAUNCHD_LABEL}", self.uid)
    }

    /// Loads the plist into the domain (RunAtLoad starts it).
    pub fn bootstrap(&self, plist: &Path) -> Vec<OsString> {
        vec![
            "bootstrap".into(),
            self.domain().into(),
            plist.as_os_str().to_owned(),
        ]
    }

    /// Unloads the job, stopping it.
    pub fn bootout(&self) -> Vec<OsString> {
        vec!["bootout".into(), self.target().into()]
    }

    /// Starts the job; `-k` kills a running instance first (a restart).
    pub fn kickstart(&self, restart: bool) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["kickstart".into()];
        if restart {
            args.push("-k".into());
        }
        args.push(self.target().into());
        args
    }

    /// Asks pincerd to shut down; its clean exit is not restarted
    /// (KeepAlive restarts only unsuccessful exits).
    pub fn stop(&self) -> Vec<OsString> {
        vec!["kill".into(), "SIGTERM".into(), self.target().into()]
    }

    /// The job's state, for `parse_print`.
    pub fn print(&self) -> Vec<OsString> {
        vec!["print".into(), self.target().into()]
    }
}

/// What `launchctl print gui/<uid>/<label>` says about the job.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Printed {
    /// "running", "not running", "spawn scheduled", ...
    pub state: String,
    pub pid: Option<u32>,
    /// None when it never exited.
    pub last_exit_code: Option<i32>,
}

/// Reads the job's own top-level `key = value` lines (nested blocks, such
/// as its environment or endpoints, have their own `state` lines).
pub fn parse_print(text: &str) -> Printed {
    let mut printed = Printed::default();
    let mut depth = 0usize;
    for line in text.lines() {
        let line = line.trim();
        if line.ends_with('{') {
            depth += 1;
            continue;
        }
        if line.starts_with('}') {
            depth = depth.saturating_sub(1);
            continue;
        }
        if depth != 1 {
            continue;
        }
        let Some((key, value)) = line.split_once(" = ") else {
            continue;
        };
        match key.trim() {
            "state" => printed.state = value.trim().to_string(),
            "pid" => printed.pid = value.trim().parse().ok(),
            "last exit code" => printed.last_exit_code = value.trim().parse().ok(),
            _ => {}
        }
    }
    printed
}

/// The user's launchd.
pub struct Launchd {
    ctl: Launchctl,
    plist_path: PathBuf,
}

impl Launchd {
    pub fn new() -> Result<Self, ServiceError> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                ServiceError::Failed("cannot find the home directory: set HOME".into())
            })?;
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        Ok(Self {
            ctl: Launchctl { uid },
            plist_path: plist_path(Path::new(&home)),
        })
    }

    /// Runs `launchctl ARGS`; its stderr is the reason when it fails.
    fn run(&self, doing: &str, args: Vec<OsString>) -> Result<String, ServiceError> {
        let out =
            Command::new("launchctl")
                .args(args)
                .output()
                .map_err(|e| ServiceError::NoManager {
                    why: format!("cannot run launchctl: {e}"),
                })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(ServiceError::Call {
            manager: MANAGER,
            doing: doing.to_string(),
            why: if stderr.is_empty() {
                format!("launchctl exited with {}", out.status)
            } else {
                stderr
            },
        })
    }

    fn loaded(&self) -> Option<Printed> {
        self.run("print the job", self.ctl.print())
            .ok()
            .map(|t| parse_print(&t))
    }
}

/// `~/Library/LaunchAgents/dev.pincer.pincerd.plist`.
pub fn plist_path(home: &Path) -> PathBuf {
    home.join("Library")
        .join("LaunchAgents")
        .join(format!("{LAUNCHD_LABEL}.plist"))
}

impl Manager for Launchd {
    fn name(&self) -> &'static str {
        MANAGER
    }

    fn definition_path(&self) -> &Path {
        &self.plist_path
    }

    fn render(&self, spec: &Spec) -> Result<String, ServiceError> {
        render::plist(spec)
    }

    /// launchd reads a plist when it is bootstrapped: a changed one is
    /// unloaded here and loaded again by `enable`.
    async fn reload(&self) -> Result<(), ServiceError> {
        if self.loaded().is_some() {
            self.run("unload the old job", self.ctl.bootout())?;
        }
        Ok(())
    }

    async fn enable(&self) -> Result<(), ServiceError> {
        if self.loaded().is_none() && self.plist_path.exists() {
            self.run("load the job", self.ctl.bootstrap(&self.plist_path))?;
        }
        Ok(())
    }

    async fn disable(&self) -> Result<(), ServiceError> {
        if self.loaded().is_some() {
            self.run("unload the job", self.ctl.bootout())?;
        }
        Ok(())
    }

    async fn start(&self) -> Result<(), ServiceError> {
        self.enable().await?;
        self.run("start the job", self.ctl.kickstart(false))
            .map(drop)
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        match self.loaded() {
            Some(p) if p.state == "running" => self.run("stop the job", self.ctl.stop()).map(drop),
            _ => Ok(()),
        }
    }

    async fn restart(&self) -> Result<(), ServiceError> {
        self.enable().await?;
        self.run("restart the job", self.ctl.kickstart(true))
            .map(drop)
    }

    async fn status(&self) -> Result<Status, ServiceError> {
        let printed = self.loaded();
        let (enabled, p) = match printed {
            Some(p) => ("loaded", p),
            None => ("not loaded", Printed::default()),
        };
        let active_state = match (p.state.as_str(), p.last_exit_code) {
            ("running", _) => "active",
            (_, Some(code)) if code != 0 => "failed",
            _ => "inactive",
        };
        Ok(Status {
            installed: self.plist_path.exists(),
            path: self.plist_path.display().to_string(),
            enabled: enabled.into(),
            active_state: active_state.into(),
            sub_state: if p.state.is_empty() {
                "not loaded".into()
            } else {
                p.state
            },
            main_pid: p.pid,
            last_exit_status: p.last_exit_code,
            ..Status::default()
        })
    }

    async fn linger(&self) -> Option<bool> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_command_lines_name_the_gui_domain_and_the_label() {
        let ctl = Launchctl { uid: 501 };
        let plist = plist_path(Path::new("/Users/ann"));
        assert_eq!(
            plist,
            Path::new("/Users/ann/Library/LaunchAgents/dev.pincer.pincerd.plist")
        );
        assert_eq!(
            words(ctl.bootstrap(&plist)),
            [
                "bootstrap",
                "gui/501",
                "/Users/ann/Library/LaunchAgents/dev.pincer.pincerd.plist"
            ]
        );
        assert_eq!(
            words(ctl.bootout()),
            ["bootout", "gui/501/dev.pincer.pincerd"]
        );
        assert_eq!(
            words(ctl.kickstart(true)),
            ["kickstart", "-k", "gui/501/dev.pincer.pincerd"]
        );
        assert_eq!(
            words(ctl.kickstart(false)),
            ["kickstart", "gui/501/dev.pincer.pincerd"]
        );
        assert_eq!(
            words(ctl.stop()),
            ["kill", "SIGTERM", "gui/501/dev.pincer.pincerd"]
        );
        assert_eq!(words(ctl.print()), ["print", "gui/501/dev.pincer.pincerd"]);
    }

    const RUNNING: &str = "gui/501/dev.pincer.pincerd = {
\tactive count = 1
\tpath = /Users/ann/Library/LaunchAgents/dev.pincer.pincerd.plist
\ttype = LaunchAgent
\tstate = running

\tprogram = /usr/local/bin/pincerd
\targuments = {
\t\t/usr/local/bin/pincerd
\t\t--home
\t}

\tenvironment = {
\t\tstate = bogus
\t}

\tpid = 4242
\timmediate reason = speculative
\tlast exit code = 78
}
";

    #[test]
    fn print_is_read_at_the_job_level_only() {
        assert_eq!(
            parse_print(RUNNING),
            Printed {
                state: "running".into(),
                pid: Some(4242),
                last_exit_code: Some(78),
            }
        );
    }

    #[test]
    fn a_job_that_never_exited_has_no_exit_code() {
        let text = "gui/501/dev.pincer.pincerd = {\n\tstate = not running\n\tlast exit code = (never exited)\n}\n";
        assert_eq!(
            parse_print(text),
            Printed {
                state: "not running".into(),
                pid: None,
                last_exit_code: None,
            }
        );
    }
}
