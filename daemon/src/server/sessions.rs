//! `pincer.v1.Sessions`: list, history, reset, delete, compact, and the
//! last prompt. Each call converts its request, calls the hub's session
//! verb ([`crate::agent::hub::sessions`]) and converts the answer.

use pincer_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::State;
use crate::agent::compaction::Compacted;
use crate::agent::hub::sessions::SessionStatus;

pub struct SessionsService {
    state: State,
}

impl SessionsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

fn info(s: SessionStatus) -> pb::SessionInfo {
    let row = s.row;
    pb::SessionInfo {
        running: s.running,
        key: row.key,
        id: row.id,
        agent: row.agent,
        channel: row.channel,
        created_at: row.created_at,
        updated_at: row.updated_at,
        input_tokens: row.input_tokens,
        output_tokens: row.output_tokens,
        compactions: row.compactions,
        last_error: row.last_error.unwrap_or_default(),
        failure_summary: row.failure_summary.unwrap_or_default(),
        entries: s.entries,
    }
}

#[tonic::async_trait]
impl pb::sessions_server::Sessions for SessionsService {
    async fn list(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let agent = request.into_inner().agent;
        let sessions = self.state.hub.list(&agent).await?;
        Ok(Response::new(pb::ListSessionsResponse {
            sessions: sessions.into_iter().map(info).collect(),
        }))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let req = request.into_inner();
        let hub = &self.state.hub;
        let row = hub.find(&req.agent, &req.session).await?;
        let history = hub.history(row, req.limit as usize).await?;
        let entries = history
            .entries
            .into_iter()
            .map(|e| pb::TranscriptEntry {
                json: serde_json::to_string(&e).unwrap_or_default(),
                kind: e.body.kind().into(),
                id: e.id,
                parent_id: e.parent.unwrap_or_default(),
                timestamp: e.ts,
            })
            .collect();
        Ok(Response::new(pb::HistoryResponse {
            session: Some(info(history.status)),
            entries,
            recovered_torn_line: history.recovered_torn_line,
        }))
    }

    async fn reset(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::ResetResponse>, Status> {
        let req = request.into_inner();
        let hub = &self.state.hub;
        let row = hub.find(&req.agent, &req.session).await?;
        let (old_id, new_id) = hub.reset(&row).await?;
        Ok(Response::new(pb::ResetResponse { old_id, new_id }))
    }

    async fn delete(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let req = request.into_inner();
        let hub = &self.state.hub;
        let row = hub.find(&req.agent, &req.session).await?;
        let deleted = hub.delete(&row).await?;
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn compact(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::CompactResponse>, Status> {
        let req = request.into_inner();
        let outcome = self
            .state
            .hub
            .compact_named(&req.agent, &req.session)
            .await?;
        Ok(Response::new(match outcome {
            Compacted::Done {
                tokens_before,
                tokens_after,
                summary,
            } => pb::CompactResponse {
                compacted: true,
                tokens_before,
                tokens_after,
                summary,
                note: String::new(),
            },
            Compacted::Nothing => pb::CompactResponse {
                compacted: false,
                note: "nothing to compact: the history since the last compaction is a single turn or empty".into(),
                ..Default::default()
            },
        }))
    }

    async fn prompt(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::PromptResponse>, Status> {
        let req = request.into_inner();
        let hub = &self.state.hub;
        let row = hub.find(&req.agent, &req.session).await?;
        let prompt = hub.last_prompt(&row).await?;
        Ok(Response::new(pb::PromptResponse {
            text: prompt.render(),
            messages_json: serde_json::to_string(&prompt.messages)
                .map_err(|e| Status::internal(e.to_string()))?,
            model: prompt.model,
            tool_format: prompt.tool_format,
            sent_at: prompt.ts,
            estimated_tokens: prompt.estimated_tokens,
            system: prompt.system,
            tools: prompt.tools,
        }))
    }
}
