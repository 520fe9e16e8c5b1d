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

use super::catalog;
use super::def::{Action, Workflow};
use super::library::LibraryError;
use super::runner::{RunEvent, Runner};
use super::store::{NewRun, RunRow, RunStore, StepRow, StoreError};
use super::template::Templates;
use crate::agent::Runtime;
use crate::agent::session_log::SessionLog;
use crate::config::AgentSettings;
use crate::config::locate::nearest;
use crate::session::SessionKey;
use crate::session::registry::NewSession;
use crate::session::transcript::Transcript;
use crate::tools::origin::ChatOrigin;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Library(#[from] LibraryError),
    #[error("{0}")]
    Inputs(String),
    #[error("workflow `{workflow}` has {kind} step `{step}`, which this pincerd cannot run yet")]
    NotYet {
        workflow: String,
        kind: &'static str,
        step: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run's transcript: {0}")]
    Transcript(String),
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
}

impl Workflows {
    /// Opens the runs database at `path`.
    pub fn open(rt: Runtime, path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            inner: Arc::new(Inner {
                rt,
                store: RunStore::open(path)?,
                templates: Arc::new(Templates::new()),
                running: Mutex::default(),
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
        runnable(&workflow)?;
        let inputs = inputs(&workflow, given)?;
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let key = SessionKey::workflow(&agent.id, &id)
            .map_err(|e| StartError::Transcript(e.to_string()))?;
        let row = rt
            .registry()
            .get_or_create(
                &key.to_string(),
                &agent.id,
                key.channel(),
                NewSession::of(origin.principal.clone()),
            )
            .await
            .map_err(|e| StartError::Transcript(e.to_string()))?;
        let path = rt.home().transcript(&agent.id, &row.id);
        let (transcript, entries, _) = tokio::task::spawn_blocking(move || Transcript::open(&path))
            .await
            .map_err(|e| StartError::Transcript(e.to_string()))?
            .map_err(|e| StartError::Transcript(e.to_string()))?;
        let run = self
            .inner
            .store
            .create(NewRun {
                id: id.clone(),
                workflow: workflow.name.clone(),
                agent: agent.id.clone(),
                hash: workflow.hash.clone(),
                source: workflow.source.clone(),
                inputs: Value::Object(inputs),
                principal: origin.principal.to_string(),
                session_key: key.to_string(),
                parent: None,
                seed: rand_seed(),
                first: workflow.steps.first().map(|s| s.id.clone()),
            })
            .await?;
        let (events, rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), cancel.clone());
        let runner = Runner::new(
            rt.clone(),
            self.inner.store.clone(),
            self.inner.templates.clone(),
            workflow,
            run,
            agent.clone(),
            origin.clone(),
            rt.tool_registry().await,
            SessionLog::new(row.id, transcript, entries),
            cancel,
            events,
        );
        let inner = self.inner.clone();
        let run_id = id.clone();
        tokio::spawn(async move {
            runner.run().await;
            inner
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&run_id);
        });
        Ok((id, rx))
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

/// The step kinds this engine runs; a workflow with another is refused
/// before it starts, rather than halfway.
fn runnable(w: &Workflow) -> Result<(), StartError> {
    let mut refused = None;
    for step in &w.steps {
        step.visit(&mut |s| {
            if refused.is_none()
                && matches!(
                    s.action,
                    Action::Approval { .. }
                        | Action::Input { .. }
                        | Action::Agent { .. }
                        | Action::Workflow { .. }
                )
            {
                refused = Some((s.kind(), s.id.clone()));
            }
        });
    }
    match refused {
        None => Ok(()),
        Some((kind, step)) => Err(StartError::NotYet {
            workflow: w.name.clone(),
            kind,
            step,
        }),
    }
}

/// The given inputs checked against the declared ones, defaults filled.
pub fn inputs(w: &Workflow, given: Map<String, Value>) -> Result<Map<String, Value>, StartError> {
    let names: Vec<String> = w.inputs.iter().map(|i| i.name.clone()).collect();
    for name in given.keys() {
        if !names.contains(name) {
            let hint = match nearest(name, &names) {
                Some(n) => format!(" (did you mean `{n}`?)"),
                None if names.is_empty() => " (it takes none)".to_string(),
                None => format!("; its inputs: {}", names.join(", ")),
            };
            return Err(StartError::Inputs(format!(
                "workflow `{}` has no input `{name}`{hint}",
                w.name
            )));
        }
    }
    let mut out = Map::new();
    for input in &w.inputs {
        let value = match (given.get(&input.name), &input.default) {
            (Some(v), _) => v.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => {
                return Err(StartError::Inputs(format!(
                    "workflow `{}` needs the input `{}` ({}): give it with --input {}=…",
                    w.name,
                    input.name,
                    input.kind.described(),
                    input.name
                )));
            }
        };
        // Text from a command line is read as the input's kind.
        let value = match (&value, input.kind) {
            (Value::String(text), kind) if !kind.admits(&value) => kind
                .from_text(text)
                .map_err(|e| StartError::Inputs(format!("input `{}`: {e}", input.name)))?,
            _ => value,
        };
        if !input.kind.admits(&value) {
            return Err(StartError::Inputs(format!(
                "input `{}` is not {}",
                input.name,
                input.kind.described()
            )));
        }
        out.insert(input.name.clone(), value);
    }
    Ok(out)
}

fn rand_seed() -> u64 {
    let u = uuid::Uuid::new_v4();
    let b = u.as_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}
