//! What a step does, by its kind: a tool or command call, a model call,
//! a condition's test, a `for_each` over its items in order within its
//! concurrency, a `parallel` step's branches, an approval, an input, an
//! `agent` turn, a sub-workflow. In a replay, what the run recorded
//! answers instead, and nothing is called.

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};

use super::{Failure, Frame, Runner, Stop};
use crate::workflow::def::{Action, Step};
use crate::workflow::store::StepState;
use crate::workflow::template::TemplateError;

impl Runner {
    /// What the step does; its output and the model tokens it spent.
    pub(super) fn act<'a>(
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
                    Some(Err(e)) => Err(Failure(e.to_string())),
                    None => Err(Failure(
                        "the run recorded no result for this step attempt".into(),
                    )),
                };
            }
            let t = &self.templates;
            let bad = |e: TemplateError| Failure(e.to_string());
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
}
