//! Picks the binding for an inbound message: among the bindings of its
//! channel whose every set field matches, the most specific — a peer
//! binding beats a role binding (the sender holds the role) beats a group
//! binding (a thread: its parent chat) beats a guild binding beats an
//! account binding beats a binding of the whole channel; a binding that
//! sets several fields counts them all (a guild and a role beats the role
//! alone); among equals, the first in the config.

use super::{Chat, Inbound};
use crate::config::Binding;

/// How specific a binding is; `None` when it does not match. Each field
/// weighs more than all the less specific ones together.
fn specificity(b: &Binding, m: &Inbound) -> Option<u8> {
    if b.channel != m.channel {
        return None;
    }
    let mut score = 0;
    if let Some(account) = &b.account {
        if m.account.as_ref() != Some(account) {
            return None;
        }
        score += 1;
    }
    if let Some(guild) = &b.guild {
        if m.guild.as_ref() != Some(guild) {
            return None;
        }
        score += 2;
    }
    if let Some(group) = &b.group {
        match &m.chat {
            Chat::Group(id) if id == group => score += 4,
            _ => return None,
        }
    }
    if let Some(role) = &b.role {
        if !m.roles.contains(role) {
            return None;
        }
        score += 8;
    }
    if let Some(peer) = &b.peer {
        if *peer != m.sender.id {
            return None;
        }
        score += 16;
    }
    Some(score)
}

/// The most specific matching binding, if any.
pub fn pick<'b>(bindings: &'b [Binding], inbound: &Inbound) -> Option<&'b Binding> {
    let mut best: Option<(u8, &Binding)> = None;
    for b in bindings {
        if let Some(score) = specificity(b, inbound)
            && best.is_none_or(|(s, _)| score > s)
        {
            best = Some((score, b));
        }
    }
    best.map(|(_, b)| b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::Sender;

    fn binding(
        account: Option<&str>,
        group: Option<&str>,
        peer: Option<&str>,
        agent: &str,
    ) -> Binding {
        Binding {
            channel: "discord".into(),
            account: account.map(Into::into),
            group: group.map(Into::into),
            peer: peer.map(Into::into),
            agent: agent.into(),
            ..Default::default()
        }
    }

    fn of_guild(guild: Option<&str>, role: Option<&str>, agent: &str) -> Binding {
        Binding {
            guild: guild.map(Into::into),
            role: role.map(Into::into),
            ..binding(None, None, None, agent)
        }
    }

    fn message(chat: Chat, peer: &str) -> Inbound {
        Inbound {
            channel: "discord".into(),
            account: Some("bot1".into()),
            chat,
            thread: None,
            guild: None,
            roles: Vec::new(),
            sender: Sender {
                id: peer.into(),
                name: peer.into(),
            },
        }
    }

    /// A message in channel `chat` of guild `987` from `peer` holding
    /// `roles`.
    fn in_guild(chat: &str, peer: &str, roles: &[&str]) -> Inbound {
        Inbound {
            guild: Some("987".into()),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            ..message(Chat::Group(chat.into()), peer)
        }
    }

    #[test]
    fn peer_beats_group_beats_account_beats_channel() {
        let bindings = vec![
            binding(None, None, None, "channel"),
            binding(Some("bot1"), None, None, "account"),
            binding(None, Some("987"), None, "group"),
            binding(None, None, Some("5"), "peer"),
        ];
        let pick_for = |chat, peer| pick(&bindings, &message(chat, peer)).map(|b| b.agent.as_str());
        assert_eq!(pick_for(Chat::Group("987".into()), "5"), Some("peer"));
        assert_eq!(pick_for(Chat::Group("987".into()), "6"), Some("group"));
        assert_eq!(pick_for(Chat::Group("1".into()), "6"), Some("account"));
        assert_eq!(pick_for(Chat::Direct, "6"), Some("account"));
    }

    #[test]
    fn peer_beats_role_beats_group_beats_guild_beats_account() {
        let bindings = vec![
            binding(Some("bot1"), None, None, "account"),
            of_guild(Some("987"), None, "guild"),
            binding(None, Some("c1"), None, "group"),
            of_guild(None, Some("mods"), "role"),
            binding(None, None, Some("5"), "peer"),
        ];
        let pick_for = |m: Inbound| pick(&bindings, &m).map(|b| b.agent.as_str());
        assert_eq!(pick_for(in_guild("c1", "5", &["mods"])), Some("peer"));
        assert_eq!(pick_for(in_guild("c1", "6", &["mods"])), Some("role"));
        assert_eq!(pick_for(in_guild("c1", "6", &["members"])), Some("group"));
        assert_eq!(pick_for(in_guild("c2", "6", &[])), Some("guild"));
        // Another guild, or a DM: neither the guild's nor the role's.
        let mut other = in_guild("c2", "6", &[]);
        other.guild = Some("988".into());
        assert_eq!(pick_for(other), Some("account"));
        assert_eq!(pick_for(message(Chat::Direct, "6")), Some("account"));
    }

    #[test]
    fn a_binding_counts_every_field_it_sets() {
        let bindings = vec![
            of_guild(None, Some("mods"), "role anywhere"),
            of_guild(Some("987"), Some("mods"), "role in 987"),
            of_guild(Some("988"), Some("mods"), "role in 988"),
        ];
        let got = pick(&bindings, &in_guild("c1", "6", &["mods"]));
        assert_eq!(got.map(|b| b.agent.as_str()), Some("role in 987"));
        let mut elsewhere = in_guild("c1", "6", &["mods"]);
        elsewhere.guild = Some("989".into());
        let got = pick(&bindings, &elsewhere);
        assert_eq!(got.map(|b| b.agent.as_str()), Some("role anywhere"));
    }

    #[test]
    fn a_field_that_does_not_match_rules_the_binding_out() {
        let bindings = vec![binding(Some("bot2"), None, None, "other")];
        assert!(pick(&bindings, &message(Chat::Direct, "1")).is_none());
        let other_channel = Binding {
            channel: "telegram".into(),
            ..binding(None, None, None, "tg")
        };
        assert!(pick(&[other_channel], &message(Chat::Direct, "1")).is_none());
        let role_in_other_guild = of_guild(Some("988"), Some("mods"), "x");
        assert!(pick(&[role_in_other_guild], &in_guild("c1", "1", &["mods"])).is_none());
    }

    #[test]
    fn among_equals_the_first_wins() {
        let bindings = vec![
            binding(None, Some("987"), None, "first"),
            binding(None, Some("987"), None, "second"),
        ];
        let got = pick(&bindings, &message(Chat::Group("987".into()), "1"));
        assert_eq!(got.map(|b| b.agent.as_str()), Some("first"));
        let bindings = vec![
            of_guild(None, Some("a"), "first role"),
            of_guild(None, Some("b"), "second role"),
        ];
        let got = pick(&bindings, &in_guild("c1", "1", &["b", "a"]));
        assert_eq!(got.map(|b| b.agent.as_str()), Some("first role"));
    }
}
