//! A line of steps and how a run walks it: the run's own workflow, or a
//! sub-workflow a `workflow` step starts ([`Frame`]).
//!
//! A sub-workflow runs inside its parent's run, not as a run of its own:
//! its steps are in the same ledger and transcript, under the step's path
//! (`digest/summarise`, `digest/each[2]`), act as the same principal under
//! the same policy, count against the same token and cost limits, and are
//! cancelled, stopped and resumed with it. Only the run's own line keeps a
//! cursor in the runs database; after a restart a sub-workflow walks again
//! from its first step, and each step it finished before takes its
//! recorded output instead of running (`Runner::attempts`), so it comes
//! back to where it was without running anything twice.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::{Failure, Runner, Stop};
use crate::workflow::def::{Action, Next, Step, Workflow};
use crate::workflow::store::RunStatus;

/// One workflow's steps as a run goes through them.
pub(super) struct Frame {
    pub workflow: Arc<Workflow>,
    /// Put before each step's id in the ledger: empty for the run's own
    /// steps, `digest/` for those of the sub-workflow step `digest`.
    pub prefix: String,
    pub inputs: Value,
    /// `steps.<id>` of the steps finished so far.
    pub values: Mutex<BTreeMap<String, Value>>,
    /// Backward jumps taken, per step.
    pub iterations: Mutex<BTreeMap<String, u32>>,
}

impl Frame {
    pub fn new(workflow: Arc<Workflow>, prefix: String, inputs: Value) -> Self {
        Self {
            workflow,
            prefix,
            inputs,
            values: Mutex::default(),
            iterations: Mutex::default(),
        }
    }

    /// The run's own line, whose cursor the runs database keeps.
    fn is_top(&self) -> bool {
        self.prefix.is_empty()
    }

    /// The ledger path of step `id` of this line.
    pub fn path(&self, id: &str) -> String {
        format!("{}{id}", self.prefix)
    }

    pub fn set_value(&self, id: &str, value: Value) {
        self.values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), value);
    }

    /// The last finished step's output.
    fn last_output(&self) -> Option<Value> {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        self.workflow
            .steps
            .iter()
            .rev()
            .find_map(|s| values.get(&s.id).map(|v| v["output"].clone()))
    }
}

impl Runner {
    /// Walks the run's own line from its cursor: the run's status, output
    /// and error; `None` when the daemon stopped first.
    pub(super) async fn steps(&self) -> Option<(RunStatus, Option<Value>, Option<String>)> {
        let top = &self.top;
        let at = self
            .run
            .cursor
            .as_deref()
            .and_then(|id| top.workflow.index_of(id));
        match self.walk(top, at).await {
            Ok(()) | Err(Stop::Done) => {}
            Err(Stop::Fail(e)) => return Some((RunStatus::Failed, None, Some(e))),
            Err(Stop::Cancelled) if self.stop.is_cancelled() => return None,
            Err(Stop::Cancelled) => {
                return Some((
                    RunStatus::Cancelled,
                    None,
                    Some("the run was cancelled".to_string()),
                ));
            }
        }
        Some(match self.output_of(top) {
            Ok(output) => (RunStatus::Succeeded, output, None),
            Err(e) => (RunStatus::Failed, None, Some(e)),
        })
    }

    /// The steps of `frame` from step `at` to the end of the line.
    async fn walk(&self, frame: &Frame, mut at: Option<usize>) -> Result<(), Stop> {
        let workflow = frame.workflow.clone();
        while let Some(i) = at {
            if self.stop.is_cancelled() || self.cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            at = self.line_step(frame, &workflow.steps[i], i).await?;
        }
        Ok(())
    }

    /// What a finished line gives: its `output` template rendered, or the
    /// last finished step's output.
    fn output_of(&self, frame: &Frame) -> Result<Option<Value>, String> {
        match &frame.workflow.output {
            None => Ok(frame.last_output()),
            Some(t) => self
                .templates
                .render(t, &self.context(frame, None))
                .map(|text| Some(Value::String(text)))
                .map_err(|e| format!("the workflow's output: {e}")),
        }
    }

    /// The values templates see; `item` is a for_each's item and index.
    pub(super) fn context(&self, frame: &Frame, item: Option<(&str, &Value, usize)>) -> Value {
        let steps = frame
            .values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut ctx = json!({
            "inputs": frame.inputs,
            "steps": steps,
            "run": {"id": self.run.id, "workflow": frame.workflow.name},
        });
        if let Some((var, value, index)) = item {
            ctx[var] = value.clone();
            ctx["index"] = json!(index);
        }
        ctx
    }

    /// One step of a line; where the line goes next.
    async fn line_step(&self, frame: &Frame, step: &Step, i: usize) -> Result<Option<usize>, Stop> {
        let steps = &frame.workflow.steps;
        let following = |n: &Next| -> Option<usize> {
            match n {
                Next::Following => (i + 1 < steps.len()).then_some(i + 1),
                Next::Step(id) => frame.workflow.index_of(id),
                Next::End => None,
            }
        };
        let ctx = self.context(frame, None);
        let result = self
            .attempts(frame, step, &frame.path(&step.id), &ctx)
            .await?;
        let output = result.clone().unwrap_or(Value::Null);
        let status = if result.is_some() { "ok" } else { "skipped" };
        let mut next = match (&step.action, &result) {
            (
                Action::Condition {
                    then, otherwise, ..
                },
                Some(v),
            ) => {
                if v.as_bool() == Some(true) {
                    following(then)
                } else {
                    following(otherwise)
                }
            }
            _ => following(&step.next),
        };
        // A backward jump is a loop: past its bound the line goes on
        // after the step instead.
        let iterations = {
            let mut iterations = frame.iterations.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(j) = next
                && j <= i
            {
                let taken = iterations.entry(step.id.clone()).or_default();
                if *taken >= step.max_iterations.unwrap_or(0) {
                    next = (i + 1 < steps.len()).then_some(i + 1);
                } else {
                    *taken += 1;
                }
            }
            iterations.clone()
        };
        frame.set_value(&step.id, json!({"output": output, "status": status}));
        if frame.is_top() {
            let cursor = next.map(|j| steps[j].id.clone());
            self.store
                .set_cursor(&self.run.id, cursor, &iterations)
                .await
                .map_err(|e| Stop::Fail(e.to_string()))?;
        }
        Ok(next)
    }

    /// A `workflow` step: the sub-workflow `name` walked as a line of
    /// this run, with `inputs` rendered; its output is the sub-workflow's.
    pub(super) async fn sub_workflow(
        &self,
        frame: &Frame,
        path: &str,
        name: &str,
        inputs: &Value,
        ctx: &Value,
    ) -> Result<(Value, u64), Failure> {
        let Some(workflow) = frame.workflow.subs.get(name) else {
            return Err(Failure(format!(
                "the sub-workflow `{name}` was not loaded with the run"
            )));
        };
        let given = match self.templates.render_value(inputs, ctx) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(Failure(format!("`inputs` is not a table but {other}"))),
            Err(e) => return Err(Failure(format!("`inputs`: {e}"))),
        };
        let inputs: Map<String, Value> = workflow
            .fill_inputs(given)
            .map_err(|e| Failure(e.to_string()))?;
        let child = Frame::new(workflow.clone(), format!("{path}/"), Value::Object(inputs));
        let start = (!workflow.steps.is_empty()).then_some(0);
        match self.walk(&child, start).await {
            Ok(()) | Err(Stop::Done) => {}
            Err(Stop::Fail(e)) => return Err(Failure(format!("sub-workflow `{name}`: {e}"))),
            // The run's cancel or the daemon's stop: `attempts` tells
            // which.
            Err(Stop::Cancelled) => return Err(Failure("stopped".into())),
        }
        let output = self.output_of(&child).map_err(Failure)?;
        Ok((output.unwrap_or(Value::Null), 0))
    }
}
