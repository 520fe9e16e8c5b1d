//! `pincer service` against a real `dbus-daemon` on a private address with
//! a fake systemd user manager and logind (tests/support/systemd.rs): the
//! real `pincer` binary finds them through DBUS_SESSION_BUS_ADDRESS and
//! DBUS_SYSTEM_BUS_ADDRESS like any D-Bus client, with HOME and
//! XDG_CONFIG_HOME in temporary directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pincer_testkit::harness::{Output, TestHome, bins};
use pincer_testkit::systemd::{Fakes, PrivateBus, unit_object_path};

/// The environment variables install reports on; cleared so the machine's
/// own keys never leak into a test (or its output).
const KEY_VARS: [&str; 4] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "TELEGRAM_BOT_TOKEN",
];

struct Setup {
    home: TestHome,
    user: tempfile::TempDir,
    fakes: Fakes,
}

impl Setup {
    async fn new() -> Self {
        let user = tempfile::Builder::new()
            .prefix("pincer-user-")
            .tempdir()
            .expect("tempdir");
        let fakes = Fakes::start(&user.path().join("config")).await;
        Self {
            home: TestHome::new(),
            user,
            fakes,
        }
    }

    fn unit_path(&self) -> PathBuf {
        self.fakes.unit_dir.join("pincer.service")
    }

    async fn pincer(&self, args: &[&str]) -> Output {
        run(&self.home, self.user.path(), &self.fakes.bus.address, args).await
    }

    /// The calls that change something, in order (status reads left out).
    fn changes(&self) -> Vec<String> {
        self.fakes
            .calls()
            .into_iter()
            .filter(|c| !c.starts_with("LoadUnit") && !c.starts_with("GetUnit"))
            .collect()
    }
}

/// Runs `pincer --home H args` with the user's dirs and `bus` as both the
/// session and the system bus.
async fn run(home: &TestHome, user: &Path, bus: &str, args: &[&str]) -> Output {
    let mut cmd = home.pincer(args);
    cmd.env("HOME", user)
        .env("XDG_CONFIG_HOME", user.join("config"))
        .env("DBUS_SESSION_BUS_ADDRESS", bus)
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
        .env("OPENAI_API_KEY", "sk-test-never-copied")
        .stdin(std::process::Stdio::null());
    for var in &KEY_VARS[1..] {
        cmd.env_remove(var);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("pincer did not finish in 60 s")
        .expect("run pincer");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn pincerd_path() -> PathBuf {
    std::fs::canonicalize(&bins().pincerd).expect("pincerd path")
}

#[tokio::test]
async fn install_writes_the_unit_enables_and_starts_it_and_uninstall_reverses_it() {
    let s = Setup::new().await;
    let out = s.pincer(&["service", "install"]).await;
    let stdout = out.ok();
    let home = std::fs::canonicalize(s.home.path()).expect("home");

    let unit = std::fs::read_to_string(s.unit_path()).expect("unit written");
    assert!(
        unit.starts_with("# Written by `pincer service install`"),
        "{unit}"
    );
    assert!(
        unit.contains(&format!(
            "\nExecStart={} --home {}\n",
            pincerd_path().display(),
            home.display()
        )),
        "{unit}"
    );
    for line in [
        format!("EnvironmentFile=-{}/service.env", home.display()),
        "Restart=always".into(),
        "RestartSec=5".into(),
        "RestartPreventExitStatus=78 75".into(),
        "UMask=0077".into(),
        "WantedBy=default.target".into(),
    ] {
        assert!(unit.lines().any(|l| l == line), "no `{line}` in:\n{unit}");
    }
    let mode = std::fs::metadata(s.unit_path())
        .expect("unit")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);

    let unit_path = s.unit_path().display().to_string();
    assert_eq!(
        s.changes(),
        [
            "Reload()".to_string(),
            format!("EnableUnitFiles([{unit_path:?}], false, true)"),
            "StartUnit(\"pincer.service\", \"replace\")".to_string(),
        ]
    );

    // The environment file: 0600, the key's name commented, never its value.
    let env_path = home.join("service.env");
    let env = std::fs::read_to_string(&env_path).expect("service.env");
    let mode = std::fs::metadata(&env_path)
        .expect("env")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(env.contains("\n#OPENAI_API_KEY=\n"), "{env}");
    assert!(!env.contains("sk-test"), "{env}");
    assert!(
        stdout.contains("set in this shell but not in") && stdout.contains("OPENAI_API_KEY"),
        "{stdout}"
    );
    assert!(!stdout.contains("ANTHROPIC_API_KEY"), "{stdout}");
    assert!(stdout.contains(&format!("wrote {unit_path}")), "{stdout}");
    assert!(stdout.contains("active (running), pid 4001"), "{stdout}");
    // Lingering is off in the fake logind.
    assert!(stdout.contains("loginctl enable-linger $USER"), "{stdout}");

    // status, as text and as JSON.
    let out = s.pincer(&["service", "status"]).await;
    let text = out.ok();
    for want in [
        format!("installed: {unit_path}"),
        "enabled:   enabled".into(),
        "state:     active (running) since".into(),
        "pid:       4001".into(),
        "restarts:  0".into(),
        "linger:    off".into(),
    ] {
        assert!(text.contains(&want), "no `{want}` in:\n{text}");
    }
    let out = s.pincer(&["--json", "service", "status"]).await;
    out.ok();
    let j = out.json();
    assert_eq!(j["installed"], true);
    assert_eq!(j["enabled"], "enabled");
    assert_eq!(j["active_state"], "active");
    assert_eq!(j["sub_state"], "running");
    assert_eq!(j["main_pid"], 4001);
    assert_eq!(j["linger"], false);
    assert_eq!(j["path"], unit_path.as_str());

    // A second install changes nothing: same file, not rewritten, no Reload.
    let before = std::fs::metadata(s.unit_path())
        .expect("unit")
        .modified()
        .expect("mtime");
    std::thread::sleep(Duration::from_millis(20));
    s.fakes.clear_calls();
    let out = s.pincer(&["service", "install"]).await;
    assert!(
        out.ok().contains("already installed, nothing changed"),
        "{}",
        out.stdout
    );
    let after = std::fs::metadata(s.unit_path())
        .expect("unit")
        .modified()
        .expect("mtime");
    assert_eq!(before, after, "the unit was rewritten");
    assert_eq!(std::fs::read_to_string(s.unit_path()).expect("unit"), unit);
    assert!(
        !s.changes().contains(&"Reload()".to_string()),
        "{:?}",
        s.changes()
    );
    std::fs::write(&env_path, "OPENAI_API_KEY=mine\n").expect("edit env");

    // Uninstall: stop, disable, remove, reload; the environment file stays.
    s.fakes.clear_calls();
    let out = s.pincer(&["service", "uninstall"]).await;
    assert!(
        out.ok().contains("stopped, disabled and removed"),
        "{}",
        out.stdout
    );
    assert_eq!(
        s.changes(),
        [
            "StopUnit(\"pincer.service\", \"replace\")",
            "DisableUnitFiles([\"pincer.service\"], false)",
            "Reload()",
        ]
    );
    assert!(!s.unit_path().exists());
    assert_eq!(
        std::fs::read_to_string(&env_path).expect("env kept"),
        "OPENAI_API_KEY=mine\n"
    );
    let unit = s.fakes.unit("pincer.service").expect("unit known");
    assert_eq!(
        (unit.active_state.as_str(), unit.unit_file_state.as_str()),
        ("inactive", "disabled")
    );

    // And again: nothing to do, no calls.
    s.fakes.clear_calls();
    let out = s.pincer(&["service", "uninstall"]).await;
    assert!(out.ok().contains("not installed"), "{}", out.stdout);
    assert!(s.changes().is_empty(), "{:?}", s.changes());
}

#[tokio::test]
async fn install_json_reports_what_it_did() {
    let s = Setup::new().await;
    s.fakes.set(|st| st.linger = Some(true));
    let out = s.pincer(&["--json", "service", "install"]).await;
    out.ok();
    let j = out.json();
    assert_eq!(j["change"], "created");
    assert_eq!(j["env_file_created"], true);
    assert_eq!(j["env_missing"], serde_json::json!(["OPENAI_API_KEY"]));
    assert_eq!(j["status"]["active_state"], "active");
    assert_eq!(j["linger"], true);
    assert_eq!(j["socket_owner_pid"], serde_json::Value::Null);
}

#[tokio::test]
async fn a_start_that_exits_78_reaches_the_user_as_a_sentence() {
    let s = Setup::new().await;
    s.fakes.set(|st| st.fail_with = Some(78));
    let out = s.pincer(&["service", "install"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("pincerd exited with status 78: its configuration is invalid")
            && out.stderr.contains("pincer config check")
            && out.stderr.contains("pincer service logs"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);

    let out = s.pincer(&["service", "status"]).await;
    let text = out.ok();
    assert!(text.contains("state:     failed (failed)"), "{text}");
    assert!(text.contains("last exit: status 78 (exit-code)"), "{text}");

    s.fakes.set(|st| st.fail_with = Some(75));
    let out = s.pincer(&["service", "restart"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("another pincerd") && out.stderr.contains("pincer stop"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_foreign_unit_is_not_overwritten_unless_forced() {
    let s = Setup::new().await;
    std::fs::create_dir_all(&s.fakes.unit_dir).expect("unit dir");
    let mine = "[Unit]\nDescription=my own pincer\n[Service]\nExecStart=/bin/true\n";
    std::fs::write(s.unit_path(), mine).expect("foreign unit");
    let out = s.pincer(&["service", "install"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(&s.unit_path().display().to_string()) && out.stderr.contains("--force"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(s.unit_path()).expect("unit"), mine);
    assert!(s.changes().is_empty(), "{:?}", s.changes());
    let out = s.pincer(&["service", "uninstall"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(s.unit_path().exists());

    let out = s.pincer(&["service", "install", "--force"]).await;
    assert!(out.ok().contains("replaced"), "{}", out.stdout);
    let unit = std::fs::read_to_string(s.unit_path()).expect("unit");
    assert!(
        unit.starts_with("# Written by `pincer service install`"),
        "{unit}"
    );
    assert!(s.changes().iter().any(|c| c.starts_with("StartUnit")));
}

#[tokio::test]
async fn lingering_advice_only_when_lingering_is_off() {
    let s = Setup::new().await;
    s.fakes.set(|st| st.linger = Some(true));
    let out = s.pincer(&["service", "install"]).await;
    assert!(!out.ok().contains("enable-linger"), "{}", out.stdout);
    let out = s.pincer(&["service", "status"]).await;
    assert!(out.ok().contains("linger:    on"), "{}", out.stdout);

    // No session and no lingering: logind answers NoSuchUser.
    s.fakes.set(|st| st.linger = None);
    std::fs::remove_file(s.unit_path()).expect("remove unit");
    let out = s.pincer(&["service", "install"]).await;
    assert!(
        out.ok().contains("loginctl enable-linger $USER"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn start_stop_and_restart_report_the_state() {
    let s = Setup::new().await;
    s.pincer(&["service", "install"]).await.ok();
    s.fakes.clear_calls();
    let out = s.pincer(&["service", "stop"]).await;
    assert!(
        out.ok().contains("pincer.service: inactive (dead)"),
        "{}",
        out.stdout
    );
    let out = s.pincer(&["service", "start"]).await;
    assert!(
        out.ok()
            .contains("pincer.service: active (running), pid 4002"),
        "{}",
        out.stdout
    );
    let out = s.pincer(&["service", "restart"]).await;
    assert!(
        out.ok().contains("active (running), pid 4003"),
        "{}",
        out.stdout
    );
    assert_eq!(
        s.changes(),
        [
            "StopUnit(\"pincer.service\", \"replace\")",
            "StartUnit(\"pincer.service\", \"replace\")",
            "RestartUnit(\"pincer.service\", \"replace\")",
        ]
    );
    assert_eq!(
        unit_object_path("pincer.service"),
        "/org/freedesktop/systemd1/unit/pincer_2eservice"
    );
}

#[tokio::test]
async fn no_user_manager_says_so_and_prints_the_unit() {
    let home = TestHome::new();
    let user = tempfile::tempdir().expect("tempdir");
    let missing = format!("unix:path={}", user.path().join("no-bus").display());
    let out = run(&home, user.path(), &missing, &["service", "install"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("pincer: cannot install the service: no systemd user manager is reachable (cannot connect to the session bus"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout
            .starts_with("# Written by `pincer service install`")
            && out.stdout.contains("ExecStart="),
        "{}",
        out.stdout
    );
    let unit_path = user.path().join("config/systemd/user/pincer.service");
    assert!(
        out.stderr
            .contains(&format!("save the unit above as {}", unit_path.display()))
            && out
                .stderr
                .contains("systemctl --user enable --now pincer.service"),
        "{}",
        out.stderr
    );
    assert!(!unit_path.exists(), "the unit is the user's to save");
    // The environment file the steps name is there to fill, private.
    let env_file = home.path().join("service.env");
    assert!(
        out.stderr
            .contains(&format!("created {} (mode 0600)", env_file.display())),
        "{}",
        out.stderr
    );
    let text = std::fs::read_to_string(&env_file).expect("service.env is created");
    assert!(text.contains("\n#OPENAI_API_KEY=\n"), "{text}");
    let mode = std::fs::metadata(&env_file)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    let out = run(&home, user.path(), &missing, &["service", "status"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    // A bus without systemd on it (a container's) is no better.
    let bus = PrivateBus::start();
    let out = run(&home, user.path(), &bus.address, &["service", "start"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(
            "no systemd user manager is reachable (the session bus has no org.freedesktop.systemd1)"
        ),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn unit_prints_the_installed_and_the_packaged_unit() {
    let home = TestHome::new();
    let out = home.cli(&["service", "unit", "--packaged"]).await;
    let committed = include_str!("../../packaging/dist/pincer.service");
    assert_eq!(out.ok(), committed);
    let out = home.cli(&["service", "unit"]).await;
    assert!(
        out.ok()
            .contains(&format!("ExecStart={} --home", pincerd_path().display())),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn a_pincerd_started_by_hand_is_not_fought_for_its_socket() {
    let s = Setup::new().await;
    let daemon = s.home.start();
    let out = s.pincer(&["service", "install"]).await;
    let stdout = out.ok();
    assert!(
        stdout.contains(&format!(
            "enabled, not started: pincerd (pid {}, not the service's) owns this home's socket",
            daemon.pid()
        )) && stdout.contains("`pincer stop`"),
        "{stdout}"
    );
    let changes = s.changes();
    assert!(
        changes.iter().any(|c| c.starts_with("EnableUnitFiles")),
        "{changes:?}"
    );
    assert!(
        !changes.iter().any(|c| c.starts_with("StartUnit")),
        "{changes:?}"
    );
    let out = s.pincer(&["--json", "service", "install"]).await;
    out.ok();
    assert_eq!(out.json()["socket_owner_pid"], daemon.pid());
}
