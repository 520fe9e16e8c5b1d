//! The slash commands (`/new`, `/reset`, `/stop`, `/status`, `/help`),
//! registered with the application in the background: per configured
//! guild (they show at once there), else globally. A 429 or a failure
//! is retried with backoff and never holds up message handling; the same
//! commands typed as text work all along.

use std::sync::Arc;
use std::time::Duration;

use pincer_channel::{Backoff, pause};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::discord::Discord;
use crate::rest::RestError;

/// The commands and what each says in Discord's menu.
pub const COMMANDS: &[(&str, &str)] = &[
    ("new", "Start a new conversation"),
    ("reset", "Start a new conversation (same as /new)"),
    ("stop", "Stop the answer being written"),
    ("status", "Show the session, model and bridge status"),
    ("help", "List the commands"),
];

fn body() -> Value {
    Value::Array(
        COMMANDS
            .iter()
            .map(|(name, description)| json!({"name": name, "description": description, "type": 1}))
            .collect(),
    )
}

/// Registers the commands until done or `stop`.
pub fn register(discord: Arc<Discord>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let app = discord.application_id.clone();
        let paths: Vec<String> = if discord.settings.guilds.is_empty() {
            vec![format!("/applications/{app}/commands")]
        } else {
            discord
                .settings
                .guilds
                .iter()
                .map(|g| format!("/applications/{app}/guilds/{g}/commands"))
                .collect()
        };
        let body = body();
        for path in paths {
            let mut backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(300));
            loop {
                let wait = match discord.rest.call(Method::PUT, &path, Some(&body)).await {
                    Ok(_) => break,
                    Err(RestError::RateLimited(wait)) => wait,
                    Err(e @ RestError::Refused { .. }) | Err(e @ RestError::Unauthorized) => {
                        tracing::warn!(
                            "discord: the slash commands were not registered ({path}): {e}"
                        );
                        break;
                    }
                    Err(e) => {
                        let wait = backoff.next_wait();
                        tracing::warn!(
                            "discord: registering the slash commands failed: {e}; trying again in {} s",
                            wait.as_secs()
                        );
                        wait
                    }
                };
                if !pause(&stop, wait).await {
                    return;
                }
            }
        }
        tracing::info!("discord: slash commands registered");
    })
}
