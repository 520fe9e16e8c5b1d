//! Bot API updates (JSON) turned into the channel layer's events: a
//! message becomes an [`Inbound`], a button press a [`ButtonPress`], and
//! everything else (edits, joins, reactions, what cannot be read) an
//! [`Event::Other`] that only moves the cursor.
//!
//! Updates are read one at a time from JSON with serde types of our own
//! that hold only the fields the bridge uses, every one optional but the
//! ids. teloxide's `Update` is stricter than the servers the bridge meets:
//! telegram-test-api sends callback queries without `chat_instance` and
//! their message without `message_id` or `date`, which teloxide rejects;
//! it also sends dates in milliseconds (teloxide reads those as the year
//! 55,000 — no error, but wrong; the bridge does not read dates at all).
//! One odd update must never stop the others or the cursor.

use pincer_channel::{Attachment, ButtonPress, ChatKind, Event, Inbound, Sender};
use serde::Deserialize;
use serde_json::Value;

use crate::me::Me;

/// The update kinds the bridge asks for (`allowed_updates`).
pub(crate) const ALLOWED_UPDATES: [&str; 3] = ["message", "edited_message", "callback_query"];

#[derive(Debug, Deserialize)]
struct User {
    id: i64,
    #[serde(default)]
    is_bot: bool,
    #[serde(default)]
    first_name: String,
    last_name: Option<String>,
    username: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Chat {
    id: i64,
    #[serde(rename = "type", default)]
    kind: String,
    title: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Entity {
    #[serde(rename = "type")]
    kind: String,
    /// In UTF-16 code units, as the Bot API counts.
    offset: usize,
    length: usize,
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct Reply {
    message_id: i64,
    from: Option<User>,
}

#[derive(Debug, Deserialize)]
struct FileRef {
    file_id: String,
    file_size: Option<u64>,
    file_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Message {
    message_id: i64,
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: bool,
    from: Option<User>,
    /// Who posts for a group (an anonymous admin, a linked channel).
    sender_chat: Option<Chat>,
    chat: Chat,
    text: Option<String>,
    caption: Option<String>,
    #[serde(default)]
    entities: Vec<Entity>,
    #[serde(default)]
    caption_entities: Vec<Entity>,
    reply_to_message: Option<Reply>,
    #[serde(default)]
    photo: Vec<PhotoSize>,
    document: Option<FileRef>,
    voice: Option<FileRef>,
}

#[derive(Debug, Deserialize)]
struct PhotoSize {
    file_id: String,
    file_size: Option<u64>,
    #[serde(default)]
    width: u64,
    #[serde(default)]
    height: u64,
}

/// The message a button sits under; telegram-test-api leaves out its id.
#[derive(Debug, Deserialize)]
struct ButtonMessage {
    message_id: Option<i64>,
    chat: Option<Chat>,
}

#[derive(Debug, Deserialize)]
struct CallbackQuery {
    id: String,
    from: User,
    message: Option<ButtonMessage>,
    data: Option<String>,
}

/// The update's id; `None` when it has none (not a Bot API update).
pub(crate) fn update_id(update: &Value) -> Option<i64> {
    update.get("update_id").and_then(Value::as_i64)
}

/// What `update` means to the bridge. Never fails: what cannot be read is
/// logged and becomes [`Event::Other`], so the cursor moves past it.
pub(crate) fn event(update: &Value, me: &Me, account: &str) -> Event {
    let id = update_id(update).unwrap_or(-1);
    if let Some(raw) = update.get("message") {
        return match serde_json::from_value::<Message>(raw.clone()) {
            Ok(msg) => message(msg, me, account).map_or(Event::Other, Event::Message),
            Err(e) => unreadable(id, "message", &e),
        };
    }
    if let Some(raw) = update.get("callback_query") {
        return match serde_json::from_value::<CallbackQuery>(raw.clone()) {
            Ok(q) => Event::Button(press(q)),
            Err(e) => unreadable(id, "button press", &e),
        };
    }
    // An edited message, a reaction, a member change: nothing to answer.
    Event::Other
}

fn unreadable(id: i64, what: &str, e: &serde_json::Error) -> Event {
    tracing::warn!(
        "Telegram update {id} holds a {what} the bridge cannot read ({e}); it is skipped"
    );
    Event::Other
}

fn name_of(user: &User) -> String {
    let full = match &user.last_name {
        Some(last) => format!("{} {last}", user.first_name),
        None => user.first_name.clone(),
    };
    let full = full.trim();
    if !full.is_empty() {
        full.to_string()
    } else if let Some(u) = &user.username {
        u.clone()
    } else {
        user.id.to_string()
    }
}

fn sender_of(msg: &Message) -> Option<Sender> {
    if let Some(u) = &msg.from {
        return Some(Sender {
            id: u.id.to_string(),
            name: name_of(u),
            is_bot: u.is_bot,
        });
    }
    msg.sender_chat.as_ref().map(|c| Sender {
        id: c.id.to_string(),
        name: c.title.clone().unwrap_or_else(|| c.id.to_string()),
        is_bot: false,
    })
}

/// A message as an [`Inbound`]; `None` for one with nothing to read (a
/// sticker, a member joining, a pinned message).
fn message(msg: Message, me: &Me, account: &str) -> Option<Inbound> {
    let attachments = attachments(&msg);
    let (text, entities) = match (&msg.text, &msg.caption) {
        (Some(t), _) => (t.clone(), &msg.entities),
        (None, Some(c)) => (c.clone(), &msg.caption_entities),
        (None, None) => (String::new(), &msg.entities),
    };
    if text.is_empty() && attachments.is_empty() {
        return None;
    }
    // A private chat's only sender is its person (`from`): a chat that
    // sent it (`sender_chat`) is not them, and such a message would
    // otherwise carry the private chat's id — the person's, possibly the
    // owner's — as its sender.
    if msg.chat.kind == "private" && msg.from.is_none() {
        tracing::debug!("a private message without a sender: skipped");
        return None;
    }
    let sender = sender_of(&msg)?;
    let kind = match msg.chat.kind.as_str() {
        "private" => ChatKind::Direct,
        _ if msg.is_topic_message && msg.message_thread_id.is_some() => ChatKind::Thread,
        _ => ChatKind::Group,
    };
    let chat = msg.chat.id;
    let mentions_bot = kind == ChatKind::Direct
        || entities.iter().any(|e| mentions(e, &text, me))
        || msg
            .reply_to_message
            .as_ref()
            .and_then(|r| r.from.as_ref())
            .is_some_and(|u| u.id == me.id);
    Some(Inbound {
        channel: "telegram".into(),
        account: account.into(),
        kind,
        chat_id: chat.to_string(),
        thread_id: match kind {
            ChatKind::Thread => msg.message_thread_id.map(|t| t.to_string()),
            _ => None,
        },
        guild_id: None,
        sender_roles: Vec::new(),
        sender,
        text,
        mentions_bot,
        reply_to: msg
            .reply_to_message
            .as_ref()
            .map(|r| format!("{chat}:{}", r.message_id)),
        attachments,
        // Telegram numbers messages per chat: the chat makes it unique.
        message_id: format!("{chat}:{}", msg.message_id),
    })
}

/// Whether one entity of `text` addresses the bot: `@name`, a text
/// mention of its id, or `/command@name`.
fn mentions(entity: &Entity, text: &str, me: &Me) -> bool {
    match entity.kind.as_str() {
        "text_mention" => entity.user.as_ref().is_some_and(|u| u.id == me.id),
        "mention" | "bot_command" if !me.username.is_empty() => {
            let Some(part) = utf16_slice(text, entity.offset, entity.length) else {
                return false;
            };
            let name = match entity.kind.as_str() {
                "mention" => part.strip_prefix('@'),
                _ => part.split_once('@').map(|(_, name)| name),
            };
            name.is_some_and(|n| n.eq_ignore_ascii_case(&me.username))
        }
        _ => false,
    }
}

/// `length` UTF-16 code units of `text` from `offset` (the Bot API's
/// entity positions), or `None` when out of range.
fn utf16_slice(text: &str, offset: usize, length: usize) -> Option<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let part = units.get(offset..offset.checked_add(length)?)?;
    String::from_utf16(part).ok()
}

fn attachments(msg: &Message) -> Vec<Attachment> {
    let mut out = Vec::new();
    // Telegram sends each photo in several sizes: the largest is kept.
    if let Some(p) = msg
        .photo
        .iter()
        .max_by_key(|p| (p.width * p.height, p.file_size.unwrap_or(0)))
    {
        out.push(Attachment {
            id: p.file_id.clone(),
            name: "photo.jpg".into(),
            kind: "photo".into(),
            size: p.file_size,
        });
    }
    if let Some(d) = &msg.document {
        out.push(Attachment {
            id: d.file_id.clone(),
            name: d.file_name.clone().unwrap_or_else(|| "document".into()),
            kind: "document".into(),
            size: d.file_size,
        });
    }
    if let Some(v) = &msg.voice {
        out.push(Attachment {
            id: v.file_id.clone(),
            name: "voice.ogg".into(),
            kind: "voice".into(),
            size: v.file_size,
        });
    }
    out
}

fn press(q: CallbackQuery) -> ButtonPress {
    let (chat_id, message_id) = match &q.message {
        Some(m) => (
            m.chat
                .as_ref()
                .map(|c| c.id.to_string())
                .unwrap_or_default(),
            m.message_id.map(|id| id.to_string()).unwrap_or_default(),
        ),
        None => (String::new(), String::new()),
    };
    ButtonPress {
        id: q.id,
        sender_id: q.from.id.to_string(),
        sender_name: name_of(&q.from),
        chat_id,
        message_id,
        data: q.data.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
