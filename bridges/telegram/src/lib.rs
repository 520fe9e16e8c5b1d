//! The Telegram bridge (SPEC §11): a bot on the Bot API as a
//! [`pincer_channel::Platform`], and the reader that feeds its updates to
//! a [`pincer_channel::Bridge`] — long polling with a watchdog, or a
//! webhook. It knows nothing of the daemon: the daemon builds the
//! [`TelegramSettings`] from its config, calls [`connect`], wraps the
//! [`Telegram`] in a bridge and [`spawn`]s the reader.
//!
//! Files: `settings` (what the config says), `telegram` (connecting, the
//! bot's own settings), `platform` (the outbound verbs), `download`
//! (attachments to disk), `updates` (Bot API updates to events), `poll`
//! and `webhook` (the two readers), `api` (the HTTP transport), `error`
//! (failures sorted and worded), `me` (the bot's identity).

mod api;
mod download;
mod error;
#[doc(hidden)]
pub mod fuzz;
mod me;
mod platform;
mod poll;
mod settings;
mod telegram;
mod updates;
mod webhook;

#[cfg(test)]
mod testing;

use std::sync::Arc;

use pincer_channel::Bridge;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use error::ConnectError;
pub use platform::{MAX_BUTTON_DATA, MAX_CHARS};
pub use poll::CURSOR_SCOPE;
pub use settings::{
    DEFAULT_API_URL, DEFAULT_POLL_TIMEOUT, DEFAULT_WEBHOOK_LISTEN, Mode, TelegramSettings,
};
pub use telegram::{Telegram, connect};
pub use webhook::SECRET_HEADER;

/// Starts reading updates for `bridge` until `stop`: first the answers a
/// previous run left owed ([`Bridge::resume`]), then long polling or the
/// webhook server, as the settings say. It never deletes a webhook on its
/// own: while one is set, polling reports the conflict in the bridge's
/// health (`pincer doctor` offers [`Telegram::delete_webhook`]).
pub fn spawn(
    telegram: Arc<Telegram>,
    bridge: Arc<Bridge>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = bridge.resume().await {
            let why = format!("cannot take up the Telegram answers left from before: {e}");
            tracing::error!("{why}");
            bridge.health().error(&why);
        }
        match telegram.settings.mode.clone() {
            Mode::Polling => poll::run(telegram, bridge, stop).await,
            Mode::Webhook {
                url,
                listen,
                secret,
            } => webhook::run(telegram, bridge, stop, url, listen, secret).await,
        }
    })
}
