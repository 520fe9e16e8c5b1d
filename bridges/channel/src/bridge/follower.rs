//! Following a turn to its end: "typing…" at the platform's pace, the
//! live preview edited at the platform's pace, the note that a call waits
//! for the owner, and the answer (or the failure) handed to delivery by
//! the one message whose turn it was.

use super::*;

/// The message that shows an answer while it is written.
#[derive(Default)]
pub(super) struct Preview {
    id: Option<String>,
    text: String,
    shown_at: Option<tokio::time::Instant>,
}

/// Turn ids remembered to send a merged turn's answer once.
pub(super) const TURNS_REMEMBERED: usize = 4096;

impl Bridge {
    /// Waits for the end of the turn that answers `msg`, showing typing
    /// (and the live preview), then plans and sends the answer. Several
    /// queued messages answered by one turn all follow it; the first to
    /// see it start owns it (its preview, its answer), the others are
    /// settled without a message.
    pub(super) async fn follow(
        self: Arc<Self>,
        msg: Inbound,
        mut events: mpsc::UnboundedReceiver<TurnEvent>,
    ) {
        let target = Target::reply(&msg);
        let caps = self.platform.capabilities();
        let previewing = self.settings().preview && caps.edits;
        let mut owner: Option<bool> = None;
        let mut preview = Preview::default();
        // Tools this chat was told wait for the owner (once each).
        let mut told_waiting: Vec<String> = Vec::new();
        let typing = caps.typing;
        // Never fires when the platform has no typing indicator.
        let mut tick = tokio::time::interval(typing.unwrap_or(Duration::from_secs(3600)));
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(TurnEvent::Started { turn_id }) => {
                        owner = Some(self.owns(&turn_id));
                    }
                    Some(TurnEvent::Text(delta)) => {
                        if previewing && owner == Some(true) {
                            preview.text.push_str(&delta);
                            self.show_preview(&target, &mut preview).await;
                        }
                    }
                    Some(TurnEvent::WaitingForApproval { tool }) => {
                        if owner != Some(false) && !told_waiting.contains(&tool) {
                            let note = waiting_text(&tool);
                            told_waiting.push(tool);
                            if let Err(e) = self.send_text(&target, &note, &[]).await {
                                tracing::debug!("could not say that a call waits for the owner: {e}");
                            }
                        }
                    }
                    Some(TurnEvent::Finished { turn_id, text }) => {
                        let mine = owner.unwrap_or_else(|| self.owns(&turn_id));
                        if mine && !text.trim().is_empty() {
                            self.reply_with(&msg, text, preview.id).await;
                        } else {
                            self.settle(&msg).await;
                        }
                        return;
                    }
                    Some(TurnEvent::Failed { turn_id, message }) => {
                        if owner.unwrap_or_else(|| self.owns(&turn_id)) {
                            let text = format!("Sorry, something went wrong: {message}");
                            self.reply_with(&msg, text, preview.id).await;
                        } else {
                            self.settle(&msg).await;
                        }
                        return;
                    }
                    // The daemon stopped mid-turn: the message stays owed
                    // and is taken up after the restart.
                    None => return,
                },
                _ = tick.tick(), if typing.is_some() => {
                    let _ = self.platform.typing(&target).await;
                }
                _ = self.stop.cancelled() => return,
            }
        }
    }

    /// Whether this follower owns `turn_id` (an empty id: a failure before
    /// any turn started, which only this message saw).
    pub(super) fn owns(&self, turn_id: &str) -> bool {
        turn_id.is_empty() || self.first_answer(turn_id)
    }

    /// Shows the answer so far in one message, edited at most once per
    /// the platform's `edit_every`; plain text (Markdown half written does not
    /// render), cut to the platform's length.
    pub(super) async fn show_preview(&self, target: &Target, preview: &mut Preview) {
        if preview
            .shown_at
            .is_some_and(|at| at.elapsed() < self.platform.capabilities().edit_every)
        {
            return;
        }
        let max = self.platform.capabilities().max_chars.saturating_sub(1);
        let mut shown: String = preview.text.chars().take(max).collect();
        shown.push('…');
        preview.shown_at = Some(tokio::time::Instant::now());
        match &preview.id {
            None => {
                match self
                    .platform
                    .send(target, &shown, Formatting::Plain, &[], None)
                    .await
                {
                    Ok(id) => preview.id = Some(id),
                    Err(e) => tracing::debug!("the preview could not be shown: {e}"),
                }
            }
            Some(id) => {
                if let Err(e) = self
                    .platform
                    .edit(target, id, &shown, Formatting::Plain)
                    .await
                {
                    tracing::debug!("the preview could not be updated: {e}");
                }
            }
        }
    }

    /// Whether this is the first answer of `turn_id` (a turn answering
    /// several queued messages is sent once, under the first of them).
    pub(super) fn first_answer(&self, turn_id: &str) -> bool {
        let mut turns = lock(&self.turns);
        let (seen, order) = &mut *turns;
        if !seen.insert(turn_id.to_string()) {
            return false;
        }
        order.push_back(turn_id.to_string());
        if order.len() > TURNS_REMEMBERED
            && let Some(old) = order.pop_front()
        {
            seen.remove(&old);
        }
        true
    }
}
