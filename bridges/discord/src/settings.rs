//! What the daemon's config says about one Discord bot, free of any config
//! format: the daemon builds [`DiscordSettings`] from `[channels.discord]`.

use std::time::Duration;

/// Discord's own origin; requests go to `{api_url}/api/v10/…`.
pub const DEFAULT_API_URL: &str = "https://discord.com";

/// How far back catch-up looks after downtime, by default.
pub const DEFAULT_CATCH_UP_AGE: Duration = Duration::from_secs(24 * 3600);

/// Messages fetched per channel by catch-up, by default (Discord's page).
pub const DEFAULT_CATCH_UP_MESSAGES: usize = 50;

/// One bot's settings.
#[derive(Clone)]
pub struct DiscordSettings {
    /// The bot token (never logged: [`std::fmt::Debug`] hides it).
    pub token: String,
    /// The API's origin (`https://discord.com`; a fake's in tests).
    pub api_url: String,
    /// Ask for the privileged Message Content intent. Without it the bot
    /// reads only messages that mention it and DMs (mention-only).
    pub message_content: bool,
    /// Guilds to register the slash commands in (instantly there);
    /// none: registered globally.
    pub guilds: Vec<String>,
    /// Guild channels listened to: catch-up fetches each of them.
    pub channels: Vec<String>,
    /// Guilds listened to in every channel: catch-up lists their text
    /// channels.
    pub open_guilds: Vec<String>,
    /// Catch-up looks this far back at most.
    pub catch_up_age: Duration,
    /// …and fetches at most this many messages per channel; 0 turns
    /// catch-up off.
    pub catch_up_messages: usize,
}

impl DiscordSettings {
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            api_url: DEFAULT_API_URL.to_string(),
            message_content: true,
            guilds: Vec::new(),
            channels: Vec::new(),
            open_guilds: Vec::new(),
            catch_up_age: DEFAULT_CATCH_UP_AGE,
            catch_up_messages: DEFAULT_CATCH_UP_MESSAGES,
        }
    }
}

impl std::fmt::Debug for DiscordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("token", &"<hidden>")
            .field("api_url", &self.api_url)
            .field("message_content", &self.message_content)
            .field("guilds", &self.guilds)
            .field("channels", &self.channels)
            .field("open_guilds", &self.open_guilds)
            .field("catch_up_age", &self.catch_up_age)
            .field("catch_up_messages", &self.catch_up_messages)
            .finish()
    }
}
