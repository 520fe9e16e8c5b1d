//! The workflow engine as a lifecycle part: at start it resumes the runs
//! a stop or a crash left going (in the background: a start never waits
//! on a run); at stop it asks them to halt at their next step boundary,
//! within the grace, so they resume at the next start.

use std::time::Duration;

use super::engine::Workflows;
use crate::config::Config;
use crate::lifecycle::{Part, Reloaded, StartFuture, StopFuture};

impl Part for Workflows {
    fn name(&self) -> &'static str {
        "workflows"
    }

    fn start<'a>(&'a self, _config: &'a Config) -> StartFuture<'a> {
        let engine = self.clone();
        Box::pin(async move {
            tokio::spawn(async move { engine.resume_all().await });
            Ok(())
        })
    }

    fn reload(&self, _old: &Config, _new: &Config) -> Reloaded {
        // Each run and each start reads the config in force.
        Reloaded::Unchanged
    }

    fn stop(&self, grace: Duration) -> StopFuture<'_> {
        Box::pin(self.stop(grace))
    }
}
