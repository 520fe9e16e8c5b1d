//! From the gateway to the bridge: the queue of events in the order they
//! came ([`Item`]), the one task that hands them over ([`feed`]), the
//! bot-loop guard, and interactions (button presses and slash commands),
//! acknowledged at once and queued as the channel layer's events.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::model::Message;
use pincer_channel::{Bridge, ButtonPress, ChatKind, Event, Inbound, Incoming, Sender};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::discord::{Discord, PendingCommand, command_message_id, lock};

/// Bot messages in one channel within [`BOT_WINDOW`] that trip the guard.
pub const BOT_LOOP_EVENTS: usize = 20;
/// The window the guard counts in, and how long it then stays quiet.
pub const BOT_WINDOW: Duration = Duration::from_secs(60);

/// What the gateway queues for the bridge.
pub(crate) enum Item {
    Message(Box<Message>),
    Event(Box<Incoming>),
    CatchUp,
}

/// Counts bot messages per channel; a channel with more than
/// [`BOT_LOOP_EVENTS`] in [`BOT_WINDOW`] is not answered for bot messages
/// for [`BOT_WINDOW`] (people there are still answered).
#[derive(Default)]
pub(crate) struct BotLoopGuard {
    seen: HashMap<String, VecDeque<Instant>>,
    quiet_until: HashMap<String, Instant>,
}

impl BotLoopGuard {
    /// Whether a bot message in `channel` at `now` may go on.
    pub fn allows(&mut self, channel: &str, now: Instant) -> bool {
        if let Some(until) = self.quiet_until.get(channel) {
            if now < *until {
                return false;
            }
            self.quiet_until.remove(channel);
        }
        let seen = self.seen.entry(channel.to_string()).or_default();
        while seen
            .front()
            .is_some_and(|t| now.duration_since(*t) >= BOT_WINDOW)
        {
            seen.pop_front();
        }
        seen.push_back(now);
        if seen.len() > BOT_LOOP_EVENTS {
            seen.clear();
            self.quiet_until
                .insert(channel.to_string(), now + BOT_WINDOW);
            return false;
        }
        true
    }
}

/// Hands queued events to the bridge one at a time, in order.
pub(crate) async fn feed(
    discord: Arc<Discord>,
    bridge: Arc<Bridge>,
    mut queue: mpsc::UnboundedReceiver<Item>,
) {
    let mut guard = BotLoopGuard::default();
    while let Some(item) = queue.recv().await {
        let incoming = match item {
            Item::Message(msg) => {
                if msg.author.bot && msg.author.id != discord.user_id {
                    let channel = msg.channel_id.clone();
                    if !guard.allows(&channel, Instant::now()) {
                        let why = format!(
                            "bot loop in channel {channel}: more than {BOT_LOOP_EVENTS} bot messages in {} s; their messages are not answered for {} s",
                            BOT_WINDOW.as_secs(),
                            BOT_WINDOW.as_secs()
                        );
                        tracing::warn!("discord: {why}");
                        bridge.health().error(&why);
                        continue;
                    }
                }
                crate::inbound::incoming(&discord, &msg).await
            }
            Item::Event(incoming) => Some(*incoming),
            Item::CatchUp => {
                crate::catch_up::run(&discord, &bridge).await;
                None
            }
        };
        if let Some(incoming) = incoming
            && let Err(e) = bridge.receive(incoming).await
        {
            let why = format!("a Discord message could not be recorded: {e}");
            tracing::error!("{why}");
            bridge.health().error(&why);
        }
    }
}

/// An INTERACTION_CREATE: acknowledged at once, then queued.
pub(crate) fn interaction(
    discord: &Arc<Discord>,
    data: &Value,
    queue: &mpsc::UnboundedSender<Item>,
) {
    let (Some(id), Some(token)) = (data["id"].as_str(), data["token"].as_str()) else {
        return;
    };
    let kind = data["type"].as_u64().unwrap_or(0);
    // 3: a button press, deferred update (the message stays as it is);
    // 2: a slash command, deferred answer ("thinking…") the reply fills.
    let ack = match kind {
        3 => 6,
        2 => 5,
        _ => return,
    };
    let (discord, data, queue) = (discord.clone(), data.clone(), queue.clone());
    let (id, token) = (id.to_string(), token.to_string());
    tokio::spawn(async move {
        let path = format!("/interactions/{id}/{token}/callback");
        if let Err(e) = discord
            .rest
            .call(Method::POST, &path, Some(&json!({"type": ack})))
            .await
        {
            tracing::warn!("discord: an interaction was not acknowledged: {e}");
            return;
        }
        let event = if kind == 3 {
            button(&id, &token, &data)
        } else {
            command(&discord, &id, &token, &data).await
        };
        if let Some(event) = event {
            let _ = queue.send(Item::Event(Box::new(Incoming {
                event,
                cursor: None,
            })));
        }
    });
}

/// Who acted: `member.user` in a guild, `user` in a DM.
fn actor(data: &Value) -> Sender {
    let user = if data["member"]["user"].is_object() {
        &data["member"]["user"]
    } else {
        &data["user"]
    };
    Sender {
        id: user["id"].as_str().unwrap_or_default().to_string(),
        name: user["global_name"]
            .as_str()
            .or(user["username"].as_str())
            .unwrap_or_default()
            .to_string(),
        is_bot: user["bot"].as_bool().unwrap_or(false),
    }
}

pub(crate) fn button(id: &str, token: &str, data: &Value) -> Option<Event> {
    let sender = actor(data);
    Some(Event::Button(ButtonPress {
        id: format!("{id}:{token}"),
        sender_id: sender.id,
        sender_name: sender.name,
        chat_id: data["channel_id"].as_str()?.to_string(),
        message_id: data["message"]["id"].as_str()?.to_string(),
        data: data["data"]["custom_id"].as_str()?.to_string(),
    }))
}

async fn command(discord: &Discord, id: &str, token: &str, data: &Value) -> Option<Event> {
    let channel = data["channel_id"].as_str()?.to_string();
    let message_id = command_message_id(id);
    lock(&discord.commands).insert(
        message_id.clone(),
        PendingCommand {
            channel: channel.clone(),
            token: token.to_string(),
            at: Instant::now(),
        },
    );
    let guild_id = data["guild_id"].as_str().map(str::to_string);
    let (kind, chat_id, thread_id) = match &guild_id {
        None => (ChatKind::Direct, channel, None),
        Some(_) => match discord.channel_info(&channel).await {
            Some(info) if info.is_thread() && info.parent_id.is_some() => (
                ChatKind::Thread,
                info.parent_id.unwrap_or_default(),
                Some(channel),
            ),
            _ => (ChatKind::Group, channel, None),
        },
    };
    Some(Event::Message(Inbound {
        channel: "discord".into(),
        account: String::new(),
        kind,
        chat_id,
        thread_id,
        guild_id,
        sender_roles: data["member"]["roles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
        sender: actor(data),
        text: format!("/{}", data["data"]["name"].as_str().unwrap_or_default()),
        // A slash command is addressed to this bot.
        mentions_bot: true,
        reply_to: None,
        attachments: Vec::new(),
        message_id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_quiets_a_channel_after_twenty_bot_messages_a_minute() {
        let mut guard = BotLoopGuard::default();
        let t0 = Instant::now();
        for i in 0..BOT_LOOP_EVENTS {
            assert!(guard.allows("c", t0 + Duration::from_secs(i as u64)), "{i}");
        }
        assert!(!guard.allows("c", t0 + Duration::from_secs(21)));
        // Another channel is not affected; the quiet one stays quiet for
        // the window, then counts afresh.
        assert!(guard.allows("d", t0 + Duration::from_secs(21)));
        assert!(!guard.allows("c", t0 + Duration::from_secs(80)));
        assert!(guard.allows("c", t0 + Duration::from_secs(82)));
    }

    #[test]
    fn slow_bot_traffic_never_trips_it() {
        let mut guard = BotLoopGuard::default();
        let t0 = Instant::now();
        for i in 0..200u64 {
            assert!(guard.allows("c", t0 + Duration::from_secs(i * 4)));
        }
    }

    #[test]
    fn a_press_names_its_presser_message_and_data() {
        let data = json!({
            "channel_id": "5", "message": {"id": "9"},
            "member": {"user": {"id": "42", "username": "ann"}, "roles": []},
            "data": {"custom_id": "a:abc"},
        });
        let Some(Event::Button(p)) = button("1", "tok", &data) else {
            panic!("a press");
        };
        assert_eq!(
            (p.id.as_str(), p.sender_id.as_str(), p.chat_id.as_str()),
            ("1:tok", "42", "5")
        );
        assert_eq!((p.message_id.as_str(), p.data.as_str()), ("9", "a:abc"));
    }
}
