//! `pincer.v1.Tools`: the effective tool set of an agent, with the policy
//! layer that removed each tool it is not offered (`pincer tools list`).

use pincer_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::{State, status_of};
use crate::tools::ToolSource;
use crate::tools::policy::{self, PolicyInput};

pub struct ToolsService {
    state: State,
}

impl ToolsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

/// `core`, `mcp:<server>` or `plugin:<id>`.
pub fn source_label(source: &ToolSource) -> String {
    match source {
        ToolSource::Core => "core".into(),
        ToolSource::Mcp { server } => format!("mcp:{server}"),
        ToolSource::Plugin { id, .. } => format!("plugin:{id}"),
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
        let agent_id = hub.agent_id(&req.agent).map_err(|e| status_of(&e))?;
        let rt = hub.runtime();
        let config = rt.config();
        let Some(agent) = config.agent(&agent_id) else {
            return Err(Status::not_found(format!("no agent `{agent_id}`")));
        };
        let mut input = PolicyInput::owner(agent);
        input.owner = !req.as_stranger;
        if req.in_channel {
            input.default_profile = "messaging";
            input.main_session = false;
        }
        let resolution = policy::resolve(&rt.tools, &config.policy, &input);
        let tools = resolution
            .verdicts
            .iter()
            .map(|v| pb::ToolInfo {
                name: v.tool.name.clone(),
                description: v.tool.description.clone(),
                source: source_label(&v.tool.source),
                groups: v.tool.groups.clone(),
                optional: v.tool.flags.optional,
                dedupe: v.tool.flags.dedupe,
                owner_only: v.tool.flags.owner_only,
                offered: v.removed.is_none(),
                removed_by: v
                    .removed
                    .as_ref()
                    .map(|r| r.layer.clone())
                    .unwrap_or_default(),
                reason: v
                    .removed
                    .as_ref()
                    .map(|r| r.reason.clone())
                    .unwrap_or_default(),
                parameters_json: v.tool.parameters.to_string(),
            })
            .collect();
        Ok(Response::new(pb::ListToolsResponse {
            agent: agent_id,
            profile: resolution.profile.clone(),
            tools,
            note: resolution.why_none().unwrap_or_default(),
        }))
    }
}
