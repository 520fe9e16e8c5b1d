//! The ids the channel tables hold, as values (`owner`, `allow_from`,
//! `admins`, `allow_roles`, `channels`) or as table keys (`groups."…"`,
//! `senders."…"`, `guilds."…"`, `roles."…"`): strings of digits (a
//! Telegram group's may be negative), a TOML integer refused with the
//! string to write instead.

use std::ops::Range;

use toml::Spanned;

use super::super::locate::ConfigError;
use super::Parser;

impl Parser<'_> {
    pub(super) fn user_ids(
        &self,
        list: &[Spanned<toml::Value>],
    ) -> Result<Vec<String>, ConfigError> {
        list.iter().map(|v| self.id(v, IdKind::User)).collect()
    }

    /// A user id written as a value: a string of digits.
    pub(super) fn user_id(&self, v: &Spanned<toml::Value>) -> Result<String, ConfigError> {
        self.id(v, IdKind::User)
    }

    /// An id written as a value: a string of digits.
    pub(super) fn id(&self, v: &Spanned<toml::Value>, kind: IdKind) -> Result<String, ConfigError> {
        let text = match v.get_ref() {
            toml::Value::String(s) => s.trim(),
            toml::Value::Integer(n) => {
                return Err(self.err(v.span(), format!("write ids as strings: \"{n}\", not {n}")));
            }
            _ => {
                return Err(self.err(
                    v.span(),
                    format!(
                        "a {} {} id is a string of digits, e.g. \"{}\"",
                        self.defaults.label,
                        kind.noun(),
                        kind.example()
                    ),
                ));
            }
        };
        self.check_id(text, kind)
            .map_err(|why| self.err(v.span(), why))
    }

    /// An id written as a table key (`senders."42"`, `groups."-100123"`,
    /// `guilds."987"`, `roles."654"`).
    pub(super) fn key(
        &self,
        id: &str,
        span: Range<usize>,
        kind: IdKind,
    ) -> Result<String, ConfigError> {
        self.check_id(id.trim(), kind)
            .map_err(|why| self.err(span, format!("{}.\"{id}\": {why}", kind.table())))
    }

    fn check_id(&self, id: &str, kind: IdKind) -> Result<String, String> {
        let label = self.defaults.label;
        if id.is_empty() {
            return Err("an empty id matches nobody".into());
        }
        let digits = match kind {
            IdKind::Chat => id.strip_prefix('-').unwrap_or(id),
            _ => id,
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "`{id}` is not a {label} {} id: write the number, e.g. \"{}\"",
                kind.noun(),
                kind.example()
            ));
        }
        Ok(id.to_string())
    }
}

/// What an id names, for its check and its error.
#[derive(Debug, Clone, Copy)]
pub(super) enum IdKind {
    User,
    /// A group's chat id (negative on Telegram).
    Chat,
    Guild,
    /// A guild channel (`channels = [...]`).
    Channel,
    Role,
}

impl IdKind {
    fn noun(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Chat => "chat",
            Self::Guild => "guild",
            Self::Channel => "channel",
            Self::Role => "role",
        }
    }

    fn example(self) -> &'static str {
        match self {
            Self::User => "123456789",
            Self::Chat => "-1001234567890",
            Self::Guild | Self::Channel | Self::Role => "123456789012345678",
        }
    }

    /// The table whose keys are such ids.
    fn table(self) -> &'static str {
        match self {
            Self::User => "senders",
            Self::Chat => "groups",
            Self::Guild => "guilds",
            Self::Channel => "channels",
            Self::Role => "roles",
        }
    }
}
