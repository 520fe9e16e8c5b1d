//! `pincer.v1.Memory`: search, read, status and reindex of each agent's
//! long-term memory index (SPEC §10). Every answer carries the vector leg,
//! so a client can never show keyword-only results as hybrid ones.

use std::time::Instant;

use pincer_memory::{IndexStatus, Legs, MemoryIndex, Progress, Query, Scope, VectorLeg};
use pincer_proto::v1 as pb;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{State, fit};

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
        let rt = hub.runtime();
        let config = rt.config();
        let settings = config
            .agent(&id)
            .ok_or_else(|| Status::not_found(format!("no agent `{id}`")))?;
        rt.memory()
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
        let rt = self.state.hub.runtime();
        let config = rt.config();
        let mut out = Vec::new();
        for settings in config.agents.values() {
            let index = rt
                .memory()
                .index(settings)
                .map_err(|e| Status::failed_precondition(e.to_string()))?;
            out.push((index, settings.workspace.display().to_string()));
        }
        Ok(out)
    }
}

pub fn vector_leg(leg: &VectorLeg) -> pb::VectorLeg {
    pb::VectorLeg {
        on: leg.is_on(),
        detail: match leg {
            VectorLeg::On { embedder } => embedder.clone(),
            VectorLeg::Off { reason } => reason.clone(),
        },
        description: leg.describe(),
    }
}

fn index_status(s: IndexStatus, workspace: String) -> pb::MemoryIndexStatus {
    pb::MemoryIndexStatus {
        agent: s.agent,
        db_path: s.db_path.display().to_string(),
        files: s.files,
        chunks: s.chunks,
        embedded_chunks: s.embedded_chunks,
        vector_leg: Some(vector_leg(&s.vector_leg)),
        dimensions: s.dimensions.unwrap_or(0) as u32,
        last_sync: s.last_sync.unwrap_or(0),
        last_error: s.last_error.unwrap_or_default(),
        skipped: s.skipped,
        watching: s.watching,
        watcher_error: s.watcher_error.unwrap_or_default(),
        workspace,
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
        let req = request.into_inner();
        if req.query.trim().is_empty() {
            return Err(Status::invalid_argument("the query is empty"));
        }
        let legs = match req.legs.as_str() {
            "" | "hybrid" => Legs::Hybrid,
            "text" => Legs::TextOnly,
            "vector" => Legs::VectorOnly,
            other => {
                return Err(Status::invalid_argument(format!(
                    "unknown legs `{other}`: use hybrid, text or vector"
                )));
            }
        };
        if let Some(m) = req.min_score
            && !(0.0..=1.0).contains(&m)
        {
            return Err(Status::invalid_argument(
                "min_score must be between 0 and 1",
            ));
        }
        let index = self.index(&req.agent)?;
        let started = Instant::now();
        let outcome = index
            .search(Query {
                text: req.query,
                limit: (req.limit > 0).then_some(req.limit as usize),
                min_score: req.min_score,
                legs,
            })
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(pb::MemorySearchResponse {
            agent: index.agent().to_string(),
            hits: outcome
                .hits
                .into_iter()
                .map(|h| pb::MemoryHit {
                    path: h.path,
                    source: h.source,
                    start_line: h.start_line,
                    end_line: h.end_line,
                    score: h.score,
                    vector_score: h.vector_score,
                    text_score: h.text_score,
                    snippet: h.snippet,
                })
                .collect(),
            vector_leg: Some(vector_leg(&outcome.vector_leg)),
            elapsed_us: started.elapsed().as_micros() as u64,
        }))
    }

    async fn get(
        &self,
        request: Request<pb::MemoryGetRequest>,
    ) -> Result<Response<pb::MemoryGetResponse>, Status> {
        let req = request.into_inner();
        let index = self.index(&req.agent)?;
        let from = (req.from > 0).then_some(req.from as usize);
        let lines = (req.lines > 0).then_some(req.lines as usize);
        let read = tokio::task::spawn_blocking(move || index.get(&req.path, from, lines))
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
        if !self.state.hub.runtime().memory().settings().enabled {
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
            indexes.push(index_status(status, workspace));
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
                    let (phase, done, total) = match p {
                        Progress::Files { done, total } => ("files", done, total),
                        Progress::Embedding { done, total } => ("embedding", done, total),
                    };
                    let _ = progress_tx.try_send(Ok(pb::ReindexProgress {
                        agent: progress_agent.clone(),
                        phase: phase.into(),
                        done: done as u64,
                        total: total as u64,
                        summary: None,
                    }));
                };
                match index.sync(Scope::All, Some(&report)).await {
                    Ok(r) => {
                        let _ = tx
                            .send(Ok(pb::ReindexProgress {
                                agent,
                                phase: "done".into(),
                                done: r.files_seen as u64,
                                total: r.files_seen as u64,
                                summary: Some(pb::ReindexSummary {
                                    files_seen: r.files_seen as u64,
                                    files_changed: r.files_changed as u64,
                                    files_removed: r.files_removed as u64,
                                    chunks_added: r.chunks_added as u64,
                                    chunks_embedded: r.chunks_embedded as u64,
                                    cache_hits: r.cache_hits as u64,
                                    vectors_rebuilt: r.vectors_rebuilt,
                                    embed_error: r.embed_error.unwrap_or_default(),
                                    elapsed_ms: r.elapsed_ms,
                                }),
                            }))
                            .await;
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
