//! Approvals to the owner: a tool call waiting for approval shown in the
//! owner's DM with Approve and Deny buttons, and the presses on them (only
//! the owner's count).

use std::sync::Arc;

use super::{Bridge, lock};
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
        let mut args: String = request.arguments.chars().take(600).collect();
        if args.len() < request.arguments.len() {
            args.push('…');
        }
        let text = format!(
            "Approval needed: agent `{}` wants to run `{}` with\n```\n{}\n```\nSession {}. It expires in {} min; answer with the buttons, or /approve {} or /deny {}.",
            request.agent,
            request.tool,
            args.replace("```", "'''"),
            request.session,
            request.expires_in_s.div_ceil(60),
            request.id,
            request.id
        );
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
        self.send_text(&Target::direct(owner), &text, &buttons)
            .await
            .map(|_| ())
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
