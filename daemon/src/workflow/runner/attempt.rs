//! A step through its attempts: skipped by its `when`, or run, recorded
//! `started` before it runs and ended after, retried with the run's seeded
//! jitter, bounded by its timeout, and on its last failure decided by its
//! `on_error`. Attempts that ended before a restart are taken from what
//! was recorded instead of run again. The run's token and cost limits are
//! checked after each.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{DEFAULT_STEP_TIMEOUT, Failure, Frame, RunEvent, Runner, Stop};
use crate::workflow::def::{Action, OnError, Step};
use crate::workflow::store::{StepEnd, StepState};

impl Runner {
    /// A step with its `when`, retries, timeout and `on_error`: `None`
    /// when `when` skipped it.
    pub(super) fn attempts<'a>(
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
    pub(super) fn failed(
        &self,
        step: &Step,
        path: &str,
        error: String,
    ) -> Result<Option<Value>, Stop> {
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
    pub(super) fn count_cost(
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

    pub(super) async fn record(
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

    pub(super) async fn end(
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
}
