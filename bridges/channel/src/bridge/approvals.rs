//! Approvals to the owner: a tool call waiting for approval shown in the
//! owner's DM with Approve and Deny buttons, and the presses on them (only
//! the owner's count).

use std::sync::Arc;

use super::{Bridge, lock};
use crate::approval::approval_text;
use crate::host::{ApprovalRequest, HostError};
use crate::message::Formatting;
use crate::platform::{Button, ButtonPress, SendError, Target};

impl Bridge {
    /// Shows an approval to the owner in their DM, with buttons. Does
    /// nothing when the channel has no owner.
    pub async fn ask_owner(&self, request: &ApprovalRequest) -> Result<(), SendError> {
        let Some(owner) = self.settings().owner.clone() else {
            return Ok(());
        };
        let shown = approval_text(request, self.platform.capabilities().max_chars);
        let buttons = [
            Button {
                label: "Approve".into(),
                data: format!("approve:{}", request.id),
            },
            Button {
                label: "Deny".into(),
                data: format!("deny:{}", request.id),
            },
        ];
        let target = Target::direct(owner);
        self.send_text(&target, &shown.text, &buttons).await?;
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
        let decision = press
            .data
            .split_once(':')
            .and_then(|(verb, id)| match verb {
                "approve" => Some((true, id)),
                "deny" => Some((false, id)),
                _ => None,
            });
        let Some((allow, id)) = decision else {
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
        let note = match self.host.decide_approval(id, allow).await {
            Ok(note) | Err(HostError::Refused(note)) => note,
            Err(HostError::ShuttingDown) => "pincerd is shutting down".to_string(),
        };
        let _ = self.platform.answer_button(&press.id, &note).await;
        let _ = self
            .platform
            .edit(
                &Target::direct(press.chat_id.clone()),
                &press.message_id,
                &note,
                Formatting::Plain,
            )
            .await;
    }
}
