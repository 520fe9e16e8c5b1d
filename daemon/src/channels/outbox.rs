//! The bridges as the `message` tool sees them
//! ([`crate::tools::message::Outbox`]): where an agent may send comes
//! from the routing layer under the live config; a send goes to the
//! channel's connected bridge, or says in a sentence why it cannot.
//! Installed into the runtime when the channels part starts.

use std::path::Path;
use std::sync::{Arc, Weak};

use pincer_channel::{Bridge, Target};

use super::{Channels, Inner};
use crate::tools::message::{MessageTargets, Outbox};
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
    fn channels(&self) -> Result<Channels, String> {
        self.inner
            .upgrade()
            .map(|inner| Channels { inner })
            .ok_or_else(|| "pincerd is shutting down; nothing was sent".to_string())
    }

    /// The connected bridge of `to`'s channel, or why there is none.
    fn bridge(&self, to: &ChatAddress) -> Result<Arc<Bridge>, String> {
        let channels = self.channels()?;
        if let Some(bridge) = channels.bridge(&to.channel) {
            return Ok(bridge);
        }
        let config = channels.hub().runtime().config();
        let Some(settings) = config.channels.get(&to.channel) else {
            return Err(format!(
                "no channel `{}` is configured in this daemon",
                to.channel
            ));
        };
        if !settings.enabled {
            return Err(format!(
                "the {} bridge is disabled ([channels.{}] enabled = false)",
                to.channel, to.channel
            ));
        }
        let why = channels
            .running()
            .get(&to.channel)
            .and_then(|r| r.health.snapshot().last_error)
            .map(|(_, why)| why)
            .unwrap_or_else(|| "it is still connecting".into());
        Err(format!(
            "the {} bridge is not connected ({why})",
            to.channel
        ))
    }
}

/// Where `to` is on its platform: a chat by its id, or a person's DM as
/// the platform opens it (Telegram: the user's id; Discord: a DM channel).
async fn target(bridge: &Bridge, to: &ChatAddress) -> Result<Target, String> {
    if to.person {
        return bridge
            .platform()
            .direct_chat(&to.chat_id)
            .await
            .map_err(|e| format!("cannot open the DM with {to}: {e}"));
    }
    Ok(Target {
        chat_id: to.chat_id.clone(),
        thread_id: to.thread_id.clone(),
        reply_to: None,
    })
}

impl Outbox for ChannelsOutbox {
    fn targets(&self, agent: &str, origin: &ChatOrigin) -> MessageTargets {
        let config = match self.channels() {
            Ok(c) => c.hub().runtime().config(),
            Err(why) => {
                return MessageTargets {
                    default: Err(why),
                    allowed: Vec::new(),
                };
            }
        };
        crate::routing::message_targets(&config, agent, origin)
    }

    fn send_text<'a>(
        &'a self,
        to: &'a ChatAddress,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let bridge = self.bridge(to)?;
            let ids = bridge
                .send_to(&target(&bridge, to).await?, text)
                .await
                .map_err(|e| format!("{} did not take the message: {e}", to.channel))?;
            tracing::info!(to = %to, messages = ids.len(), "the message tool sent text");
            Ok(ids)
        })
    }

    fn send_file<'a>(
        &'a self,
        to: &'a ChatAddress,
        file: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let bridge = self.bridge(to)?;
            let id = bridge
                .send_file_to(&target(&bridge, to).await?, file, caption)
                .await
                .map_err(|e| format!("{} did not take the file: {e}", to.channel))?;
            tracing::info!(to = %to, message = %id, "the message tool sent a file");
            Ok(id)
        })
    }
}
