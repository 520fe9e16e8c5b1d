//! The context engine (SPEC §9): what the model sees on each call.
//!
//! - [`prompt`] assembles the system prompt from ordered sections;
//!   [`bootstrap`] reads the workspace's bootstrap files with their caps and
//!   [`skills`] lists `skills/*/SKILL.md`; [`workspace_files`] keeps what
//!   they read while the files are unchanged.
//! - [`guard`] shapes the history loaded from the transcript for one call:
//!   turn limit, keep-last-K tool results, the single-result cap, calls to
//!   tools no longer allowed, and the turn order providers demand.
//! - [`history`] rebuilds the conversation from the transcript, from the
//!   last compaction on; [`images`] reads the images of its user messages
//!   for a model with vision.
//! - [`tokens`] estimates prompt sizes from the provider's last reported
//!   usage plus an estimate of what was added since.
//! - [`compact`] summarises old history when the prompt nears the window.
//!
//! [`session_prompt`] is the seam the agent turn calls: it gathers the
//! inputs from the config and the workspace and returns the prompt.

pub mod bootstrap;
pub mod compact;
pub mod guard;
pub mod history;
pub mod images;
pub mod prompt;
pub mod skills;
pub mod tokens;
pub mod workspace_files;

#[cfg(test)]
mod prompt_tests;

use crate::config::{AgentSettings, ContextSettings, PromptMode};
use crate::llm::ToolSpec;
use crate::llm::windows::ContextWindow;
use crate::session::SessionKey;
use crate::tools::origin::{ChatOrigin, ChatPlace};
use prompt::{ChatKind, PromptInputs, RuntimeInfo};

/// The kind of chat a turn answers, from the session (a sub-agent's child
/// session) and the origin the routing layer built.
pub fn chat_kind(key: &SessionKey, origin: &ChatOrigin) -> ChatKind {
    if key.is_subagent() {
        return ChatKind::SubAgent;
    }
    match &origin.chat {
        ChatPlace::Cli if origin.is_owner() => ChatKind::OwnerPrivate,
        // Someone else's message in a CLI session (one that came through
        // `sessions_send`): treated as a stranger's DM.
        ChatPlace::Cli => ChatKind::Direct {
            channel: "cli".into(),
            owner: false,
        },
        ChatPlace::Direct { channel, .. } => ChatKind::Direct {
            channel: channel.clone(),
            owner: origin.is_owner(),
        },
        ChatPlace::Group { channel, .. } => ChatKind::Group {
            channel: channel.clone(),
        },
    }
}

/// The bootstrap files a prompt of `mode` includes for `chat`.
pub fn bootstrap_names(mode: PromptMode, chat: &ChatKind) -> Vec<&'static str> {
    match mode {
        PromptMode::None => Vec::new(),
        PromptMode::Minimal => bootstrap::MINIMAL_FILES.to_vec(),
        PromptMode::Full | PromptMode::Auto => bootstrap::FILES
            .iter()
            .copied()
            .filter(|name| *name != "MEMORY.md" || chat.is_owner_private())
            .collect(),
    }
}

/// A turn's system prompt and the mode it was assembled in.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPrompt {
    pub system: String,
    /// Resolved: `Full`, `Minimal` or `None`.
    pub mode: PromptMode,
}

/// The system prompt of one session's turn: reads the bootstrap files and
/// skills of the agent's workspace and assembles the sections;
/// `chat_prompt` is the origin's addition for this chat
/// ([`ChatOrigin::prompt`]).
pub fn session_prompt(
    settings: &ContextSettings,
    agent: &AgentSettings,
    chat: &ChatKind,
    tools: &[ToolSpec],
    chat_prompt: Option<&str>,
) -> SessionPrompt {
    let window = agent.context_window();
    let mode = agent
        .prompt_mode
        .resolve(window, *chat == ChatKind::SubAgent);
    let caps = bootstrap::Caps {
        file_chars: settings.bootstrap_file_chars,
        total_chars: settings.bootstrap_total_for(window),
    };
    let read = workspace_files::load(
        &agent.workspace,
        &bootstrap_names(mode, chat),
        caps,
        mode == PromptMode::Full,
    );
    let runtime = RuntimeInfo {
        agent: agent.id.clone(),
        workspace: agent.workspace.display().to_string(),
        os: std::env::consts::OS.to_string(),
        time_zone: time_zone(),
        model: agent.models.first().map(|m| m.label()).unwrap_or_default(),
        chat: chat.clone(),
    };
    let system = prompt::assemble(&PromptInputs {
        mode,
        instructions: agent.system_prompt.as_deref(),
        chat_instructions: chat_prompt,
        tools,
        skills: &read.skills,
        files: &read.files,
        runtime: &runtime,
    });
    SessionPrompt { system, mode }
}

/// The IANA name of the machine's time zone (`TZ` wins), or `UTC`.
fn time_zone() -> String {
    std::env::var("TZ")
        .ok()
        .map(|tz| tz.trim_start_matches(':').to_string())
        .filter(|tz| !tz.is_empty())
        .or_else(|| iana_time_zone::get_timezone().ok())
        .unwrap_or_else(|| "UTC".into())
}

/// The current local time as the turn context shows it.
pub fn now_text() -> String {
    chrono::Local::now()
        .format("%Y-%m-%d %H:%M %A (UTC%:z)")
        .to_string()
}

#[cfg(test)]
mod chat_kind_tests {
    use super::*;

    fn stranger(chat: ChatPlace) -> ChatOrigin {
        ChatOrigin {
            principal: crate::session::Principal::Person {
                channel: "telegram".into(),
                user: "5".into(),
            },
            chat,
            ..ChatOrigin::owner(false)
        }
    }

    #[test]
    fn the_chat_kind_comes_from_the_origin_not_the_key_text() {
        let main = SessionKey::main("main").unwrap();
        assert_eq!(
            chat_kind(&main, &ChatOrigin::owner(true)),
            ChatKind::OwnerPrivate
        );
        // A group member's message that reached the owner's session is
        // still not the owner's private chat: no MEMORY.md for it.
        let group = stranger(ChatPlace::Group {
            channel: "telegram".into(),
            chat_id: "-100".into(),
            thread_id: None,
        });
        assert_eq!(
            chat_kind(&main, &group),
            ChatKind::Group {
                channel: "telegram".into()
            }
        );
        let dm = stranger(ChatPlace::Direct {
            channel: "discord".into(),
            chat_id: "5".into(),
        });
        assert!(!chat_kind(&main, &dm).is_owner_private());
        let sub = SessionKey::sub("main", uuid::Uuid::nil()).unwrap();
        assert_eq!(
            chat_kind(&sub, &ChatOrigin::owner(false)),
            ChatKind::SubAgent
        );
    }
}
