//! Start-up, reload and shutdown of the daemon: the one place where the
//! parts are wired together (home, config, logging, registry, model client,
//! hub, signals) and where the long-running parts (memory watchers, MCP
//! servers, the gRPC server: [`crate::lifecycle`]) are composed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agent::Runtime;
use crate::agent::hub::Hub;
use crate::config::{self, Config, ConfigError, DaemonSettings};
use crate::home::Home;
use crate::lifecycle::{Failures, Part, Parts, Reloaded, StartFuture, StopFuture};
use crate::llm::client::ModelClient;
use crate::server::daemon::{ReloadAsk, ReloadReport};
use crate::server::{self, socket};
use crate::session::registry::Registry;

/// Why the daemon could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Socket(#[from] socket::SocketError),
    #[error("cannot prepare {path}: {source}")]
    Home {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Registry(#[from] crate::session::registry::RegistryError),
    #[error("{0}")]
    Llm(#[from] crate::llm::LlmError),
    #[error(transparent)]
    Channels(#[from] crate::channels::ChannelsError),
    #[error(transparent)]
    Workflows(#[from] crate::workflow::store::StoreError),
    #[error("cannot open the approvals store {path}: {source}")]
    Approvals {
        path: String,
        source: crate::sqlite::DbError,
    },
    #[error("cannot open the schedules store {path}: {source}")]
    Schedules {
        path: String,
        source: crate::schedule::store::StoreError,
    },
    #[error("the gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

impl StartError {
    /// The line a failed start prints on stderr: `pincerd: ` and the
    /// error, unless its sentence begins with pincerd already ("pincerd is
    /// already running for …").
    pub fn line(&self) -> String {
        match self {
            Self::Socket(socket::SocketError::AlreadyRunning { .. }) => self.to_string(),
            _ => format!("pincerd: {self}"),
        }
    }

    /// The process exit status for this error (78 for config, SPEC §3;
    /// 75 when another pincerd owns the home, so a service does not loop).
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Config(_) => config::EXIT_CONFIG,
            Self::Socket(socket::SocketError::AlreadyRunning { .. }) => {
                crate::launch::EXIT_ALREADY_RUNNING
            }
            _ => 1,
        }
    }
}

/// Runs the daemon until SIGTERM/SIGINT or `Daemon.Shutdown`.
pub async fn run(home: Home, log_to_stderr: bool) -> Result<(), StartError> {
    let started = Instant::now();
    // First: nothing of ours (keys in the environment) is readable through
    // /proc by other processes of this user from here on.
    crate::sandbox::make_daemon_undumpable();
    let home_err = |source| StartError::Home {
        path: home.root().display().to_string(),
        source,
    };
    home.create_dirs().map_err(home_err)?;
    // The parts start from the config as loaded; the runtime keeps it
    // in force (and swaps in a reloaded one), less what only a start
    // reads.
    let loaded = config::load(&home)?;
    let config = std::sync::Arc::new(loaded.clone().into_in_force());
    // Lock before logging: a refused second instance must not write into
    // the running daemon's log.
    let _lock = socket::lock_instance(
        &home.run_dir(),
        home.root(),
        &crate::launch::StartedBy::detect(),
    )?;
    if let Err(e) = crate::logging::init(&home.log_file(), &config.daemon.log_level, log_to_stderr)
    {
        eprintln!(
            "pincerd: cannot open the log file {}: {e}",
            home.log_file().display()
        );
    }
    // A zero-config first start has no workspace yet: made here, a note
    // saved in it is seen by the memory watcher, and tools find the folder.
    // Opened once to see that it can be (its configured path's own links
    // resolved); everything pincerd writes in it later goes through the
    // same opener (`workspace.rs`). One that cannot be is said, not fatal:
    // the other agents work.
    for agent in config.agents.values() {
        if let Err(e) = crate::workspace::create(&agent.workspace) {
            tracing::warn!(agent = %agent.id, "Agent {}: {e}; its file tools, attachments and memory flush fail until it can be opened.", agent.id);
        }
    }
    let registry = Registry::open(&home.registry_db())?;
    // Before the socket: a client never sees such a session unreported.
    crate::session::interrupted::report(&home, &registry).await?;
    // Sessions from before principals were recorded: whose each is, from
    // its key (the CLI's and sub-agents' are the owner's).
    let owners = config.clone();
    let filled = registry
        .fill_principals(move |key| {
            crate::session::SessionKey::parse(key)
                .ok()
                .and_then(|k| k.chat_principal(|c, u| owners.is_channel_owner(c, u)))
                .unwrap_or(crate::session::Principal::Owner)
        })
        .await?;
    if filled > 0 {
        tracing::info!(sessions = filled, "recorded whose each older session is");
    }
    let models = ModelClient::new(&config.providers)?;
    for problem in config.provider_problems() {
        tracing::warn!("{problem}");
    }
    for problem in &config.plugin_problems {
        tracing::warn!("{problem}");
    }
    for plugin in &config.plugins {
        tracing::info!(plugin = %plugin.id, dir = %plugin.dir.display(), "plugin loaded");
    }
    let grace = config.daemon.shutdown_grace;
    let approvals_db = home.approvals_db();
    let approvals = crate::tools::approvals::Approvals::open(&approvals_db)
        .await
        .map_err(|source| StartError::Approvals {
            path: approvals_db.display().to_string(),
            source,
        })?;
    let runtime =
        Runtime::new(home.clone(), registry, config.clone(), models).with_approvals(approvals);
    let sandbox = runtime.sandbox().sentence(&config.tools.exec_sandbox);
    if runtime.sandbox().active(&config.tools.exec_sandbox) {
        tracing::info!("{sandbox}");
    } else {
        tracing::warn!("{sandbox}");
    }
    // The daemon wires the runtime into the parts it starts; everything
    // after start-up reaches it through the hub's verbs.
    let hub = Hub::new(runtime.clone(), config.daemon.max_concurrent_turns);
    // Signal handlers go in before the socket exists: once a client can see
    // pincerd, a SIGHUP reloads it and a SIGTERM stops it gracefully
    // instead of the default action killing it.
    let signals = Signals::install();
    let listener = socket::bind(&home.socket_path())?;

    let channels = crate::channels::Channels::open(&home, hub.clone())?;
    let workflows = crate::workflow::engine::Workflows::open(
        runtime.clone(),
        std::sync::Arc::new(hub.clone()),
        &home.workflows_db(),
    )?;
    runtime.set_workflows(std::sync::Arc::new(workflows.clone()));
    let schedules_db = home.schedules_db();
    let clock = crate::schedule::clock::clock();
    let scheduler =
        crate::schedule::scheduler::Scheduler::open(hub.clone(), &schedules_db, clock.clone())
            .map_err(|source| StartError::Schedules {
                path: schedules_db.display().to_string(),
                source,
            })?;
    runtime.set_schedules(std::sync::Arc::new(scheduler.clone()));
    let triggers = crate::schedule::trigger::Triggers::new(
        hub.clone(),
        scheduler.store().clone(),
        clock.clone(),
    );
    let heartbeats =
        crate::schedule::heartbeat::Heartbeats::new(hub.clone(), scheduler.store().clone(), clock);
    let stop = CancellationToken::new();
    let (reload_tx, reload_rx) = mpsc::channel(4);
    let failures = Failures::default();
    let server = ServerPart::new(
        listener,
        server::State {
            hub: hub.clone(),
            channels: channels.clone(),
            workflows: workflows.clone(),
            schedules: scheduler.clone(),
            started,
            stop: stop.clone(),
            reload: reload_tx.clone(),
            grace,
            failures: failures.clone(),
        },
    );
    let served = server.result.clone();
    let parts = Arc::new(
        Parts::new(failures)
            .with(runtime.memory().clone())
            .with(crate::agent::mcp_part::McpPart(runtime.clone()))
            // After MCP (their tools), before the channels and the server:
            // stopped after them, so a run's last step can still send.
            .with(workflows)
            // Stopped before the workflows it starts.
            .with(scheduler)
            .with(triggers)
            .with(heartbeats)
            // Stopped after the server (reverse order): answers of turns
            // that finish within the grace still go out.
            .with(crate::channels::part::ChannelsPart::new(channels))
            .with(server),
    );
    parts.start(&loaded).await;
    crate::session::retention::keep_audit(
        runtime.registry().clone(),
        {
            let runtime = runtime.clone();
            move || runtime.config().tools.audit_retention
        },
        stop.child_token(),
    );
    // The server takes connections: what need not delay its first answer
    // starts now (the memory watchers and their first scans).
    parts.started();
    drop(loaded);
    tokio::spawn(handle_signals(signals, stop.clone(), reload_tx));
    tokio::spawn(handle_reloads(
        home.clone(),
        runtime.clone(),
        parts.clone(),
        config.daemon.clone(),
        reload_rx,
    ));
    // The runtime holds the config in force; this copy would outlive a
    // reload.
    drop(config);
    // What start-up used and no longer needs: its freed memory and the
    // code it ran once (the config's parse, the migrations, the schedules
    // brought into the store).
    pincer_pages::give_back();

    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        pid = std::process::id(),
        home = %home.root().display(),
        socket = %home.socket_path().display(),
        ready_ms = started.elapsed().as_millis() as u64,
        "pincerd is ready"
    );
    stop.cancelled().await;
    // The server drains the hub while it still answers (Status says
    // `stopping`): running turns get the grace, then are aborted; then it
    // closes. The hub's shutdown here only covers a server that failed;
    // the other parts stop after the hub.
    let _ = served.finished.clone().wait().await;
    hub.shutdown(grace).await;
    runtime.jobs().kill_all();
    parts.stop(grace).await;
    tracing::info!("pincerd stopped");
    match served
        .error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        Some(e) => Err(StartError::from(e)),
        None => Ok(()),
    }
}

/// How the gRPC server ended.
#[derive(Clone, Default)]
struct Served {
    finished: Finished,
    error: Arc<Mutex<Option<tonic::transport::Error>>>,
}

/// Set once the server's task has ended.
#[derive(Clone, Default)]
struct Finished(CancellationToken);

impl Finished {
    async fn wait(self) {
        self.0.cancelled().await;
    }
}

/// The gRPC server as a part: served from `start` until the stop token is
/// cancelled; nothing in the config changes it (the socket lives in the
/// home folder).
struct ServerPart {
    listener: Mutex<Option<(interprocess::local_socket::tokio::Listener, server::State)>>,
    stop: CancellationToken,
    result: Served,
}

impl ServerPart {
    fn new(listener: interprocess::local_socket::tokio::Listener, state: server::State) -> Self {
        Self {
            stop: state.stop.clone(),
            listener: Mutex::new(Some((listener, state))),
            result: Served::default(),
        }
    }
}

/// The server part's listener was already taken by an earlier start.
#[derive(Debug, thiserror::Error)]
#[error("the server was started twice")]
struct StartedTwice;

impl Part for ServerPart {
    fn name(&self) -> &'static str {
        "server"
    }

    fn start<'a>(&'a self, _config: &'a Config) -> StartFuture<'a> {
        let taken = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some((listener, state)) = taken else {
            return Box::pin(std::future::ready(Err(StartedTwice.into())));
        };
        let result = self.result.clone();
        let (serving, served) = oneshot::channel();
        tokio::spawn(async move {
            if let Err(e) = server::serve(listener, state, serving).await {
                tracing::error!("the gRPC server failed: {e}");
                *result.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
            result.finished.0.cancel();
        });
        // Started once it takes connections; a server that failed first is
        // logged and recorded by its task.
        Box::pin(async move {
            let _ = served.await;
            Ok(())
        })
    }

    fn reload(&self, _old: &Config, _new: &Config) -> Reloaded {
        Reloaded::Unchanged
    }

    fn stop(&self, _grace: Duration) -> StopFuture<'_> {
        self.stop.cancel();
        Box::pin(self.result.finished.clone().wait())
    }
}

/// SIGTERM, SIGINT and SIGHUP, caught from the moment this is created.
struct Signals(
    Option<(
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
    )>,
);

impl Signals {
    fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(term), Ok(int), Ok(hup)) => Self(Some((term, int, hup))),
            _ => Self(None),
        }
    }
}

async fn handle_signals(
    signals: Signals,
    stop: CancellationToken,
    reload: mpsc::Sender<ReloadAsk>,
) {
    let Some((mut term, mut int, mut hup)) = signals.0 else {
        tracing::error!("cannot install signal handlers; stop pincerd with `pincer` or SIGKILL");
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM received"); stop.cancel(); return; }
            _ = int.recv() => { tracing::info!("SIGINT received"); stop.cancel(); return; }
            _ = hup.recv() => {
                let (tx, rx) = oneshot::channel();
                if reload.send(ReloadAsk { by: "SIGHUP", reply: tx }).await.is_err() { return; }
                // The reload logs its own outcome.
                if rx.await.is_err() { return; }
            }
            _ = stop.cancelled() => return,
        }
    }
}

/// Reloads on each request, one at a time. `running` is the `[daemon]`
/// section pincerd started with: what it runs until it restarts, whatever
/// later reloads read.
async fn handle_reloads(
    home: Home,
    runtime: Runtime,
    parts: Arc<Parts>,
    running: DaemonSettings,
    mut requests: mpsc::Receiver<ReloadAsk>,
) {
    while let Some(ask) = requests.recv().await {
        let report = reload(&home, &runtime, &parts, &running);
        log_reload(ask.by, &report);
        let _ = ask.reply.send(report);
    }
}

/// One log line per reload: what took effect and what waits for a
/// restart (names of settings and their non-secret values only, as the
/// report has them), or why the file was refused.
fn log_reload(by: &str, report: &ReloadReport) {
    match report {
        Ok((applied, restart)) if applied.is_empty() && restart.is_empty() => {
            tracing::info!("config reloaded ({by}): nothing changed");
        }
        Ok((applied, restart)) => {
            let mut said = Vec::new();
            if !applied.is_empty() {
                said.push(format!("applied: {}", applied.join(", ")));
            }
            if !restart.is_empty() {
                said.push(format!("needs a restart: {}", restart.join(", ")));
            }
            tracing::info!("config reloaded ({by}): {}", said.join("; "));
        }
        Err(e) => tracing::warn!("config reload ({by}) refused: {e}"),
    }
}

/// Loads the config again, applies what can change live, and asks each
/// part: the report has the config's own changes, then a line per part
/// that the change concerns ("mcp: servers restarted on next use").
fn reload(home: &Home, rt: &Runtime, parts: &Parts, running: &DaemonSettings) -> ReloadReport {
    let new = config::load(home)?;
    let old = rt.config();
    let (mut applied, mut needs_restart) = diff(&old, &new, running);
    let models = ModelClient::new(&new.providers)?;
    let (part_applied, part_restart) = parts.reload(&old, &new);
    rt.replace(new.into_in_force(), models);
    applied.extend(part_applied);
    needs_restart.extend(part_restart);
    Ok((applied, needs_restart))
}

/// What changed between two configs, split into live and restart-only
/// (the parts report their own settings: [`Parts::reload`]). A live
/// setting is compared with the config in force (`old`); a restart-only
/// one with what pincerd `running` started with, which is what it still
/// runs: setting a value back is no change, whatever was loaded between.
pub fn diff(old: &Config, new: &Config, running: &DaemonSettings) -> (Vec<String>, Vec<String>) {
    let mut applied = Vec::new();
    let mut restart = Vec::new();
    keyed_changes("agent", &old.agents, &new.agents, &mut applied);
    keyed_changes("provider", &old.providers, &new.providers, &mut applied);
    if old.default_agent != new.default_agent {
        applied.push(format!("default agent is now `{}`", new.default_agent));
    }
    if old.tools != new.tools {
        applied.push("tool settings changed".into());
    }
    if old.policy != new.policy {
        applied.push("tool policy changed".into());
    }
    if old.context != new.context {
        applied.push("[context] settings changed".into());
    }
    if old.bindings != new.bindings {
        applied.push("[[bindings]] changed".into());
    }
    // Routing reads owners and group entries on every message; the bridges
    // will answer for their own connection settings as a part.
    keyed_changes("channel", &old.channels, &new.channels, &mut applied);
    let new_daemon = &new.daemon;
    if running.max_concurrent_turns != new_daemon.max_concurrent_turns {
        restart.push(format!(
            "daemon.max_concurrent_turns ({} → {})",
            running.max_concurrent_turns, new_daemon.max_concurrent_turns
        ));
    }
    if running.log_level != new_daemon.log_level {
        restart.push(format!(
            "daemon.log_level ({} → {})",
            running.log_level, new_daemon.log_level
        ));
    }
    if running.shutdown_grace != new_daemon.shutdown_grace {
        restart.push(format!(
            "daemon.shutdown_grace_s ({} → {})",
            running.shutdown_grace.as_secs(),
            new_daemon.shutdown_grace.as_secs()
        ));
    }
    (applied, restart)
}

/// "`what` `name` added / changed / removed" for each entry of two maps.
fn keyed_changes<V: PartialEq>(
    what: &str,
    old: &BTreeMap<String, V>,
    new: &BTreeMap<String, V>,
    out: &mut Vec<String>,
) {
    for (name, value) in new {
        match old.get(name) {
            None => out.push(format!("{what} `{name}` added")),
            Some(o) if o != value => out.push(format!("{what} `{name}` changed")),
            _ => {}
        }
    }
    for name in old.keys().filter(|n| !new.contains_key(*n)) {
        out.push(format!("{what} `{name}` removed"));
    }
}

/// How long `--background` waits for the socket.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        let home = Home::at("/tmp/pincer-diff-test");
        match config::load::parse(&home, std::path::Path::new("/h/config.toml"), text, &|| {
            None
        }) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_failed_start_names_pincerd_once() {
        let running = StartError::Socket(socket::SocketError::AlreadyRunning {
            home: "/h".into(),
            pid: "7".into(),
            owner: None,
        });
        assert!(
            running
                .line()
                .starts_with("pincerd is already running for /h (pid 7)"),
            "{}",
            running.line()
        );
        let home = StartError::Home {
            path: "/h".into(),
            source: std::io::Error::other("read-only"),
        };
        assert_eq!(home.line(), "pincerd: cannot prepare /h: read-only");
    }

    #[test]
    fn reload_names_channel_and_binding_changes() {
        let old = config("[agents.main]\n[channels.telegram]\n[channels.discord]\n");
        let new = config(
            "[agents.main]\n[agents.friends]\n[channels.telegram]\nowner = \"1\"\n[[bindings]]\nchannel = \"telegram\"\nagent = \"friends\"\n",
        );
        let (applied, restart) = diff(&old, &new, &old.daemon);
        assert_eq!(
            applied,
            [
                "agent `friends` added",
                "[[bindings]] changed",
                "channel `telegram` changed",
                "channel `discord` removed",
            ]
        );
        assert!(restart.is_empty());
        assert_eq!(diff(&new, &new, &new.daemon), (Vec::new(), Vec::new()));
    }

    /// Setting a restart-only key back to what pincerd runs is no change:
    /// the report used to compare with the file loaded last ("3 → 8"
    /// while pincerd ran with 8).
    #[test]
    fn a_restart_only_key_is_compared_with_what_runs() {
        let started = config("[daemon]\nmax_concurrent_turns = 8\n[agents.main]\n");
        let running = started.daemon.clone();
        let three =
            config("[daemon]\nmax_concurrent_turns = 3\nshutdown_grace_s = 4\n[agents.main]\n");
        let (_, restart) = diff(&started, &three, &running);
        assert_eq!(
            restart,
            [
                "daemon.max_concurrent_turns (8 → 3)",
                "daemon.shutdown_grace_s (10 → 4)"
            ]
        );
        // The file goes back to 8 after a reload that loaded 3.
        let back = config("[daemon]\nmax_concurrent_turns = 8\n[agents.main]\n");
        assert_eq!(diff(&three, &back, &running), (Vec::new(), Vec::new()));
        let five = config("[daemon]\nmax_concurrent_turns = 5\n[agents.main]\n");
        assert_eq!(
            diff(&three, &five, &running).1,
            ["daemon.max_concurrent_turns (8 → 5)"]
        );
    }
}
