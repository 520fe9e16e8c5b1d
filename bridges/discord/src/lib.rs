//! The Discord bridge (SPEC §11): a bot on Discord's REST API and gateway
//! as a [`pincer_channel::Platform`], feeding its events to a
//! [`pincer_channel::Bridge`]. It knows nothing of the daemon: the daemon
//! builds the [`DiscordSettings`] from its config, calls [`connect`],
//! wraps the [`Discord`] in a bridge and [`run`]s the gateway.
//!
//! Files: `settings` (what the config says), `discord` (connecting, what
//! the bot knows of its channels), `rest` (the HTTP API and its rate
//! limits), `platform` (the outbound verbs), `inbound` (messages to the
//! channel layer's form), `model` (the fields of Discord's message object
//! read), `gateway` (the gateway connection), `events` (the queue to the
//! bridge, interactions, the bot-loop guard), `catch_up` (what was posted
//! while away), `commands` (slash
//! commands, registered in the background), `check` (what `pincer
//! doctor` asks Discord: the token, each channel's permissions).

mod catch_up;
mod check;
mod commands;
mod discord;
mod events;
#[doc(hidden)]
pub mod fuzz;
mod gateway;
mod inbound;
mod model;
mod platform;
mod rest;
mod settings;

use std::sync::Arc;

use pincer_channel::{Bridge, Ended};
use tokio_util::sync::CancellationToken;

pub use check::{Access, ChannelCheck, CheckError, GuildCheck, Report, check};
pub use commands::COMMANDS;
pub use discord::{Discord, connect};
pub use events::{BOT_LOOP_EVENTS, BOT_WINDOW};
pub use platform::{MAX_BUTTON_DATA, MAX_CHARS, MAX_LINES};
pub use rest::{ClientError, RestError};
pub use settings::{
    DEFAULT_API_URL, DEFAULT_CATCH_UP_AGE, DEFAULT_CATCH_UP_MESSAGES, DiscordSettings,
};

/// Runs the bridge until `stop` or a fatal close: first the answers a
/// previous run left owed ([`Bridge::resume`]), the slash commands'
/// registration in the background, then the gateway.
pub async fn run(discord: Arc<Discord>, bridge: Arc<Bridge>, stop: CancellationToken) -> Ended {
    if let Err(e) = bridge.resume().await {
        let why = format!("cannot take up the Discord answers left from before: {e}");
        tracing::error!("{why}");
        bridge.health().error(&why);
    }
    let registering = commands::register(discord.clone(), stop.child_token());
    let ended = gateway::run(discord, bridge, stop).await;
    registering.abort();
    ended
}
