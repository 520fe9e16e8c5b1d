//! The systemd user manager over D-Bus (zbus): `org.freedesktop.systemd1`
//! on the session bus, found through `DBUS_SESSION_BUS_ADDRESS` like any
//! D-Bus client; lingering from logind (`org.freedesktop.login1`) on the
//! system bus. Never shells out to `systemctl`.

use std::path::{Path, PathBuf};

use zbus::proxy::CacheProperties;
use zbus::{Connection, OwnedObjectPath};

use crate::error::ServiceError;
use crate::manager::{Manager, Status};
use crate::render::{self, Spec, UNIT_NAME};

const MANAGER: &str = "systemd user manager";
const SYSTEMD: &str = "org.freedesktop.systemd1";
/// systemd's answer to a call about a unit it has not loaded.
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
/// logind's answer for a user with neither a session nor lingering.
const NO_SUCH_USER: &str = "org.freedesktop.login1.NoSuchUser";
/// waitid(2)'s codes, as systemd reports them in ExecMainCode.
const CLD_KILLED: i32 = 2;
const CLD_DUMPED: i32 = 3;

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
trait SystemdManager {
    fn reload(&self) -> zbus::Result<()>;
    fn enable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<(bool, Vec<(String, String, String)>)>;
    fn disable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
    ) -> zbus::Result<Vec<(String, String, String)>>;
    fn start_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn restart_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn load_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
trait SystemdUnit {
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn sub_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn unit_file_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn active_enter_timestamp(&self) -> zbus::Result<u64>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1"
)]
trait SystemdService {
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn exec_main_status(&self) -> zbus::Result<i32>;
    #[zbus(property)]
    fn exec_main_code(&self) -> zbus::Result<i32>;
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;
    #[zbus(property, name = "NRestarts")]
    fn n_restarts(&self) -> zbus::Result<u32>;
}

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
trait LogindManager {
    fn get_user(&self, uid: u32) -> zbus::Result<OwnedObjectPath>;
}

#[zbus::proxy(
    interface = "org.freedesktop.login1.User",
    default_service = "org.freedesktop.login1"
)]
trait LogindUser {
    #[zbus(property)]
    fn linger(&self) -> zbus::Result<bool>;
}

/// The user's systemd, connected.
pub struct Systemd {
    conn: Connection,
    unit_path: PathBuf,
}

impl Systemd {
    /// Connects to the session bus and makes sure systemd is on it: a bus
    /// without it (a container's, WSL's) is as good as none.
    pub async fn connect() -> Result<Self, ServiceError> {
        let unit_path = unit_path()?;
        let conn = Connection::session()
            .await
            .map_err(|e| ServiceError::NoManager {
                why: format!("cannot connect to the session bus: {}", describe(&e)),
            })?;
        let dbus = zbus::fdo::DBusProxy::new(&conn)
            .await
            .map_err(|e| ServiceError::NoManager { why: describe(&e) })?;
        let present = dbus
            .name_has_owner(zbus::names::WellKnownName::from_static_str_unchecked(SYSTEMD).into())
            .await
            .map_err(|e| ServiceError::NoManager {
                why: describe(&e.into()),
            })?;
        if !present {
            return Err(ServiceError::NoManager {
                why: "the session bus has no org.freedesktop.systemd1".into(),
            });
        }
        Ok(Self { conn, unit_path })
    }

    async fn manager(&self) -> Result<SystemdManagerProxy<'_>, ServiceError> {
        SystemdManagerProxy::new(&self.conn)
            .await
            .map_err(|e| call_error("reach its Manager object", &e))
    }
}

/// `$XDG_CONFIG_HOME/systemd/user/pincer.service` (default `~/.config`).
pub fn unit_path() -> Result<PathBuf, ServiceError> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })
        .ok_or_else(|| ServiceError::Failed("cannot find the home directory: set HOME".into()))?;
    Ok(config.join("systemd").join("user").join(UNIT_NAME))
}

impl Manager for Systemd {
    fn name(&self) -> &'static str {
        MANAGER
    }

    fn definition_path(&self) -> &Path {
        &self.unit_path
    }

    fn render(&self, spec: &Spec) -> Result<String, ServiceError> {
        render::unit(spec)
    }

    async fn reload(&self) -> Result<(), ServiceError> {
        self.manager()
            .await?
            .reload()
            .await
            .map_err(|e| call_error("reload its unit files", &e))
    }

    async fn enable(&self) -> Result<(), ServiceError> {
        let path = self.unit_path.to_string_lossy();
        self.manager()
            .await?
            .enable_unit_files(&[&path], false, true)
            .await
            .map(drop)
            .map_err(|e| call_error(format!("enable {UNIT_NAME}"), &e))
    }

    async fn disable(&self) -> Result<(), ServiceError> {
        self.manager()
            .await?
            .disable_unit_files(&[UNIT_NAME], false)
            .await
            .map(drop)
            .map_err(|e| call_error(format!("disable {UNIT_NAME}"), &e))
    }

    async fn start(&self) -> Result<(), ServiceError> {
        self.manager()
            .await?
            .start_unit(UNIT_NAME, "replace")
            .await
            .map(drop)
            .map_err(|e| call_error(format!("start {UNIT_NAME}"), &e))
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        match self.manager().await?.stop_unit(UNIT_NAME, "replace").await {
            Ok(_) => Ok(()),
            Err(e) if error_name(&e) == Some(NO_SUCH_UNIT) => Ok(()),
            Err(e) => Err(call_error(format!("stop {UNIT_NAME}"), &e)),
        }
    }

    async fn restart(&self) -> Result<(), ServiceError> {
        self.manager()
            .await?
            .restart_unit(UNIT_NAME, "replace")
            .await
            .map(drop)
            .map_err(|e| call_error(format!("restart {UNIT_NAME}"), &e))
    }

    async fn status(&self) -> Result<Status, ServiceError> {
        let read = |e: zbus::Error| call_error(format!("report the state of {UNIT_NAME}"), &e);
        let object = self
            .manager()
            .await?
            .load_unit(UNIT_NAME)
            .await
            .map_err(read)?;
        let unit = SystemdUnitProxy::builder(&self.conn)
            .path(object.clone())
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(read)?;
        let service = SystemdServiceProxy::builder(&self.conn)
            .path(object)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(read)?;
        let pid = service.main_pid().await.map_err(read)?;
        let since = unit.active_enter_timestamp().await.map_err(read)?;
        let code = service.exec_main_code().await.map_err(read)?;
        let exit = service.exec_main_status().await.map_err(read)?;
        let killed = matches!(code, CLD_KILLED | CLD_DUMPED);
        Ok(Status {
            installed: self.unit_path.exists(),
            path: self.unit_path.display().to_string(),
            enabled: unit.unit_file_state().await.map_err(read)?,
            active_state: unit.active_state().await.map_err(read)?,
            sub_state: unit.sub_state().await.map_err(read)?,
            main_pid: (pid != 0).then_some(pid),
            since_unix_s: (since != 0).then_some(since / 1_000_000),
            restarts: Some(service.n_restarts().await.map_err(read)?),
            // Code 0: it has not exited since the manager started.
            last_exit_status: (code != 0 && !killed).then_some(exit),
            last_exit_signal: killed.then_some(exit),
            result: Some(service.result().await.map_err(read)?),
            linger: None,
        })
    }

    async fn linger(&self) -> Option<bool> {
        let conn = Connection::system().await.ok()?;
        let logind = LogindManagerProxy::new(&conn).await.ok()?;
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let user = match logind.get_user(uid).await {
            Ok(path) => path,
            Err(e) if error_name(&e) == Some(NO_SUCH_USER) => return Some(false),
            Err(_) => return None,
        };
        LogindUserProxy::builder(&conn)
            .path(user)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .ok()?
            .linger()
            .await
            .ok()
    }
}

/// The D-Bus error name of a method's error reply.
fn error_name(e: &zbus::Error) -> Option<&str> {
    match e {
        zbus::Error::MethodError(name, _, _) => Some(name.as_str()),
        _ => None,
    }
}

/// An error reply's own words (its description, else its name); other
/// errors as zbus words them.
fn describe(e: &zbus::Error) -> String {
    match e {
        zbus::Error::MethodError(name, Some(text), _) if !text.is_empty() => {
            format!("{text} ({name})")
        }
        zbus::Error::MethodError(name, _, _) => name.to_string(),
        zbus::Error::FDO(fdo) => fdo.to_string(),
        other => other.to_string(),
    }
}

fn call_error(doing: impl Into<String>, e: &zbus::Error) -> ServiceError {
    ServiceError::Call {
        manager: MANAGER,
        doing: doing.into(),
        why: describe(e),
    }
}
