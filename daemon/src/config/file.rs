//! The shape of `config.toml` as serde types. Every table denies unknown keys
//! so that a typo is an error with a suggestion, never a silent default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub daemon: DaemonSection,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
    #[serde(default)]
    pub models: BTreeMap<String, ModelSection>,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentSection>,
    #[serde(default)]
    pub tools: ToolsSection,
    /// MCP servers, by name.
    #[serde(default)]
    pub mcp: BTreeMap<String, Spanned<McpSection>>,
    pub default_agent: Option<Spanned<String>>,
    #[serde(default)]
    pub memory: MemorySection,
    #[serde(default)]
    pub context: ContextSection,
    /// Which agent answers which chats (SPEC §11).
    #[serde(default)]
    pub bindings: Vec<Spanned<BindingSection>>,
    /// The chat platforms pincer bridges to (SPEC §11).
    #[serde(default)]
    pub channels: ChannelsSection,
    /// Schedules, by name (SPEC §13a).
    #[serde(default)]
    pub schedules: BTreeMap<String, Spanned<ScheduleFields>>,
    #[serde(default)]
    pub triggers: BTreeMap<String, Spanned<TriggerFields>>,
    /// `[heartbeat.<agent id>]`.
    #[serde(default)]
    pub heartbeat: BTreeMap<String, Spanned<HeartbeatFields>>,
}

/// `[channels]`: one table per platform pincer has a bridge for; any other
/// name is an unknown key.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsSection {
    pub telegram: Option<ChannelSection>,
    pub discord: Option<ChannelSection>,
}

/// `[channels.<name>]`: the keys every channel shares, then Telegram's own
/// (`mode`, `poll_timeout_secs`, `[webhook]`), which another channel
/// refuses by name (`config::channels`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSection {
    pub enabled: Option<bool>,
    pub token_env: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    pub api_url: Option<Spanned<String>>,
    /// An id: a string, or an integer refused with a hint.
    pub owner: Option<Spanned<toml::Value>>,
    /// pairing | allowlist | open | disabled
    pub dm_policy: Option<Spanned<String>>,
    #[serde(default)]
    pub allow_from: Vec<Spanned<toml::Value>>,
    pub require_mention: Option<bool>,
    pub context_messages: Option<Spanned<usize>>,
    pub max_attachment_mb: Option<Spanned<u64>>,
    pub preview: Option<bool>,
    pub max_messages_per_answer: Option<Spanned<usize>>,
    /// Allowlisted groups by chat id.
    #[serde(default)]
    pub groups: BTreeMap<String, Spanned<ChannelGroupSection>>,
    /// Per-person layers of direct messages, by user id.
    #[serde(default)]
    pub peers: BTreeMap<String, Spanned<ChannelSenderSection>>,
    /// Discord: allowlisted guilds by guild id.
    #[serde(default)]
    pub guilds: BTreeMap<String, Spanned<GuildSection>>,
    /// Telegram: polling | webhook
    pub mode: Option<Spanned<String>>,
    /// Telegram: the long-polling timeout.
    pub poll_timeout_secs: Option<Spanned<u64>>,
    /// Telegram: `[channels.telegram.webhook]`.
    pub webhook: Option<Spanned<WebhookSection>>,
    /// Discord: ask for the Message Content intent (default true).
    pub message_content: Option<Spanned<bool>>,
    /// Discord: how far back catch-up looks, in hours.
    pub catch_up_hours: Option<Spanned<u64>>,
    /// Discord: messages catch-up fetches per channel (0 turns it off).
    pub catch_up_messages: Option<Spanned<usize>>,
}

/// `[channels.telegram.webhook]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSection {
    pub url: Option<Spanned<String>>,
    pub listen: Option<Spanned<String>>,
    pub secret_env: Option<Spanned<String>>,
    pub secret_file: Option<Spanned<String>>,
}

/// `[channels.<name>.groups."<chat id>"]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelGroupSection {
    pub agent: Option<Spanned<String>>,
    pub require_mention: Option<bool>,
    pub allow_from: Option<Vec<Spanned<toml::Value>>>,
    /// Discord: role ids whose holders may summon the agent here.
    pub allow_roles: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    /// Who besides the owner may start a new conversation here.
    #[serde(default)]
    pub admins: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    pub tools: LayerSection,
    /// Added to the system prompt of this chat's sessions.
    pub prompt: Option<String>,
    /// Per-sender layers, by user id.
    #[serde(default)]
    pub senders: BTreeMap<String, Spanned<ChannelSenderSection>>,
}

/// `[channels.discord.guilds."<guild id>"]`: a guild channel entry's keys,
/// and the guild's own (`channels`, `roles`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuildSection {
    pub agent: Option<Spanned<String>>,
    pub require_mention: Option<bool>,
    pub allow_from: Option<Vec<Spanned<toml::Value>>>,
    pub allow_roles: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    #[serde(default)]
    pub admins: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    pub tools: LayerSection,
    pub prompt: Option<String>,
    /// The channel ids listened to without an entry; absent: all.
    pub channels: Option<Vec<Spanned<toml::Value>>>,
    /// Per-role settings, by role id.
    #[serde(default)]
    pub roles: BTreeMap<String, Spanned<GuildRoleSection>>,
    #[serde(default)]
    pub senders: BTreeMap<String, Spanned<ChannelSenderSection>>,
}

/// `[channels.discord.guilds."<guild id>".roles."<role id>"]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuildRoleSection {
    pub agent: Option<Spanned<String>>,
    pub require_mention: Option<bool>,
    #[serde(default)]
    pub tools: LayerSection,
    pub prompt: Option<String>,
}

/// `[channels.<name>.groups."<chat id>".senders."<user id>"]` and
/// `[channels.<name>.peers."<user id>"]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSenderSection {
    #[serde(default)]
    pub tools: LayerSection,
}

/// One `[[bindings]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindingSection {
    pub channel: Spanned<String>,
    pub account: Option<String>,
    pub group: Option<String>,
    /// Discord: a guild id.
    pub guild: Option<Spanned<String>>,
    /// Discord: a role id.
    pub role: Option<Spanned<String>>,
    pub peer: Option<String>,
    pub agent: Spanned<String>,
}

/// `[context]`: bootstrap caps, the history guard and compaction (SPEC §9).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSection {
    /// Characters of one bootstrap file in the system prompt.
    pub bootstrap_max_chars: Option<Spanned<usize>>,
    /// Characters of all bootstrap files together.
    pub bootstrap_total_max_chars: Option<Spanned<usize>>,
    /// Tool results kept whole in the history; older ones become a marker.
    pub keep_tool_results: Option<Spanned<usize>>,
    /// Turns of history sent to the model; unset: all (bounded by compaction).
    pub max_history_turns: Option<Spanned<usize>>,
    pub compaction: Option<bool>,
    /// Tokens kept free below the context window; passing it compacts.
    pub reserve_tokens: Option<Spanned<u64>>,
    /// Tokens of the newest history kept verbatim by a compaction.
    pub keep_recent_tokens: Option<Spanned<u64>>,
    /// The model that writes summaries (default: the agent's).
    pub compaction_model: Option<Spanned<String>>,
    /// Before compacting, let the model save durable notes to memory/.
    pub memory_flush: Option<bool>,
}

/// `[memory]`: the long-term memory index of every agent (SPEC §10).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    pub enabled: Option<bool>,
    /// auto | local | openai | none
    pub embedder: Option<Spanned<String>>,
    /// The Hugging Face folder of the local model (relative to PINCER_HOME).
    pub model_dir: Option<String>,
    #[serde(default)]
    pub openai: MemoryOpenaiSection,
    pub chunk_tokens: Option<Spanned<usize>>,
    pub chunk_overlap: Option<Spanned<usize>>,
    /// Workspace globs indexed besides MEMORY.md and memory/**/*.md.
    #[serde(default)]
    pub paths: Vec<Spanned<String>>,
    /// Index the agent's session transcripts too.
    pub sessions: Option<bool>,
    /// Put the top hits for each new message into the system prompt.
    pub auto_recall: Option<bool>,
    pub auto_recall_results: Option<Spanned<usize>>,
    pub max_results: Option<Spanned<usize>>,
    pub min_score: Option<Spanned<f64>>,
    pub vector_weight: Option<Spanned<f64>>,
    pub text_weight: Option<Spanned<f64>>,
    /// weighted | rrf
    pub fusion: Option<Spanned<String>>,
    pub candidate_multiplier: Option<Spanned<usize>>,
    /// 0 turns temporal decay off.
    pub half_life_days: Option<Spanned<f64>>,
    pub mmr_lambda: Option<Spanned<f64>>,
    pub snippet_chars: Option<Spanned<usize>>,
    pub watch_debounce_ms: Option<Spanned<u64>>,
    pub reconcile_minutes: Option<Spanned<u64>>,
    /// Seconds without use before the local model leaves memory.
    pub release_model_after_s: Option<u64>,
}

/// `[memory.openai]`: an OpenAI-compatible `/v1/embeddings` endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryOpenaiSection {
    pub base_url: Option<Spanned<String>>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    /// Requested output size (models that support `dimensions`).
    pub dimensions: Option<usize>,
    pub timeout_s: Option<u64>,
}

/// One MCP server: `command` (stdio) or `url` (Streamable HTTP).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    pub command: Option<Vec<String>>,
    pub url: Option<Spanned<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub startup_timeout_s: Option<u64>,
    /// Tools (as the server names them) offered only when allowlisted.
    #[serde(default)]
    pub optional: Vec<String>,
    pub enabled: Option<bool>,
    /// Run a stdio server in the exec sandbox.
    pub sandbox: Option<Spanned<bool>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonSection {
    pub max_concurrent_turns: Option<Spanned<u32>>,
    pub log_level: Option<String>,
    pub shutdown_grace_s: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI chat completions and every compatible server.
    Openai,
    /// Anthropic messages.
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolFormat {
    #[default]
    Native,
    Hermes,
    Xml,
}

impl ToolFormat {
    /// The name the config and the API use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Hermes => "hermes",
            Self::Xml => "xml",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub kind: ProviderKind,
    pub base_url: Option<Spanned<String>>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    pub tool_format: Option<Spanned<ToolFormat>>,
    pub connect_timeout_s: Option<u64>,
    pub idle_timeout_s: Option<u64>,
    #[serde(default)]
    pub retry: RetrySection,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySection {
    pub max_attempts: Option<u32>,
    pub initial_backoff_ms: Option<u64>,
    pub max_backoff_ms: Option<u64>,
    pub max_retry_after_s: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    pub provider: Spanned<String>,
    pub model: String,
    pub context_window: Option<Spanned<u64>>,
    pub max_output_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// The model reads images (`Part::Image`); default false.
    pub vision: Option<bool>,
    #[serde(default)]
    pub fallbacks: Vec<Spanned<String>>,
    /// US dollars per million input and output tokens (both or neither):
    /// what a workflow's `max_cost_usd` counts.
    pub input_usd_per_mtok: Option<Spanned<f64>>,
    pub output_usd_per_mtok: Option<Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    pub model: Option<Spanned<String>>,
    pub workspace: Option<String>,
    pub max_model_calls: Option<Spanned<u32>>,
    pub max_turn_seconds: Option<u64>,
    pub system_prompt: Option<String>,
    /// auto | full | minimal | none
    pub prompt_mode: Option<Spanned<String>>,
    /// The model that writes this agent's compaction summaries.
    pub compaction_model: Option<Spanned<String>>,
    #[serde(default)]
    pub tools: LayerSection,
    /// Whose this agent's memory is: owner | shared.
    pub memory: Option<Spanned<String>>,
    /// Which sessions the session tools see: self | tree | agent.
    pub visibility: Option<Spanned<String>>,
    /// A scheduled run of this agent may make schedules with the
    /// `schedule` tool (off: a schedule cannot multiply itself).
    pub scheduled_runs_may_schedule: Option<bool>,
}

/// One layer of the tool policy (SPEC §8.3).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerSection {
    pub profile: Option<Spanned<String>>,
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    /// Tools whose calls wait for the owner's approval (agents only).
    #[serde(default)]
    pub ask: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Which sessions count as sandboxed: off | non-main | all.
    pub mode: Option<Spanned<String>>,
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    #[serde(default)]
    pub exec: ExecSection,
    #[serde(default)]
    pub fs: FsSection,
    pub max_result_chars: Option<usize>,
    /// Characters a tool call's arguments may have; longer calls are refused.
    pub max_argument_chars: Option<usize>,
    #[serde(default)]
    pub rollback: RollbackSection,
    #[serde(default)]
    pub loop_detection: LoopSection,
    #[serde(default)]
    pub hooks: Vec<HookSection>,
    /// Seconds per tool name.
    #[serde(default)]
    pub timeouts: BTreeMap<String, u64>,
    pub default_timeout_s: Option<u64>,
    /// How long an approval waits before it counts as denied.
    pub approval_timeout_s: Option<u64>,
    /// Days the audit table keeps a call's row; 0 keeps every row.
    pub audit_days: Option<u32>,
    #[serde(default)]
    pub web_fetch: WebFetchSection,
    /// The global policy layer.
    pub profile: Option<Spanned<String>>,
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    /// Per-provider layers, keyed `provider` or `provider/model`.
    #[serde(default)]
    pub by_provider: BTreeMap<String, LayerSection>,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub subagents: SubagentsSection,
}

/// The sub-agent policy layer and limits.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentsSection {
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    pub max_depth: Option<u32>,
    pub max_children: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebFetchSection {
    pub allow_private: Option<bool>,
    pub use_env_proxy: Option<bool>,
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSection {
    pub name: Option<String>,
    pub event: Spanned<String>,
    pub command: Spanned<Vec<String>>,
    #[serde(default)]
    pub tools: Vec<Spanned<String>>,
    pub timeout_s: Option<u64>,
    /// Run it in the exec sandbox.
    #[serde(default)]
    pub sandbox: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopSection {
    pub enabled: Option<bool>,
    pub window: Option<Spanned<usize>>,
    pub warning: Option<usize>,
    pub critical: Option<usize>,
    pub breaker: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackSection {
    pub max_consecutive: Option<u32>,
    #[serde(default)]
    pub refusal_keywords: Vec<String>,
}

/// `[tools.fs]`: the file tools.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsSection {
    /// Let file tools use files with more than one hard link.
    pub allow_hard_links: Option<bool>,
    /// Let file tools write in `workflows/`.
    pub edit_workflows: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSection {
    pub timeout_s: Option<u64>,
    pub max_output_chars: Option<usize>,
    /// The OS sandbox: auto | required | off.
    pub sandbox: Option<Spanned<String>>,
    /// Whether sandboxed commands may open network sockets.
    pub network: Option<bool>,
    /// Extra folders sandboxed commands may read.
    #[serde(default)]
    pub read_paths: Vec<String>,
    /// Extra folders sandboxed commands may write.
    #[serde(default)]
    pub write_paths: Vec<String>,
}

/// A schedule as written: every key optional, checked by
/// `ScheduleFields::check` (`super::schedules`). Stored as JSON for
/// schedules made at run time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFields {
    /// A cron expression: 5 fields, or 6 with seconds first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// An interval: `30m`, `2h`, `1h 30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// One instant: `2026-12-24 18:00` (in `tz`) or RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The IANA time zone of `cron` and `at`; the host's by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// The agent that runs it; the default agent by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Target: a prompt for the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The prompt's session, by name (kept across runs); a fresh one per
    /// run by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Target: a workflow of the agent's workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The workflow's inputs.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub inputs: Map<String, Value>,
    /// Target: a shell command through the exec sandbox, no model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Where the answer goes: `telegram:owner` (the owner's DM on that
    /// channel), a chat (`telegram:-100123`, `discord:<channel id>`), or
    /// `none` (the default: the run's transcript only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<String>,
    /// `once` (the default) or `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire: Option<String>,
    /// How old a missed fire `once` still runs: `24h` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookback: Option<String>,
}

/// `[triggers.<name>]`: what a trigger watches (one of `files`, `exits`,
/// `lines` with `pattern`, `condition` with `every`), what it runs and
/// how often it may. Checked by `TriggerFields::check`
/// (`super::triggers`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerFields {
    /// A workspace glob: a file created or changed under it fires.
    pub files: Option<String>,
    /// A command run supervised: its exit fires (then it runs again).
    pub exits: Option<String>,
    /// A long-running command run supervised: its output lines that
    /// match `pattern` fire, batched.
    pub lines: Option<String>,
    /// The regular expression `lines` are matched with.
    pub pattern: Option<String>,
    /// A script run every `every`: exit status 0 fires, its output the
    /// event.
    pub condition: Option<String>,
    pub every: Option<String>,
    pub agent: Option<String>,
    pub prompt: Option<String>,
    pub session: Option<String>,
    pub workflow: Option<String>,
    #[serde(default)]
    pub inputs: Map<String, Value>,
    pub command: Option<String>,
    pub deliver: Option<String>,
    /// The least time between two fires (`10s` by default).
    pub min_interval: Option<String>,
    /// The most fires in any hour (60 by default).
    pub max_per_hour: Option<u32>,
}

/// `[heartbeat.<agent id>]`: the agent's check-in, off unless the table
/// is there. Checked by `HeartbeatFields::check` (`super::heartbeat`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatFields {
    /// How often: `30m` by default.
    pub every: Option<String>,
    /// `08:00-22:00`: beats only then (in `tz`); always when left out.
    pub active_hours: Option<String>,
    pub tz: Option<String>,
    /// Where a report goes: as a schedule's `deliver`.
    pub deliver: Option<String>,
    /// The answer that means "nothing to report": `HEARTBEAT_OK`.
    pub ok_token: Option<String>,
}
