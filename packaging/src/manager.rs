//! The `Manager` trait: what `pincer service` needs from a service manager
//! (systemd's user manager over D-Bus, launchd through `launchctl`), and the
//! `Status` both report, with the sentence a failed start becomes.

use std::path::Path;

use serde::Serialize;

use crate::error::ServiceError;
use crate::render::Spec;

/// A service manager that loads pincer's definition file.
// Only ever driven from the CLI's current-thread runtime: no `Send` bound
// is needed on the futures, which is what the lint warns about.
#[allow(async_fn_in_trait)]
pub trait Manager {
    /// For sentences: "systemd user manager", "launchd".
    fn name(&self) -> &'static str;
    /// Where the definition file goes.
    fn definition_path(&self) -> &Path;
    /// The definition file's text for `spec`.
    fn render(&self, spec: &Spec) -> Result<String, ServiceError>;
    /// The definition file changed (was written, replaced or removed).
    async fn reload(&self) -> Result<(), ServiceError>;
    /// Start at login from now on.
    async fn enable(&self) -> Result<(), ServiceError>;
    /// No longer start at login.
    async fn disable(&self) -> Result<(), ServiceError>;
    async fn start(&self) -> Result<(), ServiceError>;
    /// Stops the service; one that is not loaded is already stopped.
    async fn stop(&self) -> Result<(), ServiceError>;
    async fn restart(&self) -> Result<(), ServiceError>;
    async fn status(&self) -> Result<Status, ServiceError>;
    /// Whether the user's services run without a login session (systemd
    /// lingering); `None` where unknown or meaningless (launchd).
    async fn linger(&self) -> Option<bool>;
}

/// What the manager says about the service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The definition file exists.
    pub installed: bool,
    /// Where it is (or would be).
    pub path: String,
    /// Starts at login: systemd's UnitFileState ("enabled", "disabled",
    /// ...); launchd: "loaded" or "not loaded".
    pub enabled: String,
    /// "active", "activating", "inactive", "failed", ...
    pub active_state: String,
    /// systemd's SubState ("running", "dead", "auto-restart"); launchd's state.
    pub sub_state: String,
    pub main_pid: Option<u32>,
    /// When it became active, seconds since the epoch.
    pub since_unix_s: Option<u64>,
    /// Automatic restarts since it was started.
    pub restarts: Option<u32>,
    /// The last run's exit status, when it exited.
    pub last_exit_status: Option<i32>,
    /// The signal that killed the last run, when one did.
    pub last_exit_signal: Option<i32>,
    /// systemd's Result ("success", "exit-code", "signal", ...).
    pub result: Option<String>,
    pub linger: Option<bool>,
}

impl Status {
    /// Up and running.
    pub fn is_running(&self) -> bool {
        self.active_state == "active" && self.sub_state == "running"
    }

    /// Gave up, or waiting to be restarted after a failure.
    pub fn has_failed(&self) -> bool {
        self.active_state == "failed" || self.sub_state == "auto-restart"
    }

    /// Why the last run ended, as a sentence: what the exit status means
    /// and what to do about it.
    pub fn failure(&self) -> String {
        let why = match (self.last_exit_status, self.last_exit_signal) {
            (_, Some(sig)) => format!("pincerd was killed by signal {sig}"),
            (Some(78), _) => "pincerd exited with status 78: its configuration is invalid; `pincer config check` says what to fix, then run `pincer service restart`".to_string(),
            (Some(75), _) => "pincerd exited with status 75: another pincerd (started by hand?) owns this home; stop it with `pincer stop`, then run `pincer service start`".to_string(),
            (Some(code), _) => format!("pincerd exited with status {code}"),
            (None, None) => format!(
                "it is {}/{}{}",
                self.active_state,
                self.sub_state,
                self.result
                    .as_deref()
                    .map(|r| format!(" (result: {r})"))
                    .unwrap_or_default()
            ),
        };
        format!("pincer's service did not start: {why}; `pincer service logs` shows its output")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(status: Option<i32>, signal: Option<i32>) -> Status {
        Status {
            active_state: "failed".into(),
            sub_state: "failed".into(),
            last_exit_status: status,
            last_exit_signal: signal,
            result: Some("exit-code".into()),
            ..Status::default()
        }
    }

    #[test]
    fn a_failure_says_what_the_exit_status_means() {
        let s = failed(Some(78), None).failure();
        assert!(
            s.contains("status 78") && s.contains("pincer config check"),
            "{s}"
        );
        let s = failed(Some(75), None).failure();
        assert!(
            s.contains("another pincerd") && s.contains("pincer stop"),
            "{s}"
        );
        let s = failed(Some(1), None).failure();
        assert!(
            s.contains("exited with status 1") && s.contains("pincer service logs"),
            "{s}"
        );
        let s = failed(None, Some(9)).failure();
        assert!(s.contains("signal 9"), "{s}");
        let s = failed(None, None).failure();
        assert!(s.contains("failed/failed (result: exit-code)"), "{s}");
    }

    #[test]
    fn auto_restart_counts_as_failed() {
        let s = Status {
            active_state: "activating".into(),
            sub_state: "auto-restart".into(),
            ..Status::default()
        };
        assert!(s.has_failed() && !s.is_running());
    }
}
