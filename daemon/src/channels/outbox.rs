//! The bridges as the `message` tool sees them
//! ([`crate::tools::message::Outbox`]): where an agent may send comes
//! from the routing layer under the live config; a send goes to the
//! channel's connected bridge, or says why it cannot ([`SendError`]).
//! Installed into the runtime when the channels part starts.

use std::path::Path;
use std::sync::{Arc, Weak};

use pincer_channel::{Bridge, Target};

use super::{Channels, Inner};
use crate::tools::message::{MessageTargets, NoDefaultChat, Outbox, SendError};
use crate::tools::origin::{ChatAddress, ChatOrigin};
use crate::tools::sessions::BoxFuture;

/// The channels behind the tool. Weak: the runtime that holds it is
/// reached from the channels (through the hub), and a strong handle
/// would keep both alive for good.
pub struct ChannelsOutbox {
    inner: Weak<Inner>,
}

impl Channels {
    /// This handle as the `message` tool's outbox.
    pub fn outbox(&self) -> Arc<dyn Outbox> {
        Arc::new(ChannelsOutbox {
            inner: Arc::downgrade(&self.inner),
        })
    }
}

impl ChannelsOutbox {
    /// The channels, unless pincerd is shutting down.
    fn channels(&self) -> Option<Channels> {
        self.inner.upgrade().map(|inner| Channels { inner })
    }

    /// The connected bridge of `to`'s channel, or why there is none.
    fn bridge(&self, to: &ChatAddress) -> Result<Arc<Bridge>, SendError> {
        let channels = self.channels().ok_or(SendError::ShuttingDown)?;
        if let Some(bridge) = channels.bridge(&to.channel) {
            return Ok(bridge);
        }
        let config = channels.hub().config();
        let channel = to.channel.clone();
        let Some(settings) = config.channels.get(&to.channel) else {
            return Err(SendError::NoChannel { channel });
        };
        if !settings.enabled {
            return Err(SendError::Disabled { channel });
        }
        let why = channels
            .running()
            .get(&to.channel)
            .and_then(|r| r.health.snapshot().last_error)
            .map(|(_, why)| why)
            .unwrap_or_else(|| "it is still connecting".into());
        Err(SendError::NotConnected { channel, why })
    }
}

/// Where `to` is on its platform: a chat by its id, or a person's DM as
/// the platform opens it (Telegram: the user's id; Discord: a DM channel).
async fn target(bridge: &Bridge, to: &ChatAddress) -> Result<Target, SendError> {
    if to.person {
        return bridge
            .platform()
            .direct_chat(&to.chat_id)
            .await
            .map_err(|e| SendError::NoDm {
                to: to.clone(),
                why: e.to_string(),
            });
    }
    Ok(Target {
        chat_id: to.chat_id.clone(),
        thread_id: to.thread_id.clone(),
        reply_to: None,
    })
}

impl Outbox for ChannelsOutbox {
    fn targets(&self, agent: &str, origin: &ChatOrigin) -> MessageTargets {
        let Some(channels) = self.channels() else {
            return MessageTargets {
                default: Err(NoDefaultChat::ShuttingDown),
                allowed: Vec::new(),
            };
        };
        let config = channels.hub().config();
        crate::routing::message_targets(&config, agent, origin)
    }

    fn send_text<'a>(
        &'a self,
        to: &'a ChatAddress,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, SendError>> {
        Box::pin(async move {
            let bridge = self.bridge(to)?;
            let ids = bridge
                .send_to(&target(&bridge, to).await?, text)
                .await
                .map_err(|e| SendError::TextRefused {
                    channel: to.channel.clone(),
                    why: e.to_string(),
                })?;
            tracing::info!(to = %to, messages = ids.len(), "the message tool sent text");
            Ok(ids)
        })
    }

    fn send_file<'a>(
        &'a self,
        to: &'a ChatAddress,
        file: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<String, SendError>> {
        Box::pin(async move {
            let bridge = self.bridge(to)?;
            let id = bridge
                .send_file_to(&target(&bridge, to).await?, file, caption)
                .await
                .map_err(|e| SendError::FileRefused {
                    channel: to.channel.clone(),
                    why: e.to_string(),
                })?;
            tracing::info!(to = %to, message = %id, "the message tool sent a file");
            Ok(id)
        })
    }
}
