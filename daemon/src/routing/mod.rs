//! Routing (SPEC §11): from an inbound chat message — channel, account,
//! chat kind and id, thread, sender — to a [`Route`]: the agent that
//! answers, the session key (SPEC §6) and the [`ChatOrigin`] whose policy
//! layers the turn runs under.
//!
//! This is the only place an origin is built: the owner at the CLI
//! ([`owner`]), a chat on a channel ([`route`]: the bridges, and
//! `pincer tools list --channel --peer`, which must show exactly what such
//! a chat is offered). The agent is picked by the most specific binding
//! ([`bindings`]): peer, then group, then account, then channel, then the
//! default agent.

pub mod bindings;

use crate::config::{Config, ToolLayer};
use crate::session::SessionKey;
use crate::session::key::KeyError;
pub use crate::tools::origin::{ChatOrigin, ChatPlace};

/// The kind of chat a message arrived in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chat {
    /// A direct message with the sender.
    Direct,
    /// A group, guild channel or Telegram channel, by its id.
    Group(String),
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// The platform's user id.
    pub id: String,
    /// A display name; the id when the platform gives none.
    pub name: String,
}

/// A message as a bridge receives it, before any agent is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// `telegram`, `discord`, …
    pub channel: String,
    /// The bot account on that channel, when there are several.
    pub account: Option<String>,
    pub chat: Chat,
    /// A thread or topic inside the chat: its own session.
    pub thread: Option<String>,
    pub sender: Sender,
}

/// Where a message goes and under which policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub agent: String,
    pub key: SessionKey,
    pub origin: ChatOrigin,
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("the binding for this chat names agent `{0}`, which is not configured")]
    UnknownAgent(String),
    #[error("this chat cannot have a session: {0}")]
    Key(#[from] KeyError),
}

/// The owner at the CLI, talking to the session `key`.
pub fn owner(key: &SessionKey) -> ChatOrigin {
    ChatOrigin::owner(key.is_main())
}

/// Routes a chat message: the agent of the most specific binding (else
/// the default agent), a session per DM peer or per group (and thread),
/// and the origin with the chat's and the sender's policy layers.
pub fn route(config: &Config, inbound: &Inbound) -> Result<Route, RouteError> {
    let agent = bindings::pick(&config.bindings, inbound)
        .map(|b| b.agent.clone())
        .unwrap_or_else(|| config.default_agent.clone());
    if !config.agents.contains_key(&agent) {
        return Err(RouteError::UnknownAgent(agent));
    }
    let mut key = match &inbound.chat {
        Chat::Direct => SessionKey::dm(&agent, &inbound.channel, &inbound.sender.id)?,
        Chat::Group(id) => SessionKey::group(&agent, &inbound.channel, id)?,
    };
    if let Some(thread) = &inbound.thread {
        key = key.thread(thread)?;
    }
    let origin = ChatOrigin {
        sender: format!("{}:{}", inbound.channel, inbound.sender.id),
        name: inbound.sender.name.clone(),
        // Owners per channel arrive with the channel settings; until then
        // nobody on a channel is the owner.
        owner: false,
        chat: match &inbound.chat {
            Chat::Direct => ChatPlace::Direct {
                channel: inbound.channel.clone(),
            },
            Chat::Group(_) => ChatPlace::Group {
                channel: inbound.channel.clone(),
            },
        },
        in_channel: true,
        // The chat's own layer comes from the channel settings (bridges);
        // an empty layer still makes `messaging` the default profile.
        channel: vec![ToolLayer::default()],
        sender_layers: Vec::new(),
        main_session: false,
    };
    Ok(Route { agent, key, origin })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Binding;

    fn config(bindings: Vec<Binding>) -> Config {
        let home = crate::home::Home::at("/tmp/pincer-routing-test");
        let mut c = crate::config::load::parse(
            &home,
            std::path::Path::new("/h/config.toml"),
            "[agents.main]\n[agents.friends]\n[agents.family]\n",
            &|| None,
        )
        .unwrap();
        c.bindings = bindings;
        c
    }

    fn dm(peer: &str) -> Inbound {
        Inbound {
            channel: "telegram".into(),
            account: None,
            chat: Chat::Direct,
            thread: None,
            sender: Sender {
                id: peer.into(),
                name: format!("user {peer}"),
            },
        }
    }

    #[test]
    fn a_dm_is_a_session_per_peer_on_the_default_agent() {
        let route = route(&config(Vec::new()), &dm("42")).unwrap();
        assert_eq!(route.agent, "main");
        assert_eq!(route.key.to_string(), "agent:main:telegram:dm:42");
        assert!(!route.origin.owner);
        assert!(route.origin.in_channel);
        assert_eq!(route.origin.sender, "telegram:42");
        assert_eq!(route.origin.name, "user 42");
    }

    #[test]
    fn a_group_thread_has_its_own_session() {
        let mut inbound = dm("42");
        inbound.chat = Chat::Group("-100".into());
        inbound.thread = Some("7".into());
        let route = route(&config(Vec::new()), &inbound).unwrap();
        assert_eq!(
            route.key.to_string(),
            "agent:main:telegram:group:-100:thread:7"
        );
    }

    #[test]
    fn the_most_specific_binding_wins() {
        let bindings = vec![
            Binding {
                channel: "telegram".into(),
                agent: "friends".into(),
                ..Default::default()
            },
            Binding {
                channel: "telegram".into(),
                peer: Some("42".into()),
                agent: "family".into(),
                ..Default::default()
            },
        ];
        let c = config(bindings);
        assert_eq!(route(&c, &dm("42")).unwrap().agent, "family");
        assert_eq!(route(&c, &dm("7")).unwrap().agent, "friends");
    }

    #[test]
    fn a_binding_to_a_missing_agent_is_an_error() {
        let c = config(vec![Binding {
            channel: "telegram".into(),
            agent: "ghost".into(),
            ..Default::default()
        }]);
        assert!(matches!(
            route(&c, &dm("1")),
            Err(RouteError::UnknownAgent(a)) if a == "ghost"
        ));
    }

    #[test]
    fn the_cli_owner_is_main_only_in_main() {
        assert!(owner(&SessionKey::main("main").unwrap()).main_session);
        let other = SessionKey::from_client("main", "work").unwrap();
        assert!(!owner(&other).main_session);
        assert!(owner(&other).owner);
    }
}
