//! The Memory service's wire types and their conversions. `pincer.v1` is
//! re-exported here, so the handlers name its messages `pb::X`; a search
//! is checked into a [`SearchInput`], a read becomes a [`GetInput`], and
//! the index's answers (hits, vector leg, status, reindex progress) go
//! out as their messages. Those are `pincer_memory`'s types, so
//! functions rather than `From`, and named through `memory::` since some
//! share a message's name.

pub(super) use pincer_proto::v1::*;

use pincer_memory as memory;
use pincer_proto::v1 as pb;

use crate::server::request::RequestError;

/// A search request, checked: the agent and the query for its index.
#[derive(Debug)]
pub(in crate::server) struct SearchInput {
    pub agent: String,
    pub query: memory::Query,
}

impl TryFrom<pb::MemorySearchRequest> for SearchInput {
    type Error = RequestError;

    fn try_from(req: pb::MemorySearchRequest) -> Result<Self, RequestError> {
        if req.query.trim().is_empty() {
            return Err(RequestError::EmptyQuery);
        }
        let legs = match req.legs.as_str() {
            "" | "hybrid" => memory::Legs::Hybrid,
            "text" => memory::Legs::TextOnly,
            "vector" => memory::Legs::VectorOnly,
            other => return Err(RequestError::UnknownLegs(other.to_string())),
        };
        if let Some(m) = req.min_score
            && !(0.0..=1.0).contains(&m)
        {
            return Err(RequestError::MinScore);
        }
        Ok(Self {
            agent: req.agent,
            query: memory::Query {
                text: req.query,
                limit: (req.limit > 0).then_some(req.limit as usize),
                min_score: req.min_score,
                legs,
            },
        })
    }
}

/// A read of a memory file: 0 for `from` or `lines` means "not given".
#[derive(Debug, PartialEq)]
pub(super) struct GetInput {
    pub agent: String,
    pub path: String,
    pub from: Option<usize>,
    pub lines: Option<usize>,
}

impl From<pb::MemoryGetRequest> for GetInput {
    fn from(req: pb::MemoryGetRequest) -> Self {
        Self {
            agent: req.agent,
            path: req.path,
            from: (req.from > 0).then_some(req.from as usize),
            lines: (req.lines > 0).then_some(req.lines as usize),
        }
    }
}

pub(super) fn vector_leg(leg: &memory::VectorLeg) -> pb::VectorLeg {
    pb::VectorLeg {
        on: leg.is_on(),
        detail: match leg {
            memory::VectorLeg::On { embedder } => embedder.clone(),
            memory::VectorLeg::Off { reason } => reason.clone(),
        },
        description: leg.describe(),
    }
}

pub(super) fn hit(h: memory::Hit) -> pb::MemoryHit {
    pb::MemoryHit {
        path: h.path,
        source: h.source,
        start_line: h.start_line,
        end_line: h.end_line,
        score: h.score,
        vector_score: h.vector_score,
        text_score: h.text_score,
        snippet: h.snippet,
    }
}

/// An index's status, with the workspace it indexes.
pub(super) fn index_status(s: memory::IndexStatus, workspace: String) -> pb::MemoryIndexStatus {
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

/// A step of `agent`'s reindex.
pub(super) fn progress(agent: &str, p: memory::Progress) -> pb::ReindexProgress {
    let (phase, done, total) = match p {
        memory::Progress::Files { done, total } => ("files", done, total),
        memory::Progress::Embedding { done, total } => ("embedding", done, total),
    };
    pb::ReindexProgress {
        agent: agent.to_string(),
        phase: phase.into(),
        done: done as u64,
        total: total as u64,
        summary: None,
    }
}

/// The end of `agent`'s reindex, with what it did.
pub(super) fn reindexed(agent: String, r: memory::SyncReport) -> pb::ReindexProgress {
    pb::ReindexProgress {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(f: impl FnOnce(&mut pb::MemorySearchRequest)) -> Result<SearchInput, RequestError> {
        let mut req = pb::MemorySearchRequest {
            query: "rust".into(),
            agent: "main".into(),
            ..Default::default()
        };
        f(&mut req);
        SearchInput::try_from(req)
    }

    #[test]
    fn a_search_parses_its_legs_limit_and_score() {
        let plain = search(|_| {}).unwrap();
        assert_eq!(plain.agent, "main");
        assert_eq!(plain.query.text, "rust");
        assert_eq!(plain.query.legs, memory::Legs::Hybrid);
        assert_eq!((plain.query.limit, plain.query.min_score), (None, None));
        let narrow = search(|r| {
            r.legs = "vector".into();
            r.limit = 3;
            r.min_score = Some(0.5);
        })
        .unwrap();
        assert_eq!(narrow.query.legs, memory::Legs::VectorOnly);
        assert_eq!(
            (narrow.query.limit, narrow.query.min_score),
            (Some(3), Some(0.5))
        );
        assert_eq!(
            search(|r| r.legs = "text".into()).unwrap().query.legs,
            memory::Legs::TextOnly
        );
    }

    #[test]
    fn each_bad_search_field_says_what_is_wrong() {
        let empty = search(|r| r.query = "  ".into()).unwrap_err();
        assert_eq!(empty.to_string(), "the query is empty");
        let legs = search(|r| r.legs = "both".into()).unwrap_err();
        assert_eq!(
            legs.to_string(),
            "unknown legs `both`: use hybrid, text or vector"
        );
        let score = search(|r| r.min_score = Some(1.5)).unwrap_err();
        assert_eq!(score.to_string(), "min_score must be between 0 and 1");
    }

    #[test]
    fn a_read_without_bounds_has_none() {
        let get = |from, lines| {
            GetInput::from(pb::MemoryGetRequest {
                path: "MEMORY.md".into(),
                agent: String::new(),
                from,
                lines,
            })
        };
        assert_eq!((get(0, 0).from, get(0, 0).lines), (None, None));
        assert_eq!(
            get(5, 10),
            GetInput {
                agent: String::new(),
                path: "MEMORY.md".into(),
                from: Some(5),
                lines: Some(10),
            }
        );
    }

    #[test]
    fn the_vector_leg_says_why_it_is_off() {
        let off = vector_leg(&memory::VectorLeg::Off {
            reason: "no embedder".into(),
        });
        assert!(!off.on);
        assert_eq!(off.detail, "no embedder");
        assert!(off.description.contains("no embedder"));
        let on = vector_leg(&memory::VectorLeg::On {
            embedder: "minilm".into(),
        });
        assert!(on.on);
        assert_eq!(on.detail, "minilm");
    }

    #[test]
    fn progress_and_the_summary_keep_their_counts() {
        let p = progress("main", memory::Progress::Embedding { done: 2, total: 9 });
        assert_eq!((p.agent.as_str(), p.phase.as_str()), ("main", "embedding"));
        assert_eq!((p.done, p.total), (2, 9));
        assert!(p.summary.is_none());
        let done = reindexed(
            "main".into(),
            memory::SyncReport {
                files_seen: 4,
                files_changed: 1,
                chunks_added: 7,
                embed_error: Some("offline".into()),
                ..Default::default()
            },
        );
        assert_eq!((done.phase.as_str(), done.done, done.total), ("done", 4, 4));
        let summary = done.summary.unwrap();
        assert_eq!((summary.files_changed, summary.chunks_added), (1, 7));
        assert_eq!(summary.embed_error, "offline");
    }
}
