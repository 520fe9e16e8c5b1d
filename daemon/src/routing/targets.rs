//! Where an agent's `message` tool may send ([`message_targets`]): the
//! chats the config binds to the agent, read with the same rules that
//! route messages to it, plus the chat the turn came from. The tool
//! (`crate::tools::message`) only matches the model's `to` against this
//! list; a chat id that is not on it is never sent to.
//!
//! In a turn from anyone but the owner (a group member, an approved DM),
//! only rule 1 applies: what a stranger writes in one chat never makes the
//! agent post into another group or into the owner's DM. For the owner,
//! an agent may send to
//!
//! 1. the chat the turn came from (every chat, when a turn answers
//!    messages from several);
//! 2. every group under `[channels.<name>.groups]` whose messages it
//!    answers (a sender's peer binding or role aside), and the topics in
//!    it; on Discord also every channel a guild entry lists in `channels`
//!    whose messages it answers;
//! 3. every group and every peer's DM a `[[bindings]]` entry for it names;
//! 4. the channel owner's DM, when the owner's DM is answered by it — and,
//!    for the owner at the CLI, the owner's DM on every channel: they are
//!    the one asking.
//!
//! Without `to`, a message goes to the chat the turn came from; from the
//! CLI, to the owner's DM on the one channel that has an `owner`.

use super::{Chat, DEFAULT_ACCOUNT, Inbound, Sender, agent_of};
use crate::config::Config;
use crate::tools::message::{BoundChat, MessageTargets, NoDefaultChat};
use crate::tools::origin::{ChatAddress, ChatOrigin, ChatPlace};

/// Where `agent` may send in a turn from `origin` (the module doc's
/// rules), and where a message without `to` goes.
pub fn message_targets(config: &Config, agent: &str, origin: &ChatOrigin) -> MessageTargets {
    let mut allowed: Vec<BoundChat> = Vec::new();
    let mut add = |address: ChatAddress, what: &str| {
        if !allowed.iter().any(|b| b.address == address) {
            allowed.push(BoundChat {
                address,
                what: what.to_string(),
            });
        }
    };
    for chat in std::iter::once(&origin.chat).chain(&origin.other_chats) {
        if let Some(address) = chat.address() {
            add(address, "this chat");
        }
    }
    // Anyone but the owner (a group member, an approved DM) only has the
    // agent write where they wrote: a message in one group must not make
    // it post into another group or into the owner's DM.
    if !origin.is_owner() {
        return MessageTargets {
            default: default_target(config, origin),
            allowed,
        };
    }
    let owner_at_cli = origin.chat == ChatPlace::Cli;
    for (name, channel) in &config.channels {
        if let Some(owner) = &channel.owner {
            let dm = reaching(name, Chat::Direct, owner);
            if owner_at_cli || agent_of(config, &dm) == agent {
                add(ChatAddress::person(name, owner), "the owner's DM");
            }
        }
        for id in channel.groups.keys() {
            // A sender id no binding names (the config refuses empty
            // ids): the group's own agent, whoever writes there; its
            // guild's, when a guild lists it.
            let mut anyone = reaching(name, Chat::Group(id.clone()), "");
            anyone.guild = channel.guild_listing(id).map(str::to_string);
            if agent_of(config, &anyone) == agent {
                add(ChatAddress::new(name, id), "group");
            }
        }
        // The channels a guild entry lists (one without a list names no
        // channel the config could know).
        for (guild, entry) in &channel.guilds {
            for id in entry.channels.iter().flatten() {
                let mut anyone = reaching(name, Chat::Group(id.clone()), "");
                anyone.guild = Some(guild.clone());
                if agent_of(config, &anyone) == agent {
                    add(ChatAddress::new(name, id), "group");
                }
            }
        }
    }
    for b in config.bindings.iter().filter(|b| b.agent == agent) {
        match (&b.group, &b.peer) {
            (Some(group), _) => add(ChatAddress::new(&b.channel, group), "group"),
            (None, Some(peer)) => add(ChatAddress::person(&b.channel, peer), "DM"),
            (None, None) => {}
        }
    }
    MessageTargets {
        default: default_target(config, origin),
        allowed,
    }
}

/// A message from `sender` in `chat` on the channel's bot.
fn reaching(channel: &str, chat: Chat, sender: &str) -> Inbound {
    Inbound {
        channel: channel.to_string(),
        account: Some(DEFAULT_ACCOUNT.to_string()),
        chat,
        thread: None,
        guild: None,
        roles: Vec::new(),
        sender: Sender {
            id: sender.to_string(),
            name: sender.to_string(),
        },
    }
}

/// The chat the turn came from; at the CLI the owner's DM on the one
/// channel with an owner; or why there is none.
fn default_target(config: &Config, origin: &ChatOrigin) -> Result<ChatAddress, NoDefaultChat> {
    if !origin.other_chats.is_empty() {
        let chats: Vec<String> = std::iter::once(&origin.chat)
            .chain(&origin.other_chats)
            .map(|c| match c.address() {
                Some(a) => a.to_string(),
                None => "the CLI".into(),
            })
            .collect();
        return Err(NoDefaultChat::SeveralChats(chats));
    }
    if let Some(address) = origin.chat.address() {
        return Ok(address);
    }
    if !origin.is_owner() {
        return Err(NoDefaultChat::NoChat);
    }
    let owners: Vec<ChatAddress> = config
        .channels
        .iter()
        .filter_map(|(name, c)| c.owner.as_ref().map(|o| ChatAddress::person(name, o)))
        .collect();
    match owners.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(NoDefaultChat::NoOwner),
        several => Err(NoDefaultChat::SeveralOwners(
            several.iter().map(|a| a.channel.clone()).collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{Sender as RouteSender, route};

    /// Agents `main` (the default), `friends`, `family`; the owner is 1.
    fn config(extra: &str) -> Config {
        let home = crate::home::Home::at("/tmp/pincer-targets-test");
        crate::config::load::parse(
            &home,
            std::path::Path::new("/h/config.toml"),
            &format!("[agents.main]\n[agents.friends]\n[agents.family]\n{extra}"),
            &|| None,
        )
        .unwrap()
    }

    const CHANNEL: &str = "[channels.telegram]\nowner = \"1\"\n\
        [channels.telegram.groups.\"-100\"]\nagent = \"friends\"\n\
        [channels.telegram.groups.\"-200\"]\n\
        [channels.telegram.groups.\"-300\"]\n\
        [[bindings]]\nchannel = \"telegram\"\ngroup = \"-300\"\nagent = \"family\"\n\
        [[bindings]]\nchannel = \"telegram\"\npeer = \"42\"\nagent = \"family\"\n\
        [[bindings]]\nchannel = \"telegram\"\ngroup = \"-400\"\nagent = \"friends\"\n";

    fn listed(t: &MessageTargets) -> Vec<String> {
        t.allowed
            .iter()
            .map(|b| format!("{} {}", b.address, b.what))
            .collect()
    }

    /// A chat origin as routing builds it.
    fn from(c: &Config, chat: Chat, thread: Option<&str>, sender: &str) -> ChatOrigin {
        let inbound = Inbound {
            channel: "telegram".into(),
            account: Some(DEFAULT_ACCOUNT.into()),
            chat,
            thread: thread.map(str::to_string),
            guild: None,
            roles: Vec::new(),
            sender: RouteSender {
                id: sender.into(),
                name: sender.into(),
            },
        };
        route(c, &inbound).unwrap().origin
    }

    #[test]
    fn each_agent_gets_the_chats_the_config_binds_to_it() {
        let c = config(CHANNEL);
        let cli = ChatOrigin::owner(true);
        // The owner's DM routes to `main` (the default agent), as do groups
        // without an agent of their own or a binding.
        let main = message_targets(&c, "main", &cli);
        assert_eq!(
            listed(&main),
            ["telegram:1 the owner's DM", "telegram:-200 group"]
        );
        // A person's DM: the platform opens it by the user's id.
        assert_eq!(main.default, Ok(ChatAddress::person("telegram", "1")));
        // A group binding and a group entry; the owner's DM only because
        // the owner asks at the CLI.
        let friends = message_targets(&c, "friends", &cli);
        assert_eq!(
            listed(&friends),
            [
                "telegram:1 the owner's DM",
                "telegram:-100 group",
                "telegram:-400 group"
            ]
        );
        // The entry without an agent left `-300` to its binding; peer 42's DM.
        let family = message_targets(&c, "family", &cli);
        assert_eq!(
            listed(&family),
            [
                "telegram:1 the owner's DM",
                "telegram:-300 group",
                "telegram:42 DM"
            ]
        );
        assert!(family.pick(Some("telegram:-100")).is_err());
        assert!(
            family.pick(Some("telegram:-300/9")).is_ok(),
            "a topic of its group"
        );
        // Anyone but the owner only has the agent write where they wrote.
        let someone = message_targets(&c, "family", &from(&c, Chat::Direct, None, "7"));
        assert_eq!(listed(&someone), ["telegram:7 this chat"]);
        assert!(someone.pick(Some("telegram:-300")).is_err());
        assert!(
            someone.pick(Some("telegram:1")).is_err(),
            "not the owner's DM"
        );
    }

    #[test]
    fn a_guilds_listed_channels_are_its_agents_chats() {
        let c = config(
            "[channels.discord]\n\
             [channels.discord.guilds.\"900\"]\nchannels = [\"1\", \"2\"]\nagent = \"friends\"\n\
             [channels.discord.groups.\"2\"]\nagent = \"family\"\n\
             [channels.discord.groups.\"3\"]\n\
             [channels.discord.guilds.\"901\"]\nagent = \"family\"\n",
        );
        let cli = ChatOrigin::owner(true);
        // Channel 1 by the guild's agent; 3 has an entry but no listing
        // guild, so the default agent's.
        assert_eq!(
            listed(&message_targets(&c, "friends", &cli)),
            ["discord:1 group"]
        );
        assert_eq!(
            listed(&message_targets(&c, "family", &cli)),
            ["discord:2 group"]
        );
        assert_eq!(
            listed(&message_targets(&c, "main", &cli)),
            ["discord:3 group"]
        );
    }

    #[test]
    fn the_turns_own_chat_is_the_default_and_allowed() {
        let c = config(CHANNEL);
        // A topic in a group: that topic.
        let topic = from(&c, Chat::Group("-100".into()), Some("5"), "9");
        let t = message_targets(&c, "friends", &topic);
        assert_eq!(
            t.default,
            Ok(ChatAddress::parse("telegram:-100/5").unwrap())
        );
        assert_eq!(listed(&t)[0], "telegram:-100/5 this chat");
        // The owner's own DM.
        let dm = from(&c, Chat::Direct, None, "1");
        let t = message_targets(&c, "main", &dm);
        assert_eq!(t.default, Ok(ChatAddress::person("telegram", "1")));
        assert_eq!(listed(&t), ["telegram:1 this chat", "telegram:-200 group"]);
        // Named in `to`, the DM is still known as a person's.
        assert_eq!(
            t.pick(Some("telegram:1")),
            Ok(ChatAddress::person("telegram", "1"))
        );
        // A chat the config says nothing about still gets its answer.
        let stranger = from(&c, Chat::Direct, None, "77");
        let t = message_targets(&c, "main", &stranger);
        assert_eq!(t.pick(None), Ok(ChatAddress::person("telegram", "77")));
        assert!(t.pick(Some("telegram:78")).is_err());
    }

    #[test]
    fn a_peer_binding_in_a_group_does_not_give_its_agent_the_group() {
        // Peer 42 is answered by `family` everywhere, but `-100` stays
        // `friends`' group.
        let c = config(CHANNEL);
        let t = message_targets(&c, "family", &ChatOrigin::owner(false));
        assert!(!listed(&t).iter().any(|l| l.starts_with("telegram:-100")));
    }

    #[test]
    fn without_a_chat_the_default_says_why() {
        let none = config("");
        let t = message_targets(&none, "main", &ChatOrigin::owner(true));
        assert_eq!(
            t.default.unwrap_err().to_string(),
            "this turn came from the CLI and no channel has an `owner` whose DM it could go to"
        );
        assert!(t.allowed.is_empty());
        let two = config("[channels.telegram]\nowner = \"1\"\n[channels.discord]\nowner = \"2\"\n");
        let t = message_targets(&two, "main", &ChatOrigin::owner(true));
        assert_eq!(
            t.default.unwrap_err().to_string(),
            "this turn came from the CLI and several channels have an owner (discord, telegram)"
        );
        assert_eq!(t.allowed.len(), 2, "both owners' DMs");
        let c = config(CHANNEL);
        let merged = ChatOrigin::merge(&[
            from(&c, Chat::Group("-200".into()), None, "5"),
            from(&c, Chat::Direct, None, "6"),
        ]);
        let t = message_targets(&c, "main", &merged);
        assert_eq!(
            t.default.clone().unwrap_err().to_string(),
            "this turn answers messages from several chats (telegram:-200, telegram:6)"
        );
        assert!(t.pick(Some("telegram:6")).is_ok(), "each chat it came from");
    }
}
