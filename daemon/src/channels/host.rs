//! The daemon behind the channel layer's [`Host`] seam: a chat message is
//! routed (`crate::routing`: agent, session key, the origin with the
//! chat's policy layers) and handed to the hub like a CLI message; chat
//! commands go to `super::commands`, which decides who may do what over
//! the same hub verbs as the Sessions service; approvals the same store
//! as `pincer approvals`. Nothing here decides policy.
//!
//! Attachments: [`Host::inbox`] answers the chat's own folder of the
//! answering agent's workspace (`session::Principal::folder`: the owner's
//! `inbox`, a person's `inbox/<channel>-dm-<id>`, a group's
//! `inbox/<channel>-group-<id>`), opened through the workspace opener
//! (`crate::workspace`), so a link planted on the way refuses the save
//! instead of redirecting it. The bridge names the saved images relative
//! to the workspace, as the transcript keeps them.

use pincer_channel::{
    ApprovalAnswer, BoxFuture, ChatKind, ChatPerson, Command, Dir, Host, HostError, Inbound,
    TurnEvent,
};
use tokio::sync::mpsc;

use super::commands::refused;
use crate::agent::Event;
use crate::agent::hub::Hub;
use crate::routing::{self, Chat, Route, Sender};
use crate::tools::approvals::{DecidedBy, Decision, Refusal, Voter};

/// The hub as the bridges see it.
#[derive(Clone)]
pub struct DaemonHost {
    hub: Hub,
}

impl DaemonHost {
    pub fn new(hub: Hub) -> Self {
        Self { hub }
    }

    /// The route of a chat message under the live config.
    fn route(&self, msg: &Inbound) -> Result<Route, HostError> {
        let config = self.hub.config();
        routing::route(&config, &to_routing(msg)).map_err(|e| HostError::Refused(e.to_string()))
    }
}

/// The channel layer's message as the routing layer reads it.
pub fn to_routing(msg: &Inbound) -> routing::Inbound {
    routing::Inbound {
        channel: msg.channel.clone(),
        account: Some(msg.account.clone()),
        chat: match msg.kind {
            ChatKind::Direct => Chat::Direct,
            ChatKind::Group | ChatKind::Thread => Chat::Group(msg.chat_id.clone()),
        },
        thread: match msg.kind {
            ChatKind::Thread => msg.thread_id.clone(),
            _ => None,
        },
        // A DM has no guild; a Discord guild channel's message names it and
        // the sender's roles there (Telegram: none).
        guild: match msg.kind {
            ChatKind::Direct => None,
            _ => msg.guild_id.clone(),
        },
        roles: match msg.kind {
            ChatKind::Direct => Vec::new(),
            _ => msg.sender_roles.clone(),
        },
        sender: Sender {
            id: msg.sender.id.clone(),
            name: msg.sender.name.clone(),
        },
    }
}

impl Host for DaemonHost {
    fn chat<'a>(
        &'a self,
        msg: &'a Inbound,
        text: String,
        images: Vec<String>,
    ) -> BoxFuture<'a, Result<mpsc::UnboundedReceiver<TurnEvent>, HostError>> {
        Box::pin(async move {
            let route = self.route(msg)?;
            // A chat that is not the owner's own is told when a call waits
            // for the owner (the owner gets the request itself).
            let tell_waiting = !route.origin.is_owner();
            let (tx, mut rx) = mpsc::unbounded_channel();
            self.hub
                .chat_with_images(route.key, text, images, route.origin, tx)
                .await
                .map_err(refused)?;
            let (out, events) = mpsc::unbounded_channel();
            let hub = self.hub.clone();
            tokio::spawn(async move {
                let mut turn = String::new();
                while let Some(event) = rx.recv().await {
                    // A turn ends with `Finished` or `Error`, as for the
                    // CLI (`server::agent`'s end of stream).
                    let converted = match event {
                        Event::TurnStarted { turn_id, .. } => {
                            turn = turn_id.clone();
                            TurnEvent::Started { turn_id }
                        }
                        Event::Text(t) => TurnEvent::Text(t),
                        Event::ApprovalRequested { tool, .. } if tell_waiting => {
                            TurnEvent::WaitingForApproval { tool }
                        }
                        // Aborted by the shutdown: no answer now; the
                        // message stays owed and is taken up after the
                        // restart.
                        Event::Finished { stop_reason, .. }
                        | Event::Error {
                            code: stop_reason, ..
                        } if hub.is_stopping() && stop_reason == "aborted" => {
                            return;
                        }
                        Event::Error { message, .. } => TurnEvent::Failed {
                            turn_id: turn.clone(),
                            message,
                        },
                        Event::Finished { text, .. } => TurnEvent::Finished {
                            turn_id: turn.clone(),
                            text,
                        },
                        _ => continue,
                    };
                    let last = matches!(
                        converted,
                        TurnEvent::Finished { .. } | TurnEvent::Failed { .. }
                    );
                    if out.send(converted).is_err() || last {
                        return;
                    }
                }
            });
            Ok(events)
        })
    }

    fn command<'a>(
        &'a self,
        msg: &'a Inbound,
        command: &'a Command,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            let route = self.route(msg)?;
            let config = self.hub.config();
            super::commands::answer(&self.hub, &config, msg, &route, command).await
        })
    }

    fn decide_approval<'a>(
        &'a self,
        id: &'a str,
        answer: ApprovalAnswer,
        by: &'a ChatPerson,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            let id = id.trim();
            let decision = match answer {
                ApprovalAnswer::Allow => Decision::Allow { always: false },
                ApprovalAnswer::AllowAlways => Decision::Allow { always: true },
                ApprovalAnswer::Deny => Decision::Deny,
                ApprovalAnswer::Edit(json) => {
                    Decision::Edit(Decision::json(&json, "edited data").map_err(refusal)?)
                }
                ApprovalAnswer::Revise(text) => Decision::Revise(text),
                ApprovalAnswer::Input(json) => {
                    Decision::Answer(Decision::json(&json, "input").map_err(refusal)?)
                }
            };
            let owner = self.hub.config().is_channel_owner(&by.channel, &by.id);
            let voter = Voter {
                by: DecidedBy::Chat {
                    channel: by.channel.clone(),
                    user_id: by.id.clone(),
                    name: by.name.clone(),
                },
                owner,
            };
            let decided = self
                .hub
                .approvals()
                .decide(id, decision, &voter)
                .await
                .map_err(refusal)?;
            tracing::info!(
                approval = id,
                channel = %by.channel,
                user = %by.id,
                owner,
                "answered from a chat: {decided:?}"
            );
            Ok(decided.note(id))
        })
    }

    fn is_waiting(&self, id: &str) -> bool {
        self.hub.approvals().get(id).is_some()
    }

    fn inbox(&self, msg: &Inbound) -> Result<Dir, HostError> {
        let route = self.route(msg)?;
        let config = self.hub.config();
        let agent = config
            .agent(&route.agent)
            .ok_or_else(|| HostError::Refused(format!("no agent `{}`", route.agent)))?;
        crate::workspace::chat_inbox(&agent.workspace, &route.origin.principal)
            .map_err(|e| HostError::Refused(e.to_string()))
    }
}

/// A refused answer, as the one who gave it reads it.
fn refusal(r: Refusal) -> HostError {
    HostError::Refused(match r {
        Refusal::Store(e) => {
            tracing::error!("cannot record an answer to an approval: {e}");
            "The answer could not be recorded; try again.".to_string()
        }
        r => {
            let mut s = r.to_string();
            if let Some(first) = s.get(0..1) {
                let upper = first.to_uppercase();
                s.replace_range(0..1, &upper);
            }
            s.push('.');
            s
        }
    })
}
