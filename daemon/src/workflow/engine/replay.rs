//! `pincer workflows replay`: a finished run run again by the real
//! runner on what it recorded (`workflow::replay`), against a scratch runs
//! database and transcript under `state/`, as the owner; how the replay
//! compares with the run.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{StartError, Workflows};
use crate::agent::session_log::SessionLog;
use crate::session::transcript::Transcript;
use crate::workflow::catalog;
use crate::workflow::replay;
use crate::workflow::runner::{Resume, Runner};

impl Workflows {
    /// Runs run `id` again on what it recorded (with the workflow file as
    /// it is now when `current`), nothing called; how it compares.
    pub async fn replay(&self, id: &str, current: bool) -> Result<replay::Verdict, StartError> {
        let store = &self.inner.store;
        let rt = &self.inner.rt;
        let Some(run) = store.get(id).await? else {
            return Err(StartError::NoRun(id.to_string()));
        };
        if !run.status.is_over() {
            return Err(StartError::NotOver {
                run: id.to_string(),
                status: run.status.as_str(),
            });
        }
        let (agent, origin) = self.as_owner(&run)?;
        let workflow = if current {
            catalog::open(rt, &agent, &origin)
                .await
                .take(&run.workflow)?
        } else {
            catalog::recorded(rt, &agent, &origin, &run).await?
        };
        let rows = store.steps(id).await?;
        let dir = tempfile::Builder::new()
            .prefix("replay-")
            .tempdir_in(rt.home().state_dir())
            .map_err(|e| StartError::Scratch(e.to_string()))?;
        let first = workflow.steps.first().map(|s| s.id.clone());
        let (scratch, row) = replay::scratch(dir.path(), &run, first)
            .await
            .map_err(|e| StartError::Scratch(e.to_string()))?;
        let path = dir.path().join("replay.jsonl");
        let (transcript, entries, _) =
            Transcript::open(&path).map_err(|e| StartError::Scratch(e.to_string()))?;
        let (events, _) = mpsc::unbounded_channel();
        let runner = Runner::new(
            rt.clone(),
            scratch.clone(),
            self.inner.templates.clone(),
            workflow,
            row,
            agent,
            origin,
            rt.tool_registry().await,
            SessionLog::new("replay".into(), transcript, entries),
            CancellationToken::new(),
            events,
            self.inner.sessions.clone(),
            Resume {
                replay: Some(Arc::new(replay::Recording::of(&rows))),
                ..Resume::default()
            },
        );
        runner.run().await;
        let Some(replayed) = scratch.get(id).await? else {
            return Err(StartError::Scratch("the replayed run is gone".into()));
        };
        let again = scratch.steps(id).await?;
        Ok(replay::compare(&run, &rows, &replayed, &again))
    }
}
