//! `pincer`: the command-line client of pincerd (SPEC §4). It is thin:
//! everything goes through the gRPC API; it never opens the daemon's
//! databases. Exit codes: 0 ok, 1 error, 2 usage, 3 pincerd not running.

mod chat;
mod commands;
mod init;
mod memory;
mod render;
mod rpc;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use rpc::CliError;

#[derive(Parser)]
#[command(
    name = "pincer",
    version,
    about = "Talk to pincerd, your personal AI agent daemon."
)]
pub struct Cli {
    /// PINCER_HOME (default: $PINCER_HOME, then ~/.pincer).
    #[arg(long, global = true, value_name = "PATH")]
    home: Option<PathBuf>,
    /// Print JSON (one document; streams print one JSON object per line).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Write a starter config.toml and workspace files (never overwrites).
    Init,
    /// Version, uptime, agents, sessions.
    Status,
    /// Interactive chat; Ctrl-C aborts the running turn, Ctrl-D leaves.
    Chat {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        session: Option<String>,
    },
    /// Send one message and print the reply.
    Send {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        session: Option<String>,
        /// The message ("-" reads it from stdin).
        text: String,
    },
    /// Abort the running turn of a session.
    Abort {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        session: Option<String>,
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
    /// Search an agent's long-term memory, see its index, or rebuild it.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Calls waiting for your approval (tools set to `ask`).
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Check or reload the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Show the daemon's log.
    Logs {
        /// Keep printing new lines.
        #[arg(short, long)]
        follow: bool,
        /// Lines from the end to show first.
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: u32,
    },
    /// Check config, socket and providers; one sentence per finding.
    Doctor,
}

#[derive(Subcommand)]
pub enum SessionsCommand {
    /// All sessions, most recent first.
    List {
        #[arg(long)]
        agent: Option<String>,
    },
    /// A session's details and transcript.
    Show {
        session: String,
        #[arg(long)]
        agent: Option<String>,
        /// Only the last N entries.
        #[arg(short = 'n', long, default_value_t = 0)]
        limit: u32,
    },
    /// Start the session afresh (the old transcript is kept on disk).
    Reset {
        session: String,
        #[arg(long)]
        agent: Option<String>,
    },
    /// Delete a session and its transcript.
    Delete {
        session: String,
        #[arg(long)]
        agent: Option<String>,
    },
    /// Summarise the session's older history now (as when it nears the window).
    Compact {
        session: String,
        #[arg(long)]
        agent: Option<String>,
    },
    /// The exact prompt the model received on the session's last call.
    Prompt {
        session: String,
        #[arg(long)]
        agent: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum SkillsCommand {
    /// Every skill with its description, and whether the prompt lists them.
    List {
        #[arg(long)]
        agent: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum ToolsCommand {
    /// Every tool with its source and whether it is offered (and if not, why).
    List {
        #[arg(long)]
        agent: Option<String>,
        /// As in a chat on this channel (telegram, discord): default profile `messaging`.
        #[arg(long)]
        channel: Option<String>,
        /// As this sender in that chat (not an owner: owner-only tools removed).
        #[arg(long)]
        peer: Option<String>,
    },
    /// The audit table: recent tool calls, their outcome and what decided it.
    Audit {
        /// Only this session (a key such as agent:main:main).
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
        #[arg(long)]
        agent: Option<String>,
        /// Results wanted (default: [memory] max_results, 6).
        #[arg(short = 'n', long, default_value_t = 0)]
        limit: u32,
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
        #[arg(long)]
        agent: Option<String>,
        /// First line, 1-based.
        #[arg(long, default_value_t = 1)]
        from: u32,
        /// How many lines (0: 200).
        #[arg(short = 'n', long, default_value_t = 0)]
        lines: u32,
    },
    /// Each index: files, chunks, vectors, last update, watcher, errors.
    Status {
        #[arg(long)]
        agent: Option<String>,
    },
    /// Bring the index up to date now, with a progress bar.
    Reindex {
        #[arg(long)]
        agent: Option<String>,
        /// Forget everything and index every file again.
        #[arg(long)]
        full: bool,
    },
}

#[derive(Subcommand)]
pub enum ApprovalsCommand {
    /// Calls waiting for an answer.
    List,
    /// Let the call run.
    Allow { id: String },
    /// Refuse the call (the model is told).
    Deny { id: String },
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Validate config.toml (exit 78 when invalid).
    Check,
    /// Apply config changes to the running daemon.
    Reload,
}

/// Where the home is and whether the user named it.
pub struct Ctx {
    pub home: PathBuf,
    pub explicit_home: bool,
    pub json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let explicit_home =
        cli.home.is_some() || std::env::var_os("PINCER_HOME").is_some_and(|h| !h.is_empty());
    let home = match resolve_home(cli.home) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("pincer: {}", e.message);
            return ExitCode::from(e.code);
        }
    };
    let ctx = Ctx {
        home,
        explicit_home,
        json: cli.json,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pincer: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(&ctx, cli.command)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("pincer: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

fn resolve_home(explicit: Option<PathBuf>) -> Result<PathBuf, CliError> {
    let home = match explicit {
        Some(p) => p,
        None => match std::env::var_os("PINCER_HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".pincer"))
                .ok_or_else(|| {
                    CliError::failed("cannot find the home directory: set HOME or PINCER_HOME")
                })?,
        },
    };
    if home.is_absolute() {
        Ok(home)
    } else {
        std::env::current_dir()
            .map(|d| d.join(home))
            .map_err(|e| CliError::failed(format!("cannot resolve the home path: {e}")))
    }
}
