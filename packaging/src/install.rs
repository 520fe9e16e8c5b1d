//! Installing and removing pincer's service with any `Manager`: the
//! definition file (idempotent, never someone else's unless forced), the
//! environment file, enabling, starting and waiting until pincerd is up or
//! has said why not. Also where `pincerd` is and the by-hand steps for a
//! machine with no user manager.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::env_file;
use crate::error::ServiceError;
use crate::manager::{Manager, Status};
use crate::render::{self, Spec, UNIT_NAME};

/// How long a start may take to show running or failed.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Running this long without failing counts as started when the socket
/// does not answer yet (pincerd reads its config first: a bad one exits
/// 78 well within it).
const SETTLE: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(100);

/// What install did to the definition file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Created,
    Replaced,
    Unchanged,
}

/// What to install, and what the CLI knows about a running pincerd.
pub struct Install<'a> {
    pub spec: Spec,
    /// Replace a definition file that we did not write.
    pub force: bool,
    /// The pid of a pincerd answering on this home's socket, if any.
    pub running_pid: Option<u32>,
    /// Whether this home's socket answers now.
    pub answers: &'a dyn Fn() -> bool,
}

/// What `install` did.
#[derive(Debug, Clone, Serialize)]
pub struct InstallReport {
    pub path: String,
    pub change: Change,
    pub env_file: String,
    pub env_file_created: bool,
    /// Set in this shell, not in the environment file.
    pub env_missing: Vec<String>,
    /// Not started because this pincerd (not the service's) owns the socket.
    pub socket_owner_pid: Option<u32>,
    pub status: Status,
    pub linger: Option<bool>,
}

/// What `uninstall` did.
#[derive(Debug, Clone, Serialize)]
pub struct UninstallReport {
    pub path: String,
    pub removed: bool,
    /// Kept: it holds the user's keys.
    pub env_file: String,
}

/// Writes, enables and starts the service.
pub async fn install<M: Manager>(m: &M, opts: &Install<'_>) -> Result<InstallReport, ServiceError> {
    let path = m.definition_path().to_path_buf();
    let text = m.render(&opts.spec)?;
    let change = write_definition(&path, &text, opts.force)?;
    let (env_path, names, env_file_created) = prepare_home(&opts.spec)?;
    if change != Change::Unchanged {
        m.reload().await?;
    }
    m.enable().await?;
    let before = m.status().await?;
    let socket_owner_pid = opts.running_pid.filter(|pid| before.main_pid != Some(*pid));
    let mut status = if socket_owner_pid.is_some() {
        before
    } else {
        m.start().await?;
        wait_started(m, opts.answers).await?
    };
    let linger = m.linger().await;
    status.linger = linger;
    Ok(InstallReport {
        path: path.display().to_string(),
        change,
        env_file: env_path.display().to_string(),
        env_file_created,
        env_missing: env_file::missing(&env_path, &names),
        socket_owner_pid,
        status,
        linger,
    })
}

/// The by-hand steps for a machine with no user manager: the unit to save,
/// where, and the environment file it reads, created like `install` does
/// (so the keys have their place before the unit is enabled).
#[derive(Debug, Clone, Serialize)]
pub struct ManualReport {
    pub unit: String,
    pub path: String,
    pub env_file: String,
    pub env_file_created: bool,
    pub steps: String,
}

/// Prepares the home and renders what the user installs by hand.
pub fn manual(spec: &Spec, unit_path: &Path) -> Result<ManualReport, ServiceError> {
    let unit = render::unit(spec)?;
    let (env_path, _, env_file_created) = prepare_home(spec)?;
    Ok(ManualReport {
        unit,
        path: unit_path.display().to_string(),
        env_file: env_path.display().to_string(),
        env_file_created,
        steps: manual_steps(unit_path, &env_path),
    })
}

/// The home's logs folder and its environment file (commented lines for
/// the keys the config names), made when missing: what the service needs
/// before its first start, whoever installs it.
fn prepare_home(spec: &Spec) -> Result<(PathBuf, Vec<String>, bool), ServiceError> {
    let home = &spec.home;
    // A home created here is private, as pincerd makes its own.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home.join("logs"))
        .map_err(|e| ServiceError::io("create", home.join("logs"), e))?;
    let env_path = spec.env_file();
    let names = env_file::wanted(home);
    let created = env_file::create(&env_path, &names)?;
    Ok((env_path, names, created))
}

/// Stops, disables and removes the service; the environment file and the
/// home stay.
pub async fn uninstall<M: Manager>(
    m: &M,
    home: &Path,
    force: bool,
) -> Result<UninstallReport, ServiceError> {
    let path = m.definition_path().to_path_buf();
    let report = |removed| UninstallReport {
        path: path.display().to_string(),
        removed,
        env_file: render::env_file(home).display().to_string(),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report(false)),
        Err(e) => return Err(ServiceError::io("read", &path, e)),
    };
    if !render::is_ours(&text) && !force {
        return Err(ServiceError::Foreign { path });
    }
    m.stop().await?;
    m.disable().await?;
    std::fs::remove_file(&path).map_err(|e| ServiceError::io("remove", &path, e))?;
    m.reload().await?;
    Ok(report(true))
}

/// Starts (or restarts) and waits for the outcome.
pub async fn start<M: Manager>(
    m: &M,
    restart: bool,
    answers: &dyn Fn() -> bool,
) -> Result<Status, ServiceError> {
    if restart {
        m.restart().await?;
    } else {
        m.start().await?;
    }
    wait_started(m, answers).await
}

/// The status with lingering filled in.
pub async fn status<M: Manager>(m: &M) -> Result<Status, ServiceError> {
    let mut s = m.status().await?;
    s.linger = m.linger().await;
    Ok(s)
}

/// Polls until the service runs (and its socket answers, or it has run
/// for `SETTLE`), or has failed: then the failure as a sentence.
async fn wait_started<M: Manager>(
    m: &M,
    answers: &dyn Fn() -> bool,
) -> Result<Status, ServiceError> {
    let began = Instant::now();
    let mut running_since: Option<Instant> = None;
    loop {
        let s = m.status().await?;
        if s.has_failed() {
            return Err(ServiceError::Failed(s.failure()));
        }
        if s.is_running() {
            let since = *running_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SETTLE || answers() {
                return Ok(s);
            }
        } else {
            running_since = None;
        }
        if began.elapsed() >= START_TIMEOUT {
            return Err(ServiceError::Failed(format!(
                "pincer's service is still {}/{} {} s after it was started; `pincer service logs` shows what it is doing",
                s.active_state,
                s.sub_state,
                START_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Writes `text` to `path` unless it is there already; a file we did not
/// write is replaced only with `force`.
fn write_definition(path: &Path, text: &str, force: bool) -> Result<Change, ServiceError> {
    let change = match std::fs::read_to_string(path) {
        Ok(old) if old == text => return Ok(Change::Unchanged),
        Ok(old) if !render::is_ours(&old) && !force => {
            return Err(ServiceError::Foreign {
                path: path.to_path_buf(),
            });
        }
        Ok(_) => Change::Replaced,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Change::Created,
        // Unreadable (not UTF-8, no permission): not provably ours.
        Err(_) if !force => {
            return Err(ServiceError::Foreign {
                path: path.to_path_buf(),
            });
        }
        Err(_) => Change::Replaced,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ServiceError::io("create", dir, e))?;
    }
    // Written aside and renamed: the manager never reads half a file.
    let tmp = path.with_extension("tmp-pincer");
    std::fs::write(&tmp, text).map_err(|e| ServiceError::io("write", &tmp, e))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| ServiceError::io("set the mode of", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ServiceError::io("write", path, e))?;
    Ok(change)
}

/// The absolute `pincerd` the service runs: the one next to the running
/// `pincer`, else the first on PATH.
pub fn find_pincerd() -> Result<PathBuf, ServiceError> {
    let beside = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("pincerd")));
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("pincerd"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    beside
        .into_iter()
        .chain(on_path)
        .find(|p| is_executable(p))
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or(ServiceError::NoPincerd)
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The steps to install the unit by hand where `pincer` cannot reach a
/// user manager (one per line).
fn manual_steps(unit_path: &Path, env_file: &Path) -> String {
    format!(
        "save the unit above as {}, put provider keys in {} (uncomment and fill its KEY= lines; it is readable by you only), then run:\n  systemctl --user daemon-reload\n  systemctl --user enable --now {UNIT_NAME}",
        unit_path.display(),
        env_file.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_is_written_once_and_a_foreign_one_only_when_forced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("user").join("pincer.service");
        let ours = "# Written by `pincer service install`\n[Unit]\n";
        assert_eq!(
            write_definition(&path, ours, false).unwrap(),
            Change::Created
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        assert_eq!(
            write_definition(&path, ours, false).unwrap(),
            Change::Unchanged
        );
        let newer = format!("{ours}Description=x\n");
        assert_eq!(
            write_definition(&path, &newer, false).unwrap(),
            Change::Replaced
        );
        std::fs::write(&path, "[Unit]\nDescription=mine\n").unwrap();
        let e = write_definition(&path, ours, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--force") && e.contains("pincer.service"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "[Unit]\nDescription=mine\n"
        );
        assert_eq!(
            write_definition(&path, ours, true).unwrap(),
            Change::Replaced
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), ours);
    }
}
