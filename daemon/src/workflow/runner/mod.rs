//! One run of a workflow, from its cursor to its end.
//!
//! The loop takes the step at the cursor, records the attempt as started
//! (durably, before anything runs), runs it with its `when`, `retry`,
//! `timeout` and `on_error`, records how it ended together with the next
//! cursor, and moves on. What the steps see is the run's values:
//! `inputs`, `steps.<id>.output` and `.status`, `run`. Tool and command
//! steps go through the agent's whole tool pipeline for the principal
//! that started the run (`agent::call_env`), and their calls and results
//! land in the run's own transcript (session `agent:<agent>:workflow:<run>`)
//! like a turn's; an `llm` step's prompt and answer too.
//!
//! `for_each` and `parallel` run their inner steps side by side; their
//! outputs are gathered in a canonical order (the items', the branches'),
//! so the same inputs and results always give the same values. A retry's
//! jitter comes from the run's seed. A `workflow` step walks its
//! sub-workflow as a line of the same run (`frame.rs`).
//!
//! This file holds the runner and how it starts and ends; `attempt.rs`
//! takes a step through its attempts, `action.rs` does what its kind says,
//! `parallel.rs` joins a `parallel` step's branches, `tool_call.rs` and
//! `llm_step.rs` make a tool or command step's call and an `llm` step's
//! model call, `agent_step.rs` runs an `agent` step's turn, `halt.rs`
//! waits for a person, `frame.rs` walks a line of steps and `order.rs`
//! keeps the transcript in canonical order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod action;
mod agent_step;
mod attempt;
mod frame;
mod halt;
mod llm_step;
mod order;
mod parallel;
mod tool_call;

use frame::Frame;

use super::def::Workflow;
use super::replay::Recording;
use super::store::{RunRow, RunStatus, RunStore, StepState};
use super::template::Templates;
use crate::agent::Runtime;
use crate::agent::session_log::SessionLog;
use crate::config::{AgentSettings, Config};
use crate::tools::ToolRegistry;
use crate::tools::loops::LoopDetector;
use crate::tools::origin::ChatOrigin;
use crate::tools::sessions::SessionAccess;

/// What a run reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    StepStarted {
        path: String,
        kind: &'static str,
        attempt: u32,
    },
    StepFinished {
        path: String,
        state: StepState,
        output: Value,
        error: Option<String>,
    },
    /// The run waits for a person: request `id` asks for it.
    Halted {
        path: String,
        kind: &'static str,
        id: String,
        prompt: String,
    },
    Finished {
        status: RunStatus,
        output: Option<Value>,
        error: Option<String>,
    },
}

/// How long one tool or command step may run when it sets no timeout.
const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything one run needs.
pub struct Runner {
    pub rt: Runtime,
    pub store: RunStore,
    pub templates: Arc<Templates>,
    pub run: RunRow,
    pub agent: AgentSettings,
    pub origin: ChatOrigin,
    pub config: Arc<Config>,
    pub registry: Arc<ToolRegistry>,
    pub log: tokio::sync::Mutex<SessionLog>,
    pub cancel: CancellationToken,
    pub events: tokio::sync::mpsc::UnboundedSender<RunEvent>,
    /// The hub, for the session tools of `agent` steps.
    pub sessions: Arc<dyn SessionAccess>,
    /// The run's own line of steps.
    top: Frame,
    /// The concurrent steps going on, by path: their transcript order.
    groups: Mutex<BTreeMap<String, order::Group>>,
    /// Told when an item of a group finishes: an item waiting for its
    /// turn to write (an `agent` step) looks again.
    turns: tokio::sync::Notify,
    /// Steps that ended before a restart, by path: not run again.
    recorded: Mutex<Recorded>,
    /// The daemon is stopping: the run halts at the next step boundary
    /// and resumes at the next start.
    stop: CancellationToken,
    tokens: Mutex<u64>,
    /// US dollars spent on models so far, by their `[models.*]` prices.
    cost: Mutex<f64>,
    /// The top-level steps' loop window (their calls run one at a time).
    loops: tokio::sync::Mutex<LoopDetector>,
    /// A replay: every tool, command, model and person's result is the
    /// recorded one, and nothing is called.
    replay: Option<Arc<Recording>>,
}

/// The steps that ended before a restart, by path, in the order they
/// started: each attempt's output (`None`: `when` skipped it). Each is taken once, so a loop that comes back to a step takes the
/// next, and runs the step when none is left.
pub type Recorded = BTreeMap<String, VecDeque<Option<Value>>>;

/// Where a run picks up: the values of the steps finished before, the
/// attempts of the cursor step that finished, and the daemon's stop.
#[derive(Default)]
pub struct Resume {
    pub values: BTreeMap<String, Value>,
    pub recorded: Recorded,
    pub stop: CancellationToken,
    /// Set for a replay (`super::replay`).
    pub replay: Option<Arc<Recording>>,
}

/// A step's failure.
#[derive(Debug, Clone)]
struct Failure(String);

impl Runner {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rt: Runtime,
        store: RunStore,
        templates: Arc<Templates>,
        workflow: Workflow,
        run: RunRow,
        agent: AgentSettings,
        origin: ChatOrigin,
        registry: Arc<ToolRegistry>,
        log: SessionLog,
        cancel: CancellationToken,
        events: tokio::sync::mpsc::UnboundedSender<RunEvent>,
        sessions: Arc<dyn SessionAccess>,
        resume: Resume,
    ) -> Self {
        let config = rt.config();
        let top = Frame::new(Arc::new(workflow), String::new(), run.inputs.clone());
        *top.values.lock().unwrap_or_else(|e| e.into_inner()) = resume.values;
        *top.iterations.lock().unwrap_or_else(|e| e.into_inner()) = run.iterations.clone();
        Self {
            rt,
            store,
            templates,
            run,
            agent,
            origin,
            config,
            registry,
            log: tokio::sync::Mutex::new(log),
            cancel,
            events,
            sessions,
            top,
            groups: Mutex::default(),
            turns: tokio::sync::Notify::new(),
            recorded: Mutex::new(resume.recorded),
            stop: resume.stop,
            tokens: Mutex::new(0),
            cost: Mutex::new(0.0),
            loops: tokio::sync::Mutex::default(),
            replay: resume.replay,
        }
    }

    /// Runs from the cursor to the end; the run's final status, output
    /// and error (also stored). `None` when the daemon stopped first: the
    /// run stays `running` and resumes at the next start.
    pub async fn run(self) -> Option<(RunStatus, Option<Value>, Option<String>)> {
        let (status, output, error) = self.steps().await?;
        if let Err(e) = self
            .store
            .set_status(&self.run.id, status, output.clone(), error.clone())
            .await
        {
            tracing::error!(run = %self.run.id, error = %e, "cannot record the end of a workflow run");
        }
        let _ = self.events.send(RunEvent::Finished {
            status,
            output: output.clone(),
            error: error.clone(),
        });
        Some((status, output, error))
    }
}

/// Why the loop stops early.
#[derive(Debug)]
enum Stop {
    Fail(String),
    Cancelled,
    /// `on_error = "skip_rest"`: the run ends here, successfully.
    Done,
}
