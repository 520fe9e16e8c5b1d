//! One message from the queue to a turn (steps 3 to 5 of the bridge's
//! module doc): the access decision (a stranger's code, group context,
//! silence), the chat commands, and the turn started with the group's
//! context and the attachments saved.

use std::sync::Arc;

use super::*;

impl Bridge {
    /// Steps 3 to 5 of the module docs for one message.
    pub(super) async fn accept(self: &Arc<Self>, msg: Inbound) {
        let settings = self.settings();
        let decision = if msg.kind == ChatKind::Direct && is_owner_in(&settings, &msg.sender.id) {
            Decision::Pass
        } else {
            let mut random = lock(&self.random);
            match self
                .pairings
                .decide(&settings.access, &msg, crate::unix_now(), &mut *random)
            {
                Ok(d) => d,
                Err(e) => {
                    // Without a saved code a stranger would get a new one
                    // each message: ignore instead (and say so).
                    tracing::error!("{e}");
                    self.health.error(&e.to_string());
                    Decision::Ignore
                }
            }
        };
        match decision {
            Decision::Pass => self.pass(msg, &settings).await,
            Decision::PassAsContext => {
                lock(&self.context).push_inbound(&msg, crate::unix_now());
                self.settle(&msg).await;
            }
            Decision::SendPairingCode { code } => {
                tracing::info!(channel = %msg.channel, sender = %msg.sender.id, "a stranger was sent a pairing code");
                self.reply(&msg, pairing_text(&msg.channel, &code)).await;
            }
            Decision::Ignore | Decision::AlreadyPending | Decision::TooManyPending => {
                if msg.kind != ChatKind::Direct
                    && !settings.access.listens_to_group(&msg)
                    && lock(&self.unlisted).insert(msg.chat_id.clone())
                {
                    // Once per group and run: how the owner learns the id.
                    let guild = msg
                        .guild_id
                        .as_ref()
                        .map(|g| {
                            format!(
                                ", or [channels.{}.guilds.\"{g}\"] for its whole guild",
                                msg.channel
                            )
                        })
                        .unwrap_or_default();
                    tracing::info!(
                        "{}: a message in group {}, which is not listed under [channels.{}.groups]; add [channels.{}.groups.\"{}\"] to answer there{guild}",
                        msg.channel,
                        msg.chat_id,
                        msg.channel,
                        msg.channel,
                        msg.chat_id
                    );
                }
                self.settle(&msg).await;
            }
        }
    }

    pub(super) async fn pass(self: &Arc<Self>, msg: Inbound, settings: &BridgeSettings) {
        if let Some(command) = Command::parse(&msg.text, self.platform.bot_username()) {
            let answer = match &command {
                Command::Help => Ok(HELP.to_string()),
                // Who may answer is the daemon's to say.
                command if command.answer().is_some() => {
                    let by = ChatPerson {
                        channel: msg.channel.clone(),
                        id: msg.sender.id.clone(),
                        name: msg.sender.name.clone(),
                    };
                    match command.answer() {
                        Some((id, answer)) => self.host.decide_approval(id, answer, &by).await,
                        None => Ok(String::new()),
                    }
                }
                _ => self.host.command(&msg, &command).await,
            };
            match answer {
                Ok(text) | Err(HostError::Refused(text)) => self.reply(&msg, text).await,
                Err(HostError::ShuttingDown) => {}
            }
            return;
        }
        // The person's text can hold lines that look like the headers the
        // bridge (context, notes) and the daemon add: escaped before any
        // of them is added.
        let mut text = neutralise(&msg.text).into_owned();
        if msg.kind != ChatKind::Direct {
            let lines = lock(&self.context).take(&ContextKey::of(&msg));
            if let Some(block) = context::render(&lines) {
                text = format!("{block}\n\n{text}");
            }
        }
        let (notes, images) = self.save_attachments(&msg, settings).await;
        for note in notes {
            text.push_str("\n\n");
            text.push_str(&note);
        }
        match self.host.chat(&msg, text, images).await {
            Ok(events) => {
                let this = self.clone();
                self.tasks
                    .spawn(async move { this.follow(msg, events).await });
            }
            // Left unanswered in the ledger: taken up after the restart.
            Err(HostError::ShuttingDown) => {}
            Err(HostError::Refused(why)) => self.reply(&msg, why).await,
        }
    }
}
