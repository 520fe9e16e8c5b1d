//! Attachments of an inbound message saved into the chat's inbox folder
//! (opened by the host; each file created through it, never through a
//! link), size-capped, under a safe name; which of them may be images.

use super::*;

/// A file name made safe: no folders, no leading dots, no control
/// characters, at most 80 characters; the kind when nothing is left.
pub(super) fn safe_name(name: &str, kind: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| {
            if c.is_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .chars()
        .take(80)
        .collect();
    if cleaned.is_empty() {
        kind.chars().filter(|c| c.is_ascii_alphanumeric()).collect()
    } else {
        cleaned
    }
}

/// Whether an attachment may be an image a model can look at: a photo, or
/// a document named like one (Telegram sends a picture as a document when
/// the sender asks for no compression). A guess the daemon checks against
/// the file's first bytes.
pub(super) fn may_be_image(att: &Attachment) -> bool {
    const EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "gif", "webp"];
    att.kind == "photo"
        || (att.kind == "document"
            && Path::new(&att.name)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x))))
}

impl Bridge {
    /// Saves the message's attachments in the chat's folder of the agent's
    /// workspace ([`Host::inbox`], opened by the daemon): each file is
    /// created there exclusively, never through a link nor over anything,
    /// and handed to the platform to fill. Answers one note per
    /// attachment for the agent, and the saved files that may be images,
    /// relative to the workspace (for [`Host::chat`]). What could not be
    /// saved is said in the note and logged.
    pub(super) async fn save_attachments(
        &self,
        msg: &Inbound,
        settings: &BridgeSettings,
    ) -> (Vec<String>, Vec<String>) {
        if msg.attachments.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let inbox = match self.host.inbox(msg) {
            Ok(dir) => dir,
            Err(e) => {
                tracing::warn!(
                    channel = %msg.channel,
                    chat = %msg.chat_id,
                    "The attachments of message {} were not saved: {e}",
                    msg.message_id
                );
                return (
                    vec![format!("[the attachments could not be saved: {e}]")],
                    Vec::new(),
                );
            }
        };
        let mut notes = Vec::new();
        let mut images = Vec::new();
        for (i, att) in msg.attachments.iter().enumerate() {
            let name = safe_name(&att.name, &att.kind);
            // The message id names the chat too (Telegram's `chat:message`);
            // only characters that are safe in any file name.
            let id: String = msg
                .message_id
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let file = format!("{}-{i}-{name}", id.trim_start_matches('-'));
            if att.size.is_some_and(|s| s > settings.max_attachment_bytes) {
                notes.push(format!(
                    "[{} `{}` not saved: larger than the {} MB limit]",
                    att.kind,
                    display_name(&att.name),
                    settings.max_attachment_bytes / (1024 * 1024)
                ));
                continue;
            }
            let saved = inbox.relative().join(&file).display().to_string();
            let dest = match inbox.create_new(&file) {
                Ok(dest) => dest,
                Err(e) => {
                    tracing::warn!(
                        channel = %msg.channel,
                        chat = %msg.chat_id,
                        "The {} `{}` of message {} was not saved: {e}",
                        att.kind,
                        display_name(&att.name),
                        msg.message_id
                    );
                    notes.push(format!(
                        "[{} `{}` could not be saved: {e}]",
                        att.kind,
                        display_name(&att.name)
                    ));
                    continue;
                }
            };
            match self
                .platform
                .download(att, dest, settings.max_attachment_bytes)
                .await
            {
                Ok(bytes) => {
                    notes.push(format!("[{} saved as {saved} ({bytes} bytes)]", att.kind));
                    if may_be_image(att) {
                        images.push(saved);
                    }
                }
                Err(e) => {
                    // Through the same opened folder: the half-written
                    // file, never a name swapped in since.
                    if let Err(removed) = inbox.remove_file(&file) {
                        tracing::warn!("A failed download was not cleaned up: {removed}");
                    }
                    notes.push(format!(
                        "[{} `{}` could not be saved: {}]",
                        att.kind,
                        display_name(&att.name),
                        display_name(&e.to_string())
                    ));
                }
            }
        }
        (notes, images)
    }
}
