//! Discord messages as the channel layer's [`Inbound`]: where it was
//! written (a DM, a guild channel, a thread or forum post under its
//! parent), who wrote it and with which roles, whether it addresses the
//! bot, its attachments; and the read position it moves (the channel's
//! last message id, the scope catch-up resumes from).
//!
//! A thread is its parent channel's chat (`chat_id` the parent,
//! `thread_id` the thread): group rules, attachments and memory are the
//! parent's, the session the thread's own.

use crate::model::Message;
use pincer_channel::{Attachment, ChatKind, Event, Inbound, Incoming, Sender};

use crate::discord::Discord;

/// The message as an event for the bridge; `None` for the bot's own.
pub(crate) async fn incoming(discord: &Discord, msg: &Message) -> Option<Incoming> {
    let inbound = inbound(discord, msg).await?;
    Some(Incoming {
        event: Event::Message(inbound),
        cursor: Some((msg.channel_id.clone(), msg.id.clone())),
    })
}

async fn inbound(discord: &Discord, msg: &Message) -> Option<Inbound> {
    if msg.author.id == discord.user_id {
        return None;
    }
    let channel_id = msg.channel_id.clone();
    let (kind, chat_id, thread_id, guild_id) = match msg.guild_id.clone() {
        None => (ChatKind::Direct, channel_id, None, None),
        Some(guild) => {
            let info = discord.channel_info(&channel_id).await;
            match info {
                Some(info) if info.is_thread() && info.parent_id.is_some() => (
                    ChatKind::Thread,
                    info.parent_id.unwrap_or_default(),
                    Some(channel_id),
                    Some(guild),
                ),
                _ => (ChatKind::Group, channel_id, None, Some(guild)),
            }
        }
    };
    let sender_roles = match &guild_id {
        Some(guild) => {
            let given = msg.member.as_ref().map(|m| m.roles.clone());
            discord.member_roles(guild, &msg.author.id, given).await
        }
        None => Vec::new(),
    };
    let me = &discord.user_id;
    let mentions_bot = msg.mentions.iter().any(|u| u.id == *me)
        || msg
            .referenced_message
            .as_ref()
            .is_some_and(|r| r.author.id == *me);
    Some(Inbound {
        channel: "discord".into(),
        account: String::new(),
        kind,
        chat_id,
        thread_id,
        guild_id,
        sender_roles,
        sender: Sender {
            id: msg.author.id.clone(),
            name: msg.author.shown_name().to_string(),
            is_bot: msg.author.bot,
        },
        text: text(discord, msg),
        mentions_bot,
        reply_to: msg
            .message_reference
            .as_ref()
            .and_then(|r| r.message_id.clone()),
        attachments: msg
            .attachments
            .iter()
            .map(|a| Attachment {
                id: a.url.clone(),
                name: a.filename.clone(),
                kind: match a.content_type.as_deref() {
                    Some(t) if t.starts_with("image/") => "photo".into(),
                    Some(t) if t.starts_with("audio/") => "voice".into(),
                    _ => "document".into(),
                },
                size: Some(a.size),
            })
            .collect(),
        message_id: msg.id.clone(),
    })
}

/// The text as people read it: the bot's own mention at the start is
/// dropped (`@pincer /status` is the command `/status`), other user
/// mentions read `@name`.
fn text(discord: &Discord, msg: &Message) -> String {
    let me = &discord.user_id;
    let mut text = msg.content.trim().to_string();
    for form in [format!("<@{me}>"), format!("<@!{me}>")] {
        if let Some(rest) = text.strip_prefix(&form) {
            text = rest.trim_start().to_string();
        }
    }
    for user in &msg.mentions {
        let name = user.shown_name();
        for form in [format!("<@{}>", user.id), format!("<@!{}>", user.id)] {
            text = text.replace(&form, &format!("@{name}"));
        }
    }
    text
}
