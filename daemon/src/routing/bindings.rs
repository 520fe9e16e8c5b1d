//! Picks the binding for an inbound message: among the bindings of its
//! channel whose every set field matches, the most specific — a peer
//! binding beats a group binding beats an account binding beats a binding
//! of the whole channel; among equals, the first in the config.

use super::{Chat, Inbound};
use crate::config::Binding;

/// How specific a binding is; `None` when it does not match.
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
    if let Some(group) = &b.group {
        match &m.chat {
            Chat::Group(id) if id == group => score += 2,
            _ => return None,
        }
    }
    if let Some(peer) = &b.peer {
        if *peer != m.sender.id {
            return None;
        }
        score += 4;
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
        }
    }

    fn message(chat: Chat, peer: &str) -> Inbound {
        Inbound {
            channel: "discord".into(),
            account: Some("bot1".into()),
            chat,
            thread: None,
            sender: Sender {
                id: peer.into(),
                name: peer.into(),
            },
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
    fn a_field_that_does_not_match_rules_the_binding_out() {
        let bindings = vec![binding(Some("bot2"), None, None, "other")];
        assert!(pick(&bindings, &message(Chat::Direct, "1")).is_none());
        let other_channel = Binding {
            channel: "telegram".into(),
            ..binding(None, None, None, "tg")
        };
        assert!(pick(&[other_channel], &message(Chat::Direct, "1")).is_none());
    }

    #[test]
    fn among_equals_the_first_wins() {
        let bindings = vec![
            binding(None, Some("987"), None, "first"),
            binding(None, Some("987"), None, "second"),
        ];
        let got = pick(&bindings, &message(Chat::Group("987".into()), "1"));
        assert_eq!(got.map(|b| b.agent.as_str()), Some("first"));
    }
}
