//! Discord's own keys of `[channels.discord]`: `message_content` and
//! catch-up's bounds into [`DiscordSettings`], `api_url` as the origin,
//! `allow_roles` (in a channel or guild entry), and the same keys refused
//! in another channel's table. The guilds are [`super::guilds`].

use std::time::Duration;

use toml::Spanned;

use super::super::file::ChannelSection;
use super::super::locate::ConfigError;
use super::{IdKind, Parser};

/// Most hours catch-up may look back (a week).
pub const MAX_CATCH_UP_HOURS: u64 = 168;

/// Most messages catch-up fetches per channel (Discord's page).
pub const MAX_CATCH_UP_MESSAGES: usize = 100;

/// `[channels.discord]`'s own keys.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscordSettings {
    /// `message_content` (default true): ask for the privileged Message
    /// Content intent; false runs mention-only (the bot reads messages
    /// that mention it, and DMs).
    pub message_content: bool,
    /// `catch_up_hours` (default 24, at most 168): how far back catch-up
    /// looks after downtime.
    pub catch_up: Duration,
    /// `catch_up_messages` (default 50, at most 100; 0 turns catch-up
    /// off): messages fetched per channel.
    pub catch_up_messages: usize,
}

impl Parser<'_> {
    /// `[channels.discord]`'s own keys, checked.
    pub(super) fn discord(&self, s: &ChannelSection) -> Result<DiscordSettings, ConfigError> {
        if let Some(url) = &s.api_url
            && url
                .get_ref()
                .trim()
                .trim_end_matches('/')
                .ends_with("/api/v10")
        {
            return Err(self.err(
                url.span(),
                "api_url is Discord's origin, without /api/v10: write \"https://discord.com\" (or a fake's http://127.0.0.1:PORT)",
            ));
        }
        let hours = match &s.catch_up_hours {
            Some(h) if *h.get_ref() > MAX_CATCH_UP_HOURS => {
                return Err(self.err(
                    h.span(),
                    format!("catch-up looks back at most {MAX_CATCH_UP_HOURS} hours (a week)"),
                ));
            }
            Some(h) => *h.get_ref(),
            None => 24,
        };
        let messages = match &s.catch_up_messages {
            Some(n) if *n.get_ref() > MAX_CATCH_UP_MESSAGES => {
                return Err(self.err(
                    n.span(),
                    format!(
                        "catch-up fetches at most {MAX_CATCH_UP_MESSAGES} messages per channel (0 turns it off)"
                    ),
                ));
            }
            Some(n) => *n.get_ref(),
            None => 50,
        };
        Ok(DiscordSettings {
            message_content: s.message_content.as_ref().is_none_or(|v| *v.get_ref()),
            catch_up: Duration::from_secs(hours * 3600),
            catch_up_messages: messages,
        })
    }

    pub(super) fn refuse_discord_keys(&self, s: &ChannelSection) -> Result<(), ConfigError> {
        let spans = [
            (
                "catch_up_hours",
                s.catch_up_hours.as_ref().map(Spanned::span),
            ),
            (
                "catch_up_messages",
                s.catch_up_messages.as_ref().map(Spanned::span),
            ),
            (
                "message_content",
                s.message_content.as_ref().map(Spanned::span),
            ),
        ];
        for (key, span) in spans {
            if let Some(span) = span {
                return Err(self.err(
                    span,
                    format!(
                        "`{key}` is a Discord setting; [channels.{}] has no `{key}`",
                        self.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `allow_roles`: Discord's; role ids.
    pub(super) fn allow_roles(
        &self,
        list: Option<&Spanned<Vec<Spanned<toml::Value>>>>,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(list) = list else {
            return Ok(None);
        };
        if self.name != "discord" {
            return Err(self.err(
                list.span(),
                format!(
                    "`allow_roles` is a Discord setting ({} has no roles); list the people under allow_from",
                    self.defaults.label
                ),
            ));
        }
        list.get_ref()
            .iter()
            .map(|v| self.id(v, IdKind::Role))
            .collect::<Result<_, _>>()
            .map(Some)
    }
}
