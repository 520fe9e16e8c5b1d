//! Runs the real `pincerd` and `pincer` binaries in a temporary
//! `PINCER_HOME`. The binaries are built once per test process with the
//! same cargo that runs the tests, so they are never stale.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Paths of the binaries under test.
pub struct Bins {
    pub pincerd: PathBuf,
    pub pincer: PathBuf,
    /// The exec sandbox's launcher, which pincerd finds beside itself.
    pub sandbox: PathBuf,
}

/// Builds the binaries (once) and returns their paths.
pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // The selection of `cargo test --workspace`: cargo picks dependency
        // features from the packages and targets selected, so `-p
        // pincer-daemon --bins` would build much of the tree a second time
        // with other features (and fill a small disk). Under tests/run.sh
        // this finds everything built.
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--workspace", "--bins", "--tests"])
            .current_dir(&workspace)
            .status()
            .expect("cannot run cargo to build pincerd and pincer");
        assert!(status.success(), "building pincerd and pincer failed");
        // target/debug/deps/e2e-… → target/debug
        let exe = std::env::current_exe().expect("current_exe");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target dir")
            .to_path_buf();
        let bins = Bins {
            pincerd: dir.join("pincerd"),
            pincer: dir.join("pincer"),
            sandbox: dir.join("pincer-sandbox"),
        };
        for bin in [&bins.pincerd, &bins.sandbox] {
            assert!(bin.exists(), "{} is missing after the build", bin.display());
        }
        bins
    })
}

/// A temporary PINCER_HOME.
pub struct TestHome {
    dir: tempfile::TempDir,
}

/// What a CLI run printed and returned.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Asserts exit code 0 and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "command failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        &self.stdout
    }
    /// stdout as JSON lines.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

impl Default for TestHome {
    fn default() -> Self {
        Self::new()
    }
}

impl TestHome {
    pub fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("pincer-e2e-")
                .tempdir()
                .expect("tempdir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn workspace(&self) -> PathBuf {
        self.path().join("workspace")
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(self.path().join("config.toml"), text).expect("write config");
    }

    /// Starts `pincerd` in the foreground as a child and waits for its socket.
    pub fn start(&self) -> Daemon {
        self.start_with_env(&[])
    }

    pub fn start_with_env(&self, env: &[(&str, &str)]) -> Daemon {
        self.spawn_daemon(&bins().pincerd, env, false)
    }

    /// Starts the `pincerd` at `pincerd` (a copy elsewhere, with or
    /// without the sandbox's launcher beside it).
    pub fn start_binary(&self, pincerd: &Path) -> Daemon {
        self.spawn_daemon(pincerd, &[], false)
    }

    /// Starts `pincerd` as on a kernel without Landlock: a seccomp filter
    /// makes `landlock_create_ruleset` fail with ENOSYS, which is what
    /// such a kernel answers, for the daemon and everything it starts.
    pub fn start_without_landlock(&self) -> Daemon {
        self.spawn_daemon(&bins().pincerd, &[], true)
    }

    fn spawn_daemon(&self, pincerd: &Path, env: &[(&str, &str)], without_landlock: bool) -> Daemon {
        let stderr_path = self.path().join("pincerd.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(pincerd);
        cmd.arg("--home")
            .arg(self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for var in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENROUTER_API_KEY",
            "PINCER_MODEL",
            "PINCER_HOME",
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        if without_landlock {
            let filter = crate::no_landlock::filter();
            // SAFETY: between fork and exec only prctl and seccomp(2) run
            // (apply_filter); the program was built before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    seccompiler::apply_filter(&filter).map_err(std::io::Error::other)
                });
            }
        }
        let mut child = cmd.spawn().expect("spawn pincerd");
        let socket = self.path().join("run/pincerd.sock");
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "pincerd exited at start ({status}): {}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "pincerd did not open its socket in 20 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Daemon { child: Some(child) }
    }

    /// Runs `pincer --home H args…` to completion.
    pub async fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_stdin(args, "").await
    }

    pub async fn cli_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .pincer(args)
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn pincer");
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin.as_bytes()).await;
        }
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("pincer did not finish in 120 s")
            .expect("pincer output");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Starts `pincer args…` without waiting (for abort and queue tests).
    pub fn cli_spawn(&self, args: &[&str]) -> tokio::process::Child {
        self.pincer(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn pincer")
    }

    /// `pincer --home H args…` with stdout and stderr captured; stdin is
    /// for the caller to set.
    /// `pincerd --home HOME` to run to completion (`.output()`): a second
    /// start, `--background`, a bad config.
    pub fn pincerd(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&bins().pincerd);
        cmd.arg("--home").arg(self.path());
        cmd
    }

    pub fn pincer(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&bins().pincer);
        cmd.arg("--home")
            .arg(self.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Entries of the newest transcript of `agent`, parsed.
    pub fn transcript(&self, agent: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.transcript_path(agent))
            .expect("read transcript")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The path of the newest transcript of `agent` (session ids are
    /// UUIDv7, so names sort by creation time).
    pub fn transcript_path(&self, agent: &str) -> PathBuf {
        let dir = self.path().join("sessions").join(agent);
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("no transcripts in {}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .max()
            .expect("a transcript")
    }
}

/// A running daemon; killed when dropped.
pub struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns the exit code.
    pub fn stop(self) -> Option<i32> {
        if let Some(c) = &self.child {
            // SAFETY: sends SIGTERM to our own child process.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        self.wait_exit()
    }

    /// Waits (up to 20 s) for the daemon to exit by itself; its exit code.
    pub fn wait_exit(mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return status.code();
            }
            if started.elapsed() > Duration::from_secs(20) {
                let _ = c.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A config with one OpenAI-kind provider at `base_url` (which must end in
/// `/v1` for OpenAI) and fast retries.
pub fn provider_config(kind: &str, base_url: &str, extra: &str) -> String {
    provider_config_window(kind, base_url, None, extra)
}

/// [`provider_config`] whose model has a context window of `window` tokens
/// (default: what pincerd assumes for an unknown model).
pub fn provider_config_window(
    kind: &str,
    base_url: &str,
    window: Option<u64>,
    extra: &str,
) -> String {
    let window = window.map_or(String::new(), |w| format!("context_window = {w}\n"));
    format!(
        r#"[providers.test]
kind = "{kind}"
base_url = "{base_url}"

[providers.test.retry]
max_attempts = 4
initial_backoff_ms = 20
max_backoff_ms = 200

[models.default]
provider = "test"
model = "test-model"
{window}
[agents.main]
model = "default"
{extra}
"#
    )
}
