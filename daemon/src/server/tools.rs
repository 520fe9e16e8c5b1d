//! `pincer.v1.Tools`: the effective tool set of an agent, with the policy
//! layer that removed each tool it is not offered (`pincer tools list`),
//! and the audit table of tool calls (`pincer tools audit`).

use pincer_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::{State, fit};
use crate::tools::ToolSource;
use crate::tools::approvals::{Decision, HaltAsk, PendingApproval, Subject, Voter};
use crate::tools::arguments::shorten;
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
        let rt = hub.runtime();
        let config = rt.config();
        // Exactly what such a chat is offered: with a channel, the agent
        // (unless named) and the origin come from the routing layer, as a
        // bridge's message's would: a DM, or a message in `group` (of
        // `guild`, from a sender holding `roles`).
        let (agent_id, origin) = if req.channel.trim().is_empty() {
            let agent_id = hub.agent_id(&req.agent)?;
            let origin = crate::routing::owner(&hub.resolve_key(&agent_id, "")?);
            (agent_id, origin)
        } else {
            let peer = req.peer.trim();
            let group = req.group.trim();
            let inbound = crate::routing::Inbound {
                channel: req.channel.trim().to_string(),
                account: None,
                chat: if group.is_empty() {
                    crate::routing::Chat::Direct
                } else {
                    crate::routing::Chat::Group(group.to_string())
                },
                thread: None,
                guild: Some(req.guild.trim())
                    .filter(|g| !g.is_empty())
                    .map(str::to_string),
                roles: req
                    .roles
                    .iter()
                    .map(|r| r.trim().to_string())
                    .filter(|r| !r.is_empty())
                    .collect(),
                sender: crate::routing::Sender {
                    id: if peer.is_empty() { "anyone" } else { peer }.to_string(),
                    name: peer.to_string(),
                },
            };
            let route = crate::routing::route(&config, &inbound)
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
        let registry = rt.tool_registry().await;
        let resolution = policy::resolve(&registry, &config.policy, &input);
        let boundary =
            crate::agent::call_env::describe_boundary(&config, agent, &origin, &resolution);
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
                asks: v.asks,
            })
            .collect();
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
            servers: rt
                .mcp()
                .status()
                .await
                .into_iter()
                .map(|s| pb::McpServerStatus {
                    name: s.name,
                    state: s.state,
                    tools: s.tools as u32,
                })
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
            .runtime()
            .approvals()
            .pending()
            .into_iter()
            .map(|p| pending_approval(p, now))
            .collect();
        Ok(Response::new(pb::ApprovalsResponse { pending }))
    }

    async fn decide(
        &self,
        request: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::DecideResponse>, Status> {
        let req = request.into_inner();
        let given = [
            !req.edit_json.is_empty(),
            !req.revise.is_empty(),
            !req.input_json.is_empty(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(Status::invalid_argument(
                "give at most one of edit_json, revise and input_json",
            ));
        }
        if req.always && !req.allow {
            return Err(Status::invalid_argument(
                "`always` goes with allow: a call can be allowed always, never denied always",
            ));
        }
        let decision = if !req.edit_json.is_empty() {
            Decision::Edit(Decision::json(&req.edit_json, "edited data")?)
        } else if !req.revise.is_empty() {
            Decision::Revise(req.revise)
        } else if !req.input_json.is_empty() {
            Decision::Answer(Decision::json(&req.input_json, "input")?)
        } else if req.allow {
            Decision::Allow { always: req.always }
        } else {
            Decision::Deny
        };
        let decided = self
            .state
            .hub
            .runtime()
            .approvals()
            .decide(&req.id, decision, &Voter::cli())
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
        // A model names its calls, so a call id can be of any length.
        let short = |s: String| fit::text(s, 300);
        let rows = rows
            .into_iter()
            .map(|(ts, r)| pb::AuditRow {
                ts,
                session_key: short(r.session_key),
                agent: r.agent,
                sender: short(r.sender),
                tool: short(r.tool),
                call_id: short(r.call_id),
                args_hash: r.args_hash,
                outcome: r.outcome,
                duration_ms: r.duration_ms,
                decided_by: short(r.decided_by),
                detail: fit::text(r.detail, fit::NOTE_CHARS),
                // Already masked and capped when recorded.
                arguments: r.arguments,
            })
            .collect();
        let (rows, left_out) = fit::newest(rows, fit::REPLY_BYTES);
        Ok(Response::new(pb::AuditResponse {
            rows,
            left_out: left_out as u32,
        }))
    }
}

/// A waiting request as the CLI lists it.
fn pending_approval(p: PendingApproval, now: std::time::SystemTime) -> pb::PendingApproval {
    let secs = |a: std::time::SystemTime, b: std::time::SystemTime| {
        a.duration_since(b).map(|d| d.as_secs()).unwrap_or(0)
    };
    let json = |v: &serde_json::Value| shorten(&v.to_string(), fit::EVENT_CHARS).into_owned();
    let mut out = pb::PendingApproval {
        age_s: secs(now, p.requested_at),
        expires_in_s: secs(p.expires_at, now),
        id: p.id,
        session_key: p.session_key,
        agent: p.agent,
        requester: p
            .requester
            .map(|r| format!("{} ({}:{})", r.name, r.channel, r.sender_id))
            .unwrap_or_default(),
        ..Default::default()
    };
    match p.subject {
        Subject::Call {
            tool, arguments, ..
        } => {
            out.kind = "call".into();
            out.tool = tool;
            out.arguments_json = shorten(&arguments, fit::EVENT_CHARS).into_owned();
        }
        Subject::Step(halt) => {
            out.kind = halt.ask.kind().into();
            out.run = halt.run;
            out.workflow = halt.workflow;
            out.step = halt.step;
            out.prompt = fit::text(halt.prompt, fit::NOTE_CHARS);
            match halt.ask {
                HaltAsk::Approval {
                    data,
                    approvers,
                    quorum,
                    votes,
                    edit,
                    revisions_left,
                    initiator,
                } => {
                    out.data_json = data.as_ref().map(json).unwrap_or_default();
                    out.initiator = initiator.unwrap_or_default();
                    out.approvers = approvers;
                    out.quorum = quorum;
                    out.votes = votes;
                    out.edit = edit;
                    out.revisions_left = revisions_left;
                }
                HaltAsk::Input { schema } => {
                    out.schema_json = schema.as_ref().map(json).unwrap_or_default();
                }
            }
        }
    }
    out
}
