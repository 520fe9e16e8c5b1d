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

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod agent_step;
mod frame;
mod halt;
mod order;

use frame::Frame;

use super::def::{Action, OnError, Step, Wait, Workflow};
use super::replay::Recording;
use super::store::{RunRow, RunStatus, RunStore, StepEnd, StepState};
use super::template::Templates;
use crate::agent::call_env::{self, CallScope};
use crate::agent::session_log::{Emit, SessionLog};
use crate::agent::tool_step::{self, ToolCall};
use crate::agent::{Event, Runtime};
use crate::config::{AgentSettings, Config};
use crate::llm::{Message, Request};
use crate::session::SessionKey;
use crate::session::transcript::Body;
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

    /// A step with its `when`, retries, timeout and `on_error`: `None`
    /// when `when` skipped it.
    fn attempts<'a>(
        &'a self,
        frame: &'a Frame,
        step: &'a Step,
        path: &'a str,
        ctx: &'a Value,
    ) -> BoxFuture<'a, Result<Option<Value>, Stop>> {
        async move {
            let recorded = self.take_recorded(path);
            // Redrafts a revise recorded before a restart (while this
            // approval waited) are its draft step's output now.
            if let Action::Approval {
                revise: Some(draft),
                ..
            } = &step.action
            {
                self.take_redrafts(frame, draft);
            }
            if let Some(output) = recorded {
                return Ok(output);
            }
            if let Some(when) = &step.when {
                match self.templates.is_true(when, ctx) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.record(path, 1, StepState::Skipped, None, None, 0).await?;
                        return Ok(None);
                    }
                    Err(e) => return self.failed(step, path, format!("`when`: {e}")),
                }
            }
            let mut attempt = 1;
            loop {
                let _ = self.events.send(RunEvent::StepStarted {
                    path: path.to_string(),
                    kind: step.kind(),
                    attempt,
                });
                let seq = self
                    .store
                    .start_step(&self.run.id, path, attempt)
                    .await
                    .map_err(|e| Stop::Fail(e.to_string()))?;
                let timeout = step.timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
                // A halt waits for a person until it expires; it ends its
                // request itself when the run is cancelled, and leaves it
                // waiting when pincerd stops (the run resumes on it).
                // A sub-workflow's steps do both themselves.
                let halts = step.action.halts();
                let waits = step.action.waits();
                let acted = tokio::select! {
                    r = self.act(frame, step, path, ctx, seq, attempt) => r,
                    () = tokio::time::sleep(timeout), if !waits => Err(Failure(format!("timed out after {} s", timeout.as_secs()))),
                    () = self.cancel.cancelled(), if !waits => return Err(Stop::Cancelled),
                    () = self.stop.cancelled(), if halts => return Err(Stop::Cancelled),
                };
                // A sub-workflow stopped with pincerd: its step stays
                // started, and a restart walks into it again.
                if acted.is_err() && self.stop.is_cancelled() && waits && !halts {
                    return Err(Stop::Cancelled);
                }
                match acted {
                    Ok((output, tokens)) => {
                        self.end(seq, path, StepState::Finished, Some(output.clone()), None, tokens)
                            .await?;
                        self.check_limits()?;
                        return Ok(Some(output));
                    }
                    Err(Failure(e)) => {
                        self.end(seq, path, StepState::Failed, None, Some(e.clone()), 0)
                            .await?;
                        // A tool the cancel stopped first fails as
                        // "aborted": the run was cancelled, not failed.
                        if self.cancel.is_cancelled() {
                            return Err(Stop::Cancelled);
                        }
                        if attempt >= step.retry.attempts {
                            return self.failed(step, path, e);
                        }
                        attempt += 1;
                        let mut wait = step.retry.delay_before(attempt, self.unit(path, attempt));
                        if self.replay.is_some() {
                            wait = Duration::ZERO;
                        }
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = self.cancel.cancelled() => return Err(Stop::Cancelled),
                        }
                    }
                }
            }
        }
        .boxed()
    }

    /// The output of the next attempt of the step at `path` that ended
    /// before a restart.
    fn take_recorded(&self, path: &str) -> Option<Option<Value>> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        let queue = recorded.get_mut(path)?;
        let next = queue.pop_front();
        if queue.is_empty() {
            recorded.remove(path);
        }
        next
    }

    /// The redrafts of the llm step `draft` of `frame` recorded before a
    /// restart: what is left of its recorded attempts once the step took
    /// its own (the line reached the approval after it). The last is the
    /// step's output.
    fn take_redrafts(&self, frame: &Frame, draft: &str) {
        let path = frame.path(draft);
        let left = self
            .recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&path);
        if let Some(output) = left.and_then(|mut q| q.pop_back()) {
            frame.set_value(
                draft,
                json!({"output": output.unwrap_or(Value::Null), "status": "ok"}),
            );
        }
    }

    /// A step that failed for good: its `on_error` decides.
    fn failed(&self, step: &Step, path: &str, error: String) -> Result<Option<Value>, Stop> {
        match step.on_error {
            OnError::Stop => Err(Stop::Fail(format!("step `{path}` failed: {error}"))),
            OnError::Continue => Ok(Some(json!({"failed": true, "error": error}))),
            OnError::SkipRest => Err(Stop::Done),
        }
    }

    /// A number in [0, 1) from the run's seed, the step and the attempt.
    fn unit(&self, path: &str, attempt: u32) -> f64 {
        let mut h: u64 = self.run.seed ^ 0x9e37_79b9_7f4a_7c15;
        for b in path.bytes().chain(attempt.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        (h >> 11) as f64 / (1u64 << 53) as f64
    }

    fn check_limits(&self) -> Result<(), Stop> {
        let spent = *self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(max) = self.top.workflow.max_tokens
            && spent > max
        {
            return Err(Stop::Fail(format!(
                "the run spent {spent} tokens, over its limit of {max} (max_tokens)"
            )));
        }
        let cost = *self.cost.lock().unwrap_or_else(|e| e.into_inner());
        match self.top.workflow.max_cost_usd {
            Some(max) if cost > max => Err(Stop::Fail(format!(
                "the run spent ${cost:.4}, over its limit of ${max} (max_cost_usd)"
            ))),
            _ => Ok(()),
        }
    }

    /// Counts a model call's cost; refused when the run has a cost limit
    /// and the model no prices to count it by.
    fn count_cost(
        &self,
        target: &crate::config::ModelTarget,
        input: u64,
        output: u64,
    ) -> Result<(), Failure> {
        match (target.cost(input, output), self.top.workflow.max_cost_usd) {
            (Some(c), _) => {
                *self.cost.lock().unwrap_or_else(|e| e.into_inner()) += c;
                Ok(())
            }
            (None, Some(_)) => Err(Failure(format!(
                "the run has a cost limit (max_cost_usd) but model {} has no prices to count it by: set input_usd_per_mtok and output_usd_per_mtok in its [models.*] entry",
                target.label()
            ))),
            (None, None) => Ok(()),
        }
    }

    async fn record(
        &self,
        path: &str,
        attempt: u32,
        state: StepState,
        output: Option<Value>,
        error: Option<String>,
        tokens: u64,
    ) -> Result<(), Stop> {
        let seq = self
            .store
            .start_step(&self.run.id, path, attempt)
            .await
            .map_err(|e| Stop::Fail(e.to_string()))?;
        self.end(seq, path, state, output, error, tokens).await
    }

    async fn end(
        &self,
        seq: u64,
        path: &str,
        state: StepState,
        output: Option<Value>,
        error: Option<String>,
        tokens: u64,
    ) -> Result<(), Stop> {
        *self.tokens.lock().unwrap_or_else(|e| e.into_inner()) += tokens;
        self.store
            .end_step(
                &self.run.id,
                seq,
                StepEnd {
                    state,
                    output: output.clone(),
                    error: error.clone(),
                    tokens,
                },
                None,
            )
            .await
            .map_err(|e| Stop::Fail(e.to_string()))?;
        let _ = self.events.send(RunEvent::StepFinished {
            path: path.to_string(),
            state,
            output: output.unwrap_or(Value::Null),
            error,
        });
        Ok(())
    }

    /// What the step does; its output and the model tokens it spent.
    fn act<'a>(
        &'a self,
        frame: &'a Frame,
        step: &'a Step,
        path: &'a str,
        ctx: &'a Value,
        seq: u64,
        attempt: u32,
    ) -> BoxFuture<'a, Result<(Value, u64), Failure>> {
        async move {
            if let Some(recording) = &self.replay
                && matches!(
                    step.action,
                    Action::Tool { .. }
                        | Action::Command { .. }
                        | Action::Llm { .. }
                        | Action::Approval { .. }
                        | Action::Input { .. }
                        | Action::Agent { .. }
                )
            {
                // A revise redrafted the llm step while the approval
                // waited: the redrafts are recorded again, as they were.
                if let Action::Approval {
                    revise: Some(draft),
                    ..
                } = &step.action
                {
                    let draft_path = frame.path(draft);
                    for (round, output) in recording.redrafts(&draft_path) {
                        frame.set_value(draft, json!({"output": output, "status": "ok"}));
                        self.record(
                            &draft_path,
                            round,
                            StepState::Finished,
                            Some(output),
                            None,
                            0,
                        )
                        .await
                        .map_err(|_| Failure("cannot record the redraft".into()))?;
                    }
                }
                return match recording.answer(path, attempt) {
                    Some(Ok(output)) => Ok((output, 0)),
                    Some(Err(e)) => Err(Failure(e)),
                    None => Err(Failure(
                        "the run recorded no result for this step attempt".into(),
                    )),
                };
            }
            let t = &self.templates;
            let bad = |e: super::template::TemplateError| Failure(e.to_string());
            match &step.action {
                Action::Tool { tool, arguments } => {
                    let args = t.render_value(arguments, ctx).map_err(bad)?;
                    self.call_tool(path, tool, &args, step.timeout).await
                }
                Action::Command { command } => {
                    let command = t.render(command, ctx).map_err(bad)?;
                    let mut args = json!({ "command": command });
                    if let Some(t) = step.timeout {
                        args["timeout_s"] = json!(t.as_secs().max(1));
                    }
                    self.call_tool(path, "exec", &args, step.timeout).await
                }
                Action::Llm {
                    prompt,
                    system,
                    schema,
                    repairs,
                } => {
                    let prompt = t.render(prompt, ctx).map_err(bad)?;
                    let system = match system {
                        Some(s) => t.render(s, ctx).map_err(bad)?,
                        None => String::new(),
                    };
                    self.ask_model(path, system, prompt, schema.as_ref(), *repairs)
                        .await
                }
                Action::Condition { test, .. } => {
                    let v = t.is_true(test, ctx).map_err(bad)?;
                    Ok((Value::Bool(v), 0))
                }
                Action::ForEach {
                    items,
                    var,
                    concurrency,
                    body,
                } => {
                    let list = t.eval(items, ctx).map_err(bad)?;
                    let Value::Array(list) = list else {
                        return Err(Failure(format!("`items` is not a list but {list}")));
                    };
                    let mut items: Vec<BoxFuture<'_, Result<Option<Value>, Stop>>> = Vec::new();
                    self.open_group(path, Vec::new());
                    for (i, item) in list.iter().enumerate() {
                        let ctx = self.context(frame, Some((var, item, i)));
                        let item_path = format!("{path}[{i}]");
                        items.push(
                            async move {
                                let r = self.attempts(frame, body, &item_path, &ctx).await;
                                self.item_done(path, i)
                                    .await
                                    .map_err(|Failure(e)| Stop::Fail(e))?;
                                r
                            }
                            .boxed(),
                        );
                    }
                    // `buffered` keeps the items' order whatever finishes first.
                    let outputs: Vec<Result<Option<Value>, Stop>> =
                        futures_util::stream::iter(items)
                            .buffered(*concurrency as usize)
                            .collect()
                            .await;
                    self.close_group(path).await?;
                    let mut out = Vec::new();
                    for (i, r) in outputs.into_iter().enumerate() {
                        match r {
                            Ok(v) => out.push(v.unwrap_or(Value::Null)),
                            Err(Stop::Fail(e)) => {
                                return Err(Failure(format!("item {i}: {e}")));
                            }
                            Err(Stop::Cancelled) => return Err(Failure("cancelled".into())),
                            Err(Stop::Done) => out.push(Value::Null),
                        }
                    }
                    Ok((Value::Array(out), 0))
                }
                Action::Parallel { branches, wait } => {
                    self.parallel(frame, path, branches, *wait, ctx, attempt)
                        .await
                }
                Action::Approval { .. } => self.approval(frame, step, path, ctx, seq).await,
                Action::Agent { prompt, max_calls } => {
                    let prompt = t.render(prompt, ctx).map_err(bad)?;
                    self.agent_turn(path, prompt, *max_calls).await
                }
                Action::Input {
                    prompt,
                    schema,
                    expires,
                } => {
                    let prompt = t.render(prompt, ctx).map_err(bad)?;
                    self.input(path, prompt, schema.clone(), *expires, seq)
                        .await
                }
                Action::Workflow { name, inputs } => {
                    self.sub_workflow(frame, path, name, inputs, ctx).await
                }
            }
        }
        .boxed()
    }

    async fn parallel(
        &self,
        frame: &Frame,
        path: &str,
        branches: &[Step],
        wait: Wait,
        ctx: &Value,
        attempt: u32,
    ) -> Result<(Value, u64), Failure> {
        if let (Some(recording), Wait::Any) = (&self.replay, wait) {
            return self
                .replay_any(frame, path, branches, ctx, attempt, recording)
                .await;
        }
        let mut runs: Vec<Branch<'_>> = Vec::new();
        self.open_group(path, branches.iter().map(|b| b.id.clone()).collect());
        for (i, b) in branches.iter().enumerate() {
            let branch = format!("{path}.{}", b.id);
            runs.push(
                async move {
                    let r = self.attempts(frame, b, &branch, ctx).await;
                    let r = match self.item_done(path, i).await {
                        Ok(()) => r,
                        Err(Failure(e)) => Err(Stop::Fail(e)),
                    };
                    (b, r)
                }
                .boxed(),
            );
        }
        let joined = self.join(runs, wait).await;
        self.close_group(path).await?;
        joined
    }

    /// A wait-any step replayed: the branches that ended in the run end
    /// again on their recorded results (those it cancelled do not start),
    /// and the run's winner wins again, whichever ends first here.
    async fn replay_any(
        &self,
        frame: &Frame,
        path: &str,
        branches: &[Step],
        ctx: &Value,
        attempt: u32,
        recording: &Recording,
    ) -> Result<(Value, u64), Failure> {
        let winner = match recording.peek(path, attempt) {
            Some(Ok(v)) => v["winner"].as_str().map(str::to_string),
            _ => None,
        };
        let mut output = None;
        for b in branches {
            let branch = format!("{path}.{}", b.id);
            if recording.peek(&branch, 1).is_none() {
                continue;
            }
            let r = self.attempts(frame, b, &branch, ctx).await;
            if winner.as_deref() == Some(b.id.as_str()) {
                output = Some(r);
            }
        }
        match (winner, output) {
            (Some(id), Some(Ok(v))) => {
                Ok((json!({"winner": id, "output": v.unwrap_or(Value::Null)}), 0))
            }
            (_, Some(Err(Stop::Fail(e)))) => Err(Failure(e)),
            _ => Err(Failure("the run recorded no winner for this step".into())),
        }
    }

    /// The branches of a parallel step joined as `wait` says.
    async fn join<'b>(
        &'b self,
        runs: Vec<Branch<'b>>,
        wait: Wait,
    ) -> Result<(Value, u64), Failure> {
        match wait {
            Wait::All => {
                let results = futures_util::future::join_all(runs).await;
                let mut out = serde_json::Map::new();
                for (b, r) in results {
                    match r {
                        Ok(v) => {
                            out.insert(b.id.clone(), v.unwrap_or(Value::Null));
                        }
                        Err(Stop::Fail(e)) if b.optional => {
                            out.insert(b.id.clone(), json!({"failed": true, "error": e}));
                        }
                        Err(Stop::Fail(e)) => {
                            return Err(Failure(format!("branch `{}`: {e}", b.id)));
                        }
                        Err(_) => out.insert(b.id.clone(), Value::Null).map_or((), |_| ()),
                    }
                }
                Ok((Value::Object(out), 0))
            }
            Wait::Any => {
                let mut pending: futures_util::stream::FuturesUnordered<_> =
                    runs.into_iter().collect();
                let mut errors = Vec::new();
                while let Some((b, r)) = pending.next().await {
                    match r {
                        Ok(v) => {
                            return Ok((
                                json!({"winner": b.id, "output": v.unwrap_or(Value::Null)}),
                                0,
                            ));
                        }
                        Err(Stop::Fail(e)) => errors.push(format!("branch `{}`: {e}", b.id)),
                        Err(_) => {}
                    }
                }
                Err(Failure(format!(
                    "no branch finished: {}",
                    errors.join("; ")
                )))
            }
        }
    }

    /// One call through the agent's tool pipeline, recorded in the run's
    /// transcript.
    async fn call_tool(
        &self,
        path: &str,
        tool: &str,
        args: &Value,
        timeout: Option<Duration>,
    ) -> Result<(Value, u64), Failure> {
        let key = SessionKey::parse(&self.run.session_key).map_err(|e| Failure(e.to_string()))?;
        let session_id = self.log.lock().await.session_id.clone();
        let emit: Emit = Arc::new(|_: Event| {});
        let scope = CallScope {
            rt: &self.rt,
            config: &self.config,
            agent: &self.agent,
            key: &key,
            session_id: &session_id,
            origin: &self.origin,
            spawn_layer: None,
            cancel: &self.cancel,
            emit: &emit,
            sessions: None,
        };
        let env = call_env::build(&scope, &self.registry);
        let arguments = args.to_string();
        let call_id = format!("{}:{path}", self.run.id);
        let call = ToolCall {
            id: &call_id,
            name: tool,
            arguments: &arguments,
        };
        let deadline = Instant::now() + timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
        self.write(path, tool_step::call_entry(&env, &call)).await?;
        let started = Instant::now();
        // A for_each item or parallel branch (`each[2]`, `both.a`) runs
        // beside others: it gets a window of its own.
        let result = if path.contains(['[', '.']) {
            let mut loops = LoopDetector::default();
            env.run(&mut loops, &call_id, tool, &arguments, deadline)
                .await
        } else {
            let mut loops = self.loops.lock().await;
            env.run(&mut loops, &call_id, tool, &arguments, deadline)
                .await
        };
        self.write(path, tool_step::result_entry(&call, &result, started))
            .await?;
        if result.output.is_error || result.status != "ok" {
            return Err(Failure(format!(
                "{tool} ({}): {}",
                result.status,
                crate::util::preview(&result.output.content, 500)
            )));
        }
        // A result that is JSON is kept as data.
        let content = result.output.content;
        let value = serde_json::from_str(&content).unwrap_or(Value::String(content));
        Ok((value, 0))
    }

    /// One model call (and its repairs), recorded in the transcript.
    async fn ask_model(
        &self,
        path: &str,
        system: String,
        prompt: String,
        schema: Option<&Value>,
        repairs: u32,
    ) -> Result<(Value, u64), Failure> {
        let validator = match schema {
            Some(s) => Some(
                jsonschema::validator_for(s).map_err(|e| Failure(format!("the schema: {e}")))?,
            ),
            None => None,
        };
        let mut messages = vec![Message::user(prompt.clone())];
        self.write(
            path,
            Body::User {
                text: prompt,
                images: Vec::new(),
            },
        )
        .await?;
        let models = self.rt.models();
        let mut tokens = 0;
        let mut tries = 0;
        loop {
            let request = Request {
                system: system.clone(),
                messages: messages.clone(),
                tools: Vec::new(),
            };
            let (reply, target) = models
                .complete(&self.agent.models, &request, &mut |_| {}, &self.cancel)
                .await
                .map_err(|e| Failure(format!("the model: {e}")))?;
            tokens += reply.usage.input + reply.usage.output;
            self.count_cost(&target, reply.usage.input, reply.usage.output)?;
            self.write(
                path,
                Body::Assistant {
                    text: reply.text.clone(),
                    model: target.label(),
                    usage: Some(crate::session::transcript::Usage {
                        input: reply.usage.input,
                        output: reply.usage.output,
                    }),
                    stop: "stop".into(),
                },
            )
            .await?;
            let Some(validator) = &validator else {
                return Ok((Value::String(reply.text), tokens));
            };
            let problem = match parse_json(&reply.text) {
                Err(e) => format!("the answer is not JSON: {e}"),
                Ok(v) => match validator.validate(&v) {
                    Ok(()) => return Ok((v, tokens)),
                    Err(e) => format!("the answer does not fit the schema: {e}"),
                },
            };
            if tries >= repairs {
                return Err(Failure(format!("step `{path}`: {problem}")));
            }
            tries += 1;
            let again = format!(
                "{problem}. Answer again with JSON only that satisfies this JSON Schema:\n{}",
                schema.map(Value::to_string).unwrap_or_default()
            );
            messages.push(Message {
                role: crate::llm::Role::Assistant,
                parts: vec![crate::llm::Part::Text(reply.text)],
            });
            messages.push(Message::user(again.clone()));
            self.write(
                path,
                Body::User {
                    text: again,
                    images: Vec::new(),
                },
            )
            .await?;
        }
    }
}

/// A parallel step's branch as it runs: the branch and how it ended.
type Branch<'b> = BoxFuture<'b, (&'b Step, Result<Option<Value>, Stop>)>;

/// Why the loop stops early.
#[derive(Debug)]
enum Stop {
    Fail(String),
    Cancelled,
    /// `on_error = "skip_rest"`: the run ends here, successfully.
    Done,
}

/// JSON from a model's answer, with a Markdown code fence around it
/// allowed.
fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(t);
    serde_json::from_str(t.trim())
}
