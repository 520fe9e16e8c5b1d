//! [`Discord`] as a [`Platform`]: the outbound verbs on the REST API, each
//! failure sorted into a [`SendError`].
//!
//! Every message goes with `allowed_mentions = {parse: []}`: `@everyone`,
//! `@here`, role and user mentions written by the model show as text and
//! ping no one. A thread is addressed as its own channel. An answer to a
//! slash command replaces the command's "thinking…" (the interaction's
//! original response) with its first message.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use pincer_channel::{
    Attachment, BoxFuture, Button, Capabilities, Formatting, Platform, SendError, Target,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::discord::{Discord, lock};
use crate::rest::RestError;

/// Characters in one message.
pub const MAX_CHARS: usize = 2000;

/// Lines in one message before Discord folds it.
pub const MAX_LINES: usize = 17;

/// Characters of a button's `custom_id`.
pub const MAX_BUTTON_DATA: usize = 100;

/// Characters of an ephemeral note to whoever pressed a button.
const MAX_NOTE: usize = 200;

impl From<RestError> for SendError {
    fn from(e: RestError) -> Self {
        match e {
            RestError::RateLimited(wait) => SendError::RetryAfter(wait),
            RestError::Transient(why) => SendError::Transient(why),
            e => SendError::Permanent(e.to_string()),
        }
    }
}

/// Where a target's messages are posted: the thread, else the chat.
fn channel_of(to: &Target) -> &str {
    to.thread_id.as_deref().unwrap_or(&to.chat_id)
}

fn no_pings() -> Value {
    json!({"parse": [], "replied_user": true})
}

fn components(buttons: &[Button]) -> Value {
    if buttons.is_empty() {
        return json!([]);
    }
    let row: Vec<Value> = buttons
        .iter()
        .enumerate()
        .map(|(i, b)| {
            json!({
                "type": 2,
                // Approve green, the last (Deny) red, others grey.
                "style": if i == 0 { 3 } else if i + 1 == buttons.len() { 4 } else { 2 },
                "label": b.label.chars().take(80).collect::<String>(),
                "custom_id": b.data.chars().take(MAX_BUTTON_DATA).collect::<String>(),
            })
        })
        .collect();
    json!([{"type": 1, "components": row}])
}

impl Discord {
    async fn send_message(
        &self,
        to: &Target,
        text: &str,
        buttons: &[Button],
        once: Option<&str>,
    ) -> Result<String, SendError> {
        let channel = channel_of(to);
        let mut body = json!({
            "content": text,
            "allowed_mentions": no_pings(),
            "components": components(buttons),
        });
        // Discord returns the message already posted with this nonce
        // instead of posting it again: a part re-sent after its answer was
        // lost, or after a restart, is not doubled.
        if let Some(once) = once.filter(|n| n.chars().count() <= 25) {
            body["nonce"] = json!(once);
            body["enforce_nonce"] = json!(true);
        }
        if let Some(command) = self.take_command(channel, to.reply_to.as_deref()) {
            let path = format!(
                "/webhooks/{}/{}/messages/@original",
                self.application_id, command.token
            );
            let sent = self.rest.call(Method::PATCH, &path, Some(&body)).await?;
            return Ok(sent["id"].as_str().unwrap_or_default().to_string());
        }
        // A slash command is no message to reply to.
        if let Some(reply) = to
            .reply_to
            .as_ref()
            .filter(|r| !crate::discord::is_command_message_id(r))
        {
            body["message_reference"] = json!({"message_id": reply, "fail_if_not_exists": false});
        }
        let sent = self
            .rest
            .call(
                Method::POST,
                &format!("/channels/{channel}/messages"),
                Some(&body),
            )
            .await?;
        Ok(sent["id"].as_str().unwrap_or_default().to_string())
    }
}

impl Platform for Discord {
    fn channel(&self) -> &str {
        "discord"
    }

    fn account(&self) -> &str {
        "default"
    }

    fn bot_username(&self) -> &str {
        // Discord has no `/cmd@bot`: commands are the bot's own.
        ""
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_chars: MAX_CHARS,
            max_lines: Some(MAX_LINES),
            edits: true,
            // Discord shows "typing…" for 10 s; edits share the
            // channel's message bucket (5 per 5 s).
            typing: Some(std::time::Duration::from_secs(8)),
            edit_every: std::time::Duration::from_millis(1200),
            threads: true,
            formatting: Formatting::Markdown,
        }
    }

    fn send<'a>(
        &'a self,
        to: &'a Target,
        text: &'a str,
        _formatting: Formatting,
        buttons: &'a [Button],
        once: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, SendError>> {
        Box::pin(self.send_message(to, text, buttons, once))
    }

    fn edit<'a>(
        &'a self,
        to: &'a Target,
        message_id: &'a str,
        text: &'a str,
        _formatting: Formatting,
    ) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let body = json!({"content": text, "components": [], "allowed_mentions": no_pings()});
            let path = format!("/channels/{}/messages/{message_id}", channel_of(to));
            self.rest.call(Method::PATCH, &path, Some(&body)).await?;
            Ok(())
        })
    }

    fn direct_chat<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Target, SendError>> {
        Box::pin(async move {
            if let Some(channel) = lock(&self.dms).get(user_id).cloned() {
                return Ok(Target::chat(channel));
            }
            let body = json!({"recipient_id": user_id});
            let dm = self
                .rest
                .call(Method::POST, "/users/@me/channels", Some(&body))
                .await?;
            let Some(channel) = dm["id"].as_str().map(str::to_string) else {
                return Err(SendError::Transient(
                    "Discord opened a DM without an id".into(),
                ));
            };
            lock(&self.dms).insert(user_id.to_string(), channel.clone());
            Ok(Target::chat(channel))
        })
    }

    fn typing<'a>(&'a self, to: &'a Target) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let path = format!("/channels/{}/typing", channel_of(to));
            self.rest.call(Method::POST, &path, None).await?;
            Ok(())
        })
    }

    fn send_file<'a>(
        &'a self,
        to: &'a Target,
        path: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<String, SendError>> {
        Box::pin(async move {
            let bytes = tokio::fs::read(path).await.map_err(|e| {
                SendError::Permanent(format!("cannot read {}: {e}", path.display()))
            })?;
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("file")
                .to_string();
            let payload = json!({
                "content": caption.chars().take(MAX_CHARS).collect::<String>(),
                "allowed_mentions": no_pings(),
                "attachments": [{"id": 0, "filename": name}],
            });
            let form = reqwest::multipart::Form::new()
                .text("payload_json", payload.to_string())
                .part(
                    "files[0]",
                    reqwest::multipart::Part::bytes(bytes).file_name(name),
                );
            let sent = self
                .rest
                .multipart(&format!("/channels/{}/messages", channel_of(to)), form)
                .await?;
            Ok(sent["id"].as_str().unwrap_or_default().to_string())
        })
    }

    fn download<'a>(
        &'a self,
        attachment: &'a Attachment,
        mut dest: File,
        max_bytes: u64,
    ) -> BoxFuture<'a, Result<u64, SendError>> {
        Box::pin(async move {
            if attachment.size.is_some_and(|s| s > max_bytes) {
                return Err(SendError::Permanent(format!(
                    "{} is larger than the {max_bytes} bytes allowed",
                    attachment.name
                )));
            }
            // The CDN, not the API: no token goes with it.
            let mut response = self
                .rest
                .client()
                .get(&attachment.id)
                .send()
                .await
                .map_err(|e| {
                    SendError::Transient(format!("cannot download {}: {e}", attachment.name))
                })?;
            if !response.status().is_success() {
                return Err(SendError::Permanent(format!(
                    "Discord's CDN answered {} for {}",
                    response.status(),
                    attachment.name
                )));
            }
            let mut written = 0u64;
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| SendError::Transient(format!("the download was cut off: {e}")))?
            {
                written += chunk.len() as u64;
                if written > max_bytes {
                    return Err(SendError::Permanent(format!(
                        "{} is larger than the {max_bytes} bytes allowed",
                        attachment.name
                    )));
                }
                dest.write_all(&chunk).map_err(|e| {
                    SendError::Permanent(format!("cannot save {}: {e}", attachment.name))
                })?;
            }
            Ok(written)
        })
    }

    fn answer_button<'a>(
        &'a self,
        press_id: &'a str,
        note: &'a str,
    ) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            // The press was acknowledged when it came (within Discord's
            // 3 s); a note follows as a message only the presser sees.
            if note.is_empty() {
                return Ok(());
            }
            let Some((_, token)) = press_id.split_once(':') else {
                return Err(SendError::Permanent(format!("`{press_id}` is not a press")));
            };
            let body = json!({
                "content": note.chars().take(MAX_NOTE).collect::<String>(),
                "flags": 64,
                "allowed_mentions": no_pings(),
            });
            let path = format!("/webhooks/{}/{token}", self.application_id);
            self.rest.call(Method::POST, &path, Some(&body)).await?;
            Ok(())
        })
    }
}
