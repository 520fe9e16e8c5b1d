//! The daemon behind the channel layer's [`Host`] seam: a chat message is
//! routed (`crate::routing`: agent, session key, the origin with the
//! chat's policy layers) and handed to the hub like a CLI message; chat
//! commands go to `super::commands`, which decides who may do what over
//! the same hub verbs as the Sessions service; approvals the same store
//! as `pincer approvals`. Nothing here decides policy.
//! A message's saved images go to the hub as paths relative to the
//! answering agent's workspace, as the transcript keeps them.

use std::path::{Path, PathBuf};

use pincer_channel::{BoxFuture, ChatKind, Command, Host, HostError, Inbound, TurnEvent};
use tokio::sync::mpsc;

use super::commands::refused;
use crate::agent::Event;
use crate::agent::hub::Hub;
use crate::routing::{self, Chat, Route, Sender};

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
        let config = self.hub.runtime().config();
        routing::route(&config, &to_routing(msg)).map_err(|e| HostError::Refused(e.to_string()))
    }
}

/// The saved images as paths relative to `workspace`, as the transcript
/// keeps them; one outside it (the workspace moved by a reload since the
/// file was saved) is left out, and its note in the text stays.
fn workspace_relative(workspace: &Path, images: &[PathBuf]) -> Vec<String> {
    images
        .iter()
        .filter_map(|p| match p.strip_prefix(workspace) {
            Ok(rel) => rel.to_str().map(str::to_string),
            Err(_) => {
                tracing::info!(image = %p.display(), workspace = %workspace.display(), "image outside the agent's workspace; only its note is sent");
                None
            }
        })
        .collect()
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
        images: Vec<PathBuf>,
    ) -> BoxFuture<'a, Result<mpsc::UnboundedReceiver<TurnEvent>, HostError>> {
        Box::pin(async move {
            let route = self.route(msg)?;
            let images = match self.hub.runtime().config().agent(&route.agent) {
                Some(agent) => workspace_relative(&agent.workspace, &images),
                None => Vec::new(),
            };
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
            let config = self.hub.runtime().config();
            super::commands::answer(&self.hub, &config, msg, &route, command).await
        })
    }

    fn decide_approval<'a>(
        &'a self,
        id: &'a str,
        allow: bool,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            let id = id.trim();
            Ok(if self.hub.runtime().approvals().decide(id, allow, false) {
                tracing::info!(
                    approval = id,
                    allow,
                    "approval answered from a chat by the owner"
                );
                format!("{} {id}.", if allow { "Approved" } else { "Denied" })
            } else {
                format!("No approval {id} is waiting (answered already, or expired).")
            })
        })
    }

    fn inbox(&self, msg: &Inbound) -> Result<PathBuf, HostError> {
        let route = self.route(msg)?;
        let config = self.hub.runtime().config();
        let agent = config
            .agent(&route.agent)
            .ok_or_else(|| HostError::Refused(format!("no agent `{}`", route.agent)))?;
        let inbox = agent.workspace.join("inbox");
        std::fs::create_dir_all(&inbox)
            .map_err(|e| HostError::Refused(format!("cannot create {}: {e}", inbox.display())))?;
        Ok(inbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_kept_relative_to_the_workspace_and_others_dropped() {
        let ws = Path::new("/home/u/.pincer/workspace");
        let images = [
            ws.join("inbox/1-2-0-photo.jpg"),
            PathBuf::from("/elsewhere/inbox/x.jpg"),
        ];
        assert_eq!(workspace_relative(ws, &images), ["inbox/1-2-0-photo.jpg"]);
    }
}
