//! A dry run (`pincer workflows run NAME --dry-run`): what a run would do,
//! and nothing run. Each step with its kind, what it does with its
//! templates rendered as far as the inputs allow (a template that reads a
//! step's output stays as written), where it goes next, and for each tool
//! a step needs, the agent's policy verdict for the principal: offered,
//! asks for approval, or removed by which layer.

use serde_json::{Value, json};

use super::def::{Action, Next, Step, Workflow};
use super::template::Templates;
use crate::tools::policy::Resolution;

/// One step of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    pub path: String,
    pub kind: &'static str,
    pub line: usize,
    /// What it does, with what could be rendered.
    pub what: String,
    /// The tool it calls, if any, and the policy's verdict on it.
    pub tool: Option<(String, String)>,
    /// Where the run goes after it.
    pub next: String,
}

/// The plan of `w` with `inputs` under `policy`.
pub fn plan(w: &Workflow, inputs: &Value, policy: &Resolution<'_>) -> Vec<PlannedStep> {
    let mut out = Vec::new();
    line(&mut out, w, inputs, "", &Templates::new(), policy);
    out
}

/// The steps of `w` (the run's own, or a sub-workflow's under `prefix`).
fn line(
    out: &mut Vec<PlannedStep>,
    w: &Workflow,
    inputs: &Value,
    prefix: &str,
    t: &Templates,
    policy: &Resolution<'_>,
) {
    let ctx = json!({
        "inputs": inputs,
        "steps": {},
        "run": {"id": "(dry run)", "workflow": w.name},
    });
    for (i, step) in w.steps.iter().enumerate() {
        let next = match &step.action {
            Action::Condition {
                test,
                then,
                otherwise,
            } => format!(
                "if {test}: {}, else {}",
                target(w, then, i),
                target(w, otherwise, i)
            ),
            _ => target(w, &step.next, i),
        };
        let path = format!("{prefix}{}", step.id);
        add(out, step, &path, next, t, &ctx, policy);
        // A sub-workflow's steps, with its inputs as far as they render.
        if let Action::Workflow { name, inputs } = &step.action
            && let Some(sub) = w.subs.get(name)
        {
            let given = match t.render_value(inputs, &ctx) {
                Ok(Value::Object(given)) => given,
                _ => serde_json::Map::new(),
            };
            let inputs = sub
                .fill_inputs(given)
                .map(Value::Object)
                .unwrap_or_else(|_| inputs.clone());
            line(out, sub, &inputs, &format!("{path}/"), t, policy);
        }
    }
}

fn add(
    out: &mut Vec<PlannedStep>,
    step: &Step,
    path: &str,
    next: String,
    t: &Templates,
    ctx: &Value,
    policy: &Resolution<'_>,
) {
    let text = |s: &str| t.render(s, ctx).unwrap_or_else(|_| s.to_string());
    let value = |v: &Value| t.render_value(v, ctx).unwrap_or_else(|_| v.clone());
    let (what, tool) = match &step.action {
        Action::Tool { tool, arguments } => {
            (format!("{tool} {}", value(arguments)), Some(tool.clone()))
        }
        Action::Command { command } => (text(command), Some("exec".to_string())),
        Action::Llm { prompt, schema, .. } => (
            format!(
                "ask the model{}: {}",
                if schema.is_some() {
                    " (JSON of the schema)"
                } else {
                    ""
                },
                text(prompt)
            ),
            None,
        ),
        Action::Condition { test, .. } => (format!("test {test}"), None),
        Action::ForEach {
            items,
            var,
            concurrency,
            ..
        } => (
            format!("for each {var} in {items}, {concurrency} at a time"),
            None,
        ),
        Action::Parallel { branches, wait } => (
            format!("{} branches at once, wait {wait:?}", branches.len()).to_lowercase(),
            None,
        ),
        Action::Approval {
            prompt,
            approvers,
            quorum,
            ..
        } => (
            format!(
                "ask {quorum} of [{}]: {}",
                approvers.join(", "),
                text(prompt)
            ),
            None,
        ),
        Action::Input { prompt, .. } => (format!("ask for input: {}", text(prompt)), None),
        Action::Agent { prompt, max_calls } => (
            format!(
                "a free turn of the agent (≤ {max_calls} model calls): {}",
                text(prompt)
            ),
            None,
        ),
        Action::Workflow { name, inputs } => {
            (format!("run workflow {name} with {}", value(inputs)), None)
        }
    };
    let what = match &step.when {
        Some(w) => format!("when {w}: {what}"),
        None => what,
    };
    out.push(PlannedStep {
        path: path.to_string(),
        kind: step.kind(),
        line: step.line,
        what,
        tool: tool.map(|name| {
            let verdict = verdict(policy, &name);
            (name, verdict)
        }),
        next,
    });
    match &step.action {
        Action::ForEach { body, .. } => add(
            out,
            body,
            &format!("{path}[…]"),
            "the next item".into(),
            t,
            ctx,
            policy,
        ),
        Action::Parallel { branches, .. } => {
            for b in branches {
                add(
                    out,
                    b,
                    &format!("{path}.{}", b.id),
                    "the join".into(),
                    t,
                    ctx,
                    policy,
                );
            }
        }
        _ => {}
    }
}

fn target(w: &Workflow, next: &Next, i: usize) -> String {
    match next {
        Next::Following => w
            .steps
            .get(i + 1)
            .map_or("the end".to_string(), |s| s.id.clone()),
        Next::Step(id) => id.clone(),
        Next::End => "the end".to_string(),
    }
}

/// The policy's word on one tool for this principal.
fn verdict(policy: &Resolution<'_>, name: &str) -> String {
    match policy.verdicts.iter().find(|v| v.tool.name == name) {
        None => "no such tool".into(),
        Some(v) => match &v.removed {
            Some(r) => format!("removed by the {} layer: {}", r.layer, r.reason),
            None if v.asks => "offered; asks for approval".into(),
            None => "offered".into(),
        },
    }
}
