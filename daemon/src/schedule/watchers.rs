//! The lifecycle the triggers and the heartbeats share: a set of watching
//! tasks, one per spec of the config in force, replaced as a whole when
//! the config reloads, and the fires they started, which a stop lets
//! finish within its grace.

use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub struct Watchers {
    /// Cancels the watching tasks of the specs in force.
    current: Mutex<CancellationToken>,
    /// Fires running.
    runs: TaskTracker,
    stop: CancellationToken,
}

impl Default for Watchers {
    fn default() -> Self {
        Self {
            current: Mutex::new(CancellationToken::new()),
            runs: TaskTracker::new(),
            stop: CancellationToken::new(),
        }
    }
}

impl Watchers {
    /// Cancels the watching tasks in force; the token of their
    /// replacements (cancelled too when pincerd stops).
    pub fn restart(&self) -> CancellationToken {
        let cancel = self.stop.child_token();
        let old = {
            let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *current, cancel.clone())
        };
        old.cancel();
        cancel
    }

    /// Runs a fire in the background; [`Watchers::stop`] waits for it.
    pub fn spawn_run(&self, run: impl Future<Output = ()> + Send + 'static) {
        self.runs.spawn(run);
    }

    /// Stops every watching task and waits up to `grace` for the fires
    /// running (one still going stays `running`: `unknown` at the next
    /// start).
    pub async fn stop(&self, grace: Duration) {
        self.stop.cancel();
        self.runs.close();
        let _ = tokio::time::timeout(grace, self.runs.wait()).await;
    }
}
