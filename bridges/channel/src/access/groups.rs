//! Who is heard in a group (SPEC §11): the rules of allowlisted groups,
//! guild channels and guilds, and the one function that finds the rule of
//! a group message and decides it ([`decide_group`]).
//!
//! # Which rule
//!
//! A group message is read under the first of:
//!
//! 1. the entry of its chat ([`AccessPolicy::groups`], by `chat_id`: a
//!    Telegram group, a Discord guild channel; a thread's `chat_id` is its
//!    parent's, so threads and forum posts follow their parent channel);
//! 2. the entry of its guild ([`AccessPolicy::guilds`], by `guild_id`),
//!    when the guild's [`GuildRule::channels`] lets this channel in (no
//!    list: every channel of the guild);
//!
//! and a message under neither is ignored silently (not even kept as
//! context).
//!
//! # Which keys
//!
//! A channel entry's keys override its guild's; a key the channel entry
//! leaves unset is the guild's (when the message's guild has an entry),
//! else the channel-wide default. Most specific wins: sender > role >
//! channel > guild.
//!
//! - `require_mention`: the sender's roles' (from the guild entry's
//!   [`GuildRule::roles`]; when their roles disagree, `true` wins: one of
//!   their roles asks to wait for a mention), else the channel entry's,
//!   else the guild's, else [`AccessPolicy::require_mention`]. With it
//!   only a message that mentions the bot (or replies to it) is answered;
//!   the others are context.
//! - who may summon the agent: the `allow_from` ids and the `allow_roles`
//!   role ids of the channel entry when it sets either, else the guild's.
//!   When either is set, a sender passes if their id is in `allow_from` or
//!   one of their roles is in `allow_roles`; everyone else is context only.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{AccessPolicy, Decision};
use crate::message::Inbound;

/// One allowlisted group or guild channel: its own keys, each `None` when
/// it leaves it to its guild (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRule {
    /// Only a message that mentions the bot (or replies to it) is
    /// answered; `None`: its guild's, else the channel's.
    #[serde(default)]
    pub require_mention: Option<bool>,
    /// When set (or `allow_roles` is), only these senders can summon the
    /// agent here; the others' messages are kept as context only.
    #[serde(default)]
    pub allow_from: Option<BTreeSet<String>>,
    /// When set (or `allow_from` is), senders holding one of these roles
    /// can summon the agent here too (Discord).
    #[serde(default)]
    pub allow_roles: Option<BTreeSet<String>>,
}

/// One allowlisted guild (a Discord server): the rule of its channels that
/// have no entry of their own, and the keys its channel entries inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuildRule {
    /// `None`: the channel-wide `require_mention`.
    #[serde(default)]
    pub require_mention: Option<bool>,
    #[serde(default)]
    pub allow_from: Option<BTreeSet<String>>,
    #[serde(default)]
    pub allow_roles: Option<BTreeSet<String>>,
    /// The channels of the guild listened to without an entry of their
    /// own; `None`: all of them.
    #[serde(default)]
    pub channels: Option<BTreeSet<String>>,
    /// Per-role `require_mention`, by role id (roles without one are left
    /// out).
    #[serde(default)]
    pub roles: BTreeMap<String, bool>,
}

/// The entries one group message falls under.
struct Entries<'p> {
    channel: Option<&'p GroupRule>,
    guild: Option<&'p GuildRule>,
}

/// The entries of `msg`'s chat and guild; `None` when it is not listened
/// to (the module docs' "Which rule").
fn entries<'p>(policy: &'p AccessPolicy, msg: &Inbound) -> Option<Entries<'p>> {
    let channel = policy.groups.get(&msg.chat_id);
    let guild = msg.guild_id.as_ref().and_then(|g| policy.guilds.get(g));
    let guild_listens = guild.is_some_and(|g| {
        g.channels
            .as_ref()
            .is_none_or(|ids| ids.contains(&msg.chat_id))
    });
    (channel.is_some() || guild_listens).then_some(Entries { channel, guild })
}

impl AccessPolicy {
    /// Whether a group message's chat (or guild) is allowlisted: false
    /// means it is ignored silently.
    pub fn listens_to_group(&self, msg: &Inbound) -> bool {
        entries(self, msg).is_some()
    }
}

/// Decides a group (or thread) message: see the module docs.
pub(super) fn decide_group(policy: &AccessPolicy, msg: &Inbound) -> Decision {
    let Some(Entries { channel, guild }) = entries(policy, msg) else {
        return Decision::Ignore;
    };
    let roles = &msg.sender_roles;
    let role_mention = guild.and_then(|g| {
        let set: Vec<bool> = roles
            .iter()
            .filter_map(|r| g.roles.get(r))
            .copied()
            .collect();
        (!set.is_empty()).then(|| set.contains(&true))
    });
    let require_mention = role_mention
        .or(channel.and_then(|c| c.require_mention))
        .or(guild.and_then(|g| g.require_mention))
        .unwrap_or(policy.require_mention);
    let lists = match channel {
        Some(c) if c.allow_from.is_some() || c.allow_roles.is_some() => {
            Some((&c.allow_from, &c.allow_roles))
        }
        _ => guild
            .filter(|g| g.allow_from.is_some() || g.allow_roles.is_some())
            .map(|g| (&g.allow_from, &g.allow_roles)),
    };
    let may_summon = lists.is_none_or(|(ids, role_ids)| {
        ids.as_ref().is_some_and(|ids| ids.contains(&msg.sender.id))
            || role_ids
                .as_ref()
                .is_some_and(|set| roles.iter().any(|r| set.contains(r)))
    });
    if !may_summon || (require_mention && !msg.mentions_bot) {
        Decision::PassAsContext
    } else {
        Decision::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Pairing;
    use crate::message::{ChatKind, Sender};

    fn set(ids: &[&str]) -> Option<BTreeSet<String>> {
        Some(ids.iter().map(|s| s.to_string()).collect())
    }

    /// A Discord message in channel `chat` of guild `guild`.
    fn msg(
        guild: Option<&str>,
        chat: &str,
        sender: &str,
        roles: &[&str],
        mentions: bool,
    ) -> Inbound {
        Inbound {
            channel: "discord".into(),
            account: "default".into(),
            kind: ChatKind::Group,
            chat_id: chat.into(),
            thread_id: None,
            guild_id: guild.map(Into::into),
            sender_roles: roles.iter().map(|r| r.to_string()).collect(),
            sender: Sender {
                id: sender.into(),
                name: sender.into(),
                is_bot: false,
            },
            text: "hello".into(),
            mentions_bot: mentions,
            reply_to: None,
            attachments: vec![],
            message_id: "1".into(),
        }
    }

    fn decide(policy: &AccessPolicy, m: &Inbound) -> Decision {
        let mut never = |_: &mut [u8]| panic!("no code in a group");
        Pairing::default().decide(policy, m, 0, &mut never)
    }

    fn guild_policy(rule: GuildRule) -> AccessPolicy {
        let mut p = AccessPolicy::default();
        p.guilds.insert("G".into(), rule);
        p
    }

    #[test]
    fn a_guild_entry_listens_to_every_channel_of_its_guild_and_no_other() {
        let p = guild_policy(GuildRule::default());
        assert_eq!(
            decide(&p, &msg(Some("G"), "c1", "u", &[], true)),
            Decision::Pass
        );
        assert_eq!(
            decide(&p, &msg(Some("G"), "c2", "u", &[], false)),
            Decision::PassAsContext
        );
        assert_eq!(
            decide(&p, &msg(Some("H"), "c1", "u", &[], true)),
            Decision::Ignore
        );
        assert_eq!(
            decide(&p, &msg(None, "c1", "u", &[], true)),
            Decision::Ignore,
            "no guild"
        );
        assert!(p.listens_to_group(&msg(Some("G"), "c9", "u", &[], false)));
        assert!(!p.listens_to_group(&msg(Some("H"), "c9", "u", &[], false)));
    }

    #[test]
    fn a_guilds_channel_list_restricts_where_it_listens() {
        let p = guild_policy(GuildRule {
            channels: set(&["c1"]),
            ..Default::default()
        });
        assert_eq!(
            decide(&p, &msg(Some("G"), "c1", "u", &[], true)),
            Decision::Pass
        );
        assert_eq!(
            decide(&p, &msg(Some("G"), "c2", "u", &[], true)),
            Decision::Ignore
        );
        // A channel with its own entry is listened to whatever the list.
        let mut p = p;
        p.groups.insert("c2".into(), GroupRule::default());
        assert_eq!(
            decide(&p, &msg(Some("G"), "c2", "u", &[], true)),
            Decision::Pass
        );
    }

    #[test]
    fn a_channel_entry_needs_no_guild_entry() {
        let mut p = AccessPolicy::default();
        p.groups.insert("c1".into(), GroupRule::default());
        assert_eq!(
            decide(&p, &msg(Some("G"), "c1", "u", &[], true)),
            Decision::Pass
        );
        assert_eq!(
            decide(&p, &msg(Some("G"), "c2", "u", &[], true)),
            Decision::Ignore
        );
    }

    #[test]
    fn a_thread_follows_its_parent_channel() {
        let p = guild_policy(GuildRule {
            channels: set(&["parent"]),
            require_mention: Some(false),
            ..Default::default()
        });
        let mut m = msg(Some("G"), "parent", "u", &[], false);
        m.kind = ChatKind::Thread;
        m.thread_id = Some("thread".into());
        assert_eq!(decide(&p, &m), Decision::Pass);
        m.chat_id = "other".into();
        assert_eq!(decide(&p, &m), Decision::Ignore);
    }

    #[test]
    fn require_mention_most_specific_wins() {
        let mut p = guild_policy(GuildRule {
            require_mention: Some(false),
            roles: [("quiet".to_string(), true), ("chatty".to_string(), false)].into(),
            ..Default::default()
        });
        p.groups.insert(
            "strict".into(),
            GroupRule {
                require_mention: Some(true),
                ..Default::default()
            },
        );
        p.groups.insert("plain".into(), GroupRule::default());
        let unmentioned =
            |chat: &str, roles: &[&str]| decide(&p, &msg(Some("G"), chat, "u", roles, false));
        // The guild's, in a channel without an entry and in one whose
        // entry leaves the key unset.
        assert_eq!(unmentioned("any", &[]), Decision::Pass);
        assert_eq!(unmentioned("plain", &[]), Decision::Pass);
        // The channel's over the guild's.
        assert_eq!(unmentioned("strict", &[]), Decision::PassAsContext);
        // A role's over the channel's, both ways.
        assert_eq!(unmentioned("strict", &["chatty"]), Decision::Pass);
        assert_eq!(unmentioned("any", &["quiet"]), Decision::PassAsContext);
        // Roles that disagree: the mention is required.
        assert_eq!(
            unmentioned("any", &["chatty", "quiet"]),
            Decision::PassAsContext
        );
        // A role without an entry changes nothing.
        assert_eq!(unmentioned("strict", &["other"]), Decision::PassAsContext);
        // Nobody sets it: the channel-wide default (true).
        let mut p = guild_policy(GuildRule::default());
        assert_eq!(
            decide(&p, &msg(Some("G"), "c", "u", &[], false)),
            Decision::PassAsContext
        );
        p.require_mention = false;
        assert_eq!(
            decide(&p, &msg(Some("G"), "c", "u", &[], false)),
            Decision::Pass
        );
    }

    #[test]
    fn allow_from_and_allow_roles_let_either_summon() {
        let p = guild_policy(GuildRule {
            allow_from: set(&["boss"]),
            allow_roles: set(&["mods"]),
            ..Default::default()
        });
        let summon =
            |sender: &str, roles: &[&str]| decide(&p, &msg(Some("G"), "c", sender, roles, true));
        assert_eq!(summon("boss", &[]), Decision::Pass);
        assert_eq!(summon("someone", &["mods"]), Decision::Pass);
        assert_eq!(summon("someone", &["members"]), Decision::PassAsContext);
        assert_eq!(summon("someone", &[]), Decision::PassAsContext);
        // Roles alone.
        let p = guild_policy(GuildRule {
            allow_roles: set(&["mods"]),
            ..Default::default()
        });
        assert_eq!(
            decide(&p, &msg(Some("G"), "c", "boss", &[], true)),
            Decision::PassAsContext
        );
        assert_eq!(
            decide(&p, &msg(Some("G"), "c", "x", &["mods"], true)),
            Decision::Pass
        );
    }

    #[test]
    fn a_channels_lists_override_its_guilds() {
        let mut p = guild_policy(GuildRule {
            allow_roles: set(&["mods"]),
            ..Default::default()
        });
        p.groups.insert(
            "open".into(),
            GroupRule {
                allow_from: set(&["guest"]),
                ..Default::default()
            },
        );
        p.groups.insert("inherits".into(), GroupRule::default());
        let summon = |chat: &str, sender: &str, roles: &[&str]| {
            decide(&p, &msg(Some("G"), chat, sender, roles, true))
        };
        assert_eq!(summon("open", "guest", &[]), Decision::Pass);
        assert_eq!(
            summon("open", "x", &["mods"]),
            Decision::PassAsContext,
            "the channel's list, not the guild's"
        );
        assert_eq!(summon("inherits", "x", &["mods"]), Decision::Pass);
        assert_eq!(summon("inherits", "guest", &[]), Decision::PassAsContext);
    }

    #[test]
    fn another_guilds_entry_lends_nothing() {
        // A channel entry in guild H does not take guild G's keys.
        let mut p = guild_policy(GuildRule {
            require_mention: Some(false),
            allow_from: set(&["boss"]),
            ..Default::default()
        });
        p.groups.insert("c".into(), GroupRule::default());
        assert_eq!(
            decide(&p, &msg(Some("H"), "c", "x", &[], true)),
            Decision::Pass
        );
        assert_eq!(
            decide(&p, &msg(Some("H"), "c", "x", &[], false)),
            Decision::PassAsContext
        );
    }
}
