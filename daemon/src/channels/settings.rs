//! A channel's config (`crate::config::ChannelSettings`) as the channel
//! layer's settings: the access policy (DM policy, allowlists, groups and
//! their `require_mention`) and the bridge's limits. The owner always
//! passes in their DM (the bridge checks), so `allow_from` need not name
//! them.

use pincer_channel::BridgeSettings;
use pincer_channel::access::{AccessPolicy, DmPolicy, GroupRule};

use crate::config::{ChannelSettings, DmPolicy as ConfigDmPolicy};

/// The bridge's settings for one channel's config.
pub fn bridge_settings(config: &ChannelSettings) -> BridgeSettings {
    let access = AccessPolicy {
        dm: match config.dm_policy {
            ConfigDmPolicy::Pairing => DmPolicy::Pairing,
            ConfigDmPolicy::Allowlist => DmPolicy::Allowlist,
            ConfigDmPolicy::Open => DmPolicy::Open,
            ConfigDmPolicy::Disabled => DmPolicy::Disabled,
        },
        allow_from: config.allow_from.iter().cloned().collect(),
        groups: config
            .groups
            .iter()
            .map(|(id, group)| {
                (
                    id.clone(),
                    GroupRule {
                        require_mention: Some(group.require_mention),
                        allow_roles: None,
                        allow_from: group
                            .allow_from
                            .as_ref()
                            .map(|ids| ids.iter().cloned().collect()),
                    },
                )
            })
            .collect(),
        guilds: Default::default(),
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
