//! MCP client (SPEC §8.1), on the official Rust SDK `rmcp`: servers over
//! stdio (a child process) or Streamable HTTP, each a tool source. A
//! server's tools are offered as `mcp__<server>__<tool>` (policy patterns
//! `mcp:<server>` and `group:plugins` name them all).
//!
//! Servers start lazily, when a turn or `pincer tools list` first needs the
//! tool set; one that fails or crashes is started again on a later use,
//! after a backoff that doubles from 1 s to 60 s. A
//! `notifications/tools/list_changed` makes the next use list its tools
//! again. Every MCP failure is a tool error for the model, never a crash.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, Implementation,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::{ToolContext, ToolDef, ToolFlags, ToolOutput, ToolSource};
use crate::config::ExecSandboxSettings;
use crate::config::mcp::{McpServerConfig, Transport};
use crate::sandbox::{Jail, Sandbox};

const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Notes `tools/list_changed`, so the next use lists tools again.
#[derive(Clone)]
struct Handler {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.stale.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("pincer", env!("CARGO_PKG_VERSION")),
        );
        // The newest version with the `initialize` handshake every server
        // we meet speaks.
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

type Service = RunningService<RoleClient, Handler>;

enum State {
    Idle,
    Ready {
        service: Arc<Service>,
        tools: Vec<ToolDef>,
        stale: Arc<AtomicBool>,
    },
    Failed {
        error: McpError,
        retry_at: Instant,
        backoff: Duration,
    },
}

/// Why a server offers no tools now; it is tried again on a later use,
/// after a backoff. The reasons from other libraries are kept as text:
/// the error is cloned to every use until the retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("the server `{server}` stopped")]
    Stopped { server: String },
    /// The server stopped under a call, which said `why`.
    #[error("the server `{server}` stopped: {why}")]
    StoppedInCall { server: String, why: String },
    #[error("the MCP server `{server}` has no command")]
    NoCommand { server: String },
    /// The exec sandbox refused to start it (`why`).
    #[error("the MCP server `{server}` was not started: {why}")]
    NotSandboxed { server: String, why: String },
    #[error("cannot start the MCP server `{server}` (`{program}`): {why}")]
    CannotStart {
        server: String,
        program: String,
        why: String,
    },
    #[error("the MCP server `{server}` did not initialize: {why}")]
    NotInitialized { server: String, why: String },
    #[error("the MCP server `{server}` at {url} did not initialize: {why}")]
    HttpNotInitialized {
        server: String,
        url: String,
        why: String,
    },
    #[error("bad header name `{header}`: {why}")]
    BadHeaderName { header: String, why: String },
    #[error("bad value for header `{header}`: {why}")]
    BadHeaderValue { header: String, why: String },
    #[error("cannot build the HTTP client: {why}")]
    HttpClient { why: String },
    #[error("cannot list the tools of `{server}`: {why}")]
    CannotList { server: String, why: String },
    #[error("the MCP server `{server}` did not start within {secs} s")]
    Timeout { server: String, secs: u64 },
}

/// One server and its connection.
pub struct McpServer {
    pub config: McpServerConfig,
    state: tokio::sync::Mutex<State>,
    stop: CancellationToken,
    sandbox: Arc<Sandbox>,
    exec: Arc<ExecSandboxSettings>,
}

/// One server's tools as it listed them (`pincer config check` and
/// `pincer doctor` compare the config's names with these).
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub server: String,
    /// The plugin whose server it is.
    pub plugin: Option<String>,
    /// The tools' names as offered, or why the server did not list them.
    pub tools: Result<Vec<String>, McpError>,
}

/// What `status` reports about a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    pub name: String,
    pub state: String,
    pub tools: usize,
}

impl McpServer {
    fn new(
        config: McpServerConfig,
        stop: CancellationToken,
        sandbox: Arc<Sandbox>,
        exec: Arc<ExecSandboxSettings>,
    ) -> Arc<Self> {
        Arc::new(Self {
            config,
            state: tokio::sync::Mutex::new(State::Idle),
            stop,
            sandbox,
            exec,
        })
    }

    /// The server's tools, starting (or restarting) it if needed.
    async fn tools(self: &Arc<Self>) -> Vec<ToolDef> {
        match self.ready().await {
            Ok((_, tools)) => tools,
            Err(_) => Vec::new(),
        }
    }

    /// A running service and its tool list; connects if needed.
    async fn ready(self: &Arc<Self>) -> Result<(Arc<Service>, Vec<ToolDef>), McpError> {
        let mut state = self.state.lock().await;
        if let State::Ready { service, stale, .. } = &*state {
            if gone(service) {
                tracing::warn!(server = %self.config.name, "MCP server stopped; it will be restarted");
                let server = self.config.name.clone();
                *state = failed(McpError::Stopped { server }, None);
            } else if stale.swap(false, Ordering::SeqCst) {
                match self.list(service).await {
                    Ok(list) => {
                        *state = State::Ready {
                            service: service.clone(),
                            tools: list,
                            stale: stale.clone(),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = %self.config.name, error = %e, "cannot list tools again")
                    }
                }
            }
        }
        match &*state {
            State::Ready { service, tools, .. } => return Ok((service.clone(), tools.clone())),
            State::Failed {
                error, retry_at, ..
            } if Instant::now() < *retry_at => {
                return Err(error.clone());
            }
            _ => {}
        }
        let previous = match &*state {
            State::Failed { backoff, .. } => Some(*backoff),
            _ => None,
        };
        match tokio::time::timeout(self.config.startup_timeout, self.connect()).await {
            Ok(Ok((service, stale))) => {
                let service = Arc::new(service);
                match self.list(&service).await {
                    Ok(tools) => {
                        tracing::info!(server = %self.config.name, tools = tools.len(), "MCP server ready");
                        *state = State::Ready {
                            service: service.clone(),
                            tools: tools.clone(),
                            stale,
                        };
                        Ok((service, tools))
                    }
                    Err(e) => {
                        *state = failed(e.clone(), previous);
                        Err(e)
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %self.config.name, error = %e, "MCP server failed to start");
                *state = failed(e.clone(), previous);
                Err(e)
            }
            Err(_) => {
                let e = McpError::Timeout {
                    server: self.config.name.clone(),
                    secs: self.config.startup_timeout.as_secs(),
                };
                *state = failed(e.clone(), previous);
                Err(e)
            }
        }
    }

    async fn connect(&self) -> Result<(Service, Arc<AtomicBool>), McpError> {
        let stale = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            stale: stale.clone(),
        };
        let name = &self.config.name;
        let service = match &self.config.transport {
            Transport::Stdio {
                command,
                env,
                cwd,
                sandbox,
            } => {
                let Some((program, args)) = command.split_first() else {
                    return Err(McpError::NoCommand {
                        server: name.clone(),
                    });
                };
                let mut cmd = if *sandbox {
                    let tmp_name = format!("mcp/{name}");
                    let jail = Jail::writing(cwd.iter().cloned().collect(), &tmp_name);
                    self.sandbox
                        .command(&self.exec, &jail, program)
                        .map_err(|e| McpError::NotSandboxed {
                            server: name.clone(),
                            why: e.to_string(),
                        })?
                } else {
                    tokio::process::Command::new(program)
                };
                cmd.args(args).envs(env).kill_on_drop(true);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                crate::children::die_with_daemon(&mut cmd);
                let (transport, stderr) = crate::children::spawn(move || {
                    rmcp::transport::TokioChildProcess::builder(cmd)
                        .stderr(Stdio::piped())
                        .spawn()
                })
                .await
                .map_err(|e| McpError::CannotStart {
                    server: name.clone(),
                    program: program.clone(),
                    why: e.to_string(),
                })?;
                if let Some(stderr) = stderr {
                    let server = name.clone();
                    // Its stderr goes to our log, a line at a time.
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(server = %server, "{line}");
                        }
                    });
                }
                handler
                    .serve_with_ct(transport, self.stop.child_token())
                    .await
                    .map_err(|e| McpError::NotInitialized {
                        server: name.clone(),
                        why: e.to_string(),
                    })?
            }
            Transport::Http { url, headers } => {
                crate::llm::tls::install_crypto_provider();
                let mut map = std::collections::HashMap::new();
                for (k, v) in headers {
                    let key =
                        reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| {
                            McpError::BadHeaderName {
                                header: k.clone(),
                                why: e.to_string(),
                            }
                        })?;
                    let value = reqwest::header::HeaderValue::from_str(v).map_err(|e| {
                        McpError::BadHeaderValue {
                            header: k.clone(),
                            why: e.to_string(),
                        }
                    })?;
                    map.insert(key, value);
                }
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(map);
                let client = reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .build()
                    .map_err(|e| McpError::HttpClient { why: e.to_string() })?;
                let transport =
                    rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
                handler
                    .serve_with_ct(transport, self.stop.child_token())
                    .await
                    .map_err(|e| McpError::HttpNotInitialized {
                        server: name.clone(),
                        url: url.clone(),
                        why: e.to_string(),
                    })?
            }
        };
        Ok((service, stale))
    }

    async fn list(self: &Arc<Self>, service: &Service) -> Result<Vec<ToolDef>, McpError> {
        let listed = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| McpError::CannotList {
                server: self.config.name.clone(),
                why: e.to_string(),
            })?;
        Ok(listed.into_iter().map(|t| self.tool_def(t)).collect())
    }

    fn tool_def(self: &Arc<Self>, tool: rmcp::model::Tool) -> ToolDef {
        let remote = tool.name.to_string();
        let name = match &self.config.plugin {
            Some(_) => provider_safe(&remote),
            None => namespaced(&self.config.name, &remote),
        };
        let schema = serde_json::Value::Object((*tool.input_schema).clone());
        let source = match &self.config.plugin {
            Some(id) => ToolSource::Plugin {
                id: id.clone(),
                server: self.config.name.clone(),
            },
            None => ToolSource::Mcp {
                server: self.config.name.clone(),
            },
        };
        let flags = ToolFlags {
            optional: self.config.optional.iter().any(|o| o == &remote),
            ..ToolFlags::default()
        };
        let server = self.clone();
        let handler = move |args: serde_json::Value, ctx: ToolContext| {
            let server = server.clone();
            let remote = remote.clone();
            Box::pin(async move { server.call(&remote, args, &ctx.cancel).await })
                as std::pin::Pin<Box<dyn Future<Output = ToolOutput> + Send>>
        };
        ToolDef::dynamic(
            &name,
            tool.description.as_deref().unwrap_or(""),
            schema,
            Vec::new(),
            flags,
            source,
            Arc::new(handler),
        )
    }

    /// Calls a tool; every failure is a tool error.
    async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: serde_json::Value,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let name = &self.config.name;
        let service = match self.ready().await {
            Ok((service, _)) => service,
            Err(e) => return ToolOutput::error(format!("MCP server `{name}` is unavailable: {e}")),
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let serde_json::Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let result = tokio::select! {
            r = service.call_tool(params) => r,
            _ = cancel.cancelled() => return ToolOutput::error("aborted"),
        };
        match result {
            Ok(r) => {
                let text = content_text(&r.content, r.structured_content.as_ref());
                if r.is_error.unwrap_or(false) {
                    ToolOutput::error(text)
                } else {
                    ToolOutput::ok(text)
                }
            }
            Err(e) => {
                if matches!(
                    e,
                    rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
                ) || gone(&service)
                {
                    let mut state = self.state.lock().await;
                    let stopped = McpError::StoppedInCall {
                        server: name.clone(),
                        why: e.to_string(),
                    };
                    *state = failed(stopped, None);
                }
                ToolOutput::error(format!("MCP server `{name}` failed to run `{tool}`: {e}"))
            }
        }
    }

    async fn status(&self) -> ServerStatus {
        let state = self.state.lock().await;
        let (text, tools) = match &*state {
            State::Idle => ("not started (starts when first needed)".to_string(), 0),
            State::Ready { tools, .. } => ("running".to_string(), tools.len()),
            State::Failed {
                error, retry_at, ..
            } => (
                format!(
                    "failed: {error} (retry in {} s)",
                    retry_at.saturating_duration_since(Instant::now()).as_secs()
                ),
                0,
            ),
        };
        ServerStatus {
            name: self.config.name.clone(),
            state: text,
            tools,
        }
    }
}

/// Whether the connection has ended (the process exited, the stream
/// closed) or was cancelled.
fn gone(service: &Service) -> bool {
    service.is_closed() || service.peer().is_transport_closed()
}

fn failed(error: McpError, previous: Option<Duration>) -> State {
    let backoff = previous.map_or(MIN_BACKOFF, |b| (b * 2).min(MAX_BACKOFF));
    State::Failed {
        error,
        retry_at: Instant::now() + backoff,
        backoff,
    }
}

/// `mcp__<server>__<tool>`, provider-safe.
pub fn namespaced(server: &str, tool: &str) -> String {
    provider_safe(&format!("mcp__{server}__{tool}"))
}

/// A name providers accept: `[A-Za-z0-9_-]`, at most 64 characters.
pub fn provider_safe(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(64);
    out
}

/// A tool result's content as text for the model.
fn content_text(content: &[ContentBlock], structured: Option<&serde_json::Value>) -> String {
    let mut parts: Vec<String> = content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => {
                format!("[image {}, {} bytes of base64]", i.mime_type, i.data.len())
            }
            ContentBlock::Audio(a) => {
                format!("[audio {}, {} bytes of base64]", a.mime_type, a.data.len())
            }
            ContentBlock::Resource(r) => serde_json::to_string(&r.resource).unwrap_or_default(),
            ContentBlock::ResourceLink(r) => format!("[resource {}]", r.uri),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    if parts.is_empty()
        && let Some(s) = structured
    {
        parts.push(s.to_string());
    }
    parts.join("\n")
}

/// Every MCP server of the daemon.
pub struct McpManager {
    servers: Vec<Arc<McpServer>>,
    stop: CancellationToken,
}

impl McpManager {
    /// The servers of `configs`; those with `sandbox = true` start in
    /// `sandbox` under `exec` (the `[tools.exec]` settings).
    pub fn new(
        configs: Vec<McpServerConfig>,
        sandbox: Arc<Sandbox>,
        exec: ExecSandboxSettings,
    ) -> Self {
        let stop = CancellationToken::new();
        let exec = Arc::new(exec);
        Self {
            servers: configs
                .into_iter()
                .map(|c| McpServer::new(c, stop.clone(), sandbox.clone(), exec.clone()))
                .collect(),
            stop,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The tools of every server, starting the ones not running (in
    /// parallel, each bounded by its start-up timeout).
    pub async fn tools(&self) -> Vec<ToolDef> {
        let all = futures_util::future::join_all(self.servers.iter().map(|s| s.tools())).await;
        all.into_iter().flatten().collect()
    }

    pub async fn status(&self) -> Vec<ServerStatus> {
        futures_util::future::join_all(self.servers.iter().map(|s| s.status())).await
    }

    /// Every server's tool names as offered (`mcp__<server>__<tool>`, a
    /// plugin's own names), or why it could not list them; starts the
    /// servers not running, as [`Self::tools`] does.
    pub async fn listings(&self) -> Vec<Listing> {
        futures_util::future::join_all(self.servers.iter().map(|s| async move {
            Listing {
                server: s.config.name.clone(),
                plugin: s.config.plugin.clone(),
                tools: s
                    .ready()
                    .await
                    .map(|(_, tools)| tools.into_iter().map(|t| t.name).collect()),
            }
        }))
        .await
    }

    /// Stops every server (daemon shutdown).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced_and_provider_safe() {
        assert_eq!(namespaced("everything", "echo"), "mcp__everything__echo");
        assert_eq!(
            namespaced("my server", "get.time"),
            "mcp__my_server__get_time"
        );
        assert_eq!(namespaced("s", &"x".repeat(100)).len(), 64);
    }
}
