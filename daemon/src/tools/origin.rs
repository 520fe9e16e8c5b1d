//! Where a message comes from ([`ChatOrigin`]): the owner at the CLI, or a
//! sender in a channel chat. Built only by the routing layer
//! (`crate::routing`); it decides the channel and sender policy layers and
//! owner-only tools, names the sender in the audit table, and follows the
//! message into any session its turn reaches (`sessions_send`,
//! `sessions_spawn`), so nobody gains tools by going through another
//! session.

use crate::config::ToolLayer;

/// Where a message was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatPlace {
    /// The CLI (or any client of the socket, which only the owner reaches).
    Cli,
    /// A direct message on a channel.
    Direct { channel: String },
    /// A group, guild channel or Telegram channel.
    Group { channel: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatOrigin {
    /// Shown in the audit table: `owner`, or `<channel>:<user id>` (several
    /// joined by `,` when one turn answers several senders).
    pub sender: String,
    /// How the model is told who wrote: a display name, or the sender id.
    pub name: String,
    pub owner: bool,
    /// The kind of chat, for the prompt (SPEC §9: `MEMORY.md` only in the
    /// owner's private sessions).
    pub chat: ChatPlace,
    /// A chat on a channel (not the CLI): its default profile is
    /// `messaging`.
    pub in_channel: bool,
    /// The channel or group layers of the chat.
    pub channel: Vec<ToolLayer>,
    /// The per-sender layers in that chat.
    pub sender_layers: Vec<ToolLayer>,
    /// The agent's main CLI session (not sandboxed in `non-main` mode).
    pub main_session: bool,
    /// What the config adds to the system prompt for this chat (a group
    /// entry's `prompt`), after the agent's own instructions; left behind
    /// when the message travels into another session.
    pub prompt: Option<String>,
}

impl ChatOrigin {
    /// The owner at the CLI; `main_session` for the agent's `main` session.
    pub fn owner(main_session: bool) -> Self {
        Self {
            sender: "owner".into(),
            name: "owner".into(),
            owner: true,
            chat: ChatPlace::Cli,
            in_channel: false,
            channel: Vec::new(),
            sender_layers: Vec::new(),
            main_session,
            prompt: None,
        }
    }

    /// Several messages answered in one turn: it runs under every one of
    /// their layers (the most restrictive wins), as the owner only if all
    /// came from the owner, and sandboxed unless all came from the main
    /// session. Their chats' prompt additions are all kept, each once, in
    /// the order the messages came (normally one: a session is one chat).
    pub fn merge(origins: &[ChatOrigin]) -> ChatOrigin {
        let Some(first) = origins.first() else {
            return Self::owner(false);
        };
        let mut merged = first.clone();
        for o in &origins[1..] {
            merged.owner &= o.owner;
            merged.main_session &= o.main_session;
            merged.in_channel |= o.in_channel;
            for layer in &o.channel {
                if !merged.channel.contains(layer) {
                    merged.channel.push(layer.clone());
                }
            }
            for layer in &o.sender_layers {
                if !merged.sender_layers.contains(layer) {
                    merged.sender_layers.push(layer.clone());
                }
            }
            if !merged.sender.split(',').any(|s| s == o.sender) {
                merged.sender = format!("{},{}", merged.sender, o.sender);
            }
            if !merged.name.split(", ").any(|n| n == o.name) {
                merged.name = format!("{}, {}", merged.name, o.name);
            }
            merged.prompt = match (merged.prompt.take(), &o.prompt) {
                (Some(mine), Some(theirs)) if !mine.contains(theirs.as_str()) => {
                    Some(format!("{mine}\n\n{theirs}"))
                }
                (mine, theirs) => mine.or_else(|| theirs.clone()),
            };
        }
        merged
    }

    /// The text the model sees for a message of this origin when a turn
    /// answers messages from people other than the owner: who wrote it
    /// stays attached to what they wrote.
    pub fn attributed(&self, text: &str) -> String {
        format!("[message from {} ({})]\n{text}", self.name, self.sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stranger(id: &str, deny: &[&str]) -> ChatOrigin {
        ChatOrigin {
            sender: format!("telegram:{id}"),
            name: format!("user{id}"),
            owner: false,
            chat: ChatPlace::Group {
                channel: "telegram".into(),
            },
            in_channel: true,
            channel: vec![ToolLayer::default()],
            sender_layers: vec![ToolLayer {
                deny: deny.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }],
            main_session: false,
            prompt: None,
        }
    }

    #[test]
    fn a_merged_turn_keeps_every_senders_layer() {
        let a = stranger("1", &["web_fetch"]);
        let b = stranger("2", &["memory_search"]);
        let merged = ChatOrigin::merge(&[a.clone(), b.clone()]);
        assert_eq!(merged.sender_layers.len(), 2);
        assert!(merged.sender_layers.contains(&a.sender_layers[0]));
        assert!(merged.sender_layers.contains(&b.sender_layers[0]));
        assert_eq!(merged.channel.len(), 1, "the same chat layer once");
        assert_eq!(merged.sender, "telegram:1,telegram:2");
        assert!(!merged.owner);
    }

    #[test]
    fn the_owner_only_when_every_message_is_the_owners() {
        let merged = ChatOrigin::merge(&[ChatOrigin::owner(true), stranger("1", &[])]);
        assert!(!merged.owner);
        assert!(!merged.main_session);
        assert!(merged.in_channel);
        let merged = ChatOrigin::merge(&[ChatOrigin::owner(true), ChatOrigin::owner(true)]);
        assert_eq!(merged, ChatOrigin::owner(true));
    }

    #[test]
    fn prompt_additions_are_kept_once_each() {
        let with = |id: &str, prompt: Option<&str>| ChatOrigin {
            prompt: prompt.map(str::to_string),
            ..stranger(id, &[])
        };
        let merged = ChatOrigin::merge(&[
            with("1", Some("Answer in French.")),
            with("2", None),
            with("3", Some("Answer in French.")),
        ]);
        assert_eq!(merged.prompt.as_deref(), Some("Answer in French."));
        let merged = ChatOrigin::merge(&[with("1", None), with("2", Some("Be brief."))]);
        assert_eq!(merged.prompt.as_deref(), Some("Be brief."));
        let merged = ChatOrigin::merge(&[with("1", Some("A.")), with("2", Some("B."))]);
        assert_eq!(merged.prompt.as_deref(), Some("A.\n\nB."));
    }
}
