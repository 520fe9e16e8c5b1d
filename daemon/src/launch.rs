//! How this pincerd was started, and what a service start brings with it.
//!
//! A daemon started by the systemd user service or a launchd agent and one
//! started by hand look the same from outside; a second start must still
//! say which one owns the socket, so that a person does not fight the
//! service (or a service restart loop does not fight a person). The
//! service managers tell their children who they are through the
//! environment (`INVOCATION_ID` from systemd, `XPC_SERVICE_NAME` from
//! launchd); [`StartedBy::detect`] reads it, and the instance lock records
//! it next to the pid file.
//!
//! launchd has no `EnvironmentFile=`: the plist passes
//! `--env-file PINCER_HOME/service.env` and [`load_env_file`] reads it
//! (the same `KEY=VALUE` lines systemd reads for the unit).

use std::path::{Path, PathBuf};

/// pincerd's exit status when another pincerd owns the home. The service
/// unit lists it in `RestartPreventExitStatus` beside 78, so a service
/// start that finds a daemon started by hand stops instead of looping.
pub const EXIT_ALREADY_RUNNING: i32 = 75;

/// Who started a pincerd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartedBy {
    Hand,
    /// The systemd unit, when its name could be read.
    Systemd {
        unit: Option<String>,
    },
    /// The launchd job's label.
    Launchd {
        label: String,
    },
}

impl StartedBy {
    /// Reads the markers the service managers set for their children.
    pub fn detect() -> Self {
        if std::env::var_os("INVOCATION_ID").is_some() {
            let unit = std::fs::read_to_string("/proc/self/cgroup")
                .ok()
                .and_then(|c| unit_of_cgroup(&c));
            return Self::Systemd { unit };
        }
        match std::env::var("XPC_SERVICE_NAME") {
            Ok(label) if !label.is_empty() && label != "0" => Self::Launchd { label },
            _ => Self::Hand,
        }
    }

    /// The one line kept in `run/pincerd.started-by`.
    pub fn to_line(&self) -> String {
        match self {
            Self::Hand => "hand".to_string(),
            Self::Systemd { unit } => format!("systemd {}", unit.as_deref().unwrap_or("")),
            Self::Launchd { label } => format!("launchd {label}"),
        }
    }

    /// The inverse of [`Self::to_line`]; `None` for anything else.
    pub fn from_line(line: &str) -> Option<Self> {
        let line = line.trim();
        let (kind, name) = line.split_once(' ').unwrap_or((line, ""));
        let name = name.trim();
        match kind {
            "hand" => Some(Self::Hand),
            "systemd" => Some(Self::Systemd {
                unit: (!name.is_empty()).then(|| name.to_string()),
            }),
            "launchd" if !name.is_empty() => Some(Self::Launchd {
                label: name.to_string(),
            }),
            _ => None,
        }
    }

    /// Whether a service manager started it (and would start it again).
    pub fn is_service(&self) -> bool {
        !matches!(self, Self::Hand)
    }

    /// "started by hand", "as the systemd user service pincer.service", …
    pub fn describe(&self) -> String {
        match self {
            Self::Hand => "started by hand".to_string(),
            Self::Systemd { unit: Some(u) } => format!("as the systemd user service {u}"),
            Self::Systemd { unit: None } => "as a systemd service".to_string(),
            Self::Launchd { label } => format!("as the launchd agent {label}"),
        }
    }
}

/// The `.service` unit at the end of a `/proc/self/cgroup` path
/// (`0::/user.slice/user-1000.slice/user@1000.service/app.slice/pincer.service`).
fn unit_of_cgroup(cgroup: &str) -> Option<String> {
    cgroup
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|last| last.ends_with(".service") && !last.starts_with("user@"))
        .map(str::to_string)
}

/// The sentence a second start prints: who owns the home, and what to do.
pub fn already_running(home: &str, pid: &str, owner: Option<&StartedBy>) -> String {
    match owner {
        Some(o) if o.is_service() => format!(
            "pincerd is already running for {home} (pid {pid}) {}, which owns the socket; use `pincer service restart` or `pincer service stop` instead of starting it by hand",
            o.describe()
        ),
        Some(o) => format!(
            "pincerd is already running for {home} (pid {pid}, {}); talk to it with `pincer status`, or stop it with `pincer stop`",
            o.describe()
        ),
        None => format!(
            "pincerd is already running for {home} (pid {pid}); talk to it with `pincer status`, or stop it with `pincer stop`"
        ),
    }
}

/// Why an environment file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    #[error(
        "{path}:{line}: cannot read this line of the environment file: write KEY=VALUE (quotes allowed), or # for a comment"
    )]
    Line { path: PathBuf, line: usize },
    #[error("cannot read the environment file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What [`load_env_file`] did.
#[derive(Debug, PartialEq, Eq)]
pub struct EnvFile {
    /// The names it set, in file order.
    pub names: Vec<String>,
    /// Group or others may read it (it holds keys: it should be 0600).
    pub readable_by_others: bool,
}

/// Reads `KEY=VALUE` lines (the systemd `EnvironmentFile=` subset: `#`
/// comments, blank lines, quoted values) into this process's environment,
/// each over what was there. A missing file is `Ok(None)`: the service
/// definitions name it optional. Call before any thread starts.
pub fn load_env_file(path: &Path) -> Result<Option<EnvFile>, EnvFileError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let io = |source| EnvFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io)?;
    let pairs = parse_env(&text).map_err(|line| EnvFileError::Line {
        path: path.to_path_buf(),
        line,
    })?;
    let mut names = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        // SAFETY: called from `main` before the runtime or any other
        // thread exists, so nothing reads the environment concurrently.
        unsafe { std::env::set_var(&key, value) };
        names.push(key);
    }
    Ok(Some(EnvFile {
        names,
        readable_by_others: meta.permissions().mode() & 0o077 != 0,
    }))
}

/// The pairs of an environment file, or the 1-based number of the first
/// line that is not one.
fn parse_env(text: &str) -> Result<Vec<(String, String)>, usize> {
    let mut pairs = Vec::new();
    // dotenvy parses the whole text; to name the bad line, each non-blank,
    // non-comment line is parsed on its own (values never span lines in
    // the systemd format this file shares).
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut parsed = dotenvy::from_read_iter(t.as_bytes());
        match parsed.next() {
            Some(Ok(pair)) if parsed.next().is_none() => pairs.push(pair),
            _ => return Err(n + 1),
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_by_round_trips_through_its_line() {
        for s in [
            StartedBy::Hand,
            StartedBy::Systemd { unit: None },
            StartedBy::Systemd {
                unit: Some("pincer.service".into()),
            },
            StartedBy::Launchd {
                label: "dev.pincer.pincerd".into(),
            },
        ] {
            assert_eq!(StartedBy::from_line(&s.to_line()), Some(s));
        }
        assert_eq!(StartedBy::from_line("garbage here"), None);
        assert_eq!(StartedBy::from_line("launchd"), None);
    }

    #[test]
    fn the_unit_is_read_from_the_cgroup_path() {
        let v2 = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/pincer.service\n";
        assert_eq!(unit_of_cgroup(v2).as_deref(), Some("pincer.service"));
        let shell = "0::/user.slice/user-1000.slice/session-3.scope\n";
        assert_eq!(unit_of_cgroup(shell), None);
        let manager_only = "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n";
        assert_eq!(unit_of_cgroup(manager_only), None);
    }

    #[test]
    fn the_sentence_points_a_person_at_the_service_verbs_when_a_service_owns_it() {
        let s = already_running(
            "/h",
            "42",
            Some(&StartedBy::Systemd {
                unit: Some("pincer.service".into()),
            }),
        );
        assert!(
            s.contains("as the systemd user service pincer.service"),
            "{s}"
        );
        assert!(s.contains("pincer service restart"), "{s}");
        let s = already_running("/h", "42", Some(&StartedBy::Hand));
        assert!(
            s.contains("started by hand") && s.contains("pincer stop"),
            "{s}"
        );
    }

    #[test]
    fn env_lines_parse_like_systemd_and_a_bad_line_is_named() {
        let text = "# keys\n\nOPENAI_API_KEY=sk-1\nexport X=1\nQ=\"a b\"\n";
        let pairs = parse_env(text).unwrap_or_default();
        assert_eq!(
            pairs,
            vec![
                ("OPENAI_API_KEY".to_string(), "sk-1".to_string()),
                ("X".to_string(), "1".to_string()),
                ("Q".to_string(), "a b".to_string()),
            ]
        );
        assert_eq!(parse_env("A=1\nthis is not a pair\n"), Err(2));
    }

    #[test]
    fn a_missing_env_file_is_none_and_a_present_one_reports_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.env");
        assert!(matches!(load_env_file(&path), Ok(None)));
        std::fs::write(&path, "PINCER_LAUNCH_TEST_KEY=yes\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let loaded = load_env_file(&path).unwrap().unwrap();
        assert_eq!(loaded.names, vec!["PINCER_LAUNCH_TEST_KEY".to_string()]);
        assert!(loaded.readable_by_others);
        assert_eq!(
            std::env::var("PINCER_LAUNCH_TEST_KEY").as_deref(),
            Ok("yes")
        );
    }
}
