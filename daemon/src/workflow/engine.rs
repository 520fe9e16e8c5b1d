//! The workflow engine as the daemon holds it ([`Workflows`], a cloneable
//! handle): starts runs for a principal — the inputs checked and filled
//! from their defaults, the run and its session created, the runner
//! spawned — lists and shows runs, and cancels them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::admission::{Lanes, Refused, Ticket};
use super::catalog;
use super::check::ToolStatus;
use super::def::{Admission, Workflow};
use super::library::LibraryError;
use super::runner::{Resume, RunEvent, Runner};
use super::store::{NewRun, RunRow, RunStatus, RunStore, StepRow, StepState, StoreError};
use super::template::Templates;
use super::{plan, replay, resume};
use crate::agent::Runtime;
use crate::agent::session_log::SessionLog;
use crate::config::AgentSettings;
use crate::session::SessionKey;
use crate::session::registry::NewSession;
use crate::session::transcript::Transcript;
use crate::tools::approvals::Ending;
use crate::tools::origin::ChatOrigin;
use crate::tools::sessions::SessionAccess;
use crate::tools::workflow_run::{RunReport, WorkflowRunner};
use futures_util::future::BoxFuture;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Library(#[from] LibraryError),
    #[error("{0}")]
    Inputs(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run's transcript: {0}")]
    Transcript(String),
    #[error("workflow `{workflow}` is running and its admission is `drop`: this start is dropped")]
    Busy { workflow: String },
    #[error(
        "workflow `{workflow}` is running and run {run} waits to run next; with admission `coalesce` this start joins it"
    )]
    Joined { workflow: String, run: String },
    #[error("no workflow run `{0}` (pincer workflows runs lists them)")]
    NoRun(String),
    #[error(
        "run `{run}` is {status}, not waiting on a step whose outcome is unknown: there is nothing to settle"
    )]
    NothingToSettle { run: String, status: &'static str },
    #[error("run `{run}` is {status}: only a run that ended can be replayed")]
    NotOver { run: String, status: &'static str },
    #[error("the replay's scratch space: {0}")]
    Scratch(String),
}

/// How the owner settles a step whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Run it again.
    Rerun,
    /// Count it as done, with no output.
    Skip,
    /// Fail the run.
    Fail,
}

/// The engine.
#[derive(Clone)]
pub struct Workflows {
    inner: Arc<Inner>,
}

struct Inner {
    rt: Runtime,
    store: RunStore,
    templates: Arc<Templates>,
    /// Runs going on in this process, by id.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Cancelled when the daemon stops: runs halt at a step boundary.
    stop: CancellationToken,
    /// One lane per workflow, for the admission policy.
    lanes: Lanes,
    /// The hub, for the session tools of `agent` steps.
    sessions: Arc<dyn SessionAccess>,
}

impl Workflows {
    /// Opens the runs database at `path`.
    pub fn open(
        rt: Runtime,
        sessions: Arc<dyn SessionAccess>,
        path: &Path,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            inner: Arc::new(Inner {
                rt,
                store: RunStore::open(path)?,
                templates: Arc::new(Templates::new()),
                running: Mutex::default(),
                stop: CancellationToken::new(),
                lanes: Lanes::default(),
                sessions,
            }),
        })
    }

    /// Starts workflow `name` of `agent` for `origin`; the run's id and its
    /// events.
    pub async fn start(
        &self,
        agent: &AgentSettings,
        origin: &ChatOrigin,
        name: &str,
        given: Map<String, Value>,
    ) -> Result<(String, mpsc::UnboundedReceiver<RunEvent>), StartError> {
        let rt = &self.inner.rt;
        let workflow = catalog::open(rt, agent, origin).await.take(name)?;
        let inputs = inputs(&workflow, given)?;
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let lane = format!("{}/{}", agent.id, workflow.name);
        let ticket = self
            .inner
            .lanes
            .admit(&lane, &id, workflow.admission)
            .map_err(|refused| match refused {
                Refused::Busy => StartError::Busy {
                    workflow: workflow.name.clone(),
                },
                Refused::Joined(run) => StartError::Joined {
                    workflow: workflow.name.clone(),
                    run,
                },
            })?;
        let key = SessionKey::workflow(&agent.id, &id)
            .map_err(|e| StartError::Transcript(e.to_string()))?;
        let log = self.open_log(&agent.id, &key, origin).await?;
        let run = self
            .inner
            .store
            .create(NewRun {
                id: id.clone(),
                workflow: workflow.name.clone(),
                agent: agent.id.clone(),
                hash: workflow.hash.clone(),
                source: workflow.source.clone(),
                subs: workflow
                    .all_subs()
                    .into_iter()
                    .map(|(name, w)| (name, w.source.clone()))
                    .collect(),
                inputs: Value::Object(inputs),
                principal: origin.principal.to_string(),
                chat: (!origin.is_owner())
                    .then(|| origin.source.clone())
                    .flatten(),
                session_key: key.to_string(),
                parent: None,
                seed: rand_seed(),
                first: workflow.steps.first().map(|s| s.id.clone()),
            })
            .await?;
        let (events, rx) = mpsc::unbounded_channel();
        self.spawn(
            workflow,
            run,
            agent,
            origin,
            log,
            events,
            Resume::default(),
            ticket,
        )
        .await;
        Ok((id, rx))
    }

    /// The run's session (created for `origin`'s principal the first
    /// time) and its transcript, open.
    async fn open_log(
        &self,
        agent: &str,
        key: &SessionKey,
        origin: &ChatOrigin,
    ) -> Result<SessionLog, StartError> {
        let rt = &self.inner.rt;
        let row = rt
            .registry()
            .get_or_create(
                &key.to_string(),
                agent,
                key.channel(),
                NewSession::of(origin.principal.clone()),
            )
            .await
            .map_err(|e| StartError::Transcript(e.to_string()))?;
        let path = rt.home().transcript(agent, &row.id);
        SessionLog::open(path, row.id)
            .await
            .map_err(|e| StartError::Transcript(e.to_string()))
    }

    /// What a run of `name` with `given` would do, nothing run (a dry
    /// run): the inputs are checked as for a run.
    pub async fn plan(
        &self,
        agent: &AgentSettings,
        origin: &ChatOrigin,
        name: &str,
        given: Map<String, Value>,
    ) -> Result<Vec<plan::PlannedStep>, StartError> {
        catalog::with_policy(&self.inner.rt, agent, origin, |policy| {
            let workflow = catalog::library(agent, policy).take(name)?;
            let inputs = inputs(&workflow, given)?;
            Ok(plan::plan(&workflow, &Value::Object(inputs), policy))
        })
        .await
    }

    /// Spawns the runner of `run`.
    #[allow(clippy::too_many_arguments)]
    async fn spawn(
        &self,
        workflow: Workflow,
        run: RunRow,
        agent: &AgentSettings,
        origin: &ChatOrigin,
        log: SessionLog,
        events: mpsc::UnboundedSender<RunEvent>,
        mut resume: Resume,
        ticket: Ticket,
    ) {
        let rt = &self.inner.rt;
        let cancel = CancellationToken::new();
        let id = run.id.clone();
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), cancel.clone());
        resume.stop = self.inner.stop.clone();
        let runner = Runner::new(
            rt.clone(),
            self.inner.store.clone(),
            self.inner.templates.clone(),
            workflow,
            run,
            agent.clone(),
            origin.clone(),
            rt.tool_registry().await,
            log,
            cancel,
            events,
            self.inner.sessions.clone(),
            resume,
        );
        let inner = self.inner.clone();
        tokio::spawn(async move {
            // Held until the run ends.
            let _lane = ticket.enter().await;
            runner.run().await;
            inner
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        });
    }

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
    fn as_owner(&self, run: &RunRow) -> Result<(AgentSettings, ChatOrigin), StartError> {
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
            .map_err(StartError::Scratch)?;
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

    /// Asks every run to halt at its next step boundary; waits up to
    /// `grace` for them.
    pub async fn stop(&self, grace: std::time::Duration) {
        self.inner.stop.cancel();
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline {
            if self
                .inner
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The newest runs, of one agent or all.
    pub async fn runs(&self, agent: Option<String>, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        self.inner.store.list(agent, limit).await
    }

    /// One run and its step attempts.
    pub async fn run(&self, id: &str) -> Result<Option<(RunRow, Vec<StepRow>)>, StoreError> {
        let Some(row) = self.inner.store.get(id).await? else {
            return Ok(None);
        };
        let steps = self.inner.store.steps(id).await?;
        Ok(Some((row, steps)))
    }

    /// Cancels a run going on here; false when none is.
    pub fn cancel(&self, id: &str) -> bool {
        match self
            .inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
        {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

impl WorkflowRunner for Workflows {
    fn run<'a>(
        &'a self,
        agent: &'a str,
        origin: &'a ChatOrigin,
        name: &'a str,
        inputs: Map<String, Value>,
        wait: std::time::Duration,
    ) -> BoxFuture<'a, Result<RunReport, String>> {
        Box::pin(async move {
            let rt = &self.inner.rt;
            let config = rt.config();
            let Some(agent) = config.agent(agent).cloned() else {
                return Err(format!("no agent `{agent}`"));
            };
            // Who may start runs is the origin's policy's to say: the
            // tool's own verdict, also for `/run`.
            let status = catalog::with_policy(rt, &agent, origin, |p| {
                catalog::tool_status(p, "workflow_run")
            })
            .await;
            if let ToolStatus::Removed { layer, reason } = status {
                return Err(format!(
                    "this chat may not run workflows: `workflow_run` is removed by {layer} ({reason})"
                ));
            }
            let (run, mut events) = match self.start(&agent, origin, name, inputs).await {
                Ok(started) => started,
                Err(e @ (StartError::Busy { .. } | StartError::Joined { .. })) => {
                    return Ok(RunReport::NotAdmitted { why: e.to_string() });
                }
                Err(e) => return Err(e.to_string()),
            };
            let deadline = tokio::time::sleep(wait);
            tokio::pin!(deadline);
            loop {
                let event = tokio::select! {
                    e = events.recv() => e,
                    () = &mut deadline => None,
                };
                match event {
                    Some(RunEvent::Halted { path, kind, id, .. }) => {
                        self.tell_when_over(origin, name, &run, events);
                        return Ok(RunReport::Halted {
                            run,
                            step: path,
                            kind: kind.to_string(),
                            id,
                        });
                    }
                    Some(RunEvent::Finished {
                        status,
                        output,
                        error,
                    }) => {
                        return Ok(RunReport::Finished {
                            run,
                            status: status.as_str().to_string(),
                            output,
                            error,
                        });
                    }
                    Some(_) => {}
                    None => {
                        self.tell_when_over(origin, name, &run, events);
                        return Ok(RunReport::Going { run });
                    }
                }
            }
        })
    }
}

impl Workflows {
    /// A run a chat started goes on after its start was answered (it
    /// halted for a person, or took longer): the chat is told how it
    /// ended, as `/run` would have said it.
    fn tell_when_over(
        &self,
        origin: &ChatOrigin,
        name: &str,
        run: &str,
        mut events: mpsc::UnboundedReceiver<RunEvent>,
    ) {
        let (Some(to), Some(outbox)) = (origin.chat.address(), self.inner.rt.outbox()) else {
            return;
        };
        let (name, run) = (name.to_string(), run.to_string());
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let RunEvent::Finished {
                    status,
                    output,
                    error,
                } = event
                else {
                    continue;
                };
                let report = RunReport::Finished {
                    run: run.clone(),
                    status: status.as_str().to_string(),
                    output,
                    error,
                };
                if let Err(e) = outbox.send_text(&to, &report.sentence(&name)).await {
                    tracing::warn!(run = %run, error = %e, "cannot tell the chat how the run ended");
                }
                return;
            }
        });
    }
}

/// The given inputs checked against the declared ones, defaults filled.
pub fn inputs(w: &Workflow, given: Map<String, Value>) -> Result<Map<String, Value>, StartError> {
    w.fill_inputs(given).map_err(StartError::Inputs)
}

fn rand_seed() -> u64 {
    let u = uuid::Uuid::new_v4();
    let b = u.as_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}
