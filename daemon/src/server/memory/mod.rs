//! `pincer.v1.Memory`: search, read, status and reindex of each agent's
//! long-term memory index (SPEC §10). Every answer carries the vector leg,
//! so a client can never show keyword-only results as hybrid ones.
//! Requests are checked and answers converted in `pb`.

pub(super) mod pb;

use std::time::Instant;

use pincer_memory::{MemoryIndex, Progress, Scope};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{State, fit};
use pb::{GetInput, SearchInput};

pub struct MemoryService {
    state: State,
}

impl MemoryService {
    pub fn new(state: State) -> Self {
        Self { state }
    }

    /// The index of `agent` (empty: the default agent).
    fn index(&self, agent: &str) -> Result<MemoryIndex, Status> {
        let hub = &self.state.hub;
        let id = hub.agent_id(agent)?;
        let config = hub.config();
        let settings = config
            .agent(&id)
            .ok_or_else(|| Status::not_found(format!("no agent `{id}`")))?;
        hub.memory()
            .index(settings)
            .map_err(|e| Status::failed_precondition(e.to_string()))
    }

    /// Every agent's index (empty `agent`), or one.
    fn indexes(&self, agent: &str) -> Result<Vec<(MemoryIndex, String)>, Status> {
        if !agent.trim().is_empty() {
            let index = self.index(agent)?;
            let workspace = index.sources().workspace.display().to_string();
            return Ok(vec![(index, workspace)]);
        }
        let hub = &self.state.hub;
        let config = hub.config();
        let mut out = Vec::new();
        for settings in config.agents.values() {
            let index = hub
                .memory()
                .index(settings)
                .map_err(|e| Status::failed_precondition(e.to_string()))?;
            out.push((index, settings.workspace.display().to_string()));
        }
        Ok(out)
    }
}

type ReindexStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::ReindexProgress, Status>> + Send>>;

#[tonic::async_trait]
impl pb::memory_server::Memory for MemoryService {
    async fn search(
        &self,
        request: Request<pb::MemorySearchRequest>,
    ) -> Result<Response<pb::MemorySearchResponse>, Status> {
        let req = SearchInput::try_from(request.into_inner())?;
        let index = self.index(&req.agent)?;
        let started = Instant::now();
        let outcome = index
            .search(req.query)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(pb::MemorySearchResponse {
            agent: index.agent().to_string(),
            hits: outcome.hits.into_iter().map(pb::hit).collect(),
            vector_leg: Some(pb::vector_leg(&outcome.vector_leg)),
            elapsed_us: started.elapsed().as_micros() as u64,
        }))
    }

    async fn get(
        &self,
        request: Request<pb::MemoryGetRequest>,
    ) -> Result<Response<pb::MemoryGetResponse>, Status> {
        let req = GetInput::from(request.into_inner());
        let index = self.index(&req.agent)?;
        let read = tokio::task::spawn_blocking(move || index.get(&req.path, req.from, req.lines))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        match read {
            Ok((text, start, end)) => Ok(Response::new(pb::MemoryGetResponse {
                // A memory file (a transcript, with `sessions = true`) may
                // hold a line of any length.
                text: fit::text(text, fit::REPLY_BYTES / 4),
                start_line: start as u32,
                end_line: end as u32,
            })),
            Err(e @ pincer_memory::MemoryError::NotASource(_)) => {
                Err(Status::invalid_argument(e.to_string()))
            }
            Err(e @ pincer_memory::MemoryError::Io { .. }) => Err(Status::not_found(e.to_string())),
            Err(e) => Err(Status::internal(e.to_string())),
        }
    }

    async fn status(
        &self,
        request: Request<pb::MemoryStatusRequest>,
    ) -> Result<Response<pb::MemoryStatusResponse>, Status> {
        let req = request.into_inner();
        if !self.state.hub.memory().settings().enabled {
            return Ok(Response::new(pb::MemoryStatusResponse {
                enabled: false,
                indexes: Vec::new(),
            }));
        }
        let mut indexes = Vec::new();
        for (index, workspace) in self.indexes(&req.agent)? {
            let status = index
                .status()
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            indexes.push(pb::index_status(status, workspace));
        }
        Ok(Response::new(pb::MemoryStatusResponse {
            enabled: true,
            indexes,
        }))
    }

    type ReindexStream = ReindexStream;

    async fn reindex(
        &self,
        request: Request<pb::ReindexRequest>,
    ) -> Result<Response<Self::ReindexStream>, Status> {
        let req = request.into_inner();
        let indexes = self.indexes(&req.agent)?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            for (index, _) in indexes {
                let agent = index.agent().to_string();
                if req.full
                    && let Err(e) = index.clear().await
                {
                    let _ = tx.send(Err(Status::internal(e.to_string()))).await;
                    return;
                }
                let progress_tx = tx.clone();
                let progress_agent = agent.clone();
                // Progress callbacks are sync; try_send drops a tick when the
                // client reads slowly rather than stalling the sync.
                let report = move |p: Progress| {
                    let _ = progress_tx.try_send(Ok(pb::progress(&progress_agent, p)));
                };
                match index.sync(Scope::All, Some(&report)).await {
                    Ok(r) => {
                        let _ = tx.send(Ok(pb::reindexed(agent, r))).await;
                    }
                    Err(e) => {
                        let _ = tx
                            .send(Err(Status::internal(format!("reindex of `{agent}`: {e}"))))
                            .await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
