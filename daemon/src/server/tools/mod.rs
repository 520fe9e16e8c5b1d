//! `pincer.v1.Tools`: the effective tool set of an agent, with the policy
//! layer that removed each tool it is not offered (`pincer tools list`),
//! and the audit table of tool calls (`pincer tools audit`), the
//! approvals waiting and their answers. Requests are checked and answers
//! converted in `pb`.

pub(super) mod pb;

use tonic::{Request, Response, Status};

use super::{State, fit};
use crate::tools::approvals::Voter;
use crate::tools::policy::{self, PolicyInput};
use pb::DecideInput;

pub struct ToolsService {
    state: State,
}

impl ToolsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

#[tonic::async_trait]
impl pb::tools_server::Tools for ToolsService {
    async fn list(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let req = request.into_inner();
        let hub = &self.state.hub;
        let config = hub.config();
        // Exactly what such a chat is offered: with a channel, the agent
        // (unless named) and the origin come from the routing layer, as a
        // bridge's message's would.
        let (agent_id, origin) = if req.channel.trim().is_empty() {
            let agent_id = hub.agent_id(&req.agent)?;
            let origin = crate::routing::owner(&hub.resolve_key(&agent_id, "")?);
            (agent_id, origin)
        } else {
            let chat = crate::routing::NamedChat {
                channel: &req.channel,
                group: &req.group,
                guild: &req.guild,
                roles: &req.roles,
                peer: &req.peer,
            };
            let route = crate::routing::route_named(&config, &chat)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let agent_id = if req.agent.trim().is_empty() {
                route.agent
            } else {
                hub.agent_id(&req.agent)?
            };
            (agent_id, route.origin)
        };
        let Some(agent) = config.agent(&agent_id) else {
            return Err(Status::not_found(format!("no agent `{agent_id}`")));
        };
        let input = PolicyInput::for_origin(agent, &origin, None);
        let registry = hub.tool_registry().await;
        let resolution = policy::resolve(&registry, &config.policy, &input);
        let boundary =
            crate::agent::call_env::describe_boundary(&config, agent, &origin, &resolution);
        let tools = resolution.verdicts.iter().map(pb::ToolInfo::from).collect();
        Ok(Response::new(pb::ListToolsResponse {
            agent: agent_id,
            profile: resolution.profile.clone(),
            tools,
            note: resolution.why_none().unwrap_or_default(),
            skipped: registry
                .skipped
                .iter()
                .map(|(name, why)| format!("{name}: {why}"))
                .collect(),
            servers: hub
                .mcp_status()
                .await
                .into_iter()
                .map(pb::McpServerStatus::from)
                .collect(),
            boundary,
        }))
    }

    async fn approvals(
        &self,
        _request: Request<pb::ApprovalsRequest>,
    ) -> Result<Response<pb::ApprovalsResponse>, Status> {
        let now = std::time::SystemTime::now();
        let pending = self
            .state
            .hub
            .approvals()
            .pending()
            .into_iter()
            .map(|p| pb::pending_approval(p, now))
            .collect();
        Ok(Response::new(pb::ApprovalsResponse { pending }))
    }

    async fn decide(
        &self,
        request: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::DecideResponse>, Status> {
        let req = DecideInput::try_from(request.into_inner())?;
        let decided = self
            .state
            .hub
            .approvals()
            .decide(&req.id, req.decision, &Voter::cli())
            .await?;
        Ok(Response::new(pb::DecideResponse {
            note: decided.note(req.id.trim()),
        }))
    }

    async fn audit(
        &self,
        request: Request<pb::AuditRequest>,
    ) -> Result<Response<pb::AuditResponse>, Status> {
        let req = request.into_inner();
        let rows = self.state.hub.audit(&req.session, req.limit).await?;
        let rows = rows.into_iter().map(pb::audit_row).collect();
        let (rows, left_out) = fit::newest(rows, fit::REPLY_BYTES);
        Ok(Response::new(pb::AuditResponse {
            rows,
            left_out: left_out as u32,
        }))
    }
}
