//! `pincer.v1.Workflows`: an agent's workflows, checked for the owner
//! (`pincer workflows list|check|show|graph`). The library and its checks
//! are `workflow`'s; this converts.

use pincer_proto::v1 as pb;
use serde_json::Value;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status};

use super::State;
use crate::config::locate::Problem;
use crate::workflow::def::{Action, Step, Workflow};
use crate::workflow::engine::Settle;
use crate::workflow::library::{self, Library, LibraryError};
use crate::workflow::runner::RunEvent;
use crate::workflow::store::{RunRow, StepRow};
use crate::workflow::{catalog, graph};

type RunStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::RunEvent, Status>> + Send>>;

/// Runs listed when the request names no limit.
const DEFAULT_RUNS: u32 = 20;

pub struct WorkflowsService {
    state: State,
}

impl WorkflowsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }

    /// The agent's settings and the owner's origin.
    fn owner(
        &self,
        agent: &str,
    ) -> Result<
        (
            crate::config::AgentSettings,
            crate::tools::origin::ChatOrigin,
        ),
        Status,
    > {
        let hub = &self.state.hub;
        let id = hub.agent_id(agent)?;
        let config = hub.runtime().config();
        let Some(settings) = config.agent(&id).cloned() else {
            return Err(Status::not_found(format!("no agent `{id}`")));
        };
        Ok((settings, crate::routing::owner(&hub.resolve_key(&id, "")?)))
    }

    /// The agent's id and its library as the owner may run it.
    async fn library(&self, agent: &str) -> Result<(String, String, Library), Status> {
        let (settings, origin) = self.owner(agent)?;
        let lib = catalog::open(self.state.hub.runtime(), &settings, &origin).await;
        let dir = settings.workspace.join(library::DIR).display().to_string();
        Ok((settings.id, dir, lib))
    }
}

#[tonic::async_trait]
impl pb::workflows_server::Workflows for WorkflowsService {
    type RunStream = RunStream;

    async fn run(
        &self,
        request: Request<pb::RunWorkflowRequest>,
    ) -> Result<Response<RunStream>, Status> {
        let req = request.into_inner();
        let (agent, origin) = self.owner(&req.agent)?;
        let inputs = inputs_of(req.inputs_json);
        let name = req.name.trim().to_string();
        let (run, rx) = self
            .state
            .workflows
            .start(&agent, &origin, &name, inputs)
            .await?;
        let started = pb::RunEvent {
            event: Some(pb::run_event::Event::Started(pb::RunStarted {
                run,
                workflow: name,
            })),
        };
        let events =
            tokio_stream::StreamExt::map(UnboundedReceiverStream::new(rx), |e| Ok(run_event(e)));
        let stream = tokio_stream::StreamExt::chain(tokio_stream::once(Ok(started)), events);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn plan(
        &self,
        request: Request<pb::RunWorkflowRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        let req = request.into_inner();
        let (agent, origin) = self.owner(&req.agent)?;
        let steps = self
            .state
            .workflows
            .plan(&agent, &origin, req.name.trim(), inputs_of(req.inputs_json))
            .await?;
        Ok(Response::new(pb::PlanResponse {
            steps: steps
                .into_iter()
                .map(|s| {
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
                })
                .collect(),
        }))
    }

    async fn runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let req = request.into_inner();
        let agent = match req.agent.trim() {
            "" => None,
            a => Some(self.state.hub.agent_id(a)?),
        };
        let limit = if req.limit == 0 {
            DEFAULT_RUNS
        } else {
            req.limit
        };
        let runs = self.state.workflows.runs(agent, limit).await?;
        Ok(Response::new(pb::ListRunsResponse {
            runs: {
                // Each run's output gets an equal share of the reply.
                let share = (super::fit::REPLY_BYTES / 2 / (runs.len() + 1)).max(256);
                runs.iter().map(|r| run_info(r, share)).collect()
            },
        }))
    }

    async fn status(
        &self,
        request: Request<pb::RunStatusRequest>,
    ) -> Result<Response<pb::RunStatusResponse>, Status> {
        let id = request.into_inner().run.trim().to_string();
        let Some((run, steps)) = self.state.workflows.run(&id).await? else {
            return Err(Status::not_found(format!(
                "no workflow run `{id}` (pincer workflows runs lists them)"
            )));
        };
        // Each attempt's output gets an equal share of the reply.
        let share = (super::fit::REPLY_BYTES / 2 / (steps.len() + 1)).max(256);
        Ok(Response::new(pb::RunStatusResponse {
            run: Some(run_info(&run, super::fit::REPLY_BYTES / 4)),
            steps: steps.iter().map(|s| step_attempt(s, share)).collect(),
        }))
    }

    async fn resolve(
        &self,
        request: Request<pb::ResolveRunRequest>,
    ) -> Result<Response<pb::ResolveRunResponse>, Status> {
        let req = request.into_inner();
        let settle = match req.action.trim() {
            "rerun" => Settle::Rerun,
            "skip" => Settle::Skip,
            "fail" => Settle::Fail,
            other => {
                return Err(Status::invalid_argument(format!(
                    "`{other}` is not a way to settle a step: rerun, skip or fail"
                )));
            }
        };
        let id = req.run.trim().to_string();
        self.state.workflows.resolve(&id, settle).await?;
        let status = match self.state.workflows.run(&id).await? {
            Some((run, _)) => run.status.as_str().to_string(),
            None => String::new(),
        };
        Ok(Response::new(pb::ResolveRunResponse { status }))
    }

    async fn replay(
        &self,
        request: Request<pb::ReplayRunRequest>,
    ) -> Result<Response<pb::ReplayRunResponse>, Status> {
        let req = request.into_inner();
        let verdict = self
            .state
            .workflows
            .replay(req.run.trim(), req.current_file)
            .await?;
        Ok(Response::new(pb::ReplayRunResponse {
            same: verdict.same,
            attempts: verdict.attempts as u32,
            divergence: verdict.divergence.unwrap_or_default(),
        }))
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let id = request.into_inner().run.trim().to_string();
        Ok(Response::new(pb::CancelRunResponse {
            cancelled: self.state.workflows.cancel(&id),
        }))
    }

    async fn list(
        &self,
        request: Request<pb::ListWorkflowsRequest>,
    ) -> Result<Response<pb::ListWorkflowsResponse>, Status> {
        let req = request.into_inner();
        let (agent, dir, lib) = self.library(&req.agent).await?;
        let name = req.name.trim();
        if !name.is_empty()
            && let Err(e @ LibraryError::NotFound { .. }) = lib.get(name)
        {
            return Err(e.into());
        }
        let workflows = lib
            .entries()
            .filter(|(n, _)| name.is_empty() || *n == name)
            .map(|(n, entry)| summary(n, entry))
            .collect();
        Ok(Response::new(pb::ListWorkflowsResponse {
            agent,
            dir,
            workflows,
        }))
    }

    async fn show(
        &self,
        request: Request<pb::ShowWorkflowRequest>,
    ) -> Result<Response<pb::ShowWorkflowResponse>, Status> {
        let req = request.into_inner();
        let (_, _, lib) = self.library(&req.agent).await?;
        let w = lib.get(req.name.trim())?;
        Ok(Response::new(pb::ShowWorkflowResponse {
            workflow: Some(summary(&w.name, &Ok(w.clone()))),
            steps: w.steps.iter().map(step).collect(),
            hash: w.hash.clone(),
            admission: w.admission.as_str().to_string(),
            mermaid: graph::mermaid(w),
        }))
    }
}

fn summary(name: &str, entry: &Result<Workflow, LibraryError>) -> pb::WorkflowSummary {
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

fn step(s: &Step) -> pb::WorkflowStep {
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

/// Inputs from the wire: JSON when a value reads as JSON, else the text.
fn inputs_of(raw: std::collections::HashMap<String, String>) -> serde_json::Map<String, Value> {
    raw.into_iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(&v).unwrap_or(Value::String(v));
            (k, value)
        })
        .collect()
}

fn run_event(e: RunEvent) -> pb::RunEvent {
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
            output_json: super::fit::json(Some(&output), super::fit::EVENT_CHARS),
            error: super::fit::text(error.unwrap_or_default(), super::fit::NOTE_CHARS),
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
            prompt: super::fit::text(prompt, super::fit::NOTE_CHARS),
        }),
        RunEvent::Finished {
            status,
            output,
            error,
        } => Event::Finished(pb::RunFinished {
            status: status.as_str().to_string(),
            output_json: super::fit::json(output.as_ref(), super::fit::EVENT_CHARS),
            error: super::fit::text(error.unwrap_or_default(), super::fit::NOTE_CHARS),
        }),
    };
    pb::RunEvent { event: Some(event) }
}

fn run_info(r: &RunRow, max_bytes: usize) -> pb::RunInfo {
    pb::RunInfo {
        id: r.id.clone(),
        workflow: r.workflow.clone(),
        agent: r.agent.clone(),
        status: r.status.as_str().to_string(),
        cursor: r.cursor.clone().unwrap_or_default(),
        output_json: super::fit::json(r.output.as_ref(), max_bytes),
        error: super::fit::text(r.error.clone().unwrap_or_default(), super::fit::NOTE_CHARS),
        tokens: r.tokens,
        created_at: r.created_at.clone(),
        updated_at: r.updated_at.clone(),
        hash: r.hash.clone(),
        inputs_json: r.inputs.to_string(),
        principal: r.principal.clone(),
        session_key: r.session_key.clone(),
    }
}

fn step_attempt(s: &StepRow, max_bytes: usize) -> pb::StepAttempt {
    pb::StepAttempt {
        seq: s.seq,
        path: s.path.clone(),
        attempt: s.attempt,
        state: s.state.as_str().to_string(),
        output_json: super::fit::json(s.output.as_ref(), max_bytes),
        error: super::fit::text(s.error.clone().unwrap_or_default(), super::fit::NOTE_CHARS),
        started_at: s.started_at.clone(),
        finished_at: s.finished_at.clone().unwrap_or_default(),
    }
}
