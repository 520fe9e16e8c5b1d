//! What waits on a person, shown in chats: a tool call waiting for the
//! owner (in their DM, with Approve, Always for this session and Deny
//! buttons), a workflow's approval (to the owner and to the step's
//! approvers on this channel, in their DMs, with Approve and Deny) or
//! question (to the owner). Presses and commands go to the daemon, which
//! says who may answer; the messages are edited when the request ends —
//! whichever way it ends (a button, a command, the CLI, expiry, a stopped
//! turn or run) — so no message keeps buttons nobody waits on.

use std::sync::Arc;

use super::{Bridge, lock};
use crate::approval::{approval_text, ended_text};
use crate::host::{ApprovalAnswer, ApprovalEnd, ApprovalRequest, ChatPerson, HaltKind, HostError};
use crate::message::Formatting;
use crate::platform::{Button, ButtonPress, SendError, Target};

/// Approval messages remembered until their approval ends (more: the
/// oldest are forgotten, and keep their buttons until pressed).
const SHOWN_REMEMBERED: usize = 256;

/// An approval message a person was sent.
pub(super) struct ShownApproval {
    request: ApprovalRequest,
    target: Target,
    message_id: String,
    /// The user id of the person it was sent to.
    reader: String,
}

impl Bridge {
    /// Shows a request to those who may answer it, in their DMs: the
    /// owner (nothing when the channel has none), and for a workflow's
    /// approval its approvers on this channel.
    pub async fn ask_owner(&self, request: &ApprovalRequest) -> Result<(), SendError> {
        let owner = self.settings().owner.clone();
        let mut readers: Vec<String> = owner.into_iter().collect();
        if let Some(halt) = &request.halt
            && let HaltKind::Approval { approvers, .. } = &halt.ask
        {
            let prefix = format!("{}:", self.channel());
            for a in approvers {
                if let Some(id) = a.strip_prefix(&prefix)
                    && !readers.iter().any(|r| r == id)
                {
                    readers.push(id.to_string());
                }
            }
        }
        let mut first_error = None;
        for reader in readers {
            if let Err(e) = self.show(request, &reader).await {
                tracing::warn!(channel = %self.channel(), "could not show request {} to user {reader}: {e}", request.id);
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Sends `request` to `reader`'s DM, with its buttons and, when the
    /// message shows only part of it, the whole as a file.
    async fn show(&self, request: &ApprovalRequest, reader: &str) -> Result<(), SendError> {
        let shown = approval_text(request, self.platform.capabilities().max_chars);
        let answers: &[(ApprovalAnswer, &str)] = match request.halt.as_ref().map(|h| &h.ask) {
            None => &[
                (ApprovalAnswer::Allow, "Approve"),
                (ApprovalAnswer::AllowAlways, "Always for this session"),
                (ApprovalAnswer::Deny, "Deny"),
            ],
            Some(HaltKind::Approval { .. }) => &[
                (ApprovalAnswer::Allow, "Approve"),
                (ApprovalAnswer::Deny, "Deny"),
            ],
            Some(HaltKind::Input) => &[],
        };
        let buttons: Vec<Button> = answers
            .iter()
            .map(|(decision, label)| Button {
                label: (*label).into(),
                data: format!("{}:{}", decision.verb(), request.id),
            })
            .collect();
        let target = self.platform.direct_chat(reader).await?;
        let message_id = self.send_text(&target, &shown.text, &buttons).await?;
        {
            let mut shown = lock(&self.approvals);
            shown.push_back((
                request.id.clone(),
                ShownApproval {
                    request: request.clone(),
                    target: target.clone(),
                    message_id,
                    reader: reader.to_string(),
                },
            ));
            if shown.len() > SHOWN_REMEMBERED {
                shown.pop_front();
            }
        }
        let Some((name, content)) = shown.file else {
            return Ok(());
        };
        let caption = format!("The whole of request {}.", request.id);
        if let Err(e) = self.send_document(&target, &name, content, &caption).await {
            // The message promised the file: say that it is not coming.
            let note = format!(
                "The whole of request {} could not be sent as a file ({e}); `pincer approvals list --json` shows it at the computer.",
                request.id
            );
            let _ = self.send_text(&target, &note, &[]).await;
            return Err(e);
        }
        Ok(())
    }

    /// A request ended: each message this bridge sent for it is edited to
    /// say how, by whom and where, without buttons.
    pub async fn approval_ended(&self, end: &ApprovalEnd) -> Result<(), SendError> {
        let shown: Vec<ShownApproval> = {
            let mut shown = lock(&self.approvals);
            let (this, rest): (Vec<_>, Vec<_>) = shown.drain(..).partition(|(id, _)| *id == end.id);
            shown.extend(rest);
            this.into_iter().map(|(_, s)| s).collect()
        };
        let channel = self.channel().to_string();
        let mut result = Ok(());
        for message in shown {
            let is_reader = |p: &ChatPerson| p.channel == channel && p.id == message.reader;
            let text = ended_text(
                &message.request,
                &end.outcome,
                is_reader,
                self.platform.capabilities().max_chars,
            );
            if let Err(e) = self
                .edit_chunk(&message.target, &message.message_id, &text)
                .await
            {
                result = Err(e);
            }
        }
        result
    }

    /// A press on an approval button: the daemon decides whether the one
    /// who pressed it may answer, and they are told what it did.
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
        // Who may answer is the daemon's to say (the owner for a tool
        // call, a step's approvers for a workflow's approval).
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
            // Not theirs to answer: only they are told.
            Err(HostError::Refused(note)) if self.host.is_waiting(id) => {
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
