//! Bindings (SPEC §11): which agent answers a chat. A binding names a
//! channel and, optionally, an account, a group (a Telegram group, a
//! Discord guild or channel) or a peer; the routing layer picks the most
//! specific one that matches; a chat no binding matches goes to the
//! default agent.
//!
//! ```toml
//! [[bindings]]
//! channel = "telegram"
//! group = "-1001234567890"   # this group…
//! agent = "helper"           # …is answered by `helper`
//! ```

use std::collections::BTreeMap;

use super::AgentSettings;
use super::channels::CHANNELS;
use super::file::ConfigFile;
use super::locate::{ConfigError, Locator};

/// One `[[bindings]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Binding {
    /// `telegram`, `discord`, …
    pub channel: String,
    /// The bot account on that channel, when several are configured.
    pub account: Option<String>,
    /// A group, guild or channel id.
    pub group: Option<String>,
    /// A sender id (a DM with this person, or this person in any chat).
    pub peer: Option<String>,
    /// The agent that answers.
    pub agent: String,
}

/// The `[[bindings]]` of `file`, each checked: a known channel, an agent
/// that exists, ids that are not empty.
pub(super) fn parse(
    loc: &Locator<'_>,
    file: &ConfigFile,
    agents: &BTreeMap<String, AgentSettings>,
) -> Result<Vec<Binding>, ConfigError> {
    let mut out = Vec::new();
    for entry in &file.bindings {
        let b = entry.get_ref();
        let channel = b.channel.get_ref().trim().to_lowercase();
        if !CHANNELS.contains(&channel.as_str()) {
            return Err(loc.at(
                b.channel.span(),
                format!(
                    "[[bindings]] channel: unknown channel `{}`: use {}",
                    b.channel.get_ref(),
                    CHANNELS.join(" or ")
                ),
            ));
        }
        let agent = b.agent.get_ref().trim();
        if !agents.contains_key(agent) {
            let known: Vec<&str> = agents.keys().map(String::as_str).collect();
            return Err(loc.at(
                b.agent.span(),
                format!(
                    "[[bindings]] agent: no agent `{agent}` (agents: {})",
                    known.join(", ")
                ),
            ));
        }
        let id = |v: &Option<String>| v.as_ref().map(|s| s.trim().to_string());
        for (key, value) in [
            ("account", &b.account),
            ("group", &b.group),
            ("peer", &b.peer),
        ] {
            if value.as_ref().is_some_and(|v| v.trim().is_empty()) {
                return Err(loc.at(
                    entry.span(),
                    format!("[[bindings]] {key}: an empty id matches nothing; leave the key out"),
                ));
            }
        }
        out.push(Binding {
            channel,
            account: id(&b.account),
            group: id(&b.group),
            peer: id(&b.peer),
            agent: agent.to_string(),
        });
    }
    Ok(out)
}
