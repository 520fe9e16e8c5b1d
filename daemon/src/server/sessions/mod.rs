//! `pincer.v1.Sessions`: list, history, reset, delete, compact, and the
//! last prompt. Each call converts its request, calls the hub's session
//! verb ([`crate::agent::hub::sessions`]) and converts the answer (`pb`),
//! fitted under the message limit ([`super::fit`]) so any session stays
//! readable.

mod pb;

use prost::Message;
use tonic::{Request, Response, Status};

use super::{State, fit};
use pb::HistoryInput;

pub struct SessionsService {
    state: State,
}

impl SessionsService {
    pub fn new(state: State) -> Self {
        Self { state }
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
        // Most recent first: keep the front, so reverse around `newest`.
        let infos: Vec<pb::SessionInfo> = sessions
            .into_iter()
            .rev()
            .map(pb::SessionInfo::from)
            .collect();
        let (mut sessions, left_out) = fit::newest(infos, fit::REPLY_BYTES);
        sessions.reverse();
        Ok(Response::new(pb::ListSessionsResponse {
            sessions,
            left_out: left_out as u32,
        }))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let req = HistoryInput::from(request.into_inner());
        let hub = &self.state.hub;
        let row = hub.find(&req.agent, &req.session).await?;
        let history = hub.history(row, req.limit, req.before).await?;
        let session = pb::SessionInfo::from(history.status);
        let entries = history.entries.iter().map(fit::entry).collect();
        let (entries, left_out) = fit::newest(
            entries,
            fit::REPLY_BYTES.saturating_sub(session.encoded_len()),
        );
        Ok(Response::new(pb::HistoryResponse {
            session: Some(session),
            entries,
            recovered_torn_line: history.recovered_torn_line,
            first_index: history.first_index + left_out as u64,
            left_out: left_out as u64,
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
        Ok(Response::new(outcome.into()))
    }

    async fn prompt(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::PromptResponse>, Status> {
        let req = request.into_inner();
        let hub = &self.state.hub;
        let row = hub.find(&req.agent, &req.session).await?;
        let prompt = hub.last_prompt(&row).await?;
        Ok(Response::new(fit::prompt(prompt)))
    }
}
