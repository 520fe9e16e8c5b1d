//! How a bridge is doing, for `pincer channels status` and `pincer doctor`:
//! connected or not, the last update and the last error, counts of
//! messages in and out, and how often the poll watchdog had to step in.
//! The platform's reader and the bridge record into one [`Health`]; the
//! daemon reads [`Health::snapshot`].

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
    pub messages_in: u64,
    pub messages_out: u64,
    /// Polls the watchdog abandoned because they did not return in time.
    pub watchdog_restarts: u64,
}

/// Shared, cheap to update.
#[derive(Debug, Default)]
pub struct Health(Mutex<HealthSnapshot>);

impl Health {
    pub fn new(mode: &str) -> Self {
        Self(Mutex::new(HealthSnapshot {
            mode: mode.to_string(),
            ..Default::default()
        }))
    }

    fn with(&self, f: impl FnOnce(&mut HealthSnapshot)) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state);
    }

    /// A platform call succeeded.
    pub fn connected(&self) {
        self.with(|s| s.connected = true);
    }

    /// A platform call failed in a way that means the bridge cannot reach
    /// it (network, bad token): `connected` goes false.
    pub fn disconnected(&self, why: &str) {
        let at = now();
        self.with(|s| {
            s.connected = false;
            s.last_error = Some((at, why.to_string()));
        });
    }

    /// Something failed that does not cut the connection (a send refused).
    pub fn error(&self, why: &str) {
        let at = now();
        self.with(|s| s.last_error = Some((at, why.to_string())));
    }

    /// An event arrived from the platform.
    pub fn update_seen(&self) {
        let at = now();
        self.with(|s| {
            s.connected = true;
            s.last_update = Some(at);
        });
    }

    pub fn message_in(&self) {
        self.with(|s| s.messages_in += 1);
    }

    pub fn message_out(&self) {
        self.with(|s| s.messages_out += 1);
    }

    /// The watchdog gave up on a poll that did not return in time.
    pub fn watchdog_fired(&self, why: &str) {
        let at = now();
        self.with(|s| {
            s.watchdog_restarts += 1;
            s.last_error = Some((at, why.to_string()));
        });
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
