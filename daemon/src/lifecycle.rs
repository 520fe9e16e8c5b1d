//! One lifecycle for the daemon's long-running parts (the memory
//! watchers, the MCP servers, the bridges, the gRPC server; the scheduler
//! next): started in order with the config, asked on each reload whether
//! the change applied or needs a restart, stopped in reverse order within
//! the shutdown grace. `daemon.rs` composes them; a trait because there
//! are several implementations, kept to what composing needs (mini-redis
//! and atuin's daemon wire their parts the same way).
//!
//! A start is async and can fail with a reason: a part that cannot start
//! is logged and listed in [`Failures`] (`pincer status`, `pincer doctor`)
//! while the others start and the daemon serves. Starts run before the
//! socket answers, inside the start budget, so a part never awaits the
//! network in its start: it spawns that work and reports through its own
//! health (the bridges do). Work that can wait until the server takes
//! connections (the memory watchers' first scans) goes in
//! [`Part::started`], so the first answer does not share the CPU with it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Config;

/// What a reload did to one part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// The change does not concern this part.
    Unchanged,
    /// Applied live; how, in a few words.
    Applied(String),
    /// Kept as it was until pincerd restarts; what changed.
    NeedsRestart(String),
}

pub type StopFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Why a part could not start: the part's own error, whose message is one
/// sentence a user can act on (`pincer status` and doctor show it). Boxed
/// because each part fails in its own way and the lifecycle only records
/// and shows it.
pub type StartError = Box<dyn std::error::Error + Send + Sync>;

/// A start: `Err` holds why the part could not start.
pub type StartFuture<'a> = Pin<Box<dyn Future<Output = Result<(), StartError>> + Send + 'a>>;

/// The parts that could not start and why, in start order: read by the
/// status and doctor RPCs while the daemon serves.
#[derive(Clone, Default)]
pub struct Failures(Arc<Mutex<Vec<(&'static str, String)>>>);

impl Failures {
    /// (part, why) for each part that could not start.
    pub fn list(&self) -> Vec<(&'static str, String)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record(&self, part: &'static str, why: String) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((part, why));
    }
}

/// A long-running part of the daemon.
pub trait Part: Send + Sync {
    /// Its name in reload reports and logs.
    fn name(&self) -> &'static str;
    /// Starts it with the config in force at start-up; never awaits the
    /// network (the socket does not answer until every part started).
    fn start<'a>(&'a self, config: &'a Config) -> StartFuture<'a>;
    /// Called once every part has started and the server takes
    /// connections: starts what need not be running for the first answer.
    /// Never blocks (spawn the work).
    fn started(&self) {}
    /// Takes in a new config, live where it can. `old` is the config in
    /// force; a part that answers `NeedsRestart` compares `new` with what
    /// it runs (what it started with), not with `old`, which a reload of a
    /// restart-only change already replaced.
    fn reload(&self, old: &Config, new: &Config) -> Reloaded;
    /// Stops it, taking at most `grace`.
    fn stop(&self, grace: Duration) -> StopFuture<'_>;
}

/// The parts, in start order, and those that could not start.
#[derive(Default)]
pub struct Parts {
    parts: Vec<Box<dyn Part>>,
    failures: Failures,
}

impl Parts {
    /// Parts that record their start failures in `failures`.
    pub fn new(failures: Failures) -> Self {
        Self {
            parts: Vec::new(),
            failures,
        }
    }

    pub fn with(mut self, part: impl Part + 'static) -> Self {
        self.parts.push(Box::new(part));
        self
    }

    /// Starts each part in order; one that fails is logged and recorded,
    /// and the next still starts.
    pub async fn start(&self, config: &Config) {
        for part in &self.parts {
            if let Err(why) = part.start(config).await {
                tracing::error!(part = part.name(), "could not start: {why}");
                self.failures.record(part.name(), why.to_string());
            }
        }
    }

    /// Tells each part, in order, that every part started and the server
    /// takes connections.
    pub fn started(&self) {
        for part in &self.parts {
            part.started();
        }
    }

    /// Every part's answer as report lines: (applied, needs restart).
    pub fn reload(&self, old: &Config, new: &Config) -> (Vec<String>, Vec<String>) {
        let (mut applied, mut restart) = (Vec::new(), Vec::new());
        for part in &self.parts {
            match part.reload(old, new) {
                Reloaded::Unchanged => {}
                Reloaded::Applied(how) => applied.push(format!("{}: {how}", part.name())),
                Reloaded::NeedsRestart(what) => restart.push(format!("{}: {what}", part.name())),
            }
        }
        (applied, restart)
    }

    /// Stops the parts in reverse start order, each within `grace`; one
    /// that overruns is logged and left behind.
    pub async fn stop(&self, grace: Duration) {
        for part in self.parts.iter().rev() {
            if tokio::time::timeout(grace, part.stop(grace)).await.is_err() {
                tracing::warn!(part = part.name(), "did not stop within {grace:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A part that records what it was asked, in order.
    struct Probe {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
        answer: Reloaded,
        stop_takes: Duration,
        fails: Option<&'static str>,
    }

    impl Part for Probe {
        fn name(&self) -> &'static str {
            self.name
        }
        fn start<'a>(&'a self, _: &'a Config) -> StartFuture<'a> {
            Box::pin(async move {
                tokio::task::yield_now().await;
                self.log
                    .lock()
                    .unwrap()
                    .push(format!("start {}", self.name));
                self.fails.map_or(Ok(()), |why| Err(why.into()))
            })
        }
        fn started(&self) {
            self.log
                .lock()
                .unwrap()
                .push(format!("started {}", self.name));
        }
        fn reload(&self, _: &Config, _: &Config) -> Reloaded {
            self.answer.clone()
        }
        fn stop(&self, _: Duration) -> StopFuture<'_> {
            Box::pin(async move {
                tokio::time::sleep(self.stop_takes).await;
                self.log.lock().unwrap().push(format!("stop {}", self.name));
            })
        }
    }

    #[tokio::test]
    async fn parts_start_in_order_hear_they_all_started_report_per_part_and_stop_in_reverse_within_the_grace()
     {
        let log = Arc::new(Mutex::new(Vec::new()));
        let probe = |name, answer, stop_takes| Probe {
            name,
            log: log.clone(),
            answer,
            stop_takes,
            fails: None,
        };
        let failures = Failures::default();
        let parts = Parts::new(failures.clone())
            .with(probe(
                "memory",
                Reloaded::NeedsRestart("[memory] settings".into()),
                Duration::ZERO,
            ))
            .with(probe(
                "mcp",
                Reloaded::Applied("servers restarted on next use".into()),
                Duration::from_secs(60),
            ))
            .with(Probe {
                fails: Some("the schedule database is locked"),
                ..probe("scheduler", Reloaded::Unchanged, Duration::ZERO)
            })
            .with(probe("server", Reloaded::Unchanged, Duration::ZERO));
        let config = crate::config::load::parse(
            &crate::home::Home::at("/tmp/pincer-test-home"),
            std::path::Path::new("/h/config.toml"),
            "",
            &|| None,
        )
        .unwrap();
        parts.start(&config).await;
        parts.started();
        // The failed part is recorded and the one after it still started.
        assert_eq!(
            failures.list(),
            [("scheduler", "the schedule database is locked".to_string())]
        );
        assert_eq!(
            parts.reload(&config, &config),
            (
                vec!["mcp: servers restarted on next use".to_string()],
                vec!["memory: [memory] settings".to_string()]
            )
        );
        let started = std::time::Instant::now();
        parts.stop(Duration::from_millis(50)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            *log.lock().unwrap(),
            [
                "start memory",
                "start mcp",
                "start scheduler",
                "start server",
                "started memory",
                "started mcp",
                "started scheduler",
                "started server",
                "stop server",
                "stop scheduler",
                "stop memory"
            ]
        );
    }
}
