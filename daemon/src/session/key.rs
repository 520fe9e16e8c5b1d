//! Session keys: `agent:<agent>:main`, `agent:<agent>:<channel>:dm:<user>`,
//! `agent:<agent>:<channel>:group:<chat>`, a `:thread:<id>` suffix, and
//! `agent:<agent>:sub:<uuid>` for sub-agents. The CLI may also name a session
//! by a short name, which becomes `agent:<agent>:<name>`.

use std::fmt;

use super::Principal;

/// A parsed, validated session key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    agent: String,
    rest: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("session key is empty")]
    Empty,
    #[error("session key `{0}` must start with `agent:<agent>:`")]
    MissingPrefix(String),
    #[error(
        "session key `{key}`: part `{part}` may only contain letters, digits and `-_.@+` (1 to 128 characters)"
    )]
    BadPart { key: String, part: String },
    #[error("session key `{key}`: {reason}")]
    BadShape { key: String, reason: &'static str },
}

const MAX_PART: usize = 128;

fn valid_part(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= MAX_PART
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@+".contains(c))
}

impl SessionKey {
    /// The CLI's default session of an agent.
    pub fn main(agent: &str) -> Result<Self, KeyError> {
        Self::parse(&format!("agent:{agent}:main"))
    }

    /// A direct-message session with one peer on a channel.
    pub fn dm(agent: &str, channel: &str, user: &str) -> Result<Self, KeyError> {
        Self::parse(&format!("agent:{agent}:{channel}:dm:{user}"))
    }

    /// A group or channel chat.
    pub fn group(agent: &str, channel: &str, chat: &str) -> Result<Self, KeyError> {
        Self::parse(&format!("agent:{agent}:{channel}:group:{chat}"))
    }

    /// A sub-agent's child session.
    pub fn sub(agent: &str, id: uuid::Uuid) -> Result<Self, KeyError> {
        Self::parse(&format!("agent:{agent}:sub:{id}"))
    }

    /// A workflow run's session (its transcript), `agent:<agent>:workflow:<run>`.
    pub fn workflow(agent: &str, run: &str) -> Result<Self, KeyError> {
        Self::parse(&format!("agent:{agent}:workflow:{run}"))
    }

    /// This key with a thread suffix.
    pub fn thread(&self, id: &str) -> Result<Self, KeyError> {
        Self::parse(&format!("{self}:thread:{id}"))
    }

    /// Parses a full key.
    pub fn parse(key: &str) -> Result<Self, KeyError> {
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        let mut parts = key.split(':');
        if parts.next() != Some("agent") {
            return Err(KeyError::MissingPrefix(key.to_string()));
        }
        let parts: Vec<&str> = parts.collect();
        if parts.len() < 2 {
            return Err(KeyError::MissingPrefix(key.to_string()));
        }
        for part in &parts {
            if !valid_part(part) {
                return Err(KeyError::BadPart {
                    key: key.to_string(),
                    part: part.to_string(),
                });
            }
        }
        let rest = &parts[1..];
        // `…:thread:<id>` must come last and have an id; dm/group need a peer.
        let shape_error = |reason| KeyError::BadShape {
            key: key.to_string(),
            reason,
        };
        for (i, part) in rest.iter().enumerate() {
            match *part {
                "thread" | "dm" | "group" | "sub" | "workflow" if i + 1 >= rest.len() => {
                    return Err(shape_error(
                        "a `dm`, `group`, `sub`, `workflow` or `thread` part needs an id after it",
                    ));
                }
                _ => {}
            }
        }
        Ok(Self {
            agent: parts[0].to_string(),
            rest: rest.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// Resolves what a client typed: a full key, or a short name of the
    /// given agent's session (`""` → `main`).
    pub fn from_client(agent: &str, session: &str) -> Result<Self, KeyError> {
        let session = session.trim();
        if session.is_empty() {
            Self::main(agent)
        } else if session.starts_with("agent:") {
            Self::parse(session)
        } else {
            Self::parse(&format!("agent:{agent}:{session}"))
        }
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The agent's own CLI session, `agent:<agent>:main`.
    pub fn is_main(&self) -> bool {
        self.rest.len() == 1 && self.rest[0] == "main"
    }

    /// A sub-agent's child session, `agent:<agent>:sub:<id>`.
    pub fn is_subagent(&self) -> bool {
        self.rest.first().is_some_and(|p| p == "sub")
    }

    /// Whose chat a channel key is: a DM's person (the owner when
    /// `is_owner(channel, user)`), a group key's group (threads
    /// included). `None` for the CLI's keys and sub-agents', whose
    /// principal is whoever made them.
    pub fn chat_principal(&self, is_owner: impl Fn(&str, &str) -> bool) -> Option<Principal> {
        match self.rest.as_slice() {
            [channel, kind, id, ..] if kind == "dm" => Some(if is_owner(channel, id) {
                Principal::Owner
            } else {
                Principal::Person {
                    channel: channel.clone(),
                    user: id.clone(),
                }
            }),
            [channel, kind, id, ..] if kind == "group" => Some(Principal::Group {
                channel: channel.clone(),
                chat: id.clone(),
            }),
            _ => None,
        }
    }

    /// The channel a key belongs to (the registry's `channel` column):
    /// `cli` for `main` and short names, `sub` for sub-agents, else the
    /// platform part. What a chat *is* comes from its origin (routing),
    /// not from this text.
    pub fn channel(&self) -> &str {
        match self.rest.as_slice() {
            [first, kind, ..] if kind == "dm" || kind == "group" => first,
            [first, ..] if first == "sub" => "sub",
            [first, ..] if first == "workflow" => "workflow",
            _ => "cli",
        }
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "agent:{}", self.agent)?;
        for part in &self.rest {
            write!(f, ":{part}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind() {
        for key in [
            "agent:main:main",
            "agent:main:telegram:dm:12345",
            "agent:friends:discord:group:987",
            "agent:friends:discord:group:987:thread:42",
            "agent:main:sub:0193b6f2-7b1c-7000-8000-000000000000",
            "agent:main:workflow:3f2a9c1d4e5b",
        ] {
            assert_eq!(SessionKey::parse(key).unwrap().to_string(), key);
        }
    }

    #[test]
    fn constructors_build_the_documented_shapes() {
        assert_eq!(
            SessionKey::main("main").unwrap().to_string(),
            "agent:main:main"
        );
        let dm = SessionKey::dm("a", "telegram", "7").unwrap();
        assert_eq!(dm.to_string(), "agent:a:telegram:dm:7");
        assert_eq!(dm.channel(), "telegram");
        let g = SessionKey::group("a", "discord", "-100").unwrap();
        assert_eq!(
            g.thread("9").unwrap().to_string(),
            "agent:a:discord:group:-100:thread:9"
        );
        assert_eq!(SessionKey::main("x").unwrap().channel(), "cli");
        let sub = SessionKey::sub("a", uuid::Uuid::nil()).unwrap();
        assert_eq!(sub.channel(), "sub");
        assert!(sub.is_subagent() && !sub.is_main());
        assert!(SessionKey::main("x").unwrap().is_main());
        assert!(!SessionKey::from_client("x", "main2").unwrap().is_main());
        assert!(!dm.is_main() && !dm.is_subagent());
        assert_eq!(g.channel(), "discord");
    }

    #[test]
    fn channel_keys_name_their_chat_as_the_principal() {
        let owner_is_1 = |c: &str, u: &str| c == "telegram" && u == "1";
        let key = |k: &str| SessionKey::parse(k).unwrap();
        assert_eq!(
            key("agent:a:telegram:dm:1").chat_principal(owner_is_1),
            Some(Principal::Owner)
        );
        assert_eq!(
            key("agent:a:discord:dm:1")
                .chat_principal(owner_is_1)
                .map(|p| p.to_string()),
            Some("discord:dm:1".into())
        );
        assert_eq!(
            key("agent:a:telegram:group:-5:thread:9")
                .chat_principal(owner_is_1)
                .map(|p| p.to_string()),
            Some("telegram:group:-5".into())
        );
        for k in ["agent:a:main", "agent:a:work", "agent:a:sub:1"] {
            assert_eq!(key(k).chat_principal(owner_is_1), None, "{k}");
        }
    }

    #[test]
    fn short_names_expand_to_the_agent() {
        assert_eq!(
            SessionKey::from_client("main", "").unwrap().to_string(),
            "agent:main:main"
        );
        assert_eq!(
            SessionKey::from_client("w", "notes").unwrap().to_string(),
            "agent:w:notes"
        );
        assert_eq!(
            SessionKey::from_client("w", "agent:x:main")
                .unwrap()
                .agent(),
            "x"
        );
    }

    #[test]
    fn rejects_bad_keys_with_reasons() {
        assert_eq!(SessionKey::parse(""), Err(KeyError::Empty));
        assert!(matches!(
            SessionKey::parse("main"),
            Err(KeyError::MissingPrefix(_))
        ));
        assert!(matches!(
            SessionKey::parse("agent:main"),
            Err(KeyError::MissingPrefix(_))
        ));
        assert!(matches!(
            SessionKey::parse("agent:ma in:main"),
            Err(KeyError::BadPart { .. })
        ));
        assert!(matches!(
            SessionKey::parse("agent:m::x"),
            Err(KeyError::BadPart { .. })
        ));
        assert!(matches!(
            SessionKey::parse("agent:m:../../etc"),
            Err(KeyError::BadPart { .. })
        ));
        assert!(matches!(
            SessionKey::parse("agent:m:telegram:dm"),
            Err(KeyError::BadShape { .. })
        ));
        let long = format!("agent:m:{}", "x".repeat(129));
        assert!(matches!(
            SessionKey::parse(&long),
            Err(KeyError::BadPart { .. })
        ));
    }
}
