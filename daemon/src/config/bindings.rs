//! Bindings (SPEC §11): which agent answers a chat. A binding names a
//! channel and, optionally, an account, a group (a Telegram group, a
//! Discord guild or channel) or a peer; the routing layer picks the most
//! specific one that matches. The `[[bindings]]` tables are parsed with the
//! channel settings when the bridges arrive; until then the list is empty
//! and every chat goes to the default agent.

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
