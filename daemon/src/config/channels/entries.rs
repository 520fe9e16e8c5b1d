//! Which entries of `[channels.<name>]` a group message falls under, and
//! what their keys come to ([`ChatEntries`]): the routing layer reads the
//! agent, the tool layers and the prompt here, `/new`'s check the admins.
//! (Who is heard at all, `require_mention` and `allow_from`/`allow_roles`,
//! the bridge decides by the same rules from the policy
//! `crate::channels::settings` builds: `pincer_channel::access::groups`.)
//!
//! The entries: the chat's own (`groups."<chat id>"`: a Telegram group, a
//! Discord guild channel; a thread's chat is its parent channel), and on
//! Discord its guild's (`guilds."<guild id>"`) when that covers the chat —
//! it lists it in `channels` (no list: all), or the chat has an entry of
//! its own, which then inherits the guild's keys it leaves unset — and the
//! guild's `roles."<role id>"` entries of the roles the sender holds.
//!
//! Most specific wins: sender > role > channel > guild.
//!
//! - **agent**: the first of the sender's roles (in the file's order) that
//!   names one, else the channel entry's, else the guild's;
//! - **the chat's tool layer**: the channel entry's `tools`, else (none or
//!   empty) the guild's; each of the sender's roles with `tools` adds one
//!   more layer of the chat's own ([`ChatEntries::role_layers`]): like
//!   every layer it can only narrow, so a holder of two such roles keeps
//!   what both leave;
//! - **the sender's layer**: the channel entry's `senders."<id>"`, else
//!   the guild's;
//! - **prompt**: the guild's, the channel's and the roles' additions, in
//!   that order, each on its own paragraph;
//! - **admins**: the channel entry's when it lists any, else the guild's.

use super::{ChannelSettings, GroupSettings, GuildSettings, RoleSettings};
use crate::config::ToolLayer;

/// The entries one group message falls under (see the module docs); all
/// empty when its chat is not allowlisted.
#[derive(Debug, Clone, Default)]
pub struct ChatEntries<'a> {
    /// `groups."<chat id>"`.
    pub channel: Option<&'a GroupSettings>,
    /// `guilds."<guild id>"`, when it covers the chat.
    pub guild: Option<&'a GuildSettings>,
    /// The guild's `roles` entries of the sender's roles, in the file's
    /// order.
    pub roles: Vec<&'a RoleSettings>,
}

impl ChannelSettings {
    /// The entries of a message in group `chat` of `guild` (Discord) from
    /// a sender holding `roles`.
    pub fn entries(&self, guild: Option<&str>, chat: &str, roles: &[String]) -> ChatEntries<'_> {
        let channel = self.groups.get(chat);
        let guild = guild
            .and_then(|g| self.guilds.get(g))
            .filter(|g| channel.is_some() || g.lists(chat));
        let roles = guild
            .map(|g| {
                g.roles
                    .iter()
                    .filter(|(id, _)| roles.contains(id))
                    .map(|(_, r)| r)
                    .collect()
            })
            .unwrap_or_default();
        ChatEntries {
            channel,
            guild,
            roles,
        }
    }

    /// The guild whose `channels` list names `chat`, if one does: how the
    /// config knows the guild of a channel without a message from it.
    pub fn guild_listing(&self, chat: &str) -> Option<&str> {
        self.guilds
            .iter()
            .find(|(_, g)| {
                g.channels
                    .as_ref()
                    .is_some_and(|ids| ids.iter().any(|c| c == chat))
            })
            .map(|(id, _)| id.as_str())
    }
}

impl ChatEntries<'_> {
    /// Whether the chat is allowlisted (by its own entry or its guild's).
    pub fn listened(&self) -> bool {
        self.channel.is_some() || self.guild.is_some()
    }

    /// The agent the entries name: a role's, the channel's, the guild's.
    pub fn agent(&self) -> Option<&str> {
        self.roles
            .iter()
            .find_map(|r| r.agent.as_deref())
            .or_else(|| self.channel.and_then(|c| c.agent.as_deref()))
            .or_else(|| self.guild.and_then(|g| g.agent.as_deref()))
    }

    /// The chat's layer: the channel entry's, else the guild's; empty
    /// without either.
    pub fn tools(&self) -> ToolLayer {
        self.channel
            .map(|c| &c.tools)
            .filter(|t| !t.is_empty())
            .or(self.guild.map(|g| &g.tools))
            .cloned()
            .unwrap_or_default()
    }

    /// One more layer of the chat's own per role of the sender that sets
    /// `tools`.
    pub fn role_layers(&self) -> Vec<ToolLayer> {
        self.roles
            .iter()
            .filter(|r| !r.tools.is_empty())
            .map(|r| r.tools.clone())
            .collect()
    }

    /// `user`'s layer here: the channel entry's, else the guild's.
    pub fn sender_layer(&self, user: &str) -> Option<&ToolLayer> {
        self.channel
            .and_then(|c| c.senders.get(user))
            .or_else(|| self.guild.and_then(|g| g.senders.get(user)))
    }

    /// The prompt additions: the guild's, the channel's, the roles'.
    pub fn prompt(&self) -> Option<String> {
        let parts: Vec<&str> = self
            .guild
            .and_then(|g| g.prompt.as_deref())
            .into_iter()
            .chain(self.channel.and_then(|c| c.prompt.as_deref()))
            .chain(self.roles.iter().filter_map(|r| r.prompt.as_deref()))
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Who besides the owner may `/new` here.
    pub fn admins(&self) -> &[String] {
        match (self.channel, self.guild) {
            (Some(c), _) if !c.admins.is_empty() => &c.admins,
            (_, Some(g)) => &g.admins,
            (Some(c), None) => &c.admins,
            (None, None) => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::ChannelSettings;
    use crate::config::ToolLayer;
    use crate::home::Home;

    const GUILD: &str = "[agents.main]\n[agents.friends]\n[agents.helper]\n[agents.mods]\n\
        [channels.discord]\n\
        [channels.discord.guilds.\"900\"]\n\
        channels = [\"1\", \"2\"]\n\
        agent = \"friends\"\n\
        admins = [\"70\"]\n\
        tools = { deny = [\"web_fetch\"] }\n\
        prompt = \"Guild.\"\n\
        [channels.discord.guilds.\"900\".roles.\"502\"]\n\
        tools = { deny = [\"message\"] }\n\
        prompt = \"Regular.\"\n\
        [channels.discord.guilds.\"900\".roles.\"501\"]\n\
        agent = \"mods\"\n\
        tools = { deny = [\"memory_get\"] }\n\
        prompt = \"Moderator.\"\n\
        [channels.discord.guilds.\"900\".roles.\"503\"]\n\
        agent = \"helper\"\n\
        [channels.discord.guilds.\"900\".senders.\"7\"]\n\
        tools = { deny = [\"read\"] }\n\
        [channels.discord.groups.\"2\"]\n\
        agent = \"helper\"\n\
        tools = { deny = [\"exec\"] }\n\
        prompt = \"Channel.\"\n\
        [channels.discord.groups.\"2\".senders.\"7\"]\n\
        tools = { deny = [\"write\"] }\n\
        [channels.discord.groups.\"3\"]\n\
        admins = [\"71\"]\n";

    fn discord() -> ChannelSettings {
        let home = Home::at("/tmp/pincer-entries-test");
        crate::config::load::parse(
            &home,
            std::path::Path::new("/h/config.toml"),
            GUILD,
            &|| None,
        )
        .unwrap()
        .channels["discord"]
            .clone()
    }

    fn roles(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn deny(tool: &str) -> ToolLayer {
        ToolLayer {
            deny: vec![tool.into()],
            ..Default::default()
        }
    }

    #[test]
    fn the_guild_covers_its_listed_channels_and_the_channels_with_an_entry() {
        let d = discord();
        assert!(d.entries(Some("900"), "1", &[]).listened(), "listed");
        assert!(!d.entries(Some("900"), "4", &[]).listened(), "not listed");
        let own = d.entries(Some("900"), "3", &[]);
        assert!(own.channel.is_some() && own.guild.is_some(), "inherits");
        let elsewhere = d.entries(Some("901"), "3", &[]);
        assert!(elsewhere.channel.is_some() && elsewhere.guild.is_none());
        assert!(!d.entries(None, "1", &[]).listened(), "no guild, no entry");
        assert_eq!(d.guild_listing("2"), Some("900"));
        assert_eq!(d.guild_listing("3"), None);
    }

    #[test]
    fn the_agent_is_a_roles_then_the_channels_then_the_guilds() {
        let d = discord();
        let agent = |chat: &str, r: &[&str]| {
            d.entries(Some("900"), chat, &roles(r))
                .agent()
                .map(str::to_string)
        };
        assert_eq!(agent("1", &[]).as_deref(), Some("friends"));
        assert_eq!(agent("2", &[]).as_deref(), Some("helper"));
        assert_eq!(
            agent("1", &["502"]).as_deref(),
            Some("friends"),
            "a role without agent"
        );
        assert_eq!(
            agent("2", &["501"]).as_deref(),
            Some("mods"),
            "a role over the channel"
        );
        // Several roles naming agents: the first the file lists.
        assert_eq!(agent("1", &["503", "501"]).as_deref(), Some("mods"));
        assert_eq!(agent("4", &["501"]), None, "an unlisted channel: nothing");
    }

    #[test]
    fn layers_prompt_and_admins_most_specific_wins() {
        let d = discord();
        let guild_only = d.entries(Some("900"), "1", &roles(&["501", "502", "9"]));
        assert_eq!(guild_only.tools(), deny("web_fetch"));
        assert_eq!(
            guild_only.role_layers(),
            [deny("message"), deny("memory_get")],
            "each role's layer, in the file's order"
        );
        assert_eq!(guild_only.sender_layer("7"), Some(&deny("read")));
        assert_eq!(
            guild_only.prompt().as_deref(),
            Some("Guild.\n\nRegular.\n\nModerator.")
        );
        let channel = d.entries(Some("900"), "2", &roles(&["502"]));
        assert_eq!(
            channel.tools(),
            deny("exec"),
            "the channel's over the guild's"
        );
        assert_eq!(channel.sender_layer("7"), Some(&deny("write")));
        assert_eq!(channel.sender_layer("8"), None);
        assert_eq!(
            channel.prompt().as_deref(),
            Some("Guild.\n\nChannel.\n\nRegular.")
        );
        // A channel entry without tools takes its guild's.
        let plain = d.entries(Some("900"), "3", &[]);
        assert_eq!(plain.tools(), deny("web_fetch"));
        assert_eq!(plain.admins(), ["71"], "the channel's own admins");
        assert_eq!(d.entries(Some("900"), "1", &[]).admins(), ["70"]);
        assert!(d.may_reset_group(Some("900"), "1", "70"));
        assert!(!d.may_reset_group(Some("900"), "3", "70"));
        assert!(d.may_reset_group(Some("901"), "3", "71"));
        // Not listened to: nothing.
        let none = d.entries(Some("900"), "4", &roles(&["501"]));
        assert_eq!(none.tools(), ToolLayer::default());
        assert!(none.role_layers().is_empty());
        assert_eq!(none.prompt(), None);
        assert!(none.admins().is_empty());
    }
}
