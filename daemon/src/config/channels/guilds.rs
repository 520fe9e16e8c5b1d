//! Discord guilds (SPEC §11): `[channels.discord.guilds."<guild id>"]`
//! into [`GuildSettings`], each checked as a group entry is.
//!
//! ```toml
//! [channels.discord.guilds."987654321098765432"]   # an allowlisted guild
//! channels = ["111111111111111111"]  # listened to without an entry (absent: all)
//! agent = "friends"
//! require_mention = true             # else the channel-wide one
//! allow_from = ["42"]                # who may summon the agent; others are context
//! allow_roles = ["555555555555555555"]   # …and the holders of these roles
//! admins = ["42"]                    # who besides the owner may /new and /reset
//! tools = { deny = ["web_fetch"] }   # the guild's policy layer (no `ask`)
//! prompt = "This is the Acme server."
//! [channels.discord.guilds."987654321098765432".roles."555555555555555555"]
//! agent = "helper"                   # who answers this role's holders
//! require_mention = false            # they need no mention
//! tools = { deny = ["memory_get"] }  # one more layer of the chat's own
//! prompt = "The sender is a moderator."
//! [channels.discord.guilds."987654321098765432".senders."42"]
//! tools = { deny = ["message"] }     # this sender's layer in the guild
//! ```
//!
//! How a guild's keys combine with its channels' entries
//! (`[channels.discord.groups."<channel id>"]`) and the sender's roles:
//! [`super::ChatEntries`].

use std::collections::BTreeMap;

use super::super::file::{GuildRoleSection, GuildSection};
use super::super::locate::ConfigError;
use super::super::tools::layer;
use super::{IdKind, Parser, prompt};
use crate::config::ToolLayer;

/// One allowlisted guild.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GuildSettings {
    /// `agent`: who answers in its channels (a channel entry's or a role's
    /// agent wins, and a peer binding: `routing`).
    pub agent: Option<String>,
    /// `require_mention`; `None`: the channel-wide one.
    pub require_mention: Option<bool>,
    /// `allow_from`: when set (or `allow_roles` is), only these senders
    /// (and the holders of `allow_roles`) can summon the agent.
    pub allow_from: Option<Vec<String>>,
    /// `allow_roles`: role ids whose holders can summon the agent.
    pub allow_roles: Option<Vec<String>>,
    /// `admins`: who besides the owner may start a new conversation in its
    /// channels.
    pub admins: Vec<String>,
    /// `tools`: the chat layer of its channels that have no `tools` of
    /// their own.
    pub tools: ToolLayer,
    /// `prompt`: added to the system prompt of its channels' sessions,
    /// before the channel's and the roles' additions.
    pub prompt: Option<String>,
    /// `channels`: the channels listened to without an entry of their own;
    /// `None`: all of the guild's.
    pub channels: Option<Vec<String>>,
    /// `roles."<role id>"`, in the order the file lists them (which role
    /// names the agent when a sender holds several).
    pub roles: Vec<(String, RoleSettings)>,
    /// `senders."<user id>"`: per-sender layers in its channels (a channel
    /// entry's own `senders` entry for the same person wins).
    pub senders: BTreeMap<String, ToolLayer>,
}

impl GuildSettings {
    /// Whether its entry covers `chat`, a channel without an entry.
    pub fn lists(&self, chat: &str) -> bool {
        self.channels
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|c| c == chat))
    }
}

/// `roles."<role id>"` of a guild: what holding the role changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RoleSettings {
    /// `agent`: who answers the role's holders (above the channel's).
    pub agent: Option<String>,
    /// `require_mention` for the role's holders (above the channel's).
    pub require_mention: Option<bool>,
    /// `tools`: one more layer of the chat's own for the holders.
    pub tools: ToolLayer,
    /// `prompt`: added after the guild's and the channel's.
    pub prompt: Option<String>,
}

impl Parser<'_> {
    pub(super) fn guild(&self, g: &GuildSection) -> Result<GuildSettings, ConfigError> {
        let allow_from = match &g.allow_from {
            Some(list) => Some(self.user_ids(list)?),
            None => None,
        };
        let channels = match &g.channels {
            Some(list) => Some(
                list.iter()
                    .map(|v| self.id(v, IdKind::Channel))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        };
        let mut roles: Vec<_> = g.roles.iter().collect();
        roles.sort_by_key(|(_, r)| r.span().start);
        let roles = roles
            .into_iter()
            .map(|(id, r)| {
                Ok((
                    self.key(id, r.span(), IdKind::Role)?,
                    self.role(r.get_ref())?,
                ))
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(GuildSettings {
            agent: self.agent(g.agent.as_ref())?,
            require_mention: g.require_mention,
            allow_from,
            allow_roles: self.allow_roles(g.allow_roles.as_ref())?,
            admins: self.user_ids(&g.admins)?,
            tools: layer(self.loc, self.names, &g.tools)?,
            prompt: prompt(g.prompt.as_deref()),
            channels,
            roles,
            senders: self.senders(&g.senders)?,
        })
    }

    fn role(&self, r: &GuildRoleSection) -> Result<RoleSettings, ConfigError> {
        Ok(RoleSettings {
            agent: self.agent(r.agent.as_ref())?,
            require_mention: r.require_mention,
            tools: layer(self.loc, self.names, &r.tools)?,
            prompt: prompt(r.prompt.as_deref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{Config, ConfigError};
    use crate::home::Home;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::config::load::parse(
            &Home::at("/tmp/pincer-guilds-test"),
            Path::new("/h/config.toml"),
            text,
            &|| None,
        )
    }

    /// The problem's line, dotted key and reason.
    fn located(text: &str) -> (usize, String, String) {
        match parse(text) {
            Err(ConfigError::Invalid(p)) => (p.line, p.key.unwrap_or_default(), p.reason),
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    const AGENTS: &str = "[agents.main]\n[agents.friends]\n";

    #[test]
    fn the_bot_listens_in_the_groups_the_listed_channels_and_the_open_guilds() {
        let c = parse(&format!(
            "{AGENTS}[channels.discord]\n\
             [channels.discord.guilds.\"987\"]\n\
             channels = [\"111\", \"113\"]\n\
             [channels.discord.guilds.\"988\"]\n\
             [channels.discord.groups.\"111\"]\n\
             [channels.discord.groups.\"112\"]\n"
        ))
        .unwrap();
        let (chats, open) = c.channels["discord"].listened();
        assert_eq!(chats, ["111", "112", "113"], "each once");
        assert_eq!(open, ["988"]);
    }

    #[test]
    fn every_guild_key_is_read() {
        let c = parse(&format!(
            "{AGENTS}[channels.discord]\n\
             [channels.discord.guilds.\"987\"]\n\
             channels = [\"111\", \" 112 \"]\n\
             agent = \"friends\"\n\
             require_mention = false\n\
             allow_from = [\"42\"]\n\
             allow_roles = [\"555\"]\n\
             admins = [\"43\"]\n\
             tools = {{ deny = [\"web_fetch\"] }}\n\
             prompt = \" Acme. \"\n\
             [channels.discord.guilds.\"987\".roles.\"556\"]\n\
             prompt = \"Second in the file.\"\n\
             [channels.discord.guilds.\"987\".roles.\"555\"]\n\
             agent = \"main\"\n\
             require_mention = true\n\
             tools = {{ deny = [\"memory_get\"] }}\n\
             [channels.discord.guilds.\"987\".senders.\"42\"]\n\
             tools = {{ deny = [\"message\"] }}\n\
             [channels.discord.guilds.\"988\"]\n\
             [channels.discord.groups.\"111\"]\n\
             allow_roles = [\"555\"]\n"
        ))
        .unwrap();
        let d = &c.channels["discord"];
        let g = &d.guilds["987"];
        assert_eq!(
            g.channels.as_deref(),
            Some(&["111".to_string(), "112".to_string()][..])
        );
        assert_eq!(g.agent.as_deref(), Some("friends"));
        assert_eq!(g.require_mention, Some(false));
        assert_eq!(g.allow_from.as_deref(), Some(&["42".to_string()][..]));
        assert_eq!(g.allow_roles.as_deref(), Some(&["555".to_string()][..]));
        assert_eq!(g.admins, ["43"]);
        assert_eq!(g.tools.deny, ["web_fetch"]);
        assert_eq!(g.prompt.as_deref(), Some("Acme."));
        let roles: Vec<&str> = g.roles.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(roles, ["556", "555"], "the file's order, not the ids'");
        let (_, mods) = &g.roles[1];
        assert_eq!(mods.agent.as_deref(), Some("main"));
        assert_eq!(mods.require_mention, Some(true));
        assert_eq!(mods.tools.deny, ["memory_get"]);
        assert_eq!(g.roles[0].1.prompt.as_deref(), Some("Second in the file."));
        assert_eq!(g.senders["42"].deny, ["message"]);
        let empty = &d.guilds["988"];
        assert_eq!(empty, &GuildSettings::default(), "every key unset");
        assert!(empty.lists("anything"), "no list: every channel");
        assert!(g.lists("112") && !g.lists("113"));
        assert_eq!(
            d.groups["111"].allow_roles.as_deref(),
            Some(&["555".to_string()][..])
        );
    }

    #[test]
    fn bad_guild_entries_are_located() {
        let g = "[channels.discord]\n[channels.discord.guilds.\"987\"]\n";
        let cases: &[(String, usize, &str, &str)] = &[
            (
                format!("{AGENTS}[channels.telegram.guilds.\"987\"]\nagent = \"main\"\n"),
                3,
                "channels.telegram.guilds.987",
                "`guilds` is a Discord setting; [channels.telegram] has no guilds",
            ),
            (
                format!("{AGENTS}[channels.telegram.groups.\"-100\"]\nallow_roles = [\"5\"]\n"),
                4,
                "channels.telegram.groups.-100.allow_roles",
                "`allow_roles` is a Discord setting (Telegram has no roles)",
            ),
            (
                format!("{AGENTS}[channels.discord.guilds.\"acme\"]\n"),
                3,
                "channels.discord.guilds.acme",
                "guilds.\"acme\": `acme` is not a Discord guild id: write the number",
            ),
            (
                format!("{AGENTS}[channels.discord.guilds.\"-987\"]\n"),
                3,
                "channels.discord.guilds.-987",
                "is not a Discord guild id",
            ),
            (
                format!("{AGENTS}{g}agent = \"nobody\"\n"),
                5,
                "channels.discord.guilds.987.agent",
                "no agent `nobody` (agents: friends, main)",
            ),
            (
                format!("{AGENTS}{g}channels = [111]\n"),
                5,
                "channels.discord.guilds.987.channels",
                "write ids as strings: \"111\", not 111",
            ),
            (
                format!("{AGENTS}{g}channels = [\"#general\"]\n"),
                5,
                "channels.discord.guilds.987.channels",
                "`#general` is not a Discord channel id",
            ),
            (
                format!("{AGENTS}{g}allow_roles = [\"mods\"]\n"),
                5,
                "channels.discord.guilds.987.allow_roles",
                "`mods` is not a Discord role id",
            ),
            (
                format!("{AGENTS}{g}allow_roles = [5]\n"),
                5,
                "channels.discord.guilds.987.allow_roles",
                "write ids as strings: \"5\"",
            ),
            (
                format!("{AGENTS}{g}tools = {{ ask = [\"exec\"] }}\n"),
                5,
                "channels.discord.guilds.987.tools",
                "`ask` is set per agent",
            ),
            (
                format!("{AGENTS}{g}chanels = []\n"),
                5,
                "channels.discord.guilds.987.chanels",
                "did you mean `channels`?",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.discord.guilds.\"987\".roles.\"mods\"]\nagent = \"main\"\n"
                ),
                5,
                "channels.discord.guilds.987.roles.mods",
                "roles.\"mods\": `mods` is not a Discord role id",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.discord.guilds.\"987\".roles.\"5\"]\nagent = \"ghost\"\n"
                ),
                6,
                "channels.discord.guilds.987.roles.5.agent",
                "no agent `ghost`",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.discord.guilds.\"987\".roles.\"5\"]\ntools = {{ deny = [\"group:nope\"] }}\n"
                ),
                6,
                "channels.discord.guilds.987.roles.5.tools",
                "unknown tool group",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.discord.guilds.\"987\".roles.\"5\"]\nallow_from = [\"1\"]\n"
                ),
                6,
                "channels.discord.guilds.987.roles.5.allow_from",
                "unknown key `allow_from`",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.discord.guilds.\"987\".senders.\"bob\"]\ntools = {{ deny = [\"exec\"] }}\n"
                ),
                5,
                "channels.discord.guilds.987.senders.bob",
                "senders.\"bob\": `bob` is not a Discord user id",
            ),
        ];
        for (text, line, key, why) in cases {
            let (got_line, got_key, got_why) = located(text);
            assert_eq!(
                (got_line, got_key.as_str()),
                (*line, *key),
                "{text}: {got_why}"
            );
            assert!(got_why.contains(why), "{text}: {got_why}");
        }
    }
}
