//! The Telegram bridge attached to the daemon: reads the token, connects
//! (`getMe`), registers the chat commands, builds the [`Bridge`] over the
//! hub and runs the reader (long polling with its watchdog, or the
//! webhook). A bridge that cannot connect (no token, a bad one, the API
//! unreachable) says why in its health and tries again, backing off from
//! 5 s to 5 min, until it connects or the daemon stops: the channel
//! layer's `supervise` loop, which every platform shares.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use pincer_channel::{Backoff, Bridge, Health, supervise};
use tokio_util::sync::CancellationToken;

use super::Channels;
use super::host::DaemonHost;
use super::settings::bridge_settings;
use crate::config::{ChannelSettings, TelegramMode};

/// The crate's settings from the daemon's config, reading the secrets.
fn platform_settings(
    settings: &ChannelSettings,
) -> Result<pincer_telegram::TelegramSettings, String> {
    let token = settings.token().map_err(|e| e.to_string())?;
    let mut out = pincer_telegram::TelegramSettings::new(token);
    out.api_url = settings.api_url.clone();
    match settings.telegram.as_ref().map(|t| &t.mode) {
        Some(TelegramMode::Webhook(w)) => {
            out.mode = pincer_telegram::Mode::Webhook {
                url: w.url.clone(),
                listen: w.listen,
                secret: w.secret().map_err(|e| e.to_string())?,
            };
        }
        Some(TelegramMode::Polling { timeout }) => out.poll_timeout = *timeout,
        None => {}
    }
    Ok(out)
}

/// Starts connecting in the background (the shared reconnect loop, from
/// 5 s to 5 min between failures); the task ends when `stop` is cancelled.
pub(super) fn launch(
    channels: Channels,
    settings: ChannelSettings,
    health: Arc<Health>,
    slot: Arc<RwLock<Option<Arc<Bridge>>>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
        let connect = || async {
            let s = platform_settings(&settings)?;
            pincer_telegram::connect(s).await.map_err(|e| e.to_string())
        };
        let run = |telegram| run(&channels, &settings, &health, &slot, telegram, &stop);
        supervise("telegram", &health, backoff, &stop, connect, run).await;
    })
}

/// Runs one connected bridge until its reader ends; answers how it ended.
async fn run(
    channels: &Channels,
    settings: &ChannelSettings,
    health: &Arc<Health>,
    slot: &Arc<RwLock<Option<Arc<Bridge>>>>,
    telegram: Arc<pincer_telegram::Telegram>,
    stop: &CancellationToken,
) -> String {
    health.connected();
    tracing::info!(bot = %telegram.username(), "telegram: connected");
    if let Err(e) = telegram.register_commands().await {
        tracing::warn!("telegram: the chat commands were not registered: {e}");
    }
    let bridge = Bridge::new(
        telegram.clone(),
        Arc::new(DaemonHost::new(channels.hub().clone())),
        bridge_settings(settings),
        channels.ledger().clone(),
        channels.pairings().clone(),
        health.clone(),
        Box::new(super::os_random),
    );
    let previous = slot
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .replace(bridge.clone());
    if let Some(old) = previous {
        old.stop(Duration::from_secs(1)).await;
    }
    match pincer_telegram::spawn(telegram, bridge, stop.child_token()).await {
        Ok(()) => "it returned".into(),
        Err(e) if e.is_panic() => "it panicked".into(),
        Err(e) => e.to_string(),
    }
}
