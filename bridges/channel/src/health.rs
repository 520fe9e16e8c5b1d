//! How a bridge is doing, for `pincer channels status` and `pincer doctor`:
//! connected or not, the last update and the last error, counts of
//! messages in and out, and how often the poll watchdog had to step in.
//! The platform's reader and the bridge record into one [`Health`]; the
//! daemon reads [`Health::snapshot`].
//!
//! Failures that cut the connection ([`Health::disconnected`]) are counted
//! until a call works again; then the recovery is logged once (`telegram:
//! reconnected after 3 failures / 14 s`) and the last error is marked as
//! past ([`HealthSnapshot::recovered_at`]), so a status read later does not
//! show an old "trying again in 16 s" as if it were still so.

use crate::unix_now as now;
use std::sync::Mutex;

/// A copy of a bridge's health at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthSnapshot {
    /// The last call to the platform succeeded.
    pub connected: bool,
    /// `polling`, `webhook`, `gateway`.
    pub mode: String,
    /// Unix seconds of the last event read from the platform.
    pub last_update: Option<u64>,
    /// Unix seconds and sentence of the last error (kept after recovery).
    pub last_error: Option<(u64, String)>,
    /// Unix seconds at which the bridge worked again after `last_error`
    /// cut it off; `None` while that error is current (or there is none).
    pub recovered_at: Option<u64>,
    pub messages_in: u64,
    pub messages_out: u64,
    /// Polls the watchdog abandoned because they did not return in time.
    pub watchdog_restarts: u64,
}

/// The bridge worked again after failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// Failed attempts in a row before it worked.
    pub failures: u32,
    /// Seconds from the first of them.
    pub down_for_s: u64,
    /// Whether it had been connected before (else this is the first
    /// connection, after failed attempts at start).
    pub reconnected: bool,
}

#[derive(Debug, Default)]
struct State {
    snapshot: HealthSnapshot,
    /// Failures that cut the connection since it last worked.
    failures: u32,
    /// When the first of them happened.
    down_since: Option<u64>,
    ever_connected: bool,
}

/// Shared, cheap to update.
#[derive(Debug, Default)]
pub struct Health {
    /// The channel's name, for the log line of a recovery.
    channel: String,
    state: Mutex<State>,
    /// Signalled at each recovery; a recovery while nobody waits is kept
    /// for the next wait.
    recovered: tokio::sync::Notify,
}

impl Health {
    pub fn new(channel: &str, mode: &str) -> Self {
        Self {
            channel: channel.to_string(),
            state: Mutex::new(State {
                snapshot: HealthSnapshot {
                    mode: mode.to_string(),
                    ..Default::default()
                },
                ..Default::default()
            }),
            recovered: tokio::sync::Notify::new(),
        }
    }

    /// Waits for the next recovery (a call that worked after failures
    /// that cut the connection); one since the last wait returns at once.
    pub async fn recovered(&self) {
        self.recovered.notified().await;
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    /// A platform call succeeded. After failures that cut the connection,
    /// logs the recovery once and answers it.
    pub fn connected(&self) -> Option<Recovery> {
        self.connected_at(now())
    }

    fn connected_at(&self, at: u64) -> Option<Recovery> {
        let recovery = self.with(|s| {
            s.snapshot.connected = true;
            let reconnected = s.ever_connected;
            s.ever_connected = true;
            if s.failures == 0 {
                return None;
            }
            let recovery = Recovery {
                failures: s.failures,
                down_for_s: at.saturating_sub(s.down_since.unwrap_or(at)),
                reconnected,
            };
            s.failures = 0;
            s.down_since = None;
            s.snapshot.recovered_at = Some(at);
            Some(recovery)
        });
        if let Some(r) = recovery {
            self.recovered.notify_one();
            tracing::info!(
                "{}: {} after {} failure{} / {} s",
                self.channel,
                if r.reconnected {
                    "reconnected"
                } else {
                    "connected"
                },
                r.failures,
                if r.failures == 1 { "" } else { "s" },
                r.down_for_s
            );
        }
        recovery
    }

    /// A platform call failed in a way that means the bridge cannot reach
    /// it (network, bad token): `connected` goes false.
    pub fn disconnected(&self, why: &str) {
        self.disconnected_at(why, now());
    }

    fn disconnected_at(&self, why: &str, at: u64) {
        self.with(|s| {
            s.snapshot.connected = false;
            s.snapshot.last_error = Some((at, why.to_string()));
            s.snapshot.recovered_at = None;
            s.failures = s.failures.saturating_add(1);
            s.down_since.get_or_insert(at);
        });
    }

    /// Something failed that does not cut the connection (a send refused).
    pub fn error(&self, why: &str) {
        let at = now();
        self.with(|s| {
            s.snapshot.last_error = Some((at, why.to_string()));
            s.snapshot.recovered_at = None;
        });
    }

    /// An event arrived from the platform: it is reachable.
    pub fn update_seen(&self) {
        let at = now();
        self.connected_at(at);
        self.with(|s| s.snapshot.last_update = Some(at));
    }

    pub fn message_in(&self) {
        self.with(|s| s.snapshot.messages_in += 1);
    }

    pub fn message_out(&self) {
        self.with(|s| s.snapshot.messages_out += 1);
    }

    /// The watchdog gave up on a poll that did not return in time.
    pub fn watchdog_fired(&self, why: &str) {
        let at = now();
        self.with(|s| {
            s.snapshot.watchdog_restarts += 1;
            s.snapshot.last_error = Some((at, why.to_string()));
            s.snapshot.recovered_at = None;
        });
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        self.with(|s| s.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recovery_is_answered_once_and_marks_the_error_as_past() {
        let health = Health::new("telegram", "polling");
        assert_eq!(health.connected_at(10), None, "nothing failed yet");
        health.disconnected_at("cannot reach Telegram; trying again in 1 s", 100);
        health.disconnected_at("cannot reach Telegram; trying again in 16 s", 105);
        health.disconnected_at("cannot reach Telegram; trying again in 32 s", 114);
        let down = health.snapshot();
        assert!(!down.connected);
        assert_eq!(down.recovered_at, None, "the error is current");
        assert_eq!(
            health.connected_at(120),
            Some(Recovery {
                failures: 3,
                down_for_s: 20,
                reconnected: true
            })
        );
        let up = health.snapshot();
        assert!(up.connected);
        assert_eq!(up.recovered_at, Some(120), "the error is past");
        assert_eq!(
            up.last_error,
            Some((114, "cannot reach Telegram; trying again in 32 s".into())),
            "kept, to say what happened"
        );
        assert_eq!(health.connected_at(121), None, "logged once");
        // A new failure makes the error current again.
        health.disconnected_at("cannot reach Telegram", 200);
        assert_eq!(health.snapshot().recovered_at, None);
    }

    #[test]
    fn failures_before_the_first_connection_are_a_connection_not_a_reconnection() {
        let health = Health::new("telegram", "polling");
        health.disconnected_at("cannot reach Telegram", 5);
        assert_eq!(
            health.connected_at(9),
            Some(Recovery {
                failures: 1,
                down_for_s: 4,
                reconnected: false
            })
        );
    }
}
