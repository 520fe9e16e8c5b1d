//! The workflow engine as the daemon holds it ([`Workflows`], a cloneable
//! handle): starts runs for a principal — the inputs checked and filled
//! from their defaults, the run and its session created, the runner
//! spawned — lists and shows runs, and cancels them.
//!
//! `restart.rs` resumes the runs a stop left and settles a step whose
//! outcome is unknown, `replay.rs` runs a finished run again on what it
//! recorded, and `chat.rs` is the engine as the `workflow_run` tool and
//! `/run` see it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::admission::{Lanes, Refused, Ticket};
use super::catalog;
use super::def::Workflow;
use super::library::LibraryError;
use super::plan;
use super::runner::{Resume, RunEvent, Runner};
use super::store::{NewRun, RunRow, RunStore, StepRow, StoreError};
use super::template::Templates;
use crate::agent::Runtime;
use crate::agent::session_log::SessionLog;
use crate::config::AgentSettings;
use crate::session::SessionKey;
use crate::tools::origin::ChatOrigin;
use crate::tools::sessions::SessionAccess;

mod chat;
mod replay;
mod restart;

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
    pub(super) async fn open_log(
        &self,
        agent: &str,
        key: &SessionKey,
        origin: &ChatOrigin,
    ) -> Result<SessionLog, StartError> {
        SessionLog::open_session(&self.inner.rt, agent, key, origin.principal.clone())
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
    pub(super) async fn spawn(
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

/// The given inputs checked against the declared ones, defaults filled.
pub fn inputs(w: &Workflow, given: Map<String, Value>) -> Result<Map<String, Value>, StartError> {
    w.fill_inputs(given)
        .map_err(|e| StartError::Inputs(e.to_string()))
}

fn rand_seed() -> u64 {
    let u = uuid::Uuid::new_v4();
    let b = u.as_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}
