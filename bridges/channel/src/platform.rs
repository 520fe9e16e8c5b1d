//! What a chat platform does for the channel layer: the outbound verbs
//! ([`Platform`]: send, edit, typing, files, buttons) and the inbound
//! events it hands over ([`Incoming`]). Telegram and Discord implement
//! [`Platform`] in crates of their own; the [`crate::bridge::Bridge`]
//! drives every platform the same way through it.
//!
//! Errors are sorted once, by the platform crate, into what the bridge
//! does next ([`SendError`]): send again as plain text, wait as told, back
//! off and retry, or give up. The bridge owns the retry loop, so both
//! platforms retry alike.

use std::fs::File;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use crate::message::{Attachment, Capabilities, Formatting, Inbound};

/// A boxed future, so a platform can sit behind `Arc<dyn Platform>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where an outbound message goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    /// The chat (a DM's chat id, a group, a guild channel).
    pub chat_id: String,
    /// The thread or forum topic inside it.
    pub thread_id: Option<String>,
    /// The message this one answers, shown as a reply where the platform
    /// can (groups: so people see whom the bot answers).
    pub reply_to: Option<String>,
}

impl Target {
    /// The chat `msg` was written in, answering it in groups.
    pub fn reply(msg: &Inbound) -> Self {
        Self {
            chat_id: msg.chat_id.clone(),
            thread_id: msg.thread_id.clone(),
            reply_to: match msg.kind {
                crate::message::ChatKind::Direct => None,
                _ => Some(msg.message_id.clone()),
            },
        }
    }

    /// A chat by its id, as a platform names it (a press's chat, an
    /// address `message` was given). A person is reached through
    /// [`Platform::direct_chat`] instead: only the platform knows their
    /// DM's chat.
    pub fn chat(chat_id: impl Into<String>) -> Self {
        Self {
            chat_id: chat_id.into(),
            thread_id: None,
            reply_to: None,
        }
    }
}

/// An inline button under a message (approvals): its label and the data
/// the platform hands back when it is pressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub label: String,
    pub data: String,
}

/// Why a platform call failed, sorted by what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The platform refused the formatting (Telegram: "can't parse
    /// entities"): send the same text again as plain text.
    #[error("the platform rejected the formatting: {0}")]
    Formatting(String),
    /// Rate limited (HTTP 429): wait this long, then the same call again.
    #[error("rate limited; retry after {0:?}")]
    RetryAfter(Duration),
    /// Worth another try after a backoff: the network, a timeout, a 5xx.
    #[error("{0}")]
    Transient(String),
    /// Will fail however often it is tried: the chat is gone, the bot was
    /// blocked or removed, a bad token, a 4xx other than 429.
    #[error("{0}")]
    Permanent(String),
    /// The platform cannot do this at all (a verb it lacks).
    #[error("not supported by this platform: {0}")]
    Unsupported(&'static str),
}

/// The outbound side of a platform. Every method is one platform call; the
/// bridge retries by [`SendError`].
pub trait Platform: Send + Sync + 'static {
    /// `telegram`, `discord`.
    fn channel(&self) -> &str;

    /// Which bot account of the channel this is (`default` when one).
    fn account(&self) -> &str;

    /// The bot's own user name without `@` (`pincer_bot`), to tell
    /// `/status@pincer_bot` from a command meant for another bot; empty
    /// where the platform has none.
    fn bot_username(&self) -> &str;

    /// What outbound messages may be.
    fn capabilities(&self) -> Capabilities;

    /// Sends one message of at most `capabilities().max_chars` characters,
    /// already rendered for `formatting`, with optional buttons under it.
    /// Answers the platform's id for the message. `once`, where given,
    /// names this very message (a part of an answer: the message answered
    /// and the part's index; at most 25 characters): a platform that can
    /// promise it posts a second send with the same `once` only once
    /// (Discord's `nonce` with `enforce_nonce`); one that cannot (Telegram)
    /// ignores it.
    fn send<'a>(
        &'a self,
        to: &'a Target,
        text: &'a str,
        formatting: Formatting,
        buttons: &'a [Button],
        once: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, SendError>>;

    /// Replaces the text of a message this bot sent (live preview; an
    /// approval that was answered). Buttons are removed.
    fn edit<'a>(
        &'a self,
        to: &'a Target,
        message_id: &'a str,
        text: &'a str,
        formatting: Formatting,
    ) -> BoxFuture<'a, Result<(), SendError>>;

    /// The DM with user `user_id` (the owner, for approvals; a sender just
    /// paired). Each platform's own rule: Telegram's private chat id is the
    /// user's id; Discord opens a DM channel first.
    fn direct_chat<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Target, SendError>>;

    /// Shows "typing…" in the chat for a few seconds.
    fn typing<'a>(&'a self, to: &'a Target) -> BoxFuture<'a, Result<(), SendError>>;

    /// Sends a file from disk with a caption. Answers the message id.
    fn send_file<'a>(
        &'a self,
        to: &'a Target,
        path: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<String, SendError>>;

    /// Downloads an attachment of an inbound message into `dest`, a new
    /// empty file the bridge created in the chat's folder, refusing more
    /// than `max_bytes`. Answers the number of bytes written. The bridge
    /// removes the file when this fails.
    fn download<'a>(
        &'a self,
        attachment: &'a Attachment,
        dest: File,
        max_bytes: u64,
    ) -> BoxFuture<'a, Result<u64, SendError>>;

    /// Tells the platform a button press was seen (Telegram stops the
    /// spinner on the button), with a short note for the presser.
    fn answer_button<'a>(
        &'a self,
        press_id: &'a str,
        note: &'a str,
    ) -> BoxFuture<'a, Result<(), SendError>>;
}

/// A press on one of the bot's buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonPress {
    /// The platform's id of the press (answered with
    /// [`Platform::answer_button`]).
    pub id: String,
    /// Who pressed it (user id).
    pub sender_id: String,
    pub sender_name: String,
    /// The chat and the message the button is under.
    pub chat_id: String,
    pub message_id: String,
    /// The button's data.
    pub data: String,
}

/// One event a platform's reader hands to the bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A message in a chat.
    Message(Inbound),
    /// A button under one of the bot's messages was pressed.
    Button(ButtonPress),
    /// Something the bridge does not act on (an edit, a join, a reaction):
    /// only its cursor matters.
    Other,
}

/// An event with the platform's read position after it: the bridge
/// records the event and moves the cursor in one transaction, so the
/// platform is asked from there next (Telegram: `offset = update_id + 1`;
/// Discord: the channel's last message id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub event: Event,
    /// The cursor's scope (`updates` for Telegram, a channel id for
    /// Discord) and its value after this event; `None` for a platform that
    /// keeps no cursor for this event (a webhook).
    pub cursor: Option<(String, String)>,
}
