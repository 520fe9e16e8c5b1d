//! `workflow_run`: the agent runs a whole workflow of its workspace as one
//! tool call, and the chat command `/run` does the same for a person. The
//! run acts as the turn's origin — the chat's principal and policy, checked
//! again when it starts — so a workflow started from a group can do only
//! what that group may. The call answers the run's result, or, when the
//! run halts for a person (an approval, an input) or is still going when
//! the wait ends, the run's id and what it waits for.
//!
//! The engine lives above the tools; [`WorkflowRunner`] is what the tool
//! needs of it, installed into the runtime when the daemon starts.

use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::origin::ChatOrigin;
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};

/// How long a call waits for the run to end or halt.
const TOOL_WAIT: Duration = Duration::from_secs(120);

/// Where a run started by a tool call or a chat command stands.
#[derive(Debug, Clone, PartialEq)]
pub enum RunReport {
    Finished {
        run: String,
        /// succeeded | failed | cancelled
        status: String,
        output: Option<Value>,
        error: Option<String>,
    },
    /// Waits for a person: request `id` (an approval or an input).
    Halted {
        run: String,
        step: String,
        kind: String,
        id: String,
    },
    /// Still going when the wait ended.
    Going { run: String },
    /// Not started: a run of the workflow is busy and its `admission`
    /// (`drop`, or `coalesce` with a start already waiting) turned this
    /// one away.
    NotAdmitted { why: String },
}

impl RunReport {
    /// The report as JSON, for the model.
    pub fn json(&self) -> Value {
        match self {
            Self::Finished {
                run,
                status,
                output,
                error,
            } => json!({"run": run, "status": status, "output": output, "error": error}),
            Self::Halted {
                run,
                step,
                kind,
                id,
            } => {
                json!({"run": run, "status": "waiting", "step": step, "waits_for": kind, "request": id})
            }
            Self::Going { run } => json!({"run": run, "status": "running"}),
            Self::NotAdmitted { why } => json!({"status": "not_started", "why": why}),
        }
    }

    /// The report as a sentence, for a chat.
    pub fn sentence(&self, workflow: &str) -> String {
        match self {
            Self::Finished {
                run,
                status,
                output,
                error,
            } => match (status.as_str(), output, error) {
                ("succeeded", Some(Value::String(text)), _) => {
                    format!("Run {run} of {workflow} succeeded:\n{text}")
                }
                ("succeeded", Some(v), _) => format!("Run {run} of {workflow} succeeded: {v}"),
                ("succeeded", None, _) => format!("Run {run} of {workflow} succeeded."),
                (status, _, Some(e)) => format!("Run {run} of {workflow} {status}: {e}"),
                (status, _, None) => format!("Run {run} of {workflow} {status}."),
            },
            Self::Halted {
                run,
                step,
                kind,
                id,
                ..
            } => format!(
                "Run {run} of {workflow} waits at step {step} for {} {id}.",
                if kind == "input" { "input" } else { "approval" }
            ),
            Self::NotAdmitted { why } => format!("Not started: {why}."),
            Self::Going { run } => format!(
                "Run {run} of {workflow} goes on; `pincer workflows status {run}` follows it."
            ),
        }
    }
}

/// Why a run was not started.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no agent `{0}`")]
    NoAgent(String),
    /// The origin's policy removes `workflow_run`.
    #[error("this chat may not run workflows: `workflow_run` is removed by {layer} ({reason})")]
    NotOffered { layer: String, reason: String },
    /// The engine could not start it (an unknown workflow, inputs that do
    /// not fit, a store that failed): the engine's sentence.
    #[error("{0}")]
    NotStarted(String),
}

/// What the tool and the chat command need of the workflow engine.
pub trait WorkflowRunner: Send + Sync {
    /// Starts workflow `name` of `agent` for `origin` (refused unless its
    /// policy offers `workflow_run`) and waits up to `wait` for it to end
    /// or halt.
    fn run<'a>(
        &'a self,
        agent: &'a str,
        origin: &'a ChatOrigin,
        name: &'a str,
        inputs: Map<String, Value>,
        wait: Duration,
    ) -> BoxFuture<'a, Result<RunReport, RunError>>;
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowRunArgs {
    /// The workflow: the name of `workflows/NAME.toml` in the workspace.
    pub name: String,
    /// Its inputs by name; the workflow's defaults fill the rest.
    #[serde(default)]
    pub inputs: Map<String, Value>,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "workflow_run",
        "Run a workflow of this workspace (workflows/NAME.toml) as one call: answers its result, or its run id and what it waits for when it halts for a person's approval or input.",
        &["workflows"],
        ToolFlags::default(),
        run,
    )
    .with_aliases(&[("workflow", "name"), ("args", "inputs")])
}

async fn run(args: WorkflowRunArgs, ctx: ToolContext) -> ToolOutput {
    let Some(runner) = ctx.workflows.clone() else {
        return ToolOutput::error("no workflow engine runs in this pincerd");
    };
    match runner
        .run(&ctx.agent, &ctx.origin, &args.name, args.inputs, TOOL_WAIT)
        .await
    {
        Ok(report) => ToolOutput::ok(report.json().to_string()),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}
