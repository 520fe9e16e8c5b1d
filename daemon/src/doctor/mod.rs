//! Diagnosis for `pincer doctor`: every finding is one sentence that says
//! what is wrong and what to do. Used offline (`pincerd doctor`) and by the
//! running daemon (`Daemon.Doctor`), which checks with its live config.
//!
//! This file runs every check; each thing checked has its file: the
//! config file (`config.rs`), the home's socket (`socket.rs`), tool names
//! against the servers' lists (`tools.rs`), the exec sandbox
//! (`sandbox.rs`), the agents' prompts (`context.rs`), memory
//! (`memory.rs`), providers (`providers.rs`) and the chat bridges
//! (`channels.rs`).

use crate::config::Config;
use crate::home::Home;

mod channels;
mod config;
mod context;
mod memory;
mod providers;
mod sandbox;
mod socket;
mod tools;

pub use channels::{check_channel, fix_channels};
pub use context::check_context;
pub use memory::check_memory;
pub use providers::check_provider;
pub use tools::check_tool_names;

use config::check_config_file;
use sandbox::check_sandbox;
use socket::check_dirs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub level: Level,
    pub subject: String,
    pub message: String,
}

fn finding(level: Level, subject: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding {
        level,
        subject: subject.into(),
        message: message.into(),
    }
}

/// Checks of the config file on disk and of every provider and agent it
/// names. `running` is the config the daemon runs (the daemon's
/// `Daemon.Doctor`), `None` offline; with `memory`, the running daemon's
/// indexes are checked too, and with `mcp` its MCP servers are asked
/// for their tools.
pub async fn check_running(
    home: &Home,
    running: Option<&Config>,
    memory: Option<&crate::memory::Memory>,
    mcp: Option<&crate::tools::mcp::McpManager>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // The file decides, not what the daemon loaded: right after `pincer
    // init`, or with a broken edit the daemon refused, the two differ.
    let disk = crate::config::load(home);
    out.extend(check_config_file(home, &disk, running));
    let Some(config) = disk.as_ref().ok().or(running) else {
        return out;
    };
    if let Some(problem) = &config.provider_problem {
        out.push(finding(Level::Error, "provider", problem.clone()));
    }
    for problem in &config.plugin_problems {
        out.push(finding(Level::Warn, "plugin", problem.clone()));
    }
    for plugin in &config.plugins {
        out.push(finding(
            Level::Ok,
            "plugin",
            format!("`{}` loaded from {}", plugin.id, plugin.dir.display()),
        ));
    }
    out.extend(check_dirs(home));
    out.extend(check_tool_names(home, config, running.zip(mcp)).await);
    out.push(check_sandbox(config));
    out.extend(check_context(config));
    out.extend(check_memory(config, memory).await);
    for provider in config.providers.values() {
        out.push(check_provider(provider).await);
    }
    for channel in config.channels.values().filter(|c| c.enabled) {
        out.extend(check_channel(channel).await);
    }
    for agent in config.agents.values() {
        if agent.models.is_empty() && config.provider_problem.is_none() {
            out.push(finding(
                Level::Error,
                format!("agent {}", agent.id),
                "has no model; set `model` under its [agents] table",
            ));
        }
    }
    out
}
/// One error per part of the running daemon that could not start (the
/// others serve).
pub fn part_failures(failures: &crate::lifecycle::Failures) -> Vec<Finding> {
    failures
        .list()
        .into_iter()
        .map(|(part, why)| {
            finding(
                Level::Error,
                part,
                format!(
                    "did not start: {why}; the rest of pincerd serves; fix it and restart pincerd"
                ),
            )
        })
        .collect()
}
