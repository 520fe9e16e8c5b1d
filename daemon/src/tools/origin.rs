//! Where a message comes from ([`ChatOrigin`]): the owner at the CLI, or a
//! sender in a channel chat. Built only by the routing layer
//! (`crate::routing`); it decides the channel and sender policy layers and
//! owner-only tools, names the sender in the audit table, and follows the
//! message into any session its turn reaches (`sessions_send`,
//! `sessions_spawn`), so nobody gains tools by going through another
//! session. It also says which chat the message came from, so the
//! `message` tool can send there ([`ChatAddress`]).

use crate::config::ToolLayer;
pub use crate::session::Principal;

/// Where a message was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatPlace {
    /// The CLI (or any client of the socket, which only the owner reaches).
    Cli,
    /// A direct message on a channel. `chat_id` is the person's user id:
    /// a DM is addressed by whom it is with (on Telegram a private chat's
    /// id is the user's id; bindings and `owner` name people the same way).
    Direct { channel: String, chat_id: String },
    /// A group, guild channel or Telegram channel, and the thread (forum
    /// topic) inside it the message was written in.
    Group {
        channel: String,
        chat_id: String,
        thread_id: Option<String>,
    },
}

impl ChatPlace {
    /// The chat as an address to send to; `None` for the CLI.
    pub fn address(&self) -> Option<ChatAddress> {
        match self {
            Self::Cli => None,
            Self::Direct { channel, chat_id } => Some(ChatAddress {
                channel: channel.clone(),
                chat_id: chat_id.clone(),
                thread_id: None,
                person: true,
            }),
            Self::Group {
                channel,
                chat_id,
                thread_id,
            } => Some(ChatAddress {
                channel: channel.clone(),
                chat_id: chat_id.clone(),
                thread_id: thread_id.clone(),
                person: false,
            }),
        }
    }
}

/// A chat on a channel, written `telegram:<chat id>` or
/// `telegram:<chat id>/<thread id>` (what the `message` tool's `to` takes
/// and its answers and refusals show).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChatAddress {
    pub channel: String,
    /// A group's chat id, or a person's user id for their DM.
    pub chat_id: String,
    /// A thread or forum topic inside a group.
    pub thread_id: Option<String>,
    /// `chat_id` is a person's user id: their DM, which the platform
    /// opens (Discord's DM channel is not the user's id). Known from
    /// routing; an address written in `to` takes it from the bound chat
    /// it matches ([`ChatAddress::same_chat`]).
    pub person: bool,
}

impl ChatAddress {
    /// A chat (group, guild channel) by its id.
    pub fn new(channel: &str, chat_id: &str) -> Self {
        Self {
            channel: channel.to_string(),
            chat_id: chat_id.to_string(),
            thread_id: None,
            person: false,
        }
    }

    /// A person's DM, by their user id.
    pub fn person(channel: &str, user_id: &str) -> Self {
        Self {
            person: true,
            ..Self::new(channel, user_id)
        }
    }

    /// The same channel, chat and thread, whichever way it was named.
    pub fn same_chat(&self, other: &Self) -> bool {
        self.channel == other.channel
            && self.chat_id == other.chat_id
            && self.thread_id == other.thread_id
    }

    /// Reads `channel:chat` or `channel:chat/thread`; the error shows the
    /// form.
    pub fn parse(text: &str) -> Result<Self, BadChatAddress> {
        let bad = || BadChatAddress {
            text: text.to_string(),
        };
        let (channel, rest) = text.trim().split_once(':').ok_or_else(bad)?;
        let (chat, thread) = match rest.split_once('/') {
            Some((chat, thread)) => (chat, Some(thread)),
            None => (rest, None),
        };
        let id = |s: &str| {
            let s = s.trim();
            let digits = s.strip_prefix('-').unwrap_or(s);
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.to_string())
        };
        let channel = channel.trim().to_ascii_lowercase();
        if channel.is_empty() || !channel.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(bad());
        }
        Ok(Self {
            person: false,
            channel,
            chat_id: id(chat).ok_or_else(bad)?,
            thread_id: match thread {
                Some(t) => Some(id(t).ok_or_else(bad)?),
                None => None,
            },
        })
    }

    /// This address without its thread: the chat itself.
    pub fn chat(&self) -> Self {
        Self {
            thread_id: None,
            ..self.clone()
        }
    }
}

impl std::fmt::Display for ChatAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.channel, self.chat_id)?;
        if let Some(thread) = &self.thread_id {
            write!(f, "/{thread}")?;
        }
        Ok(())
    }
}

/// Text that is not a chat address (`channel:chat` or
/// `channel:chat/thread`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a chat address: write the channel and the chat id, as telegram:-1001234567890 (a group), telegram:-1001234567890/7 (a topic in it) or telegram:123456789 (a DM)"
)]
pub struct BadChatAddress {
    pub text: String,
}

/// The kind of chat a message arrived in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Chat {
    /// A direct message with the sender.
    Direct,
    /// A group, guild channel or Telegram channel, by its id.
    Group(String),
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sender {
    /// The platform's user id.
    pub id: String,
    /// A display name; the id when the platform gives none.
    pub name: String,
}

/// A message as a bridge receives it, before any agent is chosen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Inbound {
    /// `telegram`, `discord`, …
    pub channel: String,
    /// The bot account on that channel, when there are several.
    pub account: Option<String>,
    pub chat: Chat,
    /// A thread or topic inside the chat: its own session.
    pub thread: Option<String>,
    /// The guild the chat belongs to (Discord); `None` elsewhere.
    pub guild: Option<String>,
    /// The sender's roles in that guild, by id (Discord); empty elsewhere.
    pub roles: Vec<String>,
    pub sender: Sender,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatOrigin {
    /// Shown in the audit table: `owner`, or `<channel>:<user id>` (several
    /// joined by `,` when one turn answers several senders).
    pub sender: String,
    /// How the model is told who wrote: a display name, or the sender id.
    pub name: String,
    /// On whose behalf the turn runs (the data boundary): the owner, the
    /// person of a DM, or the group the message was written in.
    pub principal: Principal,
    /// The chat the message was written in: the kind for the prompt (SPEC
    /// §9: `MEMORY.md` only in the owner's private sessions), the ids for
    /// the `message` tool.
    pub chat: ChatPlace,
    /// The other chats of a merged turn's messages, when they differ from
    /// `chat` (a message `sessions_send` brought from another chat waited
    /// in the queue with this chat's own): the turn came from all of them.
    pub other_chats: Vec<ChatPlace>,
    /// A chat on a channel (not the CLI): its default profile is
    /// `messaging`.
    pub in_channel: bool,
    /// The channel or group layers of the chat.
    pub channel: Vec<ToolLayer>,
    /// The layers of the sender's guild roles in that chat (Discord: the
    /// guild entry's `roles."<id>".tools`): more layers of the chat's own.
    pub role_layers: Vec<ToolLayer>,
    /// The per-sender layers in that chat.
    pub sender_layers: Vec<ToolLayer>,
    /// The agent's main CLI session (not sandboxed in `non-main` mode).
    pub main_session: bool,
    /// What the config adds to the system prompt for this chat (a group
    /// entry's `prompt`), after the agent's own instructions; left behind
    /// when the message travels into another session.
    pub prompt: Option<String>,
    /// The message the routing layer built this from, so that it can be
    /// routed again under a later config (a workflow run a chat started,
    /// resumed after a restart); `None` for the owner at the CLI and for a
    /// turn merged from several senders' messages.
    pub source: Option<Inbound>,
}

impl ChatOrigin {
    /// Whether the owner is asking: owner-only tools, `MEMORY.md`, the
    /// owner's memory and sessions.
    pub fn is_owner(&self) -> bool {
        self.principal.is_owner()
    }

    /// The owner at the CLI; `main_session` for the agent's `main` session.
    pub fn owner(main_session: bool) -> Self {
        Self {
            sender: "owner".into(),
            name: "owner".into(),
            principal: Principal::Owner,
            chat: ChatPlace::Cli,
            other_chats: Vec::new(),
            in_channel: false,
            channel: Vec::new(),
            role_layers: Vec::new(),
            sender_layers: Vec::new(),
            main_session,
            prompt: None,
            source: None,
        }
    }

    /// Several messages answered in one turn: it runs under every one of
    /// their layers (chat, role and sender: the most restrictive wins), as the owner only if all
    /// came from the owner, and sandboxed unless all came from the main
    /// session. Their chats' prompt additions are all kept, each once, in
    /// the order the messages came (normally one: a session is one chat).
    /// The first message's chat stays `chat`; any other chat is kept in
    /// `other_chats`, so the turn knows it answers more than one.
    pub fn merge(origins: &[ChatOrigin]) -> ChatOrigin {
        let Some(first) = origins.first() else {
            return Self::owner(false);
        };
        let mut merged = first.clone();
        for o in &origins[1..] {
            for chat in std::iter::once(&o.chat).chain(&o.other_chats) {
                if *chat != merged.chat && !merged.other_chats.contains(chat) {
                    merged.other_chats.push(chat.clone());
                }
            }
            // One turn, one principal: several only when messages of
            // different principals queued together, and then the first
            // that is not the owner (never the owner's rights for a
            // stranger's message).
            if merged.principal != o.principal && merged.principal.is_owner() {
                merged.principal = o.principal.clone();
            }
            merged.main_session &= o.main_session;
            merged.in_channel |= o.in_channel;
            for layer in &o.channel {
                if !merged.channel.contains(layer) {
                    merged.channel.push(layer.clone());
                }
            }
            for layer in &o.role_layers {
                if !merged.role_layers.contains(layer) {
                    merged.role_layers.push(layer.clone());
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
            // Messages of several senders or chats route apart.
            if merged.source != o.source {
                merged.source = None;
            }
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
            principal: Principal::Group {
                channel: "telegram".into(),
                chat: "-100".into(),
            },
            chat: ChatPlace::Group {
                channel: "telegram".into(),
                chat_id: "-100".into(),
                thread_id: None,
            },
            other_chats: Vec::new(),
            in_channel: true,
            channel: vec![ToolLayer::default()],
            role_layers: Vec::new(),
            sender_layers: vec![ToolLayer {
                deny: deny.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }],
            main_session: false,
            prompt: None,
            source: None,
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
        assert!(!merged.is_owner());
    }

    #[test]
    fn the_owner_only_when_every_message_is_the_owners() {
        let merged = ChatOrigin::merge(&[ChatOrigin::owner(true), stranger("1", &[])]);
        assert!(!merged.is_owner());
        assert_eq!(merged.principal.to_string(), "telegram:group:-100");
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

    #[test]
    fn a_merged_turn_keeps_every_chat_it_came_from() {
        let here = stranger("1", &[]);
        let elsewhere = ChatOrigin {
            chat: ChatPlace::Direct {
                channel: "telegram".into(),
                chat_id: "9".into(),
            },
            ..stranger("9", &[])
        };
        let same = ChatOrigin::merge(&[here.clone(), stranger("2", &[])]);
        assert_eq!(same.chat, here.chat);
        assert!(same.other_chats.is_empty(), "one chat, several senders");
        let merged = ChatOrigin::merge(&[here.clone(), elsewhere.clone(), here.clone()]);
        assert_eq!(merged.chat, here.chat);
        assert_eq!(merged.other_chats, std::slice::from_ref(&elsewhere.chat));
        // Merging a merged origin keeps its other chats.
        let again = ChatOrigin::merge(&[ChatOrigin::owner(false), merged]);
        assert_eq!(again.chat, ChatPlace::Cli);
        assert_eq!(again.other_chats, [here.chat, elsewhere.chat]);
    }

    #[test]
    fn chat_addresses_read_and_print_the_same() {
        for text in ["telegram:-1001234567890", "telegram:-100/7", "discord:42"] {
            let a = ChatAddress::parse(text).unwrap();
            assert_eq!(a.to_string(), text);
        }
        let a = ChatAddress::parse(" Telegram:-100/7 ").unwrap();
        assert_eq!(
            (
                a.channel.as_str(),
                a.chat_id.as_str(),
                a.thread_id.as_deref()
            ),
            ("telegram", "-100", Some("7"))
        );
        assert_eq!(a.chat().to_string(), "telegram:-100");
        for bad in [
            "-100",
            "telegram:",
            "telegram:@bob",
            "telegram:-100/",
            ":5",
            "tele gram:5",
            "telegram:1/2/3",
        ] {
            let e = ChatAddress::parse(bad).unwrap_err().to_string();
            assert!(e.contains("telegram:-1001234567890"), "{bad}: {e}");
        }
        assert_eq!(
            ChatPlace::Group {
                channel: "telegram".into(),
                chat_id: "-100".into(),
                thread_id: Some("3".into()),
            }
            .address()
            .map(|a| a.to_string())
            .as_deref(),
            Some("telegram:-100/3")
        );
        assert_eq!(ChatPlace::Cli.address(), None);
    }
}
