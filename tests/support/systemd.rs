//! A private D-Bus for the service tests: a real `dbus-daemon` on a unix
//! socket in a temporary directory, and on it a fake systemd user manager
//! (`org.freedesktop.systemd1`) and a fake logind (`org.freedesktop.login1`)
//! served with zbus. They speak the real interfaces, object paths and error
//! names, record every Manager call with its arguments, and keep the units'
//! state; the test reads and steers them through `Fakes`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use zbus::object_server::ObjectServer;
use zbus::{Connection, OwnedObjectPath};

/// A `dbus-daemon` of our own, killed on drop.
pub struct PrivateBus {
    pub address: String,
    pid: i32,
    _dir: tempfile::TempDir,
}

impl PrivateBus {
    /// Starts the daemon and waits for its address.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pincer-dbus-")
            .tempdir()
            .expect("tempdir");
        let socket = dir.path().join("bus");
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )
        .expect("write bus.conf");
        let mut child = match Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args([
                "--print-address=1",
                "--print-pid=1",
                "--fork",
                "--nopidfile",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
        {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "dbus-daemon is not installed: install the Debian package dbus (apt-get install dbus), or run tests/setup.sh"
            ),
            Err(e) => panic!("cannot run dbus-daemon: {e}"),
        };
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let address = lines.next().expect("address line").expect("read address");
        let pid: i32 = lines
            .next()
            .expect("pid line")
            .expect("read pid")
            .trim()
            .parse()
            .expect("pid");
        let status = child.wait().expect("wait for dbus-daemon's parent");
        assert!(status.success(), "dbus-daemon failed to start: {status}");
        Self {
            address: address.trim().to_string(),
            pid,
            _dir: dir,
        }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        // SAFETY: signals the daemon we started, by its pid.
        unsafe {
            libc::kill(self.pid, libc::SIGTERM);
        }
    }
}

/// One unit as the fake manager keeps it.
#[derive(Debug, Clone)]
pub struct UnitState {
    pub load_state: String,
    pub active_state: String,
    pub sub_state: String,
    pub unit_file_state: String,
    pub main_pid: u32,
    pub exec_main_code: i32,
    pub exec_main_status: i32,
    pub result: String,
    pub n_restarts: u32,
    pub active_enter_timestamp: u64,
}

impl Default for UnitState {
    fn default() -> Self {
        Self {
            load_state: "not-found".into(),
            active_state: "inactive".into(),
            sub_state: "dead".into(),
            unit_file_state: String::new(),
            main_pid: 0,
            exec_main_code: 0,
            exec_main_status: 0,
            result: "success".into(),
            n_restarts: 0,
            active_enter_timestamp: 0,
        }
    }
}

/// What the fakes know and recorded.
#[derive(Debug, Default)]
pub struct State {
    /// Every Manager call, as `Name(args…)`.
    pub calls: Vec<String>,
    pub units: BTreeMap<String, UnitState>,
    /// When set, a started unit fails: pincerd "exits" with this status.
    pub fail_with: Option<i32>,
    /// logind's Linger for our user; `None`: no such user (no session).
    pub linger: Option<bool>,
    next_pid: u32,
    next_job: u32,
}

/// The shared state of the fakes.
pub type Shared = Arc<Mutex<State>>;

/// The fakes served on a private bus.
pub struct Fakes {
    pub bus: PrivateBus,
    pub state: Shared,
    /// The user unit directory the fake reads (XDG_CONFIG_HOME/systemd/user).
    pub unit_dir: PathBuf,
    _conn: Connection,
}

impl Fakes {
    /// Starts a bus and serves systemd1 and login1 on it for `config_home`
    /// (the XDG_CONFIG_HOME the CLI gets).
    pub async fn start(config_home: &Path) -> Self {
        let bus = PrivateBus::start();
        let state: Shared = Arc::new(Mutex::new(State {
            next_pid: 4000,
            linger: Some(false),
            ..State::default()
        }));
        let unit_dir = config_home.join("systemd").join("user");
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .name("org.freedesktop.systemd1")
            .name("org.freedesktop.login1")
            .serve_at(
                "/org/freedesktop/systemd1",
                SystemdManager {
                    state: state.clone(),
                    unit_dir: unit_dir.clone(),
                },
            )
            .serve_at(
                "/org/freedesktop/login1",
                LogindManager {
                    state: state.clone(),
                },
            )
            .serve_at(
                format!("/org/freedesktop/login1/user/_{uid}").as_str(),
                LogindUser {
                    state: state.clone(),
                },
            )
            .build()
            .await
            .expect("connect the fakes to the private bus");
        Self {
            bus,
            state,
            unit_dir,
            _conn: conn,
        }
    }

    pub fn calls(&self) -> Vec<String> {
        self.state.lock().expect("state").calls.clone()
    }

    pub fn clear_calls(&self) {
        self.state.lock().expect("state").calls.clear();
    }

    pub fn unit(&self, name: &str) -> Option<UnitState> {
        self.state.lock().expect("state").units.get(name).cloned()
    }

    pub fn set(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.lock().expect("state"));
    }
}

/// systemd's object path of a unit (bus_label_escape: `_` and the hex
/// of every byte that is not a letter or digit).
pub fn unit_object_path(name: &str) -> String {
    let mut label = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() {
            label.push(b as char);
        } else {
            label.push_str(&format!("_{b:02x}"));
        }
    }
    format!("/org/freedesktop/systemd1/unit/{label}")
}

/// systemd's error names.
#[derive(zbus::DBusError, Debug)]
#[zbus(prefix = "org.freedesktop.systemd1")]
pub enum SystemdError {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchUnit(String),
}

/// logind's error names.
#[derive(zbus::DBusError, Debug)]
#[zbus(prefix = "org.freedesktop.login1")]
pub enum LogindError {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchUser(String),
}

struct SystemdManager {
    state: Shared,
    unit_dir: PathBuf,
}

impl SystemdManager {
    fn record(&self, call: String) {
        self.state.lock().expect("state").calls.push(call);
    }

    /// The unit with its load state from the unit directory, exported.
    async fn load(&self, server: &ObjectServer, name: &str) -> OwnedObjectPath {
        let exists = self.unit_dir.join(name).exists();
        {
            let mut s = self.state.lock().expect("state");
            let unit = s.units.entry(name.to_string()).or_default();
            unit.load_state = if exists { "loaded" } else { "not-found" }.into();
            if !exists {
                unit.unit_file_state = String::new();
            } else if unit.unit_file_state.is_empty() {
                unit.unit_file_state = "disabled".into();
            }
        }
        let path = unit_object_path(name);
        let unit = UnitObject {
            name: name.to_string(),
            state: self.state.clone(),
        };
        let service = ServiceObject {
            name: name.to_string(),
            state: self.state.clone(),
        };
        server.at(path.as_str(), unit).await.expect("export unit");
        server
            .at(path.as_str(), service)
            .await
            .expect("export service");
        OwnedObjectPath::try_from(path).expect("object path")
    }

    fn job(&self) -> OwnedObjectPath {
        let mut s = self.state.lock().expect("state");
        s.next_job += 1;
        OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{}", s.next_job))
            .expect("job path")
    }

    /// Runs the unit: active/running with a pid, or failed as configured.
    fn run(&self, name: &str) {
        let mut s = self.state.lock().expect("state");
        let fail = s.fail_with;
        s.next_pid += 1;
        let pid = s.next_pid;
        let unit = s.units.entry(name.to_string()).or_default();
        match fail {
            Some(code) => {
                unit.active_state = "failed".into();
                unit.sub_state = "failed".into();
                unit.main_pid = 0;
                unit.exec_main_code = 1;
                unit.exec_main_status = code;
                unit.result = "exit-code".into();
            }
            None => {
                unit.active_state = "active".into();
                unit.sub_state = "running".into();
                unit.main_pid = pid;
                unit.result = "success".into();
                unit.active_enter_timestamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_micros() as u64)
                    .unwrap_or(0);
            }
        }
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl SystemdManager {
    fn reload(&self) {
        self.record("Reload()".into());
    }

    async fn enable_unit_files(
        &self,
        #[zbus(object_server)] server: &ObjectServer,
        files: Vec<String>,
        runtime: bool,
        force: bool,
    ) -> Result<(bool, Vec<(String, String, String)>), SystemdError> {
        self.record(format!("EnableUnitFiles({files:?}, {runtime}, {force})"));
        let mut changes = Vec::new();
        for file in files {
            let name = Path::new(&file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !Path::new(&file).exists() {
                return Err(SystemdError::NoSuchUnit(format!(
                    "Unit file {file} does not exist."
                )));
            }
            self.load(server, &name).await;
            self.state
                .lock()
                .expect("state")
                .units
                .entry(name.clone())
                .or_default()
                .unit_file_state = "enabled".into();
            changes.push((
                "symlink".to_string(),
                self.unit_dir
                    .join("default.target.wants")
                    .join(&name)
                    .display()
                    .to_string(),
                file,
            ));
        }
        Ok((false, changes))
    }

    fn disable_unit_files(
        &self,
        files: Vec<String>,
        runtime: bool,
    ) -> Vec<(String, String, String)> {
        self.record(format!("DisableUnitFiles({files:?}, {runtime})"));
        let mut s = self.state.lock().expect("state");
        files
            .into_iter()
            .filter_map(|f| {
                let unit = s.units.get_mut(&f)?;
                unit.unit_file_state = "disabled".into();
                Some((
                    "unlink".to_string(),
                    self.unit_dir
                        .join("default.target.wants")
                        .join(&f)
                        .display()
                        .to_string(),
                    String::new(),
                ))
            })
            .collect()
    }

    async fn start_unit(
        &self,
        #[zbus(object_server)] server: &ObjectServer,
        name: String,
        mode: String,
    ) -> Result<OwnedObjectPath, SystemdError> {
        self.record(format!("StartUnit({name:?}, {mode:?})"));
        self.load(server, &name).await;
        if !self.unit_dir.join(&name).exists() {
            return Err(SystemdError::NoSuchUnit(format!("Unit {name} not found.")));
        }
        self.run(&name);
        Ok(self.job())
    }

    async fn restart_unit(
        &self,
        #[zbus(object_server)] server: &ObjectServer,
        name: String,
        mode: String,
    ) -> Result<OwnedObjectPath, SystemdError> {
        self.record(format!("RestartUnit({name:?}, {mode:?})"));
        self.load(server, &name).await;
        if !self.unit_dir.join(&name).exists() {
            return Err(SystemdError::NoSuchUnit(format!("Unit {name} not found.")));
        }
        self.run(&name);
        Ok(self.job())
    }

    fn stop_unit(&self, name: String, mode: String) -> Result<OwnedObjectPath, SystemdError> {
        self.record(format!("StopUnit({name:?}, {mode:?})"));
        {
            let mut s = self.state.lock().expect("state");
            let Some(unit) = s.units.get_mut(&name).filter(|u| u.load_state == "loaded") else {
                return Err(SystemdError::NoSuchUnit(format!("Unit {name} not loaded.")));
            };
            unit.active_state = "inactive".into();
            unit.sub_state = "dead".into();
            unit.main_pid = 0;
        }
        Ok(self.job())
    }

    fn get_unit(&self, name: String) -> Result<OwnedObjectPath, SystemdError> {
        self.record(format!("GetUnit({name:?})"));
        let s = self.state.lock().expect("state");
        match s.units.get(&name) {
            Some(u) if u.load_state == "loaded" => {
                Ok(OwnedObjectPath::try_from(unit_object_path(&name)).expect("path"))
            }
            _ => Err(SystemdError::NoSuchUnit(format!("Unit {name} not loaded."))),
        }
    }

    async fn load_unit(
        &self,
        #[zbus(object_server)] server: &ObjectServer,
        name: String,
    ) -> OwnedObjectPath {
        self.record(format!("LoadUnit({name:?})"));
        self.load(server, &name).await
    }
}

struct UnitObject {
    name: String,
    state: Shared,
}

impl UnitObject {
    fn get<T>(&self, f: impl FnOnce(&UnitState) -> T) -> T {
        let s = self.state.lock().expect("state");
        f(s.units.get(&self.name).expect("unit exported but unknown"))
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl UnitObject {
    #[zbus(property)]
    fn id(&self) -> String {
        self.name.clone()
    }
    #[zbus(property)]
    fn load_state(&self) -> String {
        self.get(|u| u.load_state.clone())
    }
    #[zbus(property)]
    fn active_state(&self) -> String {
        self.get(|u| u.active_state.clone())
    }
    #[zbus(property)]
    fn sub_state(&self) -> String {
        self.get(|u| u.sub_state.clone())
    }
    #[zbus(property)]
    fn unit_file_state(&self) -> String {
        self.get(|u| u.unit_file_state.clone())
    }
    #[zbus(property)]
    fn active_enter_timestamp(&self) -> u64 {
        self.get(|u| u.active_enter_timestamp)
    }
}

struct ServiceObject {
    name: String,
    state: Shared,
}

impl ServiceObject {
    fn get<T>(&self, f: impl FnOnce(&UnitState) -> T) -> T {
        let s = self.state.lock().expect("state");
        f(s.units.get(&self.name).expect("unit exported but unknown"))
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Service")]
impl ServiceObject {
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> u32 {
        self.get(|u| u.main_pid)
    }
    #[zbus(property)]
    fn exec_main_code(&self) -> i32 {
        self.get(|u| u.exec_main_code)
    }
    #[zbus(property)]
    fn exec_main_status(&self) -> i32 {
        self.get(|u| u.exec_main_status)
    }
    #[zbus(property)]
    fn result(&self) -> String {
        self.get(|u| u.result.clone())
    }
    #[zbus(property, name = "NRestarts")]
    fn n_restarts(&self) -> u32 {
        self.get(|u| u.n_restarts)
    }
}

struct LogindManager {
    state: Shared,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl LogindManager {
    fn get_user(&self, uid: u32) -> Result<OwnedObjectPath, LogindError> {
        let s = self.state.lock().expect("state");
        match s.linger {
            Some(_) => Ok(OwnedObjectPath::try_from(format!(
                "/org/freedesktop/login1/user/_{uid}"
            ))
            .expect("user path")),
            None => Err(LogindError::NoSuchUser(format!(
                "User ID {uid} is not logged in or lingering"
            ))),
        }
    }
}

struct LogindUser {
    state: Shared,
}

#[zbus::interface(name = "org.freedesktop.login1.User")]
impl LogindUser {
    #[zbus(property)]
    fn linger(&self) -> bool {
        self.state.lock().expect("state").linger.unwrap_or(false)
    }
}
