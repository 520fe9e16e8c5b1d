//! [`Telegram`] as a [`Platform`]: the outbound verbs on the Bot API
//! (sendMessage, editMessageText, sendChatAction, sendDocument, getFile,
//! answerCallbackQuery), each failure sorted into a [`SendError`].
//!
//! Ids: the platform answers a sent message's `message_id` as it is
//! (`"950"`); inbound messages carry `"{chat}:{message}"` (unique across
//! chats), so wherever a message id comes back (`reply_to`, `edit`) the
//! part after the last `:` is the Telegram id.
//!
//! Link previews are turned off: an answer that cites sources would get a
//! preview of whichever link came first, and a preview under each chunk of
//! a long answer pushes the text apart.

use std::path::Path;

use pincer_channel::{
    Attachment, BoxFuture, Button, Capabilities, Formatting, Platform, SendError, Target,
};
use reqwest::multipart::Form;
use serde_json::Value;
use teloxide_core::payloads::{AnswerCallbackQuery, EditMessageText, SendChatAction, SendMessage};
use teloxide_core::types::{
    CallbackQueryId, ChatAction, ChatId, InlineKeyboardButton, InlineKeyboardMarkup,
    LinkPreviewOptions, MessageId, ParseMode, Recipient, ReplyMarkup, ReplyParameters, ThreadId,
};

use crate::error::{is_not_modified, send_error};
use crate::telegram::Telegram;

/// Characters in one message (Telegram allows 4,096; the margin is for
/// the HTML the bridge's rendering may grow by).
pub const MAX_CHARS: usize = 4000;

/// Bytes of `callback_data` Telegram accepts on a button.
pub const MAX_BUTTON_DATA: usize = 64;

/// Characters of a document's caption.
const MAX_CAPTION: usize = 1024;

/// Characters of the note shown to whoever pressed a button.
const MAX_BUTTON_NOTE: usize = 200;

fn chat(to: &Target) -> Result<Recipient, SendError> {
    to.chat_id
        .trim()
        .parse::<i64>()
        .map(|id| Recipient::Id(ChatId(id)))
        .map_err(|_| SendError::Permanent(format!("`{}` is not a Telegram chat id", to.chat_id)))
}

/// A Telegram message id from ours (`"-100123:42"` or `"42"`).
pub(crate) fn message_id(id: &str) -> Result<MessageId, SendError> {
    id.rsplit(':')
        .next()
        .and_then(|n| n.trim().parse::<i32>().ok())
        .map(MessageId)
        .ok_or_else(|| SendError::Permanent(format!("`{id}` is not a Telegram message id")))
}

fn thread(to: &Target) -> Result<Option<ThreadId>, SendError> {
    to.thread_id
        .as_deref()
        .map(|t| message_id(t).map(ThreadId))
        .transpose()
}

fn parse_mode(formatting: Formatting) -> Option<ParseMode> {
    match formatting {
        Formatting::Html => Some(ParseMode::Html),
        // Telegram's Markdown dialects are not the Markdown the bridge
        // writes: anything but HTML goes as plain text.
        Formatting::Plain | Formatting::Markdown => None,
    }
}

fn no_preview() -> LinkPreviewOptions {
    LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}

fn reply(to: &Target) -> Result<Option<ReplyParameters>, SendError> {
    to.reply_to
        .as_deref()
        .map(|r| message_id(r).map(|id| ReplyParameters::new(id).allow_sending_without_reply()))
        .transpose()
}

/// The buttons in one row under the message.
fn keyboard(buttons: &[Button]) -> Result<InlineKeyboardMarkup, SendError> {
    let mut row = Vec::with_capacity(buttons.len());
    for b in buttons {
        if b.data.len() > MAX_BUTTON_DATA {
            return Err(SendError::Permanent(format!(
                "the button `{}` carries {} bytes of data; Telegram allows {MAX_BUTTON_DATA}",
                b.label,
                b.data.len()
            )));
        }
        row.push(InlineKeyboardButton::callback(&b.label, &b.data));
    }
    Ok(InlineKeyboardMarkup::new([row]))
}

fn shortened(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The `message_id` of a sent message; empty when the answer has none
/// (the message was sent: the id is only needed to edit it later).
fn sent_id(result: &Value) -> String {
    match result.get("message_id").and_then(Value::as_i64) {
        Some(id) => id.to_string(),
        None => {
            tracing::debug!("Telegram confirmed a message without its id");
            String::new()
        }
    }
}

impl Telegram {
    async fn send_message(
        &self,
        to: &Target,
        text: &str,
        formatting: Formatting,
        buttons: &[Button],
    ) -> Result<String, SendError> {
        let mut p = SendMessage::new(chat(to)?, text);
        p.message_thread_id = thread(to)?;
        p.parse_mode = parse_mode(formatting);
        p.link_preview_options = Some(no_preview());
        p.reply_parameters = reply(to)?;
        if !buttons.is_empty() {
            p.reply_markup = Some(ReplyMarkup::InlineKeyboard(keyboard(buttons)?));
        }
        let result = self.api.call(&p).await.map_err(send_error)?;
        Ok(sent_id(&result))
    }

    async fn edit_message(
        &self,
        to: &Target,
        id: &str,
        text: &str,
        formatting: Formatting,
    ) -> Result<(), SendError> {
        let mut p = EditMessageText::new(chat(to)?, message_id(id)?, text);
        p.parse_mode = parse_mode(formatting);
        p.link_preview_options = Some(no_preview());
        // An empty keyboard removes the buttons (an answered approval).
        p.reply_markup = Some(InlineKeyboardMarkup::default());
        // The answer is not read: the real API sends the edited message,
        // telegram-test-api `null`; a 2xx is the success either way.
        match self.api.call(&p).await {
            Ok(_) => Ok(()),
            Err(f) if is_not_modified(&f) => Ok(()),
            Err(f) => Err(send_error(f)),
        }
    }

    async fn show_typing(&self, to: &Target) -> Result<(), SendError> {
        let mut p = SendChatAction::new(chat(to)?, ChatAction::Typing);
        p.message_thread_id = thread(to)?;
        self.api.call(&p).await.map(drop).map_err(send_error)
    }

    async fn send_document(
        &self,
        to: &Target,
        path: &Path,
        caption: &str,
    ) -> Result<String, SendError> {
        // Checked before the file is opened: a bad chat is not worth a read.
        chat(to)?;
        let mut form = Form::new().text("chat_id", to.chat_id.trim().to_string());
        if let Some(t) = thread(to)? {
            form = form.text("message_thread_id", t.0.0.to_string());
        }
        if !caption.is_empty() {
            form = form.text("caption", shortened(caption, MAX_CAPTION));
        }
        if let Some(r) = reply(to)? {
            let json = serde_json::to_string(&r)
                .map_err(|e| SendError::Permanent(format!("cannot encode the reply: {e}")))?;
            form = form.text("reply_parameters", json);
        }
        let form = form
            .file("document", path)
            .await
            .map_err(|e| SendError::Permanent(format!("cannot read {}: {e}", path.display())))?;
        let result = self
            .api
            .call_form("sendDocument", form)
            .await
            .map_err(send_error)?;
        Ok(sent_id(&result))
    }

    async fn answer_press(&self, press_id: &str, note: &str) -> Result<(), SendError> {
        let mut p = AnswerCallbackQuery::new(CallbackQueryId(press_id.to_string()));
        if !note.is_empty() {
            p.text = Some(shortened(note, MAX_BUTTON_NOTE));
        }
        self.api.call(&p).await.map(drop).map_err(send_error)
    }
}

impl Platform for Telegram {
    fn channel(&self) -> &str {
        "telegram"
    }

    fn account(&self) -> &str {
        &self.settings.account
    }

    fn bot_username(&self) -> &str {
        &self.me.username
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_chars: MAX_CHARS,
            max_lines: None,
            edits: true,
            // Telegram shows "typing…" for 5 s.
            typing: Some(std::time::Duration::from_secs(4)),
            edit_every: std::time::Duration::from_secs(1),
            threads: true,
            formatting: Formatting::Html,
        }
    }

    fn send<'a>(
        &'a self,
        to: &'a Target,
        text: &'a str,
        formatting: Formatting,
        buttons: &'a [Button],
        // `sendMessage` has no idempotency key (docs/src/channels/telegram.md: the one window).
        _once: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, SendError>> {
        Box::pin(self.send_message(to, text, formatting, buttons))
    }

    fn edit<'a>(
        &'a self,
        to: &'a Target,
        message_id: &'a str,
        text: &'a str,
        formatting: Formatting,
    ) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(self.edit_message(to, message_id, text, formatting))
    }

    /// Telegram's rule: a user's private chat has the user's id.
    fn direct_chat<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Target, SendError>> {
        Box::pin(async move { Ok(Target::chat(user_id)) })
    }

    fn typing<'a>(&'a self, to: &'a Target) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(self.show_typing(to))
    }

    fn send_file<'a>(
        &'a self,
        to: &'a Target,
        path: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<String, SendError>> {
        Box::pin(self.send_document(to, path, caption))
    }

    fn download<'a>(
        &'a self,
        attachment: &'a Attachment,
        dest: std::fs::File,
        max_bytes: u64,
    ) -> BoxFuture<'a, Result<u64, SendError>> {
        Box::pin(crate::download::download(
            &self.api, attachment, dest, max_bytes,
        ))
    }

    fn answer_button<'a>(
        &'a self,
        press_id: &'a str,
        note: &'a str,
    ) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(self.answer_press(press_id, note))
    }
}

#[cfg(test)]
mod tests;
