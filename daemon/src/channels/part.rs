//! The bridges as a lifecycle part (`crate::lifecycle`): each enabled
//! `[channels.<name>]` is launched at start; a reload stops, starts or
//! restarts a bridge whose connection changed (token, `api_url`, mode) and
//! hands the others their new access settings live; the daemon's stop
//! ends the readers first and lets answers being sent finish within the
//! grace. Routing (agents, tool layers, prompts of groups) reads the live
//! config on every message, so it needs nothing here. Starting also
//! installs the bridges into the runtime for the `message` tool.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use pincer_channel::Health;
use tokio_util::sync::CancellationToken;

use super::settings::bridge_settings;
use super::{Channels, Running};
use crate::config::{ChannelSettings, Config, TelegramMode};
use crate::lifecycle::{Part, Reloaded, StartFuture, StopFuture};

/// The bridges' part.
pub struct ChannelsPart {
    channels: Channels,
    stop: CancellationToken,
}

impl ChannelsPart {
    pub fn new(channels: Channels) -> Self {
        Self {
            channels,
            stop: CancellationToken::new(),
        }
    }
}

/// `polling`, `webhook`, `gateway`: how a channel's events arrive.
fn mode(settings: &ChannelSettings) -> &'static str {
    match settings.telegram.as_ref().map(|t| &t.mode) {
        Some(TelegramMode::Webhook(_)) => "webhook",
        Some(TelegramMode::Polling { .. }) => "polling",
        None => "gateway",
    }
}

/// Whether a change needs the bridge reconnected (not just new settings).
fn reconnects(old: &ChannelSettings, new: &ChannelSettings) -> bool {
    old.token_source != new.token_source
        || old.api_url != new.api_url
        || old.telegram != new.telegram
        || old.discord != new.discord
}

impl Channels {
    /// Starts the bridge of one channel; it connects in the background,
    /// retrying, and says why it cannot in its health.
    pub(crate) fn launch(&self, name: &str, settings: &ChannelSettings) {
        let health = Arc::new(Health::new(name, mode(settings)));
        let stop = CancellationToken::new();
        let slot = Arc::new(RwLock::new(None));
        let task = match name {
            #[cfg(feature = "telegram")]
            "telegram" => Some(super::telegram::launch(
                self.clone(),
                settings.clone(),
                health.clone(),
                slot.clone(),
                stop.clone(),
            )),
            #[cfg(feature = "discord")]
            "discord" => Some(super::discord::launch(
                self.clone(),
                settings.clone(),
                health.clone(),
                slot.clone(),
                stop.clone(),
            )),
            other => {
                let why = format!("this pincerd was built without the {other} bridge");
                tracing::warn!("{why}");
                health.disconnected(&why);
                None
            }
        };
        let previous = self.running().insert(
            name.to_string(),
            Running {
                health,
                bridge: slot,
                stop,
                task,
            },
        );
        if let Some(old) = previous {
            old.stop.cancel();
        }
    }

    /// Stops one bridge: its reader at once, its answers within `grace`.
    pub(crate) async fn halt(&self, name: &str, grace: Duration) {
        let Some(run) = self.running().remove(name) else {
            return;
        };
        run.stop.cancel();
        if let Some(bridge) = run.bridge() {
            bridge.stop(grace).await;
        }
        if let Some(task) = run.task {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
    }
}

impl Part for ChannelsPart {
    fn name(&self) -> &'static str {
        "channels"
    }

    /// Launches each enabled bridge; each connects in the background and
    /// reports through its health, so this start does not fail.
    fn start<'a>(&'a self, config: &'a Config) -> StartFuture<'a> {
        self.channels.hub().install_outbox(self.channels.outbox());
        self.channels.forward_approvals(self.stop.child_token());
        self.channels.prune_ledger(self.stop.child_token());
        for (name, settings) in &config.channels {
            if settings.enabled {
                self.channels.launch(name, settings);
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn reload(&self, old: &Config, new: &Config) -> Reloaded {
        if old.channels == new.channels {
            return Reloaded::Unchanged;
        }
        let mut done = Vec::new();
        let names: std::collections::BTreeSet<&String> =
            old.channels.keys().chain(new.channels.keys()).collect();
        for name in names {
            let before = old.channels.get(name).filter(|s| s.enabled);
            let after = new.channels.get(name).filter(|s| s.enabled);
            match (before, after) {
                (None, None) => {}
                (Some(_), None) => {
                    done.push(format!("{name} stopped"));
                    let channels = self.channels.clone();
                    let name = name.clone();
                    tokio::spawn(async move { channels.halt(&name, Duration::from_secs(5)).await });
                }
                (None, Some(s)) => {
                    self.channels.launch(name, s);
                    done.push(format!("{name} started"));
                }
                (Some(a), Some(b)) if reconnects(a, b) => {
                    done.push(format!("{name} reconnecting"));
                    let channels = self.channels.clone();
                    let (name, settings) = (name.clone(), b.clone());
                    tokio::spawn(async move {
                        channels.halt(&name, Duration::from_secs(5)).await;
                        channels.launch(&name, &settings);
                    });
                }
                (Some(a), Some(b)) => {
                    if a != b {
                        if let Some(bridge) = self.channels.bridge(name) {
                            bridge.set_settings(bridge_settings(b));
                        }
                        done.push(format!("{name} settings applied"));
                    }
                }
            }
        }
        if done.is_empty() {
            Reloaded::Unchanged
        } else {
            Reloaded::Applied(done.join(", "))
        }
    }

    fn stop(&self, grace: Duration) -> StopFuture<'_> {
        Box::pin(async move {
            self.stop.cancel();
            let names: Vec<String> = self.channels.running().keys().cloned().collect();
            for name in names {
                self.channels.halt(&name, grace).await;
            }
        })
    }
}
