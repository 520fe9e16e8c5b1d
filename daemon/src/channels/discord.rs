//! The Discord bridge attached to the daemon: reads the token, connects
//! (`/users/@me`, `/gateway/bot`), builds the [`Bridge`] over the hub and
//! runs the gateway. A bridge that cannot connect says why in its health
//! and tries again, backing off from 5 s to 5 min (the channel layer's
//! `supervise` loop, shared with Telegram); a refused token or intents
//! the application may not use stop this bridge only, with the fix in
//! its health, and never loop.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use pincer_channel::{Backoff, Bridge, Ended, Health, supervise};
use tokio_util::sync::CancellationToken;

use super::Channels;
use super::host::DaemonHost;
use super::settings::bridge_settings;
use crate::config::ChannelSettings;

/// The crate's settings from the daemon's config, reading the token.
fn platform_settings(settings: &ChannelSettings) -> Result<pincer_discord::DiscordSettings, Ended> {
    let mut out = pincer_discord::DiscordSettings::new(
        settings.token().map_err(|e| Ended::Fatal(e.to_string()))?,
    );
    out.api_url = settings.api_url.clone();
    (out.channels, out.open_guilds) = settings.listened();
    out.guilds = settings.guilds.keys().cloned().collect();
    if let Some(d) = &settings.discord {
        out.message_content = d.message_content;
        out.catch_up_age = d.catch_up;
        out.catch_up_messages = d.catch_up_messages;
    }
    Ok(out)
}

/// Starts connecting in the background; the task ends when `stop` is
/// cancelled or the bridge stops for good.
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
            pincer_discord::connect(s).await
        };
        let run = |discord| run(&channels, &settings, &health, &slot, discord, &stop);
        supervise("discord", &health, backoff, &stop, connect, run).await;
    })
}

/// Runs one connected bridge until its gateway ends; answers how.
async fn run(
    channels: &Channels,
    settings: &ChannelSettings,
    health: &Arc<Health>,
    slot: &Arc<RwLock<Option<Arc<Bridge>>>>,
    discord: Arc<pincer_discord::Discord>,
    stop: &CancellationToken,
) -> Ended {
    tracing::info!(bot = %discord.username(), "discord: connected");
    let bridge = Bridge::new(
        discord.clone(),
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
    pincer_discord::run(discord, bridge, stop.child_token()).await
}
