//! The scheduler: one task that waits for the earliest deadline of all
//! schedules and deliveries (one timer; woken early when a schedule is
//! added, edited or the config reloads), makes a [`tick`] pass at that
//! instant, and runs what it claimed. At start, fires a crash left going
//! become `unknown` (the owner is told, nothing is run again) and the
//! config's schedules are brought into the store.

use std::sync::Arc;
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
use super::tick::{self, Agents};

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

    /// Brings the store in line with `config`'s `[schedules.*]`.
    async fn sync(&self, config: &Config) {
        let ids: Vec<&str> = config.agents.keys().map(String::as_str).collect();
        let agents = Agents {
            ids: &ids,
            default: &config.default_agent,
        };
        match tick::sync_config(&self.inner.store, &config.schedules, &agents, self.now()).await {
            Ok(problems) => {
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
            let config = inner.hub.runtime().config();
            let ids: Vec<&str> = config.agents.keys().map(String::as_str).collect();
            let agents = Agents {
                ids: &ids,
                default: &config.default_agent,
            };
            let mut wake = now.checked_add(IDLE).unwrap_or(now);
            match tick::tick(&inner.store, &agents, now).await {
                Ok(t) => {
                    for (name, why) in t.disabled {
                        tracing::warn!(schedule = %name, "schedule {name} is disabled: {why}");
                    }
                    for c in t.claimed {
                        let me = self.clone();
                        inner.runs.spawn(async move {
                            let clock = me.inner.clock.clone();
                            let notes =
                                fire::run(&me.inner.hub, &me.inner.store, c, move || clock.now())
                                    .await;
                            for note in notes {
                                tracing::warn!("{note}");
                            }
                            me.poke();
                        });
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
                        tracing::warn!(
                            schedule = %f.schedule,
                            "schedule {}: the fire due at {} was running when pincerd stopped; whether it finished is unknown, so it is not run again",
                            f.schedule,
                            f.due_at
                        );
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

    fn reload(&self, old: &Config, new: &Config) -> Reloaded {
        if old.schedules == new.schedules {
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
