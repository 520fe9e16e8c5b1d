//! Configuration (SPEC §5): the TOML file's shape ([`file`]), loading
//! ([`load`]) with errors that name file, line and key ([`locate`]), one
//! file per noun for resolving it (providers and models, agents, [`tools`],
//! [`mcp`], [`plugins`], [`memory`], [`context`], [`bindings`],
//! [`channels`], and where secrets come from: [`secret`]), and the
//! zero-config defaults taken from the environment ([`env`]).
//!
//! Everything else in the daemon reads the validated [`Config`], never the
//! raw file. The config owns the types it parses and depends only on `home`
//! and `util`: the modules that use a setting depend on the config, never
//! the reverse.

mod agents;
pub mod bindings;
pub mod channels;
pub mod context;
pub mod env;
pub mod file;
pub mod heartbeat;
pub mod load;
pub mod locate;
pub mod mcp;
pub mod memory;
mod models;
pub mod plugins;
pub mod schedules;
pub mod secret;
pub mod tool_names;
pub mod tools;
pub mod triggers;
mod url;
pub mod when;

#[cfg(test)]
mod reference_tests;

pub use load::load;
pub use locate::{ConfigError, Problem};

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use bindings::Binding;
pub use channels::{
    ChannelSettings, ChatEntries, DmPolicy, GroupSettings, GuildSettings, RoleSettings,
    TelegramMode, TelegramSettings, WebhookSettings,
};
pub use context::{ContextSettings, PromptMode};
pub use file::{ProviderKind, ToolFormat};
pub use memory::{EmbedderChoice, MemorySettings};
pub use secret::SecretSource;

/// Exit status for invalid configuration (`EX_CONFIG`); the service unit does
/// not restart on it.
pub const EXIT_CONFIG: i32 = 78;

/// The validated configuration the daemon runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from; `None` for the zero-config default.
    pub source: Option<PathBuf>,
    pub daemon: DaemonSettings,
    pub providers: BTreeMap<String, ProviderSettings>,
    pub agents: BTreeMap<String, AgentSettings>,
    pub default_agent: String,
    pub tools: ToolSettings,
    pub policy: PolicySettings,
    /// MCP servers from `[mcp.<name>]` and plugins.
    pub mcp: Vec<mcp::McpServerConfig>,
    /// Plugins found in `PINCER_HOME/plugins/`.
    pub plugins: Vec<plugins::Plugin>,
    /// Plugin folders that were refused, as sentences.
    pub plugin_problems: Vec<String>,
    /// `[memory]`: embedder, sources, search and watcher settings.
    pub memory: MemorySettings,
    /// `[context]`: bootstrap caps, history guard, compaction.
    pub context: ContextSettings,
    /// Which agent answers which chat (most specific wins).
    pub bindings: Vec<Binding>,
    /// `[channels.<name>]` by name (`telegram`, `discord`): only the
    /// channels the file has a table for.
    pub channels: BTreeMap<String, ChannelSettings>,
    /// `[schedules.<name>]`, checked, by name: for the scheduler, which
    /// brings them into its store at start and reload. Empty in the
    /// config in force ([`Config::into_in_force`]).
    pub schedules: Vec<(String, schedules::ScheduleFields)>,
    /// `[triggers.<name>]`, checked, by name; shared with the tasks that
    /// watch them.
    pub triggers: Vec<Arc<triggers::TriggerSpec>>,
    /// `[heartbeat.<agent id>]`, checked.
    pub heartbeats: Vec<heartbeat::HeartbeatSpec>,
    /// A hash of the file's text (0 without a file): tells whether the
    /// file on disk is still the one the daemon runs (`pincer doctor`).
    pub text_hash: u64,
    /// Why no model can be called, as a sentence for the user; set when no
    /// provider was configured or detected.
    pub provider_problem: Option<String>,
    /// Tool names in the policy lists that only an MCP server's or a
    /// plugin's tool list can confirm (`pincer config check` and `pincer
    /// doctor` warn about those none lists).
    pub tool_names_to_check: Vec<tool_names::NameToCheck>,
}

impl Config {
    /// This config as the runtime keeps it while in force: without the
    /// `[schedules.*]` tables, which live in the scheduler's store once
    /// it has brought them in and which nothing reads again — a thousand
    /// of them would stay parsed in memory for the daemon's life.
    pub fn into_in_force(mut self) -> Self {
        self.schedules = Vec::new();
        self
    }

    pub fn agent(&self, id: &str) -> Option<&AgentSettings> {
        self.agents.get(id)
    }

    /// Why model calls fail before they are made, one sentence each: no
    /// provider configured or detected, or a provider whose API key is
    /// missing. `pincer status` (and the chat's opening note) show these;
    /// `pincer doctor` reports the same sentences per provider.
    pub fn provider_problems(&self) -> Vec<String> {
        self.provider_problem
            .iter()
            .cloned()
            .chain(self.providers.values().filter_map(|p| match &p.api_key {
                ApiKey::Missing { problem } => Some(problem.clone()),
                _ => None,
            }))
            .collect()
    }

    /// Whether `user` is the `owner` of `channel` (`[channels.<name>]`).
    pub fn is_channel_owner(&self, channel: &str, user: &str) -> bool {
        self.channels.get(channel).is_some_and(|c| c.is_owner(user))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonSettings {
    pub max_concurrent_turns: usize,
    pub log_level: String,
    pub shutdown_grace: Duration,
}

/// A secret value; never printed.
#[derive(Clone, PartialEq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Where a provider's API key comes from, and whether it was found.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiKey {
    /// No key configured (local servers).
    None,
    Found {
        origin: String,
        value: Secret,
    },
    /// Configured but absent: the turn fails with this sentence.
    Missing {
        problem: String,
    },
}

impl ApiKey {
    /// The environment variable a found key came from (`None` for a key
    /// file or no key).
    pub fn env_var(&self) -> Option<&str> {
        match self {
            Self::Found { origin, .. } => origin.strip_prefix('$'),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetrySettings {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub max_retry_after: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: String,
    pub api_key: ApiKey,
    pub tool_format: ToolFormat,
    pub connect_timeout: Duration,
    /// Longest silence allowed while a response streams.
    pub idle_timeout: Duration,
    pub retry: RetrySettings,
    pub headers: BTreeMap<String, String>,
}

/// One concrete model to call: a provider and the model id it knows.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTarget {
    pub provider: String,
    pub model: String,
    /// The window the config sets; `None`: the model family's
    /// (`llm::windows`).
    pub context_window: Option<u64>,
    pub max_output_tokens: u32,
    pub temperature: Option<f32>,
    /// The model reads images: photos sent to the agent go to it as image
    /// parts. `[models.<name>] vision = true`; false for everything else
    /// (a `provider/model` reference, a detected provider), because a
    /// text-only model fails the whole request on an image part.
    pub vision: bool,
    /// US dollars per million input and output tokens, when the config
    /// gives them (`[models.<name>] input_usd_per_mtok`,
    /// `output_usd_per_mtok`).
    pub price: Option<(f64, f64)>,
}

impl ModelTarget {
    /// `provider/model`, as shown to users.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }

    /// What `input` and `output` tokens cost on this model, in US
    /// dollars; `None` without prices.
    pub fn cost(&self, input: u64, output: u64) -> Option<f64> {
        self.price
            .map(|(i, o)| (input as f64 * i + output as f64 * o) / 1_000_000.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    pub id: String,
    /// The primary model first, then its fallbacks in order.
    pub models: Vec<ModelTarget>,
    pub workspace: PathBuf,
    pub max_model_calls: u32,
    pub max_turn_duration: Duration,
    pub system_prompt: Option<String>,
    /// How much of the system prompt this agent gets (SPEC §9).
    pub prompt_mode: PromptMode,
    /// Who writes compaction summaries; empty: the agent's own models.
    pub compaction_models: Vec<ModelTarget>,
    pub tools: ToolLayer,
    /// Tool patterns whose calls wait for the owner's approval.
    pub ask: Vec<String>,
    /// `memory`: whose the agent's memory is (default the owner's).
    pub memory: MemoryScope,
    /// `visibility`: which sessions the session tools see; `None`: the
    /// whole agent for the owner, a session and its sub-agents for
    /// everyone else.
    pub visibility: Option<Visibility>,
    /// `scheduled_runs_may_schedule`: a scheduled run may use the
    /// `schedule` tool to make schedules (off by default).
    pub scheduled_runs_may_schedule: bool,
}

/// Whose an agent's memory (`MEMORY.md`, `memory/`, `[memory] paths` and
/// their index) is: the data boundary's rule for the memory tools, the
/// file tools and `exec` (SPEC §8.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryScope {
    /// The owner's alone (the default): no one else reads, searches or
    /// lists it, whatever tools they have.
    #[default]
    Owner,
    /// Everyone who talks to the agent: an agent with a workspace of its
    /// own that serves a group (SPEC §5's `friends`).
    Shared,
}

/// Which sessions an agent's session tools see, from the calling one
/// (`visibility`). Ordered: each sees more than the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Visibility {
    /// The calling session only.
    Own,
    /// The calling session and its sub-agents, all the way down.
    Tree,
    /// Every session of the agent; only ever the owner's.
    Agent,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Own => "self",
            Self::Tree => "tree",
            Self::Agent => "agent",
        }
    }
}

impl AgentSettings {
    /// What the session tools of a turn see: the configured visibility
    /// (default `agent` for the owner, `tree` for everyone else), never
    /// more than `tree` for anyone but the owner.
    pub fn visibility_for(&self, owner: bool) -> Visibility {
        match (owner, self.visibility) {
            (true, v) => v.unwrap_or(Visibility::Agent),
            (false, v) => v.unwrap_or(Visibility::Tree).min(Visibility::Tree),
        }
    }
}

/// One layer of the tool policy (SPEC §8.3): a profile, an allowlist and a
/// denylist of tool names, `group:` names, source ids and `*` globs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolLayer {
    pub profile: Option<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl ToolLayer {
    pub fn is_empty(&self) -> bool {
        self.profile.is_none() && self.allow.is_empty() && self.deny.is_empty()
    }
}

/// Which sessions the sandbox layer applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    #[default]
    Off,
    /// Every session except an agent's main (CLI) session.
    NonMain,
    All,
}

/// The layers of the tool policy that come from `[tools]`; the agent's own
/// layer lives in [`AgentSettings`], channel and sender layers come with
/// the chat.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicySettings {
    pub global: ToolLayer,
    /// Keyed `provider` or `provider/model`.
    pub by_provider: BTreeMap<String, ToolLayer>,
    pub sandbox_mode: SandboxMode,
    pub sandbox: ToolLayer,
    pub subagents: ToolLayer,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSettings {
    pub exec_timeout: Duration,
    pub exec_max_output_chars: usize,
    pub exec_sandbox: ExecSandboxSettings,
    pub max_result_chars: usize,
    /// Characters a call's arguments may have: a longer call is refused
    /// and recorded shortened, so one reply cannot bloat the transcript.
    pub max_argument_chars: usize,
    pub fs: FsSettings,
    /// Consecutive replies the loop may drop and ask again (SPEC §7).
    pub max_rollbacks: u32,
    /// A reply without tool calls containing one of these is a refusal and
    /// is rolled back (case-insensitive; none by default).
    pub refusal_keywords: Vec<String>,
    pub loops: LoopSettings,
    pub hooks: Vec<HookSettings>,
    /// Per-tool time limits; tools not named get `default_timeout`.
    pub timeouts: BTreeMap<String, Duration>,
    pub default_timeout: Duration,
    pub approval_timeout: Duration,
    /// How long the audit table keeps a call's row (`None`: for ever).
    pub audit_retention: Option<Duration>,
    pub web_fetch: WebFetchSettings,
    pub subagents: SubagentLimits,
}

/// How `exec` is confined by the operating system (`[tools.exec]`; the
/// guide's docs/src/sandbox.md). Hooks and stdio MCP servers that set
/// `sandbox = true` get the same confinement.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecSandboxSettings {
    pub mode: ExecSandboxMode,
    /// Sandboxed commands may open network sockets (never Unix ones).
    pub network: bool,
    /// Extra folders they may read, and write.
    pub read_paths: Vec<PathBuf>,
    pub write_paths: Vec<PathBuf>,
}

impl Default for ExecSandboxSettings {
    fn default() -> Self {
        Self {
            mode: ExecSandboxMode::Auto,
            network: true,
            read_paths: Vec::new(),
            write_paths: Vec::new(),
        }
    }
}

/// `tools.exec.sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecSandboxMode {
    /// Sandboxed where the kernel allows it, else run and say so.
    #[default]
    Auto,
    /// Refuse to run commands where the sandbox cannot be had.
    Required,
    /// Never sandbox.
    Off,
}

impl ExecSandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
            Self::Off => "off",
        }
    }
}

/// `sessions_spawn` limits (SPEC §7: depth 1, 5 children per turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentLimits {
    pub max_depth: u32,
    pub max_children: u32,
}

/// `[tools.fs]`: what the file tools may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsSettings {
    /// Use regular files with more than one hard link. Off by default: a
    /// link's other name may be outside the workspace (made by the owner,
    /// or by the model through `exec`), so reading it would read that file.
    pub allow_hard_links: bool,
    /// File tools may write in `workflows/` (off: workflow files are the
    /// owner's to edit by hand).
    pub edit_workflows: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct WebFetchSettings {
    /// Let `web_fetch` reach private, loopback and link-local addresses.
    pub allow_private: bool,
    /// Hosts reachable even when they resolve to private addresses.
    pub allow_hosts: Vec<String>,
    /// Go through `HTTP(S)_PROXY` from the environment. Off by default:
    /// a proxy resolves names itself, so the address checked is not
    /// necessarily the one fetched.
    pub use_env_proxy: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    BeforeToolCall,
    AfterToolCall,
}

/// A command hook (SPEC §8.4), from `[[tools.hooks]]` or a plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSettings {
    pub name: String,
    pub event: HookEvent,
    /// Program and arguments; no shell.
    pub command: Vec<String>,
    /// Tool patterns it applies to, as in the policy; empty: every tool.
    pub tools: Vec<String>,
    pub timeout: Duration,
    /// Runs in the exec sandbox (`sandbox = true`).
    pub sandbox: bool,
}

/// Loop detection thresholds (SPEC §8.4).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopSettings {
    pub enabled: bool,
    /// Calls remembered per session.
    pub window: usize,
    pub warning: usize,
    pub critical: usize,
    pub breaker: usize,
}
