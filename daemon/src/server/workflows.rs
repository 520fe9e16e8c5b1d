//! `pincer.v1.Workflows`: an agent's workflows, checked for the owner
//! (`pincer workflows list|check|show|graph`). The library and its checks
//! are `workflow`'s; this converts.

use pincer_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::State;
use crate::config::locate::Problem;
use crate::workflow::def::{Action, Step, Workflow};
use crate::workflow::library::{self, Library, LibraryError};
use crate::workflow::{catalog, graph};

pub struct WorkflowsService {
    state: State,
}

impl WorkflowsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }

    /// The agent's id and its library as the owner may run it.
    async fn library(&self, agent: &str) -> Result<(String, String, Library), Status> {
        let hub = &self.state.hub;
        let id = hub.agent_id(agent)?;
        let config = hub.runtime().config();
        let Some(settings) = config.agent(&id) else {
            return Err(Status::not_found(format!("no agent `{id}`")));
        };
        let origin = crate::routing::owner(&hub.resolve_key(&id, "")?);
        let lib = catalog::open(hub.runtime(), settings, &origin).await;
        let dir = settings.workspace.join(library::DIR).display().to_string();
        Ok((id, dir, lib))
    }
}

#[tonic::async_trait]
impl pb::workflows_server::Workflows for WorkflowsService {
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
