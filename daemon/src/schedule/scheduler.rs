//! The scheduler: one task that waits for the earliest deadline of all
//! schedules and deliveries (one timer; woken early when a schedule is
//! added, edited or the config reloads), makes a [`tick`] pass at that
//! instant, and runs what it claimed. At start, fires a crash left going
//! become `unknown` (the owner is told, nothing is run again) and the
//! config's schedules are brought into the store.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::hub::Hub;
use crate::config::Config;
use crate::lifecycle::{Part, Reloaded, StartFuture, StopFuture};

use super::clock::Clock;
use super::fire;
use super::store::{ScheduleStore, StoreError};
use super::tick::{self, Agents, Claimed};

/// How long the scheduler waits when a pass failed (the database is
/// busy or gone) before it tries again.
const AFTER_ERROR: SignedDuration = SignedDuration::from_secs(60);

/// How far ahead the scheduler sleeps when nothing is scheduled: it is
/// woken when something is.
const IDLE: SignedDuration = SignedDuration::from_hours(24 * 365);

/// A cloneable handle to the scheduler.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    hub: Hub,
    store: ScheduleStore,
    clock: Arc<dyn Clock>,
    changed: Notify,
    stop: CancellationToken,
    runs: TaskTracker,
    /// A digest of the `[schedules.*]` tables the last sync brought into
    /// the store: the config in force keeps no copy of them to compare a
    /// reload's with.
    synced: Mutex<Option<u64>>,
}

/// A digest of a config's `[schedules.*]` tables.
fn digest(config: &Config) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    for (name, fields) in &config.schedules {
        name.hash(&mut h);
        serde_json::to_string(fields)
            .unwrap_or_default()
            .hash(&mut h);
    }
    h.finish()
}

impl Scheduler {
    /// Opens the schedules database at `path`.
    pub fn open(
        hub: Hub,
        path: &std::path::Path,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            inner: Arc::new(Inner {
                hub,
                store: ScheduleStore::open(path)?,
                clock,
                changed: Notify::new(),
                stop: CancellationToken::new(),
                runs: TaskTracker::new(),
                synced: Mutex::new(None),
            }),
        })
    }

    /// The schedules database.
    pub fn store(&self) -> &ScheduleStore {
        &self.inner.store
    }

    /// The time now, on the scheduler's clock.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// Wakes the scheduler: a deadline may have changed.
    pub fn poke(&self) {
        self.inner.changed.notify_one();
    }

    /// The config in force.
    pub(super) fn runtime_config(&self) -> Arc<Config> {
        self.inner.hub.config()
    }

    /// Runs claimed fire `c` in the background (the stop's grace waits
    /// for it); what it has to tell the owner is sent to them.
    pub(super) fn spawn_fire(&self, c: Claimed) {
        let me = self.clone();
        self.inner.runs.spawn(async move {
            let clock = me.inner.clock.clone();
            let (name, id) = (c.schedule.name.clone(), c.fire);
            let notes = fire::run(&me.inner.hub, &me.inner.store, c, move || clock.now()).await;
            for note in notes {
                me.tell_owner(&name, id, note).await;
            }
            me.poke();
        });
    }

    /// Tells the owner `text` about schedule `name` (fire `fire`, 0 for
    /// none): in the log, and queued for their DM like a fire's answer, so
    /// it is sent once the channel runs and retried if it fails.
    async fn tell_owner(&self, name: &str, fire: i64, text: String) {
        tracing::warn!(schedule = %name, "{text}");
        let Some(to) = fire::owner_dm(&self.inner.hub) else {
            return;
        };
        let r = self
            .inner
            .store
            .queue_delivery(fire, name, &to.to_string(), &text, self.now())
            .await;
        match r {
            Ok(_) => self.poke(),
            Err(e) => {
                tracing::error!(schedule = %name, error = %e, "cannot queue a message to the owner")
            }
        }
    }

    /// Brings the store in line with `config`'s `[schedules.*]`.
    async fn sync(&self, config: &Config) {
        let ids: Vec<&str> = config.agents.keys().map(String::as_str).collect();
        let agents = Agents {
            ids: &ids,
            default: &config.default_agent,
        };
        match tick::sync_config(&self.inner.store, &config.schedules, &agents, self.now()).await {
            Ok(problems) => {
                *self.inner.synced.lock().unwrap_or_else(|e| e.into_inner()) = Some(digest(config));
                for p in problems {
                    tracing::warn!("{p}");
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot bring the config's schedules into the store")
            }
        }
        self.poke();
    }

    async fn run_loop(self) {
        let inner = &self.inner;
        loop {
            let now = inner.clock.now();
            let config = inner.hub.config();
            let ids: Vec<&str> = config.agents.keys().map(String::as_str).collect();
            let agents = Agents {
                ids: &ids,
                default: &config.default_agent,
            };
            let mut wake = now.checked_add(IDLE).unwrap_or(now);
            match tick::tick(&inner.store, &agents, now).await {
                Ok(t) => {
                    for (name, why) in t.disabled {
                        self.tell_owner(&name, 0, format!("Schedule {name} is disabled: {why}."))
                            .await;
                    }
                    for c in t.claimed {
                        self.spawn_fire(c);
                    }
                    if let Some(t) = t.wake {
                        wake = wake.min(t);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "the scheduler cannot read its schedules");
                    wake = now.checked_add(AFTER_ERROR).unwrap_or(now);
                }
            }
            match inner.store.pending_deliveries().await {
                Ok(pending) => {
                    for d in pending {
                        match d.next_try_at {
                            Some(at) if at > now => wake = wake.min(at),
                            _ => {
                                let clock = inner.clock.clone();
                                fire::deliver(&inner.hub, &inner.store, &d, &move || clock.now())
                                    .await;
                            }
                        }
                    }
                }
                Err(e) => tracing::error!(error = %e, "the scheduler cannot read its deliveries"),
            }
            tokio::select! {
                () = inner.clock.sleep_until(wake) => {}
                () = inner.changed.notified() => {}
                () = inner.stop.cancelled() => return,
            }
        }
    }
}

impl Part for Scheduler {
    fn name(&self) -> &'static str {
        "schedules"
    }

    fn start<'a>(&'a self, config: &'a Config) -> StartFuture<'a> {
        Box::pin(async move {
            match self.inner.store.settle_crashed(self.now()).await {
                Ok(fires) => {
                    for f in fires {
                        // A trigger's or a heartbeat's fire has no
                        // schedule to run by hand.
                        let (what, hint) = match self.inner.store.get(&f.schedule).await {
                            Ok(Some(_)) => (
                                format!("Schedule {}", f.schedule),
                                format!(
                                    " (`pincer schedules run-now {}` runs it by hand)",
                                    f.schedule
                                ),
                            ),
                            _ => (f.schedule.clone(), String::new()),
                        };
                        self.tell_owner(
                            &f.schedule,
                            f.id,
                            format!(
                                "{what}: the fire due at {} was running when pincerd stopped; whether it finished is unknown, so it is not run again{hint}.",
                                f.due_at
                            ),
                        )
                        .await;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot settle the fires a stop left running")
                }
            }
            self.sync(config).await;
            tokio::spawn(self.clone().run_loop());
            Ok(())
        })
    }

    fn reload(&self, _old: &Config, new: &Config) -> Reloaded {
        let synced = *self.inner.synced.lock().unwrap_or_else(|e| e.into_inner());
        if synced == Some(digest(new)) {
            return Reloaded::Unchanged;
        }
        let me = self.clone();
        let config = new.clone();
        tokio::spawn(async move { me.sync(&config).await });
        Reloaded::Applied(format!("{} from the file", new.schedules.len()))
    }

    fn stop(&self, grace: Duration) -> StopFuture<'_> {
        Box::pin(async move {
            self.inner.stop.cancel();
            self.inner.runs.close();
            // Fires still running after the grace stay `running` and are
            // `unknown` at the next start.
            let _ = tokio::time::timeout(grace, self.inner.runs.wait()).await;
        })
    }
}
