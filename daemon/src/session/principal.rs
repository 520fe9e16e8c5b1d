//! Whose a session is, and on whose behalf a tool call runs: the
//! [`Principal`] of the data boundary (SPEC §8.3).
//!
//! Everyone who can talk to an agent is one of three kinds:
//!
//! - **the owner**: at the CLI, and in their own DM on a channel whose
//!   `owner` names them;
//! - **a person** in a direct message who is not the owner (paired,
//!   allowlisted, or in an open DM);
//! - **a group** (a group chat, a guild channel, a Telegram channel): its
//!   members share its conversation, its attachments folder and
//!   everything its turns may reach, so the group, not the member, is the
//!   principal — the owner writing in a group is a member there.
//!
//! Routing decides the principal of every message (`crate::routing`); the
//! registry records the principal of every session when it is created
//! (`session::registry`), so the data boundary compares the two without
//! guessing from the text of a session key. A scheduled run comes later.

use std::fmt;

/// Who is asking, or whose a session is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Principal {
    /// The owner: the CLI, and the owner's DM on a channel.
    Owner,
    /// One person in a direct message on a channel.
    Person { channel: String, user: String },
    /// A group, guild channel or Telegram channel, with all its members.
    Group { channel: String, chat: String },
}

impl Principal {
    pub fn is_owner(&self) -> bool {
        matches!(self, Self::Owner)
    }

    /// Reads the registry's text form ([`fmt::Display`]); `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<Self> {
        if text == "owner" {
            return Some(Self::Owner);
        }
        let (channel, rest) = text.split_once(':')?;
        let (kind, id) = rest.split_once(':')?;
        if channel.is_empty() || id.is_empty() {
            return None;
        }
        let (channel, id) = (channel.to_string(), id.to_string());
        match kind {
            "dm" => Some(Self::Person { channel, user: id }),
            "group" => Some(Self::Group { channel, chat: id }),
            _ => None,
        }
    }

    /// The principal as a sentence names it: `the owner`, `telegram user
    /// 42`, `telegram group -100123`.
    pub fn describe(&self) -> String {
        match self {
            Self::Owner => "the owner".into(),
            Self::Person { channel, user } => format!("{channel} user {user}"),
            Self::Group { channel, chat } => format!("{channel} group {chat}"),
        }
    }

    /// The folder of the agent's workspace this principal's chat
    /// attachments are saved in, relative to the workspace:
    /// `inbox/<channel>-dm-<user>` or `inbox/<channel>-group-<chat>`; the
    /// owner's go to `inbox` itself. Another non-owner never reads a
    /// folder that is not its own, and the owner reads them all.
    pub fn folder(&self) -> String {
        match self {
            Self::Owner => INBOX.to_string(),
            Self::Person { channel, user } => {
                format!("{INBOX}/{}-dm-{}", safe(channel), safe(user))
            }
            Self::Group { channel, chat } => {
                format!("{INBOX}/{}-group-{}", safe(channel), safe(chat))
            }
        }
    }

    /// The non-owner whose folder holds `rel` (a path relative to the
    /// workspace), read back from [`Principal::folder`]'s names:
    /// `inbox/telegram-dm-42/a.pdf` is telegram user 42's. `None` for a
    /// path in no chat's folder (`inbox` itself is the owner's).
    pub fn of_folder(rel: &std::path::Path) -> Option<Self> {
        let mut parts = rel.components();
        if parts.next()?.as_os_str() != INBOX {
            return None;
        }
        let name = parts.next()?.as_os_str().to_str()?;
        // Channel names have no `-`; ids may (a Telegram group's).
        let (channel, rest) = name.split_once('-')?;
        let channel = channel.to_string();
        let who = match (rest.strip_prefix("dm-"), rest.strip_prefix("group-")) {
            (Some(user), _) if !user.is_empty() => Self::Person {
                channel,
                user: user.to_string(),
            },
            (_, Some(chat)) if !chat.is_empty() => Self::Group {
                channel,
                chat: chat.to_string(),
            },
            _ => return None,
        };
        // Only a name `folder` makes (nothing it would have changed).
        (who.folder() == format!("{INBOX}/{name}")).then_some(who)
    }
}

/// The folder of a workspace that chat attachments are saved under.
pub const INBOX: &str = "inbox";

/// An id as a file name: letters, digits, `-` and `_`; anything else `_`.
fn safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl fmt::Display for Principal {
    /// `owner`, `<channel>:dm:<user>`, `<channel>:group:<chat>`: what the
    /// registry stores and the audit table and listings show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Owner => f.write_str("owner"),
            Self::Person { channel, user } => write!(f, "{channel}:dm:{user}"),
            Self::Group { channel, chat } => write!(f, "{channel}:group:{chat}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_reads_back() {
        for p in [
            Principal::Owner,
            Principal::Person {
                channel: "telegram".into(),
                user: "42".into(),
            },
            Principal::Group {
                channel: "telegram".into(),
                chat: "-100123".into(),
            },
        ] {
            assert_eq!(Principal::parse(&p.to_string()), Some(p));
        }
        for bad in [
            "",
            "owner:1",
            "telegram:42",
            "telegram:sub:1",
            ":dm:1",
            "telegram:dm:",
        ] {
            assert_eq!(Principal::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_non_owner_has_its_own_folder_under_the_inbox() {
        let group = Principal::Group {
            channel: "telegram".into(),
            chat: "-100123".into(),
        };
        assert_eq!(group.folder(), "inbox/telegram-group--100123");
        let person = Principal::Person {
            channel: "discord".into(),
            user: "9/../x".into(),
        };
        assert_eq!(person.folder(), "inbox/discord-dm-9____x");
        assert_eq!(Principal::Owner.folder(), "inbox");
    }

    #[test]
    fn a_chats_folder_reads_back_as_its_principal() {
        use std::path::Path;
        let group = Principal::Group {
            channel: "telegram".into(),
            chat: "-100123".into(),
        };
        let person = Principal::Person {
            channel: "discord".into(),
            user: "9001".into(),
        };
        for p in [&group, &person] {
            assert_eq!(
                Principal::of_folder(Path::new(&p.folder())).as_ref(),
                Some(p)
            );
            let deeper = format!("{}/2026/scan.pdf", p.folder());
            assert_eq!(Principal::of_folder(Path::new(&deeper)).as_ref(), Some(p));
        }
        for none in [
            "inbox",
            "inbox/a.pdf",
            "docs/telegram-dm-42",
            "inbox/telegram-dm-",
            "inbox/telegram-group-",
            "inbox/telegram-chat-42",
            "inbox/telegram",
            "inbox/telegram-dm-4 2",
            "",
        ] {
            assert_eq!(Principal::of_folder(Path::new(none)), None, "{none}");
        }
    }
}
