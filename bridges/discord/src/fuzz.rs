//! Entry point for the coverage-guided fuzzer (`fuzz/`; see
//! `pincer_channel::fuzz`): gateway frames as Discord (or anyone in its
//! place) sends them. Not used by pincerd.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::discord::{ChannelInfo, Discord, lock};
use crate::events::Item;
use crate::model::Member;
use crate::rest::Rest;
use crate::settings::DiscordSettings;

/// A bot that reaches no server: the fuzzer's frames are all it hears.
fn offline() -> Option<Arc<Discord>> {
    static BOT: OnceLock<Option<Arc<Discord>>> = OnceLock::new();
    BOT.get_or_init(|| {
        let settings = DiscordSettings::new("fuzz");
        let rest = Rest::new("http://127.0.0.1:9", "fuzz").ok()?;
        Some(Arc::new(Discord {
            settings,
            rest,
            user_id: "4242".into(),
            username: "pincer".into(),
            application_id: "4243".into(),
            gateway_url: String::new(),
            channels: Mutex::new(HashMap::new()),
            dms: Mutex::new(HashMap::new()),
            commands: Mutex::new(HashMap::new()),
            roles: Mutex::new(HashMap::new()),
        }))
    })
    .clone()
}

/// A dispatch frame (`{"op":0,"t":…,"d":…}`) or a list of them, handled as
/// the gateway handles them, each message then read into the channel
/// layer's event; button presses read as the interaction handler reads
/// them (its acknowledgement, a REST call, is left out). Never a panic.
pub fn gateway(data: &[u8]) {
    let Ok(payload) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Some(discord) = offline() else { return };
    // Each input starts from a bot that has seen nothing.
    lock(&discord.channels).clear();
    lock(&discord.roles).clear();
    let frames = match payload {
        Value::Array(frames) => frames,
        frame => vec![frame],
    };
    let (queue, mut queued) = mpsc::unbounded_channel();
    for frame in &frames {
        let (Some(kind), data) = (frame["t"].as_str(), &frame["d"]) else {
            continue;
        };
        if kind == "INTERACTION_CREATE" {
            if let (Some(id), Some(token)) = (data["id"].as_str(), data["token"].as_str()) {
                crate::events::button(id, token, data);
            }
        } else {
            crate::gateway::dispatch(&discord, kind, data, &queue);
        }
    }
    drop(queue);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    while let Ok(item) = queued.try_recv() {
        let Item::Message(mut msg) = item else {
            continue;
        };
        // What would be asked of Discord's REST API is known already: a
        // channel no GUILD_CREATE named is a plain text channel, a member
        // without roles has none.
        if let Some(guild) = &msg.guild_id {
            lock(&discord.channels)
                .entry(msg.channel_id.clone())
                .or_insert_with(|| ChannelInfo {
                    guild_id: Some(guild.clone()),
                    parent_id: None,
                    kind: 0,
                });
            msg.member.get_or_insert(Member { roles: Vec::new() });
        }
        runtime.block_on(crate::inbound::incoming(&discord, &msg));
    }
}
