//! `pincer.v1.Sessions`: list, history, reset, delete, compact, and the
//! last prompt. History is read from the transcript on disk, so it shows
//! exactly what was recorded; the prompt from the file the turn keeps
//! beside it ([`crate::agent::last_prompt`]).

use pincer_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::agent::resolve_key;
use super::{State, status_of};
use crate::session::registry::SessionRow;
use crate::session::transcript::Transcript;

pub struct SessionsService {
    state: State,
}

impl SessionsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }

    /// Finds a session by id, full key, or short name of the agent.
    async fn find(&self, agent: &str, session: &str) -> Result<SessionRow, Status> {
        if session.trim().is_empty() {
            return Err(Status::invalid_argument(
                "name a session: a key such as agent:main:main, a short name, or an id",
            ));
        }
        let registry = &self.state.hub.runtime().registry;
        if let Some(row) = registry.find(session).await.map_err(internal)? {
            return Ok(row);
        }
        let key = resolve_key(&self.state, agent, session)?;
        registry
            .find(&key.to_string())
            .await
            .map_err(internal)?
            .ok_or_else(|| {
                Status::not_found(format!(
                    "no session `{session}` (looked for {key}); `pincer sessions list` shows them"
                ))
            })
    }

    fn info(&self, row: SessionRow, entries: u64) -> pb::SessionInfo {
        pb::SessionInfo {
            running: self.state.hub.is_running(&row.key),
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
            entries,
        }
    }

    fn transcript_path(&self, row: &SessionRow) -> std::path::PathBuf {
        self.state
            .hub
            .runtime()
            .home
            .sessions_dir(&row.agent)
            .join(format!("{}.jsonl", row.id))
    }
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

#[tonic::async_trait]
impl pb::sessions_server::Sessions for SessionsService {
    async fn list(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let agent = request.into_inner().agent;
        let filter = if agent.is_empty() {
            None
        } else {
            Some(self.state.hub.agent_id(&agent).map_err(|e| status_of(&e))?)
        };
        let rows = self
            .state
            .hub
            .runtime()
            .registry
            .list(filter)
            .await
            .map_err(internal)?;
        let sessions = rows
            .into_iter()
            .map(|row| {
                let entries = count_lines(&self.transcript_path(&row));
                self.info(row, entries)
            })
            .collect();
        Ok(Response::new(pb::ListSessionsResponse { sessions }))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let req = request.into_inner();
        let row = self.find(&req.agent, &req.session).await?;
        let path = self.transcript_path(&row);
        let (entries, recovery) = tokio::task::spawn_blocking(move || Transcript::read(&path))
            .await
            .map_err(internal)?
            .map_err(|e| Status::internal(format!("cannot read the transcript: {e}")))?;
        let total = entries.len();
        let skip = if req.limit == 0 {
            0
        } else {
            total.saturating_sub(req.limit as usize)
        };
        let entries = entries
            .into_iter()
            .skip(skip)
            .map(|e| pb::TranscriptEntry {
                json: serde_json::to_string(&e).unwrap_or_default(),
                kind: e.body.kind().into(),
                id: e.id,
                parent_id: e.parent.unwrap_or_default(),
                timestamp: e.ts,
            })
            .collect();
        Ok(Response::new(pb::HistoryResponse {
            session: Some(self.info(row, total as u64)),
            entries,
            recovered_torn_line: recovery.torn_tail,
        }))
    }

    async fn reset(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::ResetResponse>, Status> {
        let req = request.into_inner();
        let row = self.find(&req.agent, &req.session).await?;
        self.state.hub.forget(&row.key).map_err(|e| status_of(&e))?;
        self.state.hub.runtime().prompts.forget(&row.id);
        let (old_id, new_id) = self
            .state
            .hub
            .runtime()
            .registry
            .reset(&row.key)
            .await
            .map_err(internal)?
            .ok_or_else(|| Status::not_found(format!("session {} disappeared", row.key)))?;
        tracing::info!(session = %row.key, %old_id, %new_id, "session reset; the old transcript is kept");
        Ok(Response::new(pb::ResetResponse { old_id, new_id }))
    }

    async fn delete(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let req = request.into_inner();
        let row = self.find(&req.agent, &req.session).await?;
        self.state.hub.forget(&row.key).map_err(|e| status_of(&e))?;
        self.state.hub.runtime().prompts.forget(&row.id);
        let deleted = self
            .state
            .hub
            .runtime()
            .registry
            .delete(&row.key)
            .await
            .map_err(internal)?;
        let path = self.transcript_path(&row);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Status::internal(format!(
                    "the session was removed but its transcript {} was not: {e}",
                    path.display()
                )));
            }
        }
        let _ = std::fs::remove_file(crate::agent::last_prompt::path(&path));
        tracing::info!(session = %row.key, "session deleted");
        Ok(Response::new(pb::DeleteResponse {
            deleted: deleted.is_some(),
        }))
    }

    async fn compact(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Result<Response<pb::CompactResponse>, Status> {
        use crate::agent::compaction::Compacted;
        let req = request.into_inner();
        let row = self.find(&req.agent, &req.session).await?;
        let outcome = self
            .state
            .hub
            .compact(row)
            .await
            .map_err(|e| status_of(&e))?;
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
        let row = self.find(&req.agent, &req.session).await?;
        let transcript = self.transcript_path(&row);
        let store = self.state.hub.runtime().prompts.clone();
        let id = row.id.clone();
        let prompt = tokio::task::spawn_blocking(move || store.get(&id, &transcript))
            .await
            .map_err(internal)?
            .map_err(|e| Status::internal(format!("cannot read the last prompt: {e}")))?
            .ok_or_else(|| {
                Status::not_found(format!(
                    "session {} has made no model call since it was created or reset",
                    row.key
                ))
            })?;
        Ok(Response::new(pb::PromptResponse {
            text: prompt.render(),
            messages_json: serde_json::to_string(&prompt.messages).map_err(internal)?,
            model: prompt.model,
            tool_format: prompt.tool_format,
            sent_at: prompt.ts,
            estimated_tokens: prompt.estimated_tokens,
            system: prompt.system,
            tools: prompt.tools,
        }))
    }
}

fn count_lines(path: &std::path::Path) -> u64 {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .unwrap_or(0)
}
