//! The long-polling reader: `getUpdates` from the saved cursor, each
//! batch handed to the bridge whole (recorded in one ledger transaction,
//! then handled in order), the cursor moving only past what the bridge
//! recorded.
//!
//! Three things keep it alive unattended:
//! - a **watchdog**: a poll that has not returned within twice the poll
//!   timeout (and a margin) is abandoned and started again — a connection
//!   that died silently (NAT timeout, suspend) would otherwise hang it
//!   forever;
//! - **backoff** on errors, 1 s doubling to 60 s, five minutes for a
//!   refused token, each error a sentence in the bridge's health;
//! - **no spinning** on a server that does not long-poll (telegram-test-api
//!   answers at once and ignores `offset`, sending nothing new or the same
//!   updates again): a quick answer without new updates waits a moment
//!   before the next poll.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pincer_channel::{Backoff, Bridge, pause};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::Failure;
use crate::error::is_bad_token;
use crate::telegram::Telegram;
use crate::updates::{self, ALLOWED_UPDATES};

/// The cursor's scope in the ledger.
pub const CURSOR_SCOPE: &str = "updates";

/// Backoff after a failed poll: from, and at most.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The wait after a refused token: it will not fix itself soon.
const BAD_TOKEN_WAIT: Duration = Duration::from_secs(300);

/// The wait before reading again after the bridge could not record an
/// update (its ledger failed).
const RECEIVE_RETRY: Duration = Duration::from_secs(1);

/// A poll answered faster than this without new updates is a server that
/// does not long-poll.
const QUICK_ANSWER: Duration = Duration::from_secs(1);

/// The pause after such an answer. Short: with a server that does not
/// long-poll, it is what a new message waits at worst (the bridge's budget
/// for added latency is 100 ms at p99).
const IDLE_PAUSE: Duration = Duration::from_millis(50);

/// How long a poll may take before the watchdog abandons it: twice the
/// poll timeout, plus a margin of the poll timeout up to 5 s, and never
/// under a second.
pub(crate) fn watchdog_limit(poll_timeout: Duration) -> Duration {
    (poll_timeout * 2 + poll_timeout.min(Duration::from_secs(5))).max(Duration::from_secs(1))
}

/// One `getUpdates`. The request's own timeout is past the watchdog's, so
/// a hung poll is the watchdog's to catch (and count).
async fn get_updates(
    telegram: &Telegram,
    offset: Option<i64>,
    timeout: Duration,
) -> Result<Vec<Value>, Failure> {
    let mut body = json!({
        "timeout": timeout.as_secs(),
        "allowed_updates": ALLOWED_UPDATES,
    });
    if let Some(o) = offset {
        body["offset"] = json!(o);
    }
    let limit = watchdog_limit(timeout) + Duration::from_secs(30);
    match telegram
        .api
        .call_json("getUpdates", &body, Some(limit))
        .await?
    {
        Value::Array(updates) => Ok(updates),
        _ => Err(Failure::Api {
            status: 200,
            description: "the answer to getUpdates is not a list of updates".into(),
            retry_after: None,
        }),
    }
}

/// The sentence for a failed poll, and how long to wait before the next.
fn failed(f: &Failure, base: &str, backoff: &mut Backoff) -> (String, Duration) {
    match f {
        Failure::Network(why) => {
            let wait = backoff.next_wait();
            (
                format!(
                    "cannot reach Telegram at {base} ({why}); trying again in {} s",
                    wait.as_secs()
                ),
                wait,
            )
        }
        Failure::Api {
            status,
            description,
            ..
        } if is_bad_token(*status, description) => (
            format!(
                "Telegram does not accept the bot token ({status} {description}); check the token under [channels.telegram]. Trying again in {} minutes",
                BAD_TOKEN_WAIT.as_secs() / 60
            ),
            BAD_TOKEN_WAIT,
        ),
        Failure::Api {
            status: 409,
            description,
            ..
        } => {
            let wait = backoff.next_wait();
            (
                format!(
                    "Telegram refuses polling (409: {description}): a webhook is set on this bot (`pincer doctor` offers to delete it) or another program is polling with the same token. Trying again in {} s",
                    wait.as_secs()
                ),
                wait,
            )
        }
        Failure::Api {
            retry_after: Some(secs),
            ..
        } => (
            format!("Telegram asks to wait {secs} s before polling again"),
            Duration::from_secs(*secs),
        ),
        Failure::Api {
            status,
            description,
            ..
        } => {
            let wait = backoff.next_wait();
            (
                format!(
                    "Telegram refused getUpdates ({status}: {description}); trying again in {} s",
                    wait.as_secs()
                ),
                wait,
            )
        }
    }
}

/// Polls until `stop`.
pub(crate) async fn run(telegram: Arc<Telegram>, bridge: Arc<Bridge>, stop: CancellationToken) {
    let health = bridge.health().clone();
    let poll_timeout = telegram.settings.poll_timeout;
    let watchdog = watchdog_limit(poll_timeout);
    let account = telegram.settings.account.clone();
    let mut backoff = Backoff::new(BACKOFF_FIRST, BACKOFF_MAX);
    // The next offset; read from the ledger at start and after the bridge
    // failed to record an update.
    let mut offset: Option<i64> = None;
    let mut reload = true;
    while !stop.is_cancelled() {
        if reload {
            match bridge.cursor(CURSOR_SCOPE).await {
                Ok(saved) => {
                    offset = saved.and_then(|c| c.parse().ok());
                    reload = false;
                }
                Err(e) => {
                    let why = format!("cannot read the saved Telegram position: {e}");
                    tracing::error!("{why}");
                    health.error(&why);
                    if !pause(&stop, backoff.next_wait()).await {
                        return;
                    }
                    continue;
                }
            }
        }
        let started = Instant::now();
        let answer = tokio::select! {
            _ = stop.cancelled() => return,
            a = tokio::time::timeout(watchdog, get_updates(&telegram, offset, poll_timeout)) => a,
        };
        let batch = match answer {
            Err(_) => {
                let why = format!(
                    "a Telegram poll did not return within {} s; it was abandoned and a new one started",
                    watchdog.as_secs_f32()
                );
                tracing::warn!("{why}");
                health.watchdog_fired(&why);
                continue;
            }
            Ok(Err(f)) => {
                let (why, wait) = failed(&f, telegram.api.base(), &mut backoff);
                tracing::warn!("{why}");
                health.disconnected(&why);
                if !pause(&stop, wait).await {
                    return;
                }
                continue;
            }
            Ok(Ok(batch)) => batch,
        };
        health.connected();
        backoff.reset();
        let mut fresh = false;
        let mut events = Vec::with_capacity(batch.len());
        let mut last = None;
        for update in &batch {
            let Some(id) = updates::update_id(update) else {
                tracing::warn!("Telegram sent an update without an id; it is skipped");
                continue;
            };
            fresh |= offset.is_none_or(|o| id >= o);
            last = last.max(Some(id));
            events.push(updates::event(update, &telegram.me, &account));
        }
        // The whole batch in one ledger transaction: one commit, and the
        // cursor moves past all of it or none of it.
        if let Some(last) = last {
            let cursor = (CURSOR_SCOPE.to_string(), (last + 1).to_string());
            match bridge.receive_batch(events, cursor).await {
                Ok(()) => offset = Some(offset.map_or(last + 1, |o| o.max(last + 1))),
                Err(e) => {
                    let why = format!(
                        "a batch of Telegram updates could not be recorded ({e}); reading it again"
                    );
                    tracing::error!("{why}");
                    health.error(&why);
                    reload = true;
                }
            }
        }
        if reload {
            if !pause(&stop, RECEIVE_RETRY).await {
                return;
            }
        } else if !fresh && started.elapsed() < QUICK_ANSWER && !pause(&stop, IDLE_PAUSE).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
