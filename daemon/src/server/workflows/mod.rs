//! `pincer.v1.Workflows`: an agent's workflows, checked for the owner
//! (`pincer workflows list|check|show|graph`). The library and its checks
//! are `workflow`'s; this converts (`pb`).

pub(super) mod pb;

use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status};

use super::State;
use crate::workflow::library::{self, Library, LibraryError};
use crate::workflow::{catalog, graph};
use pb::{ResolveInput, RunInput};

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
        let config = hub.config();
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
        let req = RunInput::from(request.into_inner());
        let (agent, origin) = self.owner(&req.agent)?;
        let (run, rx) = self
            .state
            .workflows
            .start(&agent, &origin, &req.name, req.inputs)
            .await?;
        let started = pb::started(run, req.name);
        let events = tokio_stream::StreamExt::map(UnboundedReceiverStream::new(rx), |e| {
            Ok(pb::RunEvent::from(e))
        });
        let stream = tokio_stream::StreamExt::chain(tokio_stream::once(Ok(started)), events);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn plan(
        &self,
        request: Request<pb::RunWorkflowRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        let req = RunInput::from(request.into_inner());
        let (agent, origin) = self.owner(&req.agent)?;
        let steps = self
            .state
            .workflows
            .plan(&agent, &origin, &req.name, req.inputs)
            .await?;
        Ok(Response::new(pb::PlanResponse {
            steps: steps.into_iter().map(pb::PlannedStep::from).collect(),
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
                runs.iter().map(|r| pb::run_info(r, share)).collect()
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
            run: Some(pb::run_info(&run, super::fit::REPLY_BYTES / 4)),
            steps: steps.iter().map(|s| pb::step_attempt(s, share)).collect(),
        }))
    }

    async fn resolve(
        &self,
        request: Request<pb::ResolveRunRequest>,
    ) -> Result<Response<pb::ResolveRunResponse>, Status> {
        let req = ResolveInput::try_from(request.into_inner())?;
        self.state.workflows.resolve(&req.run, req.settle).await?;
        let status = match self.state.workflows.run(&req.run).await? {
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
            .map(|(n, entry)| pb::summary(n, entry))
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
            workflow: Some(pb::summary(&w.name, &Ok(w.clone()))),
            steps: w.steps.iter().map(pb::step).collect(),
            hash: w.hash.clone(),
            admission: w.admission.as_str().to_string(),
            mermaid: graph::mermaid(w),
        }))
    }
}
