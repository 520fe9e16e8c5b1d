//! Runs picked up again: at a start, every run a stop or crash left
//! `running` or `waiting` — the file as it ran checked again against
//! today's policy, the steps finished before not run again, a step whose
//! outcome is unknown run again only when idempotent, else left for the
//! owner to settle (`resolve`) — and who a run acts as when it resumes.

use serde_json::Value;
use tokio::sync::mpsc;

use super::{Settle, StartError, Workflows};
use crate::config::AgentSettings;
use crate::session::SessionKey;
use crate::tools::approvals::Ending;
use crate::tools::origin::ChatOrigin;
use crate::workflow::catalog;
use crate::workflow::def::Admission;
use crate::workflow::resume;
use crate::workflow::store::{RunRow, RunStatus, StepState};

impl Workflows {
    /// Picks up every run a stop or crash left `running`: the steps
    /// finished before are not run again; a step left running whose
    /// outcome is unknown runs again if it is idempotent, else the run
    /// waits for the owner.
    pub async fn resume_all(&self) {
        let runs = match self.inner.store.open_runs().await {
            Ok(runs) => runs,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the workflow runs to resume");
                return;
            }
        };
        // Waiting runs too: one halted for a person waits on its request
        // again; one waiting for the owner to settle a step stays so.
        for run in runs
            .into_iter()
            .filter(|r| matches!(r.status, RunStatus::Running | RunStatus::Waiting))
        {
            let id = run.id.clone();
            if let Err(e) = self.resume(run, None).await {
                tracing::error!(run = %id, error = %e, "cannot resume the workflow run");
                // Nobody will wait on its requests any more.
                let approvals = self.inner.rt.approvals();
                for p in approvals.pending() {
                    if p.halt().is_some_and(|h| h.run == id) {
                        let _ = approvals.end(&p.id, Ending::Aborted).await;
                    }
                }
                let _ = self
                    .inner
                    .store
                    .set_status(
                        &id,
                        RunStatus::Failed,
                        None,
                        Some(format!("cannot resume: {e}")),
                    )
                    .await;
            }
        }
    }

    /// Resumes `run`; `settled` says how the owner settled its unknown
    /// step, if they did.
    async fn resume(&self, run: RunRow, settled: Option<Settle>) -> Result<(), StartError> {
        let store = &self.inner.store;
        let rt = &self.inner.rt;
        let (agent, origin) = self.as_starter(&run)?;
        let key = SessionKey::parse(&run.session_key)
            .map_err(|e| StartError::Transcript(e.to_string()))?;
        // The file as it ran, checked again against today's policy.
        let workflow = catalog::recorded(rt, &agent, &origin, &run)
            .await
            .map_err(StartError::Library)?;
        let rows = store.steps(&run.id).await?;
        let mut reading = resume::read(&workflow, &run, &rows);
        let unknown_seqs: Vec<u64> = reading.unknown.iter().map(|(seq, _, _)| *seq).collect();
        if !unknown_seqs.is_empty() {
            store.mark_unknown(&run.id, unknown_seqs).await?;
        }
        match (reading.blocking().map(str::to_string), settled) {
            (Some(path), None) => {
                let why = format!(
                    "step `{path}` was running when pincerd stopped and is not marked idempotent, so whether it ran is unknown: settle it with `pincer workflows resolve {} rerun|skip|fail`",
                    run.id
                );
                tracing::warn!(run = %run.id, "{why}");
                store
                    .set_status(&run.id, RunStatus::Waiting, None, Some(why))
                    .await?;
                return Ok(());
            }
            (_, Some(Settle::Fail)) => {
                store
                    .set_status(
                        &run.id,
                        RunStatus::Failed,
                        None,
                        Some("the owner settled a step whose outcome was unknown as failed".into()),
                    )
                    .await?;
                return Ok(());
            }
            (_, Some(Settle::Skip)) => {
                // The unknown steps count as finished with no output.
                for (_, path, _) in &reading.unknown {
                    reading
                        .resume
                        .recorded
                        .entry(path.clone())
                        .or_default()
                        .push_back(Some(Value::Null));
                }
            }
            _ => {}
        }
        store
            .set_status(&run.id, RunStatus::Running, None, None)
            .await?;
        let log = self.open_log(&agent.id, &key, &origin).await?;
        tracing::info!(run = %run.id, workflow = %run.workflow, "resuming the workflow run");
        // Admitted when it started: it only waits for its lane again.
        let admission = match workflow.admission {
            Admission::Parallel => Admission::Parallel,
            _ => Admission::Queue,
        };
        let lane = format!("{}/{}", agent.id, workflow.name);
        let ticket = self
            .inner
            .lanes
            .admit(&lane, &run.id, admission)
            .map_err(|_| StartError::Busy {
                workflow: workflow.name.clone(),
            })?;
        // The chat that started it was answered before the stop: it is
        // told how the run ends, as it would have been without one.
        let (events, ended) = mpsc::unbounded_channel();
        self.tell_when_over(&origin, &workflow.name, &run.id, ended);
        self.spawn(
            workflow,
            run,
            &agent,
            &origin,
            log,
            events,
            reading.resume,
            ticket,
        )
        .await;
        Ok(())
    }

    /// Settles the step of a waiting run whose outcome is unknown, and
    /// resumes it (or fails it).
    pub async fn resolve(&self, id: &str, settle: Settle) -> Result<(), StartError> {
        let Some(run) = self.inner.store.get(id).await? else {
            return Err(StartError::NoRun(id.to_string()));
        };
        let rows = self.inner.store.steps(id).await?;
        // A run going on here (halted for a person) has nothing to settle.
        let going = self
            .inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(id);
        let waits_on_unknown = !going
            && run.status == RunStatus::Waiting
            && rows
                .iter()
                .any(|r| r.seq > run.cursor_seq && r.state == StepState::Unknown);
        if !waits_on_unknown {
            return Err(StartError::NothingToSettle {
                run: id.to_string(),
                status: run.status.as_str(),
            });
        }
        // The unknown rows stay unknown in the ledger; the rerun and the
        // skip read them as not run and as done.
        let run = RunRow {
            status: RunStatus::Running,
            ..run
        };
        self.resume(run, Some(settle)).await
    }

    /// The agent of `run` under today's config, and the owner's origin
    /// it resumes or replays as.
    pub(super) fn as_owner(&self, run: &RunRow) -> Result<(AgentSettings, ChatOrigin), StartError> {
        let Some(agent) = self.inner.rt.config().agent(&run.agent).cloned() else {
            return Err(StartError::Inputs(format!(
                "agent `{}` is gone from the config",
                run.agent
            )));
        };
        let main =
            SessionKey::main(&run.agent).map_err(|e| StartError::Transcript(e.to_string()))?;
        Ok((agent, crate::routing::owner(&main)))
    }

    /// The agent of `run` under today's config, and the origin it resumes
    /// as: the owner's, or the chat that started it routed again under
    /// today's config (its policy as it is now), which must still be the
    /// same principal.
    fn as_starter(&self, run: &RunRow) -> Result<(AgentSettings, ChatOrigin), StartError> {
        let (agent, owner) = self.as_owner(run)?;
        if run.principal == owner.principal.to_string() {
            return Ok((agent, owner));
        }
        let Some(chat) = &run.chat else {
            return Err(StartError::Inputs(format!(
                "the run was started by {} in a turn that answered several chats, which cannot be routed again",
                run.principal
            )));
        };
        let route = crate::routing::route(&self.inner.rt.config(), chat)
            .map_err(|e| StartError::Inputs(format!("the chat that started the run: {e}")))?;
        if route.origin.principal.to_string() != run.principal {
            return Err(StartError::Inputs(format!(
                "the chat that started the run now acts as {}, not {}",
                route.origin.principal, run.principal
            )));
        }
        Ok((agent, route.origin))
    }
}
