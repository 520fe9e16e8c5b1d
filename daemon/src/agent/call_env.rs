//! The environment one tool call runs in ([`CallEnv`]): which tools the
//! chat is offered (the policy pipeline for the agent and origin), the
//! redactor, the result cap, the tool context (workspace, cancellation,
//! jobs, memory, session access, the chat bridges), the audit table and
//! approvals. Built once per model turn by the turn, and by anything else
//! that runs tools without a model turn around them (a workflow's `tool`
//! step).

use std::sync::{Arc, LazyLock};

use tokio_util::sync::CancellationToken;

use super::session_log::Emit;
use super::{Event, Runtime};
use crate::config::{AgentSettings, Config, MemoryScope};
use crate::llm::windows::ContextWindow;
use crate::session::SessionKey;
use crate::tools::access::FileAccess;
use crate::tools::approvals::{PendingApproval, Requester, Subject};
use crate::tools::memory::MemoryAccess;
use crate::tools::origin::ChatOrigin;
use crate::tools::pipeline::CallEnv;
use crate::tools::policy::{self, PolicyInput};
use crate::tools::redact::Redactor;
use crate::tools::sessions::SessionAccess;
use crate::tools::{ToolContext, ToolRegistry};

/// Environment variables that always count as secrets.
const WELL_KNOWN_SECRETS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
];

/// Who runs tools, where, and where their events go.
pub struct CallScope<'a> {
    pub rt: &'a Runtime,
    /// The config snapshot the calls run under.
    pub config: &'a Config,
    pub agent: &'a AgentSettings,
    pub key: &'a SessionKey,
    /// The session's id (what an "always" approval holds for).
    pub session_id: &'a str,
    pub origin: &'a ChatOrigin,
    /// A sub-agent session's spawn layer (from the registry).
    pub spawn_layer: Option<&'a crate::config::ToolLayer>,
    pub cancel: &'a CancellationToken,
    /// Approval requests are announced here.
    pub emit: &'a Emit,
    /// The hub, for the session tools (`None`: they answer unavailable).
    pub sessions: Option<Arc<dyn SessionAccess>>,
}

/// Where the events of calls outside a turn go: nobody streams them.
static NO_EVENTS: LazyLock<Emit> = LazyLock::new(|| Arc::new(|_: Event| {}));

impl<'a> CallScope<'a> {
    /// The scope of calls run without a model turn around them (a
    /// workflow's tool and command steps, a schedule's or a trigger's
    /// command): no sub-agent layer, no session tools, and its events
    /// reported to nobody.
    pub fn outside_turn(
        rt: &'a Runtime,
        config: &'a Config,
        agent: &'a AgentSettings,
        key: &'a SessionKey,
        session_id: &'a str,
        origin: &'a ChatOrigin,
        cancel: &'a CancellationToken,
    ) -> Self {
        Self {
            rt,
            config,
            agent,
            key,
            session_id,
            origin,
            spawn_layer: None,
            cancel,
            emit: &NO_EVENTS,
            sessions: None,
        }
    }
}

/// The call environment of `scope` over `registry`.
pub fn build<'r>(scope: &CallScope<'_>, registry: &'r ToolRegistry) -> CallEnv<'r> {
    let CallScope {
        rt,
        config,
        agent,
        key,
        origin,
        ..
    } = scope;
    let workspace_error = crate::workspace::create(&agent.workspace)
        .err()
        .map(|e| e.to_string());
    // A sub-agent session from before spawn layers were recorded still
    // gets the [tools.subagents] layer.
    let sub_layer = scope
        .spawn_layer
        .cloned()
        .or_else(|| key.is_subagent().then(crate::config::ToolLayer::default));
    let input = PolicyInput::for_origin(agent, origin, sub_layer.as_ref());
    let resolution = policy::resolve(registry, &config.policy, &input);
    let offered = resolution.offered();
    // The data boundary: what this origin reaches of the workspace and the
    // memory (SPEC §8.3).
    let files = file_access(config, agent, origin, &resolution);
    let memory = match (origin.is_owner(), agent.memory, rt.memory.index(agent)) {
        (false, MemoryScope::Owner, _) => MemoryAccess::OwnersOnly,
        (_, _, Err(e)) => MemoryAccess::Unavailable(Arc::from(e.to_string())),
        (true, _, Ok(index)) => MemoryAccess::Index(index),
        (false, MemoryScope::Shared, Ok(index)) => MemoryAccess::Shared(index),
    };
    let secret_env = secret_env(config);
    let settings = Arc::new(config.tools.clone());
    CallEnv {
        offered,
        resolution,
        redactor: Redactor::from_env(&secret_env, provider_keys(config)),
        result_cap: result_cap(config, agent),
        workspace_error,
        base: ToolContext {
            agent: agent.id.clone(),
            session_key: key.to_string(),
            workspace: agent.workspace.clone(),
            cancel: scope.cancel.clone(),
            settings: settings.clone(),
            secret_env: Arc::new(secret_env),
            jobs: rt.jobs.clone(),
            sessions: scope.sessions.clone(),
            outbox: rt.outbox(),
            workflows: rt.workflows(),
            schedules: rt.schedules(),
            turn_spawns: Arc::default(),
            origin: Arc::new((*origin).clone()),
            memory,
            files,
            sandbox: rt.sandbox.clone(),
        },
        settings,
        sender: origin.sender.clone(),
        audit: rt.registry.clone(),
        approvals: rt.approvals.clone(),
        session_id: scope.session_id.to_string(),
        requester: Requester::of(origin),
        announce: {
            let emit = scope.emit.clone();
            let timeout = config.tools.approval_timeout;
            Arc::new(move |p: &PendingApproval| {
                if let Subject::Call {
                    tool, arguments, ..
                } = &p.subject
                {
                    emit(Event::ApprovalRequested {
                        id: p.id.clone(),
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        expires_in_s: timeout.as_secs(),
                    })
                }
            })
        },
    }
}

/// What a turn of `agent` for `origin` reaches of the workspace, with the
/// tools `resolution` offers it (`message` sends files only where `read`
/// is offered).
fn file_access(
    config: &Config,
    agent: &AgentSettings,
    origin: &ChatOrigin,
    resolution: &policy::Resolution<'_>,
) -> FileAccess {
    let read_offered = resolution
        .verdicts
        .iter()
        .any(|v| v.tool.name == "read" && v.removed.is_none());
    FileAccess::new(
        &agent.workspace,
        &origin.principal,
        agent.memory,
        &config.memory.paths,
        read_offered,
    )
    .workflows_writable(config.tools.fs.edit_workflows)
}

/// The data boundary of a turn of `agent` for `origin` (SPEC §8.3), one
/// sentence a line: whose data the turn acts for, the memory, the
/// sessions and the files it reaches (`pincer tools list`). From the
/// same rules the tools enforce.
pub fn describe_boundary(
    config: &Config,
    agent: &AgentSettings,
    origin: &ChatOrigin,
    resolution: &policy::Resolution<'_>,
) -> Vec<String> {
    let owner = origin.is_owner();
    let files = file_access(config, agent, origin, resolution);
    let whose = origin.principal.describe();
    vec![
        format!("acts for: {whose}"),
        match (owner, agent.memory) {
            (true, _) => "memory: the owner's, searched and read here".into(),
            (false, MemoryScope::Owner) => {
                "memory: the owner's (memory = \"owner\"), never searched or read here".into()
            }
            (false, MemoryScope::Shared) => {
                "memory: shared with everyone who talks to the agent (memory = \"shared\")".into()
            }
        },
        format!(
            "sessions: {}; sends only into sessions of {whose}",
            match agent.visibility_for(owner) {
                crate::config::Visibility::Own => "sees only its own",
                crate::config::Visibility::Tree => "sees its own and its sub-agents'",
                crate::config::Visibility::Agent => "sees every session of the agent",
            }
        ),
        files.describe(),
    ]
}

/// min(configured chars, 30 % of the context window at ~4 chars/token)
fn result_cap(config: &Config, agent: &AgentSettings) -> usize {
    let window = agent.context_window();
    let window_chars = (window as usize).saturating_mul(4) * 3 / 10;
    config.tools.max_result_chars.min(window_chars.max(1000))
}

/// Environment variables that hold secrets: the well-known ones, every
/// variable a provider reads its key from, and the channels' bot tokens
/// and webhook secrets.
pub fn secret_env(config: &Config) -> Vec<String> {
    let mut vars: Vec<String> = WELL_KNOWN_SECRETS.iter().map(|s| s.to_string()).collect();
    vars.extend(
        config
            .providers
            .values()
            .filter_map(|p| p.api_key.env_var().map(str::to_string)),
    );
    vars.extend(
        config
            .channels
            .values()
            .flat_map(|c| c.secret_env_vars())
            .map(str::to_string),
    );
    vars.sort();
    vars.dedup();
    vars
}

/// The values of provider keys (also those read from secret files).
fn provider_keys(config: &Config) -> Vec<String> {
    config
        .providers
        .values()
        .filter_map(|p| match &p.api_key {
            crate::config::ApiKey::Found { value, .. } => Some(value.0.clone()),
            _ => None,
        })
        .collect()
}
