//! A channel's config (`crate::config::ChannelSettings`) as the channel
//! layer's settings: the access policy (DM policy, allowlists, the groups
//! and guilds with their `require_mention`, `allow_from` and
//! `allow_roles`, the roles' `require_mention`) and the bridge's limits.
//! The owner always passes in their DM (the bridge checks), so
//! `allow_from` need not name them.

use std::collections::BTreeSet;

use pincer_channel::BridgeSettings;
use pincer_channel::access::{AccessPolicy, GroupRule, GuildRule};

use crate::config::ChannelSettings;

/// The bridge's settings for one channel's config.
pub fn bridge_settings(config: &ChannelSettings) -> BridgeSettings {
    let set = |ids: &Option<Vec<String>>| -> Option<BTreeSet<String>> {
        ids.as_ref().map(|ids| ids.iter().cloned().collect())
    };
    let access = AccessPolicy {
        dm: config.dm_policy,
        allow_from: config.allow_from.iter().cloned().collect(),
        groups: config
            .groups
            .iter()
            .map(|(id, group)| {
                let rule = GroupRule {
                    require_mention: group.require_mention,
                    allow_from: set(&group.allow_from),
                    allow_roles: set(&group.allow_roles),
                };
                (id.clone(), rule)
            })
            .collect(),
        guilds: config
            .guilds
            .iter()
            .map(|(id, guild)| {
                let rule = GuildRule {
                    require_mention: guild.require_mention,
                    allow_from: set(&guild.allow_from),
                    allow_roles: set(&guild.allow_roles),
                    channels: set(&guild.channels),
                    roles: guild
                        .roles
                        .iter()
                        .filter_map(|(role, r)| Some((role.clone(), r.require_mention?)))
                        .collect(),
                };
                (id.clone(), rule)
            })
            .collect(),
        require_mention: config.require_mention,
        ignore_bots: true,
    };
    BridgeSettings {
        access,
        owner: config.owner.clone(),
        context_messages: config.context_messages,
        max_attachment_bytes: config.max_attachment_bytes,
        preview: config.preview,
        max_messages_per_answer: config.max_messages_per_answer,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use pincer_channel::access::{GroupRule, GuildRule};

    use super::bridge_settings;
    use crate::home::Home;

    fn ids(list: &[&str]) -> Option<BTreeSet<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn guilds_channels_and_roles_reach_the_access_policy() {
        let config = crate::config::load::parse(
            &Home::at("/tmp/pincer-settings-test"),
            std::path::Path::new("/h/config.toml"),
            "[channels.discord]\nrequire_mention = false\n\
             [channels.discord.guilds.\"900\"]\nchannels = [\"1\"]\nallow_roles = [\"501\"]\n\
             [channels.discord.guilds.\"900\".roles.\"501\"]\nrequire_mention = true\n\
             [channels.discord.guilds.\"900\".roles.\"502\"]\nprompt = \"x\"\n\
             [channels.discord.groups.\"2\"]\nallow_from = [\"7\"]\n",
            &|| None,
        )
        .unwrap();
        let access = bridge_settings(&config.channels["discord"]).access;
        assert!(!access.require_mention);
        assert_eq!(
            access.guilds["900"],
            GuildRule {
                require_mention: None,
                allow_from: None,
                allow_roles: ids(&["501"]),
                channels: ids(&["1"]),
                roles: [("501".to_string(), true)].into(),
            },
            "a role that sets no require_mention is left out"
        );
        assert_eq!(
            access.groups["2"],
            GroupRule {
                require_mention: None,
                allow_from: ids(&["7"]),
                allow_roles: None,
            }
        );
    }
}
