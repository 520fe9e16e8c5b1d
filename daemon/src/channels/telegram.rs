//! The Telegram bridge attached to the daemon: reads the token, connects
//! (`getMe`), registers the chat commands, builds the [`Bridge`] over the
//! hub and runs the reader (long polling with its watchdog, or the
//! webhook). A bridge that cannot connect (no token, a bad one, the API
//! unreachable) says why in its health and tries again, backing off from
//! 5 s to 5 min, until it connects or the daemon stops.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use pincer_channel::{Bridge, Health};
use tokio_util::sync::CancellationToken;

use super::Channels;
use super::host::DaemonHost;
use super::settings::bridge_settings;
use crate::config::{ChannelSettings, TelegramMode};

/// Random bytes from the OS (pairing codes), through uuid's v4 source.
fn os_random(buf: &mut [u8]) {
    for chunk in buf.chunks_mut(16) {
        let id = uuid::Uuid::new_v4();
        chunk.copy_from_slice(&id.as_bytes()[..chunk.len()]);
    }
}

/// The crate's settings from the daemon's config, reading the secrets.
fn platform_settings(
    settings: &ChannelSettings,
) -> Result<pincer_telegram::TelegramSettings, String> {
    let mut out = pincer_telegram::TelegramSettings::new(settings.token()?);
    out.api_url = settings.api_url.clone();
    match settings.telegram.as_ref().map(|t| &t.mode) {
        Some(TelegramMode::Webhook(w)) => {
            out.mode = pincer_telegram::Mode::Webhook {
                url: w.url.clone(),
                listen: w.listen,
                secret: w.secret()?,
            };
        }
        Some(TelegramMode::Polling { timeout }) => out.poll_timeout = *timeout,
        None => {}
    }
    Ok(out)
}

/// Starts connecting in the background; the task ends when `stop` is
/// cancelled.
pub(super) fn launch(
    channels: Channels,
    settings: ChannelSettings,
    health: Arc<Health>,
    slot: Arc<RwLock<Option<Arc<Bridge>>>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut wait = Duration::from_secs(5);
        let telegram = loop {
            let attempt = match platform_settings(&settings) {
                Ok(s) => pincer_telegram::connect(s).await.map_err(|e| e.to_string()),
                Err(why) => Err(why),
            };
            match attempt {
                Ok(t) => break t,
                Err(why) => {
                    tracing::warn!("telegram: {why}; trying again in {}s", wait.as_secs());
                    health.disconnected(&why);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.cancelled() => return,
            }
            wait = (wait * 2).min(Duration::from_secs(300));
        };
        health.connected();
        tracing::info!(bot = %pincer_channel::Platform::bot_username(&*telegram), "telegram: connected");
        if let Err(e) = telegram.register_commands().await {
            tracing::warn!("telegram: the chat commands were not registered: {e}");
        }
        let bridge = Bridge::new(
            telegram.clone(),
            Arc::new(DaemonHost::new(channels.hub().clone())),
            bridge_settings(&settings),
            channels.ledger().clone(),
            channels.pairings().clone(),
            health,
            Box::new(os_random),
        );
        *slot.write().unwrap_or_else(|e| e.into_inner()) = Some(bridge.clone());
        let _ = pincer_telegram::spawn(telegram, bridge, stop).await;
    })
}
