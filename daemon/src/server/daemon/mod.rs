//! `pincer.v1.Daemon`: status, shutdown, reload, logs and doctor. The
//! handlers gather what each answer says and convert it in `pb`; how a
//! refused reload reads is `status.rs`'s.

mod pb;

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::State;
use pb::LogsInput;

/// What a reload changed (the settings applied live, then those that wait
/// for a restart), or why it was refused.
pub type ReloadReport = Result<(Vec<String>, Vec<String>), ReloadError>;

/// Why a reload was refused; the config in force stays as it was.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not load (its problem names file, line and key).
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    /// The new providers cannot be set up.
    #[error("{0}")]
    Models(#[from] crate::llm::LlmError),
}

/// A request to reload, to the task that owns reloading (`daemon.rs`).
pub struct ReloadAsk {
    /// Who asked, for the log line (`SIGHUP`, `a reload request`).
    pub by: &'static str,
    pub reply: oneshot::Sender<ReloadReport>,
}

pub struct DaemonService {
    state: State,
}

impl DaemonService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

type LogStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::LogLine, Status>> + Send>>;

#[tonic::async_trait]
impl pb::daemon_server::Daemon for DaemonService {
    async fn status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let hub = &self.state.hub;
        let config = hub.config();
        let agents = config.agents.values().map(pb::AgentInfo::from).collect();
        let providers = config
            .providers
            .values()
            .map(pb::ProviderInfo::from)
            .collect();
        Ok(Response::new(pb::StatusResponse {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            uptime_ms: self.state.started.elapsed().as_millis() as u64,
            home: hub.home().root().display().to_string(),
            agents,
            running_turns: self.state.hub.running_turns() as u32,
            max_concurrent_turns: self.state.hub.max_concurrent_turns() as u32,
            sessions: hub.session_count().await,
            config_path: config.source.as_ref().map_or_else(
                || "(none: zero-config defaults)".into(),
                |p| p.display().to_string(),
            ),
            provider_problem: config.provider_problems().join("; "),
            state: if self.state.hub.is_stopping() {
                "stopping"
            } else {
                "running"
            }
            .into(),
            providers,
            sandbox: hub.sandbox().sentence(&config.tools.exec_sandbox),
            sandboxed: hub.sandbox().active(&config.tools.exec_sandbox),
            channels: self
                .state
                .channels
                .status()
                .into_iter()
                .map(pb::ChannelStatus::from)
                .collect(),
            failed_parts: self
                .state
                .failures
                .list()
                .into_iter()
                .map(pb::part_failure)
                .collect(),
        }))
    }

    async fn shutdown(
        &self,
        _: Request<pb::ShutdownRequest>,
    ) -> Result<Response<pb::ShutdownResponse>, Status> {
        tracing::info!("shutdown requested over gRPC");
        self.state.stop.cancel();
        Ok(Response::new(pb::ShutdownResponse {
            running_turns: self.state.hub.running_turns() as u32,
            grace_s: self.state.grace.as_secs() as u32,
        }))
    }

    async fn reload(
        &self,
        _: Request<pb::ReloadRequest>,
    ) -> Result<Response<pb::ReloadResponse>, Status> {
        let (tx, rx) = oneshot::channel();
        self.state
            .reload
            .send(ReloadAsk {
                by: "a reload request",
                reply: tx,
            })
            .await
            .map_err(|_| Status::unavailable("pincerd is shutting down"))?;
        match rx.await {
            Ok(Ok((applied, needs_restart))) => Ok(Response::new(pb::ReloadResponse {
                applied,
                needs_restart,
            })),
            Ok(Err(refused)) => Err(refused.into()),
            Err(_) => Err(Status::unavailable("pincerd is shutting down")),
        }
    }

    type LogsStream = LogStream;

    async fn logs(
        &self,
        request: Request<pb::LogsRequest>,
    ) -> Result<Response<Self::LogsStream>, Status> {
        let req = LogsInput::from(request.into_inner());
        let path = self.state.hub.home().log_file();
        let (tx, rx) = mpsc::channel(256);
        let stop = self.state.stop.clone();
        tokio::task::spawn_blocking(move || tail(&path, req.lines, req.follow, &tx, &stop));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn doctor(
        &self,
        request: Request<pb::DoctorRequest>,
    ) -> Result<Response<pb::DoctorResponse>, Status> {
        let rt = self.state.hub.runtime();
        let mut findings = Vec::new();
        if request.into_inner().fix {
            // The daemon's environment holds the tokens.
            findings.extend(crate::doctor::fix_channels(&rt.config()).await);
        }
        findings.extend(
            crate::doctor::check_running(
                rt.home(),
                Some(&rt.config()),
                Some(rt.memory()),
                Some(&rt.mcp()),
            )
            .await,
        );
        findings.extend(self.state.channels.findings());
        findings.extend(self.state.schedules.findings().await);
        findings.extend(crate::doctor::part_failures(&self.state.failures));
        Ok(Response::new(pb::DoctorResponse {
            findings: findings.into_iter().map(pb::Finding::from).collect(),
        }))
    }
}

/// Sends the last `lines` lines, then (if `follow`) new lines as they come,
/// surviving rotation, until the client leaves or the daemon stops.
fn tail(
    path: &std::path::Path,
    lines: usize,
    follow: bool,
    tx: &mpsc::Sender<Result<pb::LogLine, Status>>,
    stop: &tokio_util::sync::CancellationToken,
) {
    let send = |line: &str| {
        tx.blocking_send(Ok(pb::LogLine {
            line: line.to_string(),
        }))
        .is_ok()
    };
    let Ok(mut file) = std::fs::File::open(path) else {
        let _ = tx.blocking_send(Err(Status::not_found(format!(
            "no log file at {}",
            path.display()
        ))));
        return;
    };
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines)..] {
        if !send(line) {
            return;
        }
    }
    if !follow {
        return;
    }
    let mut pos = text.len() as u64;
    let mut partial = String::new();
    while !stop.is_cancelled() && !tx.is_closed() {
        std::thread::sleep(Duration::from_millis(200));
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if len < pos {
            // Rotated: the file was replaced by a new, shorter one.
            match std::fs::File::open(path) {
                Ok(f) => file = f,
                Err(_) => continue,
            }
            pos = 0;
        }
        if len == pos {
            continue;
        }
        if file.seek(SeekFrom::Start(pos)).is_err() {
            continue;
        }
        let mut chunk = String::new();
        if let Ok(n) = (&mut file).take(len - pos).read_to_string(&mut chunk) {
            pos += n as u64;
        }
        partial.push_str(&chunk);
        while let Some(i) = partial.find('\n') {
            let line: String = partial.drain(..=i).collect();
            if !send(line.trim_end_matches('\n')) {
                return;
            }
        }
    }
}
