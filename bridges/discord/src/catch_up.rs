//! Catch-up: what was posted while the bot was away, answered once.
//!
//! After every READY (the first of a run, and after a reconnect that
//! could not resume), for each channel the ledger holds a read position
//! for (every DM and channel the bot handled a message in) and each
//! allowlisted guild channel, the messages after that position are
//! fetched — at most `catch_up_messages`, none older than `catch_up_age`
//! — oldest first, and handed to the bridge like live ones. "Answered" is
//! the ledger's to say, never Discord's: a message the ledger holds is a
//! duplicate there and nothing more happens; one it does not goes
//! through access like any other (a mention in a mention-only channel is
//! answered, the rest is context).

use std::collections::BTreeMap;
use std::time::Duration;

use pincer_channel::Bridge;
use serde::Deserialize;

use crate::discord::Discord;
use crate::model::Message;
use crate::rest::RestError;

/// Discord's epoch (2015-01-01) in Unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Tries per channel when Discord rate-limits or fails.
const TRIES: u32 = 3;

/// The smallest snowflake of a moment (Unix milliseconds).
pub(crate) fn snowflake_at(unix_ms: u64) -> u64 {
    unix_ms.saturating_sub(DISCORD_EPOCH_MS) << 22
}

/// Fetches and hands over what was missed; errors are logged per channel.
pub(crate) async fn run(discord: &Discord, bridge: &std::sync::Arc<Bridge>) {
    let settings = &discord.settings;
    if settings.catch_up_messages == 0 {
        return;
    }
    let mut scopes: BTreeMap<String, u64> = BTreeMap::new();
    match bridge.scopes().await {
        Ok(held) => {
            for (scope, cursor) in held {
                if let Ok(n) = cursor.parse() {
                    scopes.insert(scope, n);
                }
            }
        }
        Err(e) => tracing::warn!("discord: catch-up cannot read the ledger: {e}"),
    }
    for channel in settings
        .channels
        .iter()
        .chain(&guild_channels(discord).await)
    {
        scopes.entry(channel.clone()).or_insert(0);
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let oldest = snowflake_at(now_ms.saturating_sub(settings.catch_up_age.as_millis() as u64));
    let mut handed = 0usize;
    for (scope, cursor) in scopes {
        let after = cursor.max(oldest);
        match fetch(discord, &scope, after).await {
            Ok(mut messages) => {
                messages.sort_by_key(Message::number);
                for msg in messages {
                    let Some(incoming) = crate::inbound::incoming(discord, &msg).await else {
                        continue;
                    };
                    handed += 1;
                    if let Err(e) = bridge.receive(incoming).await {
                        tracing::warn!("discord: catch-up could not record a message: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!(channel = %scope, "discord: catch-up skipped a channel: {e}"),
        }
    }
    if handed > 0 {
        tracing::info!(
            messages = handed,
            "discord: caught up with messages posted while away"
        );
    }
}

/// The text channels (and announcement channels) of the guilds listened
/// to in every channel.
async fn guild_channels(discord: &Discord) -> Vec<String> {
    let mut out = Vec::new();
    for guild in &discord.settings.open_guilds {
        match discord.rest.get(&format!("/guilds/{guild}/channels")).await {
            Ok(v) => out.extend(
                v.as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| matches!(c["type"].as_u64(), Some(0 | 5)))
                    .filter_map(|c| c["id"].as_str().map(str::to_string)),
            ),
            Err(e) => {
                tracing::warn!(guild = %guild, "discord: catch-up cannot list the guild's channels: {e}")
            }
        }
    }
    out
}

async fn fetch(discord: &Discord, channel: &str, after: u64) -> Result<Vec<Message>, RestError> {
    let path = format!(
        "/channels/{channel}/messages?after={after}&limit={}",
        discord.settings.catch_up_messages.min(100)
    );
    let mut tries = 0;
    loop {
        tries += 1;
        match discord.rest.get(&path).await {
            // One message that cannot be read is skipped, not the page.
            Ok(v) => {
                return Ok(v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| Message::deserialize(m).ok())
                    .collect());
            }
            Err(RestError::RateLimited(wait)) if tries < TRIES => tokio::time::sleep(wait).await,
            Err(RestError::Transient(_)) if tries < TRIES => {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snowflake_holds_its_moment_in_the_upper_bits() {
        // Discord's documented example: 175928847299117063 was made at
        // 1462015105796 ms.
        let id: u64 = 175_928_847_299_117_063;
        assert_eq!((id >> 22) + DISCORD_EPOCH_MS, 1_462_015_105_796);
        assert!(snowflake_at(1_462_015_105_796) <= id);
        assert!(snowflake_at(1_462_015_105_797) > id);
    }
}
