//! The inbound message a bridge hands the channel layer, and what a
//! platform can do with the outbound ones.

use serde::{Deserialize, Serialize};

/// Where a message was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChatKind {
    /// A private chat with one person.
    Direct,
    /// A group, supergroup or guild channel.
    Group,
    /// A thread inside a group (a Telegram forum topic, a Discord thread).
    Thread,
}

/// Who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// The platform's user id, as text.
    pub id: String,
    /// A display name for people (not trusted: anyone can pick any name).
    pub name: String,
    /// Another bot (ignored on platforms where bots can loop).
    pub is_bot: bool,
}

/// A file that came with a message; the bridge downloads it on demand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The platform's handle to fetch it with.
    pub id: String,
    /// The file name to save it under (made safe before use).
    pub name: String,
    /// `photo`, `document`, `voice`, …
    pub kind: String,
    /// Size in bytes, when the platform says.
    pub size: Option<u64>,
}

/// One message as every bridge describes it (SPEC §11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inbound {
    /// `telegram`, `discord`.
    pub channel: String,
    /// Which bot account of that channel received it.
    pub account: String,
    pub kind: ChatKind,
    /// The chat (a DM's chat, a group, a guild channel).
    pub chat_id: String,
    /// The thread or forum topic, for [`ChatKind::Thread`].
    pub thread_id: Option<String>,
    /// The guild (Discord server) the chat belongs to; `None` in DMs and
    /// on platforms without guilds. Group rules may name the guild.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// The sender's roles in that guild, by id (Discord); group rules may
    /// name a role.
    #[serde(default)]
    pub sender_roles: Vec<String>,
    pub sender: Sender,
    pub text: String,
    /// An @mention of the bot, or a reply to one of its messages.
    pub mentions_bot: bool,
    /// The platform id of the message this one answers.
    pub reply_to: Option<String>,
    pub attachments: Vec<Attachment>,
    /// The platform's unique id of this message (the dedupe key).
    pub message_id: String,
}

/// How a platform renders formatted text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Formatting {
    /// No formatting: plain text only.
    Plain,
    /// Markdown as the platform reads it (Discord).
    Markdown,
    /// A subset of HTML (Telegram's `parse_mode = HTML`).
    Html,
}

/// What a platform allows outbound messages to be and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Characters in one message (Telegram 4,096, used as 4,000; Discord 2,000).
    pub max_chars: usize,
    /// Lines in one message, where the platform folds long ones (Discord 17).
    pub max_lines: Option<usize>,
    /// A sent message can be edited (live preview).
    pub edits: bool,
    /// How often "typing…" is renewed while a turn runs (a little under
    /// how long the platform shows it: Telegram 5 s, Discord 10 s); `None`
    /// where there is no typing indicator.
    pub typing: Option<std::time::Duration>,
    /// The live preview is edited at most this often (Telegram 1 s,
    /// Discord 1.2 s: their edit rate limits).
    pub edit_every: std::time::Duration,
    /// Replies can go into threads.
    pub threads: bool,
    pub formatting: Formatting,
}
