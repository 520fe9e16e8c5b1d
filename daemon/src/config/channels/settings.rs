//! The settings of one `[channels.<name>]` table as the daemon reads
//! them: [`ChannelSettings`] (the keys every channel has, the bot token
//! read on demand) and [`GroupSettings`] (one allowlisted group). Who may
//! write in a DM is the channel layer's own [`DmPolicy`], which the
//! config parses into.

use std::collections::BTreeMap;

pub use pincer_channel::access::DmPolicy;

use super::super::ToolLayer;
use super::super::secret::{MissingSecret, SecretSource};
use super::{DiscordSettings, GuildSettings, TelegramMode, TelegramSettings};

/// One `[channels.<name>]` table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSettings {
    /// `telegram` or `discord`.
    pub name: String,
    /// `enabled` (default true): a disabled channel's bridge does not run.
    pub enabled: bool,
    /// Where the bot token comes from: `token_env` (default
    /// `TELEGRAM_BOT_TOKEN` / `DISCORD_BOT_TOKEN`) or `token_file` (in
    /// `PINCER_HOME/secrets/`). Read with [`Self::token`].
    pub token_source: SecretSource,
    /// `api_url`: the platform's API base (default
    /// `https://api.telegram.org`; Discord's origin `https://discord.com`,
    /// whose `/api/v10/gateway/bot` also names the gateway); a
    /// self-hosted Bot API server or an emulator in tests.
    pub api_url: String,
    /// `owner`: the owner's user id on this channel. Their DM counts as the
    /// owner's (owner-only tools, `MEMORY.md`), approvals go to that DM,
    /// and only they can press approval buttons.
    pub owner: Option<String>,
    /// `dm_policy` (default `pairing`).
    pub dm_policy: DmPolicy,
    /// `allow_from`: user ids that may always write in DMs.
    pub allow_from: Vec<String>,
    /// `require_mention` (default true): in groups, only a message that
    /// mentions the bot or replies to it is answered.
    pub require_mention: bool,
    /// `context_messages` (default 50 on Telegram, 20 on Discord; 0 keeps
    /// none; at most 500): un-mentioned group messages kept and handed to
    /// the agent with the next mention.
    pub context_messages: usize,
    /// `max_attachment_mb` (default 20 on Telegram, the Bot API's download
    /// cap; 10 on Discord), in bytes: larger attachments are named, not
    /// saved; 0 saves none.
    pub max_attachment_bytes: u64,
    /// `preview` (default false): show the answer while it is written by
    /// editing one message (at most once per second).
    pub preview: bool,
    /// `max_messages_per_answer` (default 10, 1..=100): the messages one
    /// answer takes at most. A longer answer is sent as its first N − 1
    /// messages and the rest as one Markdown file (`answer.md`), so it
    /// takes N messages with the file.
    pub max_messages_per_answer: usize,
    /// `[channels.<name>.groups."<chat id>"]`: the allowlisted groups (or
    /// guild channels); a group not listed (nor its guild) is ignored.
    pub groups: BTreeMap<String, GroupSettings>,
    /// `[channels.discord.guilds."<guild id>"]`: the allowlisted guilds
    /// (Discord only; empty elsewhere).
    pub guilds: BTreeMap<String, GuildSettings>,
    /// `[channels.<name>.peers."<user id>"] tools`: the layer of one
    /// person's direct messages (a DM's own layer, as a group's `tools`).
    pub peers: BTreeMap<String, ToolLayer>,
    /// Telegram's own settings; `None` on other channels.
    pub telegram: Option<TelegramSettings>,
    /// Discord's own settings; `None` on other channels.
    pub discord: Option<DiscordSettings>,
}

impl ChannelSettings {
    /// The bot token, read now from its variable or file; the error names
    /// them. The value is never logged.
    pub fn token(&self) -> Result<String, MissingSecret> {
        self.token_source
            .read_for(&format!("[channels.{}]", self.name), "bot token")
    }

    /// The environment variables this channel's secrets are read from (the
    /// token's, a webhook secret's): kept out of `exec` and redacted.
    pub fn secret_env_vars(&self) -> impl Iterator<Item = &str> {
        let webhook = match self.telegram.as_ref().map(|t| &t.mode) {
            Some(TelegramMode::Webhook(w)) => w.secret_source.env_var(),
            _ => None,
        };
        self.token_source.env_var().into_iter().chain(webhook)
    }

    /// Whether `user` is this channel's owner. An empty id (a message
    /// without a sender) is nobody, never the owner.
    pub fn is_owner(&self, user: &str) -> bool {
        !user.trim().is_empty() && self.owner.as_deref() == Some(user)
    }

    /// Whether `user` may start a new conversation (`/new`, `/reset`) in
    /// group `chat` (of `guild`, on Discord): the owner, or one of the
    /// `admins` of the chat's entry (else of its guild's).
    pub fn may_reset_group(&self, guild: Option<&str>, chat: &str, user: &str) -> bool {
        self.is_owner(user)
            || (!user.trim().is_empty()
                && self
                    .entries(guild, chat, &[])
                    .admins()
                    .iter()
                    .any(|a| a == user))
    }

    /// The entry of a group chat, if it is allowlisted.
    pub fn group(&self, chat: &str) -> Option<&GroupSettings> {
        self.groups.get(chat)
    }

    /// Where the bot listens besides DMs (Discord's catch-up fetches these
    /// and `pincer doctor` checks them): the allowlisted chats, each
    /// group's and the channels a guild lists, once each; and the guilds
    /// listened to in every channel (those that list none).
    pub fn listened(&self) -> (Vec<String>, Vec<String>) {
        let mut chats: Vec<String> = self.groups.keys().cloned().collect();
        let mut open_guilds = Vec::new();
        for (id, guild) in &self.guilds {
            match &guild.channels {
                Some(listed) => {
                    for chat in listed {
                        if !chats.contains(chat) {
                            chats.push(chat.clone());
                        }
                    }
                }
                None => open_guilds.push(id.clone()),
            }
        }
        (chats, open_guilds)
    }
}

/// One allowlisted group, guild channel or Telegram channel. On Discord a
/// key it leaves unset is its guild's ([`ChatEntries`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupSettings {
    /// `agent`: who answers here (a peer binding of the sender still wins:
    /// `routing`).
    pub agent: Option<String>,
    /// `require_mention`; `None`: its guild's, else the channel's.
    pub require_mention: Option<bool>,
    /// `allow_from`: when set, only these senders can summon the agent
    /// here; the others' messages are kept as context only.
    pub allow_from: Option<Vec<String>>,
    /// `allow_roles` (Discord): when set, the holders of these roles can
    /// summon the agent here too.
    pub allow_roles: Option<Vec<String>>,
    /// `admins`: who besides the channel's owner may start a new
    /// conversation here (`/new`, `/reset`); nobody by default.
    pub admins: Vec<String>,
    /// `tools = { profile, allow, deny }`: the group's policy layer.
    pub tools: ToolLayer,
    /// `prompt`: added to the system prompt of this chat's sessions.
    pub prompt: Option<String>,
    /// `[...senders."<user id>"] tools`: per-sender layers in this group.
    pub senders: BTreeMap<String, ToolLayer>,
}
