//! The session tools (SPEC §8.2): `session_status`, `sessions_list`,
//! `sessions_history`, `sessions_send`, `sessions_spawn`.
//!
//! They need the session hub, which lives above the tools: the hub
//! implements [`SessionAccess`] and the turn hands it to tools in their
//! context, so the dependency still points one way (agent → tools).
//! An agent only ever reaches its own sessions, and a turn only those its
//! [`Caller`] may see (the data boundary, decided by the hub: a session
//! and its sub-agents for anyone but the owner, never a session of
//! another principal to write into).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::config::ToolLayer;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who calls a session tool: the calling session and the turn's origin
/// (whose principal the hub checks every session against).
#[derive(Debug, Clone)]
pub struct Caller {
    pub key: String,
    pub agent: String,
    pub origin: std::sync::Arc<crate::tools::policy::ChatOrigin>,
}

impl Caller {
    pub fn of(ctx: &ToolContext) -> Self {
        Self {
            key: ctx.session_key.clone(),
            agent: ctx.agent.clone(),
            origin: ctx.origin.clone(),
        }
    }
}

/// Why a session tool did not do what was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionToolError {
    /// The data boundary: the session is not the caller's to see or to
    /// write into (the audit records it as the boundary's refusal).
    #[error("{0}")]
    Boundary(String),
    /// Anything else: no such session, a failed turn, a timeout.
    #[error("{0}")]
    Failed(String),
}

pub type SessionResult = Result<String, SessionToolError>;

/// A sub-agent run asked for by `sessions_spawn`.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub parent_key: String,
    /// The parent turn's origin: the child never has more than it.
    pub origin: crate::tools::policy::ChatOrigin,
    pub agent: String,
    pub task: String,
    /// The spawn's own narrowing, on top of `[tools.subagents]`.
    pub layer: ToolLayer,
    pub timeout: Duration,
}

/// A message to another session asked for by `sessions_send`.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub caller: Caller,
    pub to: String,
    pub message: String,
    /// Wait this long for the answer; `None`: do not wait.
    pub wait: Option<Duration>,
}

/// What the session tools need from the hub. Results are text for the
/// model; errors are sentences.
pub trait SessionAccess: Send + Sync {
    /// The calling session's key, agent, model, tokens.
    fn status<'a>(&'a self, caller: &'a Caller) -> BoxFuture<'a, SessionResult>;
    /// The sessions the caller may see, most recent first.
    fn list<'a>(&'a self, caller: &'a Caller, limit: usize) -> BoxFuture<'a, SessionResult>;
    /// The recent messages of a session the caller may see.
    fn history<'a>(
        &'a self,
        caller: &'a Caller,
        session: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, SessionResult>;
    /// Delivers `message` to another existing session of the caller's own
    /// principal that it may see; with `wait`, returns its answer.
    fn send(&self, request: SendRequest) -> BoxFuture<'_, SessionResult>;
    /// Runs a task in a new child session and returns its final answer.
    fn spawn(
        &self,
        request: SpawnRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'_, SessionResult>;
    /// The sub-agent depth of a session (0 for a top-level session).
    fn depth<'a>(&'a self, session_key: &'a str) -> BoxFuture<'a, u32>;
}

const SESSIONS: &[&str] = &["sessions"];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// How many sessions, most recent first (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// A session key (agent:main:work) or short name (work).
    pub session: String,
    /// How many recent messages (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// The session to send to: a key or short name of this agent's sessions.
    pub session: String,
    pub message: String,
    /// Seconds to wait for its answer (default 120; 0 sends without waiting).
    #[serde(default)]
    pub wait_s: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArgs {
    /// The task for the sub-agent, complete in itself: it does not see this conversation.
    pub task: String,
    /// Narrow the sub-agent's tools further: only these (names, group:…, globs).
    #[serde(default)]
    pub allow: Vec<String>,
    /// And never these.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Seconds the sub-agent may run (default 600).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

fn access(ctx: &ToolContext) -> Result<&dyn SessionAccess, ToolOutput> {
    ctx.sessions
        .as_deref()
        .ok_or_else(|| ToolOutput::error("session tools are not available in this context"))
}

fn done(r: SessionResult) -> ToolOutput {
    match r {
        Ok(t) => ToolOutput::ok(t),
        Err(SessionToolError::Boundary(e)) => ToolOutput::refused(e),
        Err(SessionToolError::Failed(e)) => ToolOutput::error(e),
    }
}

pub fn tools() -> Vec<ToolDef> {
    let plain = ToolFlags::default();
    vec![
        ToolDef::typed(
            "session_status",
            "This session's key, agent, model, token use and the current date and time.",
            SESSIONS,
            plain,
            |_: NoArgs, ctx: ToolContext| async move {
                match access(&ctx) {
                    Ok(a) => done(a.status(&Caller::of(&ctx)).await),
                    Err(e) => e,
                }
            },
        ),
        ToolDef::typed(
            "sessions_list",
            "The sessions this conversation may see (itself and its sub-agents; for the owner, the agent's), most recent first: key, last activity, token use.",
            SESSIONS,
            plain,
            |args: ListArgs, ctx: ToolContext| async move {
                match access(&ctx) {
                    Ok(a) => done(
                        a.list(&Caller::of(&ctx), args.limit.unwrap_or(20).min(200))
                            .await,
                    ),
                    Err(e) => e,
                }
            },
        ),
        ToolDef::typed(
            "sessions_history",
            "The recent messages of a session this conversation may see (itself, its sub-agents; for the owner, the agent's).",
            SESSIONS,
            plain,
            |args: HistoryArgs, ctx: ToolContext| async move {
                match access(&ctx) {
                    Ok(a) => done(
                        a.history(
                            &Caller::of(&ctx),
                            &args.session,
                            args.limit.unwrap_or(20).min(200),
                        )
                        .await,
                    ),
                    Err(e) => e,
                }
            },
        )
        .with_aliases(&[("key", "session"), ("session_key", "session")]),
        ToolDef::typed(
            "sessions_send",
            "Send a message to another existing session of this conversation's own (for the owner: the owner's other sessions) and (by default) wait for its answer.",
            SESSIONS,
            plain,
            |args: SendArgs, ctx: ToolContext| async move {
                let a = match access(&ctx) {
                    Ok(a) => a,
                    Err(e) => return e,
                };
                let wait = match args.wait_s {
                    Some(0) => None,
                    Some(s) => Some(Duration::from_secs(s.min(3600))),
                    None => Some(Duration::from_secs(120)),
                };
                done(
                    a.send(SendRequest {
                        caller: Caller::of(&ctx),
                        to: args.session,
                        message: args.message,
                        wait,
                    })
                    .await,
                )
            },
        )
        .with_aliases(&[("text", "message"), ("key", "session")]),
        ToolDef::typed(
            "sessions_spawn",
            "Run a self-contained task in a sub-agent (its own session, history and narrower tools) and get its final answer.",
            SESSIONS,
            plain,
            spawn,
        )
        .with_aliases(&[("prompt", "task"), ("instructions", "task")]),
    ]
}

async fn spawn(args: SpawnArgs, ctx: ToolContext) -> ToolOutput {
    let a = match access(&ctx) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let limits = &ctx.settings.subagents;
    let depth = a.depth(&ctx.session_key).await;
    if depth >= limits.max_depth {
        return ToolOutput::error(format!(
            "sub-agents cannot be nested deeper than {} level(s); do the task here",
            limits.max_depth
        ));
    }
    let spawned = ctx.turn_spawns.fetch_add(1, Ordering::SeqCst);
    if spawned >= limits.max_children {
        return ToolOutput::error(format!(
            "at most {} sub-agents per turn; use the answers you have",
            limits.max_children
        ));
    }
    if args.task.trim().is_empty() {
        return ToolOutput::error("the task is empty");
    }
    let mut deny = args.deny;
    // The child may spawn only if it would stay within the depth limit.
    if depth + 1 >= limits.max_depth {
        deny.push("sessions_spawn".into());
    }
    let request = SpawnRequest {
        parent_key: ctx.session_key.clone(),
        origin: (*ctx.origin).clone(),
        agent: ctx.agent.clone(),
        task: args.task,
        layer: ToolLayer {
            profile: None,
            allow: args.allow,
            deny,
        },
        timeout: Duration::from_secs(args.timeout_s.unwrap_or(600).min(24 * 3600)),
    };
    done(a.spawn(request, ctx.cancel.clone()).await)
}
