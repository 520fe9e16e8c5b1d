//! How the bridge delivers: an answer planned in the ledger, then sent
//! chunk by chunk and confirmed (steps 6 of the bridge's module doc), and
//! the messages and files the `message` tool sends outside any answer.
//!
//! Each chunk is rendered for the platform ([`crate::format`]); a
//! formatting the platform rejects is sent again as plain text, a 429 waits
//! `retry_after`, a transient error backs off (1 s doubling to 30 s, six
//! tries), a permanent one (the bot blocked, the chat gone) gives the
//! answer up and says so in the health. An answer whose tries all failed
//! stays owed in the ledger and is sent when the platform is reached again
//! (or at the next start). Chunks of one chat go out one answer at a
//! time, in order.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Bridge, MAX_RETRY_AFTER, MsgKey, SEND_TRIES, chat_of, lock, now};
use crate::answer::{REST_CAPTION, plan};
use crate::chunk::chunks_for;
use crate::format::render;
use crate::ledger::Chunk;
use crate::message::{Formatting, Inbound};
use crate::platform::{Button, SendError, Target};

impl Bridge {
    /// Marks `msg` handled without an answer.
    pub(super) async fn settle(&self, msg: &Inbound) {
        let key = MsgKey::of(msg);
        let at = now();
        if let Err(e) = self.ledger(move |l| l.answered(key.key(), at)).await {
            tracing::error!("cannot record a handled message: {e}");
        }
    }

    /// Plans `text` as the answer to `msg`, then sends it.
    pub(super) async fn reply(&self, msg: &Inbound, text: String) {
        self.reply_with(msg, text, None).await;
    }

    /// [`Self::reply`], turning the live preview message `preview` (when
    /// there is one) into the answer's first chunk.
    pub(super) async fn reply_with(&self, msg: &Inbound, text: String, preview: Option<String>) {
        let chunks = plan(
            &text,
            &self.platform.capabilities(),
            self.settings().max_messages_per_answer,
        );
        let key = MsgKey::of(msg);
        lock(&self.answering).insert(key.clone());
        let planned = {
            let key = key.clone();
            let at = now();
            self.ledger(move |l| l.planned(key.key(), &chunks, at))
                .await
        };
        match planned {
            Ok(_) => self.deliver_with(msg, preview).await,
            Err(e) => {
                tracing::error!("cannot record an answer before sending it: {e}");
                self.health.error(&e.to_string());
            }
        }
        lock(&self.answering).remove(&key);
    }

    /// Sends the chunks of `msg`'s planned answer the platform has not
    /// confirmed yet, in order.
    pub(super) async fn deliver(&self, msg: &Inbound) {
        self.deliver_with(msg, None).await;
    }

    /// Sends, after each recovery of the platform, the answers that were
    /// planned but not wholly sent: those whose tries all failed in an
    /// outage would otherwise wait for the next start. One its own task
    /// is still planning or sending is left to that task; one sent
    /// meanwhile is not sent twice: [`Self::deliver`] waits for its chat's
    /// gate and then finds its chunks confirmed.
    pub(super) async fn deliver_after_outages(self: Arc<Self>) {
        loop {
            tokio::select! {
                () = self.health.recovered() => {}
                () = self.closing.cancelled() => return,
            }
            let (channel, account) = (self.channel().to_string(), self.account().to_string());
            let owed = match self.ledger(move |l| l.unanswered(&channel, &account)).await {
                Ok(owed) => owed,
                Err(e) => {
                    tracing::error!("cannot read the answers owed: {e}");
                    continue;
                }
            };
            let theirs = lock(&self.answering).clone();
            for item in owed
                .into_iter()
                .filter(|o| o.planned && !theirs.contains(&MsgKey::of(&o.inbound)))
            {
                let this = self.clone();
                self.tasks
                    .spawn(async move { this.deliver(&item.inbound).await });
            }
        }
    }

    /// [`Self::deliver`], editing the preview message into chunk 0.
    pub(super) async fn deliver_with(&self, msg: &Inbound, preview: Option<String>) {
        let chat = chat_of(msg);
        let gate = lock(&self.sending).entry(chat.clone()).or_default().clone();
        {
            let _one_at_a_time = gate.lock().await;
            self.send_owed(msg, preview).await;
        }
        // Nobody else holds or waits for the gate (the map's reference and
        // ours are the only ones, and taking another needs the map's lock):
        // drop it, so the map holds the chats being answered, not every
        // chat ever answered.
        let mut sending = lock(&self.sending);
        if Arc::strong_count(&gate) == 2 {
            sending.remove(&chat);
        }
    }

    /// [`Self::deliver_with`] behind the chat's gate.
    pub(super) async fn send_owed(&self, msg: &Inbound, mut preview: Option<String>) {
        let key = MsgKey::of(msg);
        let pending = {
            let key = key.clone();
            match self.ledger(move |l| l.pending_chunks(key.key())).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!("cannot read an answer's chunks: {e}");
                    return;
                }
            }
        };
        let target = Target::reply(msg);
        for (index, chunk) in pending {
            let once = format!("{}.{index}", msg.message_id);
            let sent = match (preview.take(), chunk) {
                (Some(id), Chunk::Text(text)) if index == 0 => {
                    match self.edit_chunk(&target, &id, &text).await {
                        Ok(()) => Ok(id),
                        Err(e) => {
                            tracing::debug!(
                                "the preview could not become the answer ({e}); sending it"
                            );
                            self.send_chunk(&target, &text, &once).await
                        }
                    }
                }
                (preview, Chunk::File { name, content }) => {
                    if let Some(id) = preview.filter(|_| index == 0) {
                        // The whole answer is the file: the preview says so
                        // rather than keep a half-written answer.
                        let _ = self.edit_chunk(&target, &id, REST_CAPTION).await;
                    }
                    self.send_document(&target, &name, content, REST_CAPTION)
                        .await
                }
                (_, Chunk::Text(text)) => self.send_chunk(&target, &text, &once).await,
            };
            match sent {
                Ok(id) => {
                    self.health.message_out();
                    let key = key.clone();
                    let at = now();
                    if let Err(e) = self
                        .ledger(move |l| l.confirmed(key.key(), index, &id, at))
                        .await
                    {
                        tracing::error!("cannot record a sent chunk: {e}");
                        return;
                    }
                }
                Err(
                    e @ (SendError::Permanent(_)
                    | SendError::Formatting(_)
                    | SendError::Unsupported(_)),
                ) => {
                    let why = format!("an answer in chat {} was given up: {e}", msg.chat_id);
                    tracing::warn!("{why}");
                    self.health.error(&why);
                    self.settle(msg).await;
                    return;
                }
                Err(e) => {
                    // Left owed: the next recovery or start sends the rest.
                    let why = format!(
                        "an answer in chat {} could not be sent yet: {e}",
                        msg.chat_id
                    );
                    tracing::warn!("{why}");
                    self.health.disconnected(&why);
                    return;
                }
            }
        }
    }

    /// Replaces the preview's text with a rendered chunk (plain text again
    /// when the formatting is refused).
    pub(super) async fn edit_chunk(
        &self,
        target: &Target,
        id: &str,
        markdown: &str,
    ) -> Result<(), SendError> {
        let formatting = self.platform.capabilities().formatting;
        match self
            .platform
            .edit(target, id, &render(markdown, formatting), formatting)
            .await
        {
            Err(SendError::Formatting(_)) if formatting != Formatting::Plain => {
                self.platform
                    .edit(
                        target,
                        id,
                        &render(markdown, Formatting::Plain),
                        Formatting::Plain,
                    )
                    .await
            }
            other => other,
        }
    }

    /// One part of an answer with the retry rules of the module docs;
    /// `once` names the part (see [`crate::Platform::send`]).
    pub(super) async fn send_chunk(
        &self,
        target: &Target,
        markdown: &str,
        once: &str,
    ) -> Result<String, SendError> {
        self.send(target, markdown, &[], Some(once)).await
    }

    /// A message outside an answer's parts (notes, approvals).
    pub(super) async fn send_text(
        &self,
        target: &Target,
        markdown: &str,
        buttons: &[Button],
    ) -> Result<String, SendError> {
        self.send(target, markdown, buttons, None).await
    }

    async fn send(
        &self,
        target: &Target,
        markdown: &str,
        buttons: &[Button],
        once: Option<&str>,
    ) -> Result<String, SendError> {
        let mut formatting = self.platform.capabilities().formatting;
        let mut text = render(markdown, formatting);
        let mut transient = 0;
        loop {
            match self
                .platform
                .send(target, &text, formatting, buttons, once)
                .await
            {
                Ok(id) => {
                    self.health.connected();
                    return Ok(id);
                }
                Err(SendError::Formatting(why)) if formatting != Formatting::Plain => {
                    tracing::debug!("formatting rejected ({why}); sending as plain text");
                    formatting = Formatting::Plain;
                    text = render(markdown, Formatting::Plain);
                }
                Err(e) => self.again(e, &mut transient).await?,
            }
        }
    }

    /// After a failed call: waits as the error says and answers `Ok` to
    /// try again (a 429 waits `retry_after`; a transient error backs off,
    /// [`SEND_TRIES`] tries in all), or the error to give up with (any
    /// other error, or the bridge stopping meanwhile).
    async fn again(&self, e: SendError, transient: &mut u32) -> Result<(), SendError> {
        match e {
            SendError::RetryAfter(wait) => {
                self.health
                    .error(&format!("rate limited for {}s", wait.as_secs()));
                if !self.pause(wait.min(MAX_RETRY_AFTER)).await {
                    return Err(SendError::Transient("pincerd is stopping".into()));
                }
                Ok(())
            }
            SendError::Transient(why) if *transient + 1 < SEND_TRIES => {
                let wait = Duration::from_secs((1u64 << *transient).min(30));
                *transient += 1;
                tracing::debug!("send failed ({why}); trying again in {wait:?}");
                if !self.pause(wait).await {
                    return Err(SendError::Transient(why));
                }
                Ok(())
            }
            e => Err(e),
        }
    }

    /// Sends `content` as a file named `name` with the retry rules of the
    /// module doc. The file is written first into a new private folder
    /// (only pincerd's user can read it), which is removed afterwards.
    pub(super) async fn send_document(
        &self,
        target: &Target,
        name: &str,
        content: String,
        caption: &str,
    ) -> Result<String, SendError> {
        let name = name.to_string();
        let (_folder, path) = tokio::task::spawn_blocking(move || private_file(&name, &content))
            .await
            .map_err(|e| SendError::Transient(format!("cannot write the file: {e}")))?
            .map_err(|e| SendError::Transient(format!("cannot write the file: {e}")))?;
        let mut transient = 0;
        loop {
            match self.platform.send_file(target, &path, caption).await {
                Ok(id) => {
                    self.health.connected();
                    return Ok(id);
                }
                Err(e) => self.again(e, &mut transient).await?,
            }
        }
    }

    /// Sleeps unless the bridge stops first; answers whether it slept.
    pub(super) async fn pause(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(wait) => true,
            _ = self.stop.cancelled() => false,
        }
    }

    /// Sends `text` to a chat outside any answer (the `message` tool),
    /// with the same rendering and retries.
    pub async fn send_to(&self, target: &Target, text: &str) -> Result<Vec<String>, SendError> {
        let mut ids = Vec::new();
        for chunk in chunks_for(text, &self.platform.capabilities()) {
            ids.push(self.send_text(target, &chunk, &[]).await?);
            self.health.message_out();
        }
        Ok(ids)
    }

    /// Sends `text` to user `user_id` in their DM (a sender just paired).
    pub async fn send_to_user(&self, user_id: &str, text: &str) -> Result<Vec<String>, SendError> {
        let target = self.platform.direct_chat(user_id).await?;
        self.send_to(&target, text).await
    }

    /// Sends a file to a chat (the `message` tool).
    pub async fn send_file_to(
        &self,
        target: &Target,
        path: &Path,
        caption: &str,
    ) -> Result<String, SendError> {
        let id = self.platform.send_file(target, path, caption).await?;
        self.health.message_out();
        Ok(id)
    }
}

/// `content` written as `name` in a new folder of the system's temporary
/// directory that only this user can open (`tempfile` makes it 0700);
/// the folder is removed when the returned guard drops.
fn private_file(name: &str, content: &str) -> std::io::Result<(tempfile::TempDir, PathBuf)> {
    let folder = tempfile::Builder::new().prefix("pincer-send-").tempdir()?;
    let path = folder.path().join(name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path)?;
    std::io::Write::write_all(&mut file, content.as_bytes())?;
    file.sync_all()?;
    Ok((folder, path))
}
