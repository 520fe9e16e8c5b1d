//! The Workflows service's wire types and their conversions. `pincer.v1`
//! is re-exported here, so the handlers name its messages `pb::X`; a run
//! or plan request becomes a [`RunInput`], a resolve is checked into a
//! [`ResolveInput`], and workflows, their steps and problems, runs, step
//! attempts and run events go out as their messages, outputs capped
//! ([`fit`]). Our `RunEvent` and `PlannedStep` are named by their paths:
//! imported, they would hide the messages of those names.

pub(super) use pincer_proto::v1::*;

use std::collections::HashMap;

use pincer_proto::v1 as pb;
use serde_json::{Map, Value};

use crate::config::locate::Problem;
use crate::server::fit;
use crate::server::request::RequestError;
use crate::workflow::def::{Action, Step, Workflow};
use crate::workflow::engine::Settle;
use crate::workflow::library::LibraryError;
use crate::workflow::store::{RunRow, StepRow};

/// A run (or plan) request: the workflow's name trimmed, its inputs read.
#[derive(Debug, PartialEq)]
pub(super) struct RunInput {
    pub agent: String,
    pub name: String,
    pub inputs: Map<String, Value>,
}

impl From<pb::RunWorkflowRequest> for RunInput {
    fn from(req: pb::RunWorkflowRequest) -> Self {
        Self {
            agent: req.agent,
            name: req.name.trim().to_string(),
            inputs: inputs_of(req.inputs_json),
        }
    }
}

/// Inputs from the wire: JSON when a value reads as JSON, else the text.
fn inputs_of(raw: HashMap<String, String>) -> Map<String, Value> {
    raw.into_iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(&v).unwrap_or(Value::String(v));
            (k, value)
        })
        .collect()
}

/// A resolve request, checked: the run and how its step is settled.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct ResolveInput {
    /// Trimmed.
    pub run: String,
    pub settle: Settle,
}

impl TryFrom<pb::ResolveRunRequest> for ResolveInput {
    type Error = RequestError;

    fn try_from(req: pb::ResolveRunRequest) -> Result<Self, RequestError> {
        let settle = match req.action.trim() {
            "rerun" => Settle::Rerun,
            "skip" => Settle::Skip,
            "fail" => Settle::Fail,
            other => return Err(RequestError::UnknownSettle(other.to_string())),
        };
        Ok(Self {
            run: req.run.trim().to_string(),
            settle,
        })
    }
}

/// The first event of a run's stream: its id, before any step.
pub(super) fn started(run: String, workflow: String) -> pb::RunEvent {
    pb::RunEvent {
        event: Some(pb::run_event::Event::Started(pb::RunStarted {
            run,
            workflow,
        })),
    }
}

impl From<crate::workflow::plan::PlannedStep> for pb::PlannedStep {
    fn from(s: crate::workflow::plan::PlannedStep) -> Self {
        let (tool, verdict) = s.tool.unwrap_or_default();
        pb::PlannedStep {
            path: s.path,
            kind: s.kind.to_string(),
            line: s.line as u32,
            what: s.what,
            tool,
            verdict,
            next: s.next,
        }
    }
}

pub(super) fn summary(name: &str, entry: &Result<Workflow, LibraryError>) -> pb::WorkflowSummary {
    match entry {
        Ok(w) => pb::WorkflowSummary {
            name: name.to_string(),
            description: w.description.clone(),
            path: w.path.display().to_string(),
            steps: w.steps.len() as u32,
            inputs: w
                .inputs
                .iter()
                .map(|i| pb::WorkflowInput {
                    name: i.name.clone(),
                    r#type: i.kind.as_str().to_string(),
                    default_json: i
                        .default
                        .as_ref()
                        .map(|d| d.to_string())
                        .unwrap_or_default(),
                    description: i.description.clone(),
                })
                .collect(),
            problems: Vec::new(),
        },
        Err(e) => pb::WorkflowSummary {
            name: name.to_string(),
            problems: match e {
                LibraryError::Invalid(problems) => problems.iter().map(problem).collect(),
                other => vec![pb::WorkflowProblem {
                    reason: other.to_string(),
                    ..Default::default()
                }],
            },
            ..Default::default()
        },
    }
}

fn problem(p: &Problem) -> pb::WorkflowProblem {
    pb::WorkflowProblem {
        path: p.path.display().to_string(),
        line: p.line as u32,
        column: p.column as u32,
        key: p.key.clone().unwrap_or_default(),
        reason: p.reason.clone(),
    }
}

pub(super) fn step(s: &Step) -> pb::WorkflowStep {
    let (summary, inner) = match &s.action {
        Action::Tool { tool, arguments } => (format!("{tool} {arguments}"), Vec::new()),
        Action::Command { command } => (command.clone(), Vec::new()),
        Action::Llm { prompt, schema, .. } => (
            format!(
                "{}{}",
                crate::util::preview(prompt, 80),
                if schema.is_some() {
                    " (answer checked against a schema)"
                } else {
                    ""
                }
            ),
            Vec::new(),
        ),
        Action::Condition {
            test,
            then,
            otherwise,
        } => (
            format!("if {test}: {then:?} else {otherwise:?}"),
            Vec::new(),
        ),
        Action::ForEach {
            items,
            var,
            concurrency,
            body,
        } => (
            format!("{var} in {items}, {concurrency} at a time"),
            vec![step(body)],
        ),
        Action::Parallel { branches, wait } => (
            format!("{} branches, wait {wait:?}", branches.len()),
            branches.iter().map(step).collect(),
        ),
        Action::Approval {
            prompt,
            approvers,
            quorum,
            ..
        } => (
            format!(
                "{} — {quorum} of {}",
                crate::util::preview(prompt, 60),
                approvers.join(", ")
            ),
            Vec::new(),
        ),
        Action::Input { prompt, .. } | Action::Agent { prompt, .. } => {
            (crate::util::preview(prompt, 80), Vec::new())
        }
        Action::Workflow { name, .. } => (name.clone(), Vec::new()),
    };
    pb::WorkflowStep {
        id: s.id.clone(),
        kind: s.kind().to_string(),
        line: s.line as u32,
        summary,
        inner,
    }
}

impl From<crate::workflow::runner::RunEvent> for pb::RunEvent {
    fn from(e: crate::workflow::runner::RunEvent) -> Self {
        use crate::workflow::runner::RunEvent;
        use pb::run_event::Event;
        let event = match e {
            RunEvent::StepStarted {
                path,
                kind,
                attempt,
            } => Event::StepStarted(pb::StepStarted {
                path,
                kind: kind.to_string(),
                attempt,
            }),
            RunEvent::StepFinished {
                path,
                state,
                output,
                error,
            } => Event::StepFinished(pb::StepFinished {
                path,
                state: state.as_str().to_string(),
                output_json: fit::json(Some(&output), fit::EVENT_CHARS),
                error: fit::text(error.unwrap_or_default(), fit::NOTE_CHARS),
            }),
            RunEvent::Halted {
                path,
                kind,
                id,
                prompt,
            } => Event::Halted(pb::Halted {
                path,
                kind: kind.to_string(),
                id,
                prompt: fit::text(prompt, fit::NOTE_CHARS),
            }),
            RunEvent::Finished {
                status,
                output,
                error,
            } => Event::Finished(pb::RunFinished {
                status: status.as_str().to_string(),
                output_json: fit::json(output.as_ref(), fit::EVENT_CHARS),
                error: fit::text(error.unwrap_or_default(), fit::NOTE_CHARS),
            }),
        };
        pb::RunEvent { event: Some(event) }
    }
}

pub(super) fn run_info(r: &RunRow, max_bytes: usize) -> pb::RunInfo {
    pb::RunInfo {
        id: r.id.clone(),
        workflow: r.workflow.clone(),
        agent: r.agent.clone(),
        status: r.status.as_str().to_string(),
        cursor: r.cursor.clone().unwrap_or_default(),
        output_json: fit::json(r.output.as_ref(), max_bytes),
        error: fit::text(r.error.clone().unwrap_or_default(), fit::NOTE_CHARS),
        tokens: r.tokens,
        created_at: r.created_at.clone(),
        updated_at: r.updated_at.clone(),
        hash: r.hash.clone(),
        inputs_json: r.inputs.to_string(),
        principal: r.principal.clone(),
        session_key: r.session_key.clone(),
    }
}

pub(super) fn step_attempt(s: &StepRow, max_bytes: usize) -> pb::StepAttempt {
    pb::StepAttempt {
        seq: s.seq,
        path: s.path.clone(),
        attempt: s.attempt,
        state: s.state.as_str().to_string(),
        output_json: fit::json(s.output.as_ref(), max_bytes),
        error: fit::text(s.error.clone().unwrap_or_default(), fit::NOTE_CHARS),
        started_at: s.started_at.clone(),
        finished_at: s.finished_at.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::workflow::check::ToolStatus;
    use crate::workflow::library::Library;
    use crate::workflow::plan::PlannedStep;
    use crate::workflow::runner::RunEvent;
    use crate::workflow::store::{RunStatus, StepState};

    #[test]
    fn run_inputs_are_json_when_they_read_as_json() {
        let input = RunInput::from(pb::RunWorkflowRequest {
            agent: "main".into(),
            name: " daily ".into(),
            inputs_json: HashMap::from([
                ("n".to_string(), "3".to_string()),
                ("list".to_string(), "[1, 2]".to_string()),
                ("who".to_string(), "Ann".to_string()),
            ]),
        });
        assert_eq!(input.agent, "main");
        assert_eq!(input.name, "daily");
        assert_eq!(input.inputs["n"], json!(3));
        assert_eq!(input.inputs["list"], json!([1, 2]));
        assert_eq!(input.inputs["who"], json!("Ann"));
    }

    #[test]
    fn a_resolve_names_a_way_to_settle() {
        let resolve = |action: &str| {
            ResolveInput::try_from(pb::ResolveRunRequest {
                run: " r1 ".into(),
                action: action.into(),
            })
        };
        assert_eq!(
            resolve(" skip ").unwrap(),
            ResolveInput {
                run: "r1".into(),
                settle: Settle::Skip,
            }
        );
        assert_eq!(resolve("rerun").unwrap().settle, Settle::Rerun);
        assert_eq!(resolve("fail").unwrap().settle, Settle::Fail);
        assert_eq!(
            resolve("retry").unwrap_err().to_string(),
            "`retry` is not a way to settle a step: rerun, skip or fail"
        );
    }

    #[test]
    fn run_events_keep_their_fields() {
        let Some(pb::run_event::Event::Started(s)) = started("r1".into(), "daily".into()).event
        else {
            panic!("not Started");
        };
        assert_eq!((s.run.as_str(), s.workflow.as_str()), ("r1", "daily"));
        let finished = pb::RunEvent::from(RunEvent::StepFinished {
            path: "fetch".into(),
            state: StepState::Finished,
            output: json!({"ok": true}),
            error: None,
        });
        let Some(pb::run_event::Event::StepFinished(f)) = finished.event else {
            panic!("not StepFinished");
        };
        assert_eq!((f.path.as_str(), f.state.as_str()), ("fetch", "finished"));
        assert_eq!(f.output_json, r#"{"ok":true}"#);
        assert_eq!(f.error, "");
        let over = pb::RunEvent::from(RunEvent::Finished {
            status: RunStatus::Failed,
            output: None,
            error: Some("boom".into()),
        });
        let Some(pb::run_event::Event::Finished(f)) = over.event else {
            panic!("not Finished");
        };
        assert_eq!((f.status.as_str(), f.error.as_str()), ("failed", "boom"));
    }

    #[test]
    fn a_planned_step_keeps_its_tool_and_verdict() {
        let step = pb::PlannedStep::from(PlannedStep {
            path: "fetch".into(),
            kind: "tool",
            line: 4,
            what: "web_fetch https://example.org".into(),
            tool: Some(("web_fetch".into(), "offered".into())),
            next: "summarise".into(),
        });
        assert_eq!(
            (step.path.as_str(), step.kind.as_str(), step.line),
            ("fetch", "tool", 4)
        );
        assert_eq!(
            (step.tool.as_str(), step.verdict.as_str()),
            ("web_fetch", "offered")
        );
        assert_eq!(step.next, "summarise");
    }

    #[test]
    fn runs_and_attempts_keep_their_fields() {
        let run = RunRow {
            id: "r1".into(),
            workflow: "daily".into(),
            agent: "main".into(),
            hash: "h".into(),
            source: String::new(),
            subs: BTreeMap::new(),
            inputs: json!({"n": 1}),
            principal: "owner".into(),
            chat: None,
            session_key: "agent:main:workflow".into(),
            parent: None,
            seed: 0,
            status: RunStatus::Waiting,
            cursor: Some("publish".into()),
            output: Some(json!("x".repeat(10_000))),
            error: None,
            tokens: 42,
            created_at: "2026-01-01".into(),
            updated_at: "2026-01-02".into(),
            cursor_seq: 0,
            iterations: BTreeMap::new(),
        };
        let info = run_info(&run, 1_000);
        assert_eq!((info.id.as_str(), info.status.as_str()), ("r1", "waiting"));
        assert_eq!((info.cursor.as_str(), info.tokens), ("publish", 42));
        assert_eq!(info.inputs_json, r#"{"n":1}"#);
        assert!(info.output_json.len() < 10_000);
        let attempt = step_attempt(
            &StepRow {
                seq: 3,
                path: "publish".into(),
                attempt: 2,
                state: StepState::Unknown,
                output: None,
                error: Some("lost".into()),
                started_at: "t0".into(),
                finished_at: None,
            },
            1_000,
        );
        assert_eq!((attempt.seq, attempt.attempt), (3, 2));
        assert_eq!(
            (attempt.state.as_str(), attempt.error.as_str()),
            ("unknown", "lost")
        );
        assert_eq!(attempt.finished_at, "");
    }

    #[test]
    fn a_workflow_and_its_problems_keep_their_fields() {
        let dir = tempfile::tempdir().unwrap();
        let wf = dir.path().join("workflows");
        std::fs::create_dir(&wf).unwrap();
        std::fs::write(
            wf.join("daily.toml"),
            "description = \"every day\"\n\n[inputs.n]\ntype = \"integer\"\ndefault = 2\n\n\
             [[steps]]\nid = \"ask\"\nkind = \"llm\"\nprompt = \"hi\"\n",
        )
        .unwrap();
        let lib = Library::open(dir.path(), &|_| ToolStatus::Offered);
        let w = lib.get("daily").unwrap();
        let summary = summary("daily", &Ok(w.clone()));
        assert_eq!(
            (summary.name.as_str(), summary.description.as_str()),
            ("daily", "every day")
        );
        assert_eq!(summary.steps, 1);
        assert_eq!(summary.inputs[0].name, "n");
        assert_eq!(summary.inputs[0].default_json, "2");
        assert!(summary.problems.is_empty());
        let s = step(&w.steps[0]);
        assert_eq!(
            (s.id.as_str(), s.kind.as_str(), s.summary.as_str()),
            ("ask", "llm", "hi")
        );
        let broken = super::summary(
            "bad",
            &Err(LibraryError::Invalid(vec![Problem {
                path: PathBuf::from("/w/bad.toml"),
                line: 3,
                column: 1,
                key: Some("steps.id".into()),
                reason: "a step needs an id".into(),
            }])),
        );
        assert_eq!(broken.name, "bad");
        assert_eq!(broken.problems.len(), 1);
        let p = &broken.problems[0];
        assert_eq!(
            (p.path.as_str(), p.line, p.key.as_str()),
            ("/w/bad.toml", 3, "steps.id")
        );
        assert_eq!(p.reason, "a step needs an id");
    }
}
