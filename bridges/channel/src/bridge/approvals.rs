//! Approvals to the owner: a tool call waiting for approval shown in the
//! owner's DM with Approve, Always for this session and Deny buttons
//! ([`ApprovalAnswer`]), the presses on them (only
//! the owner's count), and the message edited when the approval ends —
//! whichever way it ends (a button, `/approve`, the CLI, expiry, a stopped
//! turn) — so no message keeps buttons for a call nobody waits on.

use std::sync::Arc;

use super::{Bridge, lock};
use crate::approval::{approval_text, ended_text};
use crate::host::{ApprovalAnswer, ApprovalEnd, ApprovalRequest, ChatPerson, HostError};
use crate::message::Formatting;
use crate::platform::{Button, ButtonPress, SendError, Target};

/// Approval messages remembered until their approval ends (more: the
/// oldest are forgotten, and keep their buttons until pressed).
const SHOWN_REMEMBERED: usize = 256;

/// An approval message the owner was sent.
pub(super) struct ShownApproval {
    request: ApprovalRequest,
    target: Target,
    message_id: String,
}

impl Bridge {
    /// Shows an approval to the owner in their DM, with buttons. Does
    /// nothing when the channel has no owner.
    pub async fn ask_owner(&self, request: &ApprovalRequest) -> Result<(), SendError> {
        let Some(owner) = self.settings().owner.clone() else {
            return Ok(());
        };
        let shown = approval_text(request, self.platform.capabilities().max_chars);
        let buttons = [
            (ApprovalAnswer::Allow, "Approve"),
            (ApprovalAnswer::AllowAlways, "Always for this session"),
            (ApprovalAnswer::Deny, "Deny"),
        ]
        .map(|(decision, label)| Button {
            label: label.into(),
            data: format!("{}:{}", decision.verb(), request.id),
        });
        let target = self.platform.direct_chat(&owner).await?;
        let message_id = self.send_text(&target, &shown.text, &buttons).await?;
        {
            let mut shown = lock(&self.approvals);
            shown.push_back((
                request.id.clone(),
                ShownApproval {
                    request: request.clone(),
                    target: target.clone(),
                    message_id,
                },
            ));
            if shown.len() > SHOWN_REMEMBERED {
                shown.pop_front();
            }
        }
        let Some((name, content)) = shown.file else {
            return Ok(());
        };
        let caption = format!("The whole call waiting for approval {}.", request.id);
        if let Err(e) = self.send_document(&target, &name, content, &caption).await {
            // The message promised the file: say that it is not coming.
            let note = format!(
                "The whole call of approval {} could not be sent as a file ({e}); `pincer approvals list --json` shows it at the computer.",
                request.id
            );
            let _ = self.send_text(&target, &note, &[]).await;
            return Err(e);
        }
        Ok(())
    }

    /// An approval ended: its message (when this bridge sent one) is
    /// edited to say how, by whom and where, without buttons.
    pub async fn approval_ended(&self, end: &ApprovalEnd) -> Result<(), SendError> {
        let shown = {
            let mut shown = lock(&self.approvals);
            let at = shown.iter().position(|(id, _)| *id == end.id);
            at.and_then(|i| shown.remove(i)).map(|(_, s)| s)
        };
        let Some(shown) = shown else {
            return Ok(());
        };
        let settings = self.settings();
        let channel = self.channel().to_string();
        let is_reader =
            |p: &ChatPerson| p.channel == channel && super::is_owner_in(&settings, &p.id);
        let text = ended_text(
            &shown.request,
            &end.outcome,
            is_reader,
            self.platform.capabilities().max_chars,
        );
        self.edit_chunk(&shown.target, &shown.message_id, &text)
            .await
    }

    /// A press on an approval button: the owner's decides, anyone else's
    /// is told no.
    pub(super) async fn button(self: Arc<Self>, press: ButtonPress) {
        {
            let mut seen = lock(&self.presses);
            if seen.contains(&press.id) {
                return;
            }
            seen.push_back(press.id.clone());
            if seen.len() > 256 {
                seen.pop_front();
            }
        }
        let Some((decision, id)) = ApprovalAnswer::from_button(&press.data) else {
            let _ = self.platform.answer_button(&press.id, "").await;
            return;
        };
        if !self.is_owner(&press.sender_id) {
            tracing::warn!(sender = %press.sender_id, "an approval button pressed by someone other than the owner: refused");
            let _ = self
                .platform
                .answer_button(&press.id, "Only the owner can answer this.")
                .await;
            return;
        }
        let by = ChatPerson {
            channel: self.channel().to_string(),
            id: press.sender_id.clone(),
            name: press.sender_name.clone(),
        };
        match self.host.decide_approval(id, decision, &by).await {
            // The approval's end edits the message (`approval_ended`).
            Ok(note) => {
                let _ = self.platform.answer_button(&press.id, &note).await;
            }
            // Nothing waits on it (answered, expired, or from before a
            // restart): the message must not keep offering buttons.
            Err(HostError::Refused(note)) => {
                let _ = self.platform.answer_button(&press.id, &note).await;
                let _ = self
                    .platform
                    .edit(
                        &Target::chat(press.chat_id.clone()),
                        &press.message_id,
                        &note,
                        Formatting::Plain,
                    )
                    .await;
            }
            Err(HostError::ShuttingDown) => {
                let _ = self
                    .platform
                    .answer_button(&press.id, "pincerd is shutting down")
                    .await;
            }
        }
    }
}
