//! One lifecycle for the daemon's long-running parts (the memory
//! watchers, the MCP servers, the gRPC server; the bridges and the
//! scheduler next): started in order with the config, asked on each reload
//! whether the change applied or needs a restart, stopped in reverse order
//! within the shutdown grace. `daemon.rs` composes them; a trait because
//! there are several implementations, kept to what composing needs
//! (mini-redis and atuin's daemon wire their parts the same way).

use std::future::Future;
use std::pin::Pin;
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

/// A long-running part of the daemon.
pub trait Part: Send + Sync {
    /// Its name in reload reports and logs.
    fn name(&self) -> &'static str;
    /// Starts it with the config in force at start-up.
    fn start(&self, config: &Config);
    /// Takes in a new config, live where it can. `old` is the config in
    /// force; a part that answers `NeedsRestart` compares `new` with what
    /// it runs (what it started with), not with `old`, which a reload of a
    /// restart-only change already replaced.
    fn reload(&self, old: &Config, new: &Config) -> Reloaded;
    /// Stops it, taking at most `grace`.
    fn stop(&self, grace: Duration) -> StopFuture<'_>;
}

/// The parts, in start order.
#[derive(Default)]
pub struct Parts(Vec<Box<dyn Part>>);

impl Parts {
    pub fn with(mut self, part: impl Part + 'static) -> Self {
        self.0.push(Box::new(part));
        self
    }

    pub fn start(&self, config: &Config) {
        for part in &self.0 {
            part.start(config);
        }
    }

    /// Every part's answer as report lines: (applied, needs restart).
    pub fn reload(&self, old: &Config, new: &Config) -> (Vec<String>, Vec<String>) {
        let (mut applied, mut restart) = (Vec::new(), Vec::new());
        for part in &self.0 {
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
        for part in self.0.iter().rev() {
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
    }

    impl Part for Probe {
        fn name(&self) -> &'static str {
            self.name
        }
        fn start(&self, _: &Config) {
            self.log
                .lock()
                .unwrap()
                .push(format!("start {}", self.name));
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
    async fn parts_start_in_order_report_per_part_and_stop_in_reverse_within_the_grace() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let probe = |name, answer, stop_takes| Probe {
            name,
            log: log.clone(),
            answer,
            stop_takes,
        };
        let parts = Parts::default()
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
            .with(probe("server", Reloaded::Unchanged, Duration::ZERO));
        let config = crate::config::load::parse(
            &crate::home::Home::at("/tmp/pincer-test-home"),
            std::path::Path::new("/h/config.toml"),
            "",
            &|| None,
        )
        .unwrap();
        parts.start(&config);
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
                "start server",
                "stop server",
                "stop memory"
            ]
        );
    }
}
