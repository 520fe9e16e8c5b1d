//! Searching a [`MemoryIndex`] (SPEC §10): a [`Query`] under the
//! [`SearchSettings`] runs the vector leg (a Hamming scan of the sign bits
//! held in memory, re-scored by exact cosine) and the full-text leg
//! (`text.rs`: bm25 over the informative query terms) at once, merges them, then applies decay, the
//! minimum score and MMR, and cuts each [`Hit`]'s snippet.

use rusqlite::{Connection, OptionalExtension, params};
use time::OffsetDateTime;

use super::{Inner, MemoryIndex, VectorLeg, has_vector_table};
use crate::MemoryError;
use crate::db;
use crate::embed::EmbedderId;
use crate::fuse::{self, Fusion, Scored};

/// Search defaults of SPEC §10.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSettings {
    pub max_results: usize,
    pub min_score: f64,
    pub vector_weight: f64,
    pub text_weight: f64,
    pub fusion: Fusion,
    /// Each leg fetches this many times the wanted results.
    pub candidate_multiplier: usize,
    /// Half-life of dated notes; 0 turns decay off.
    pub half_life_days: f64,
    /// 1 turns MMR off.
    pub mmr_lambda: f64,
    pub snippet_chars: usize,
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            max_results: 6,
            min_score: 0.35,
            vector_weight: 0.7,
            text_weight: 0.3,
            fusion: Fusion::Weighted,
            candidate_multiplier: 4,
            half_life_days: 30.0,
            mmr_lambda: 0.7,
            snippet_chars: 700,
        }
    }
}

/// Which legs a search may use (the evaluation compares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Legs {
    #[default]
    Hybrid,
    TextOnly,
    VectorOnly,
}

/// One search request.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub text: String,
    /// Overrides `max_results`.
    pub limit: Option<usize>,
    /// Overrides `min_score`.
    pub min_score: Option<f64>,
    pub legs: Legs,
}

/// One result: where it is, how it scored, and a snippet.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: String,
    pub source: String,
    pub start_line: u32,
    pub end_line: u32,
    pub score: f64,
    pub vector_score: Option<f64>,
    pub text_score: Option<f64>,
    pub snippet: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub hits: Vec<Hit>,
    pub vector_leg: VectorLeg,
}

impl MemoryIndex {
    /// Hybrid search (SPEC §10).
    pub async fn search(&self, query: Query) -> Result<SearchOutcome, MemoryError> {
        let settings = self.inner.settings.search.clone();
        let limit = query.limit.unwrap_or(settings.max_results).clamp(1, 100);
        let candidates = limit * settings.candidate_multiplier.max(1);
        let mut vector_leg = self.vector_leg();
        let mut query_vector = None;
        if query.legs != Legs::TextOnly
            && vector_leg.is_on()
            && let Some(embedder) = &self.inner.embedder
            && !query.text.trim().is_empty()
        {
            match embedder.embed(std::slice::from_ref(&query.text)).await {
                Ok(mut v) if v.len() == 1 => query_vector = v.pop(),
                Ok(_) => {}
                Err(e) => {
                    vector_leg = VectorLeg::Off {
                        reason: format!("{} failed: {e}", embedder.id()),
                    }
                }
            }
        }
        let use_text = query.legs != Legs::VectorOnly;
        let min_score = query.min_score.unwrap_or(settings.min_score);
        let embedder_id = self.inner.embedder.as_ref().map(|e| e.id().clone());
        // The full-text leg runs on the reader connection while the vector
        // leg runs on the main one. A sync committing in between can leave
        // a text hit whose chunk is gone: `rank` skips it.
        let (text_tx, text_rx) = std::sync::mpsc::channel();
        if use_text {
            let inner = self.inner.clone();
            let text = query.text.clone();
            tokio::task::spawn_blocking(move || {
                let reader = inner.reader.lock().unwrap_or_else(|e| e.into_inner());
                let _ = text_tx.send(super::text::leg(&reader, &text, candidates));
            });
        } else {
            drop(text_tx);
        }
        let hits = self
            .with_conn(move |conn, inner| {
                let now_day = OffsetDateTime::now_utc().unix_timestamp() / 86_400;
                let vector_hits = match (&query_vector, &embedder_id) {
                    (Some(v), Some(id)) => Some(vector_candidates(conn, inner, id, v, candidates)?),
                    _ => None,
                };
                let text_hits = match text_rx.recv() {
                    Ok(hits) => hits?,
                    Err(_) if !use_text => Vec::new(),
                    Err(_) => return Err(MemoryError::Task("the full-text leg stopped".into())),
                };
                let merged = fuse::merge(
                    vector_hits.as_deref(),
                    &text_hits,
                    settings.fusion,
                    settings.vector_weight,
                    if use_text { settings.text_weight } else { 0.0 },
                );
                rank(conn, merged, &settings, limit, min_score, now_day)
            })
            .await?;
        Ok(SearchOutcome { hits, vector_leg })
    }
}

/// How many bit-scan candidates are re-scored by exact cosine per vector
/// candidate wanted: sign bits misorder close neighbours, rarely far ones.
/// At 8, 96 % of the exact top 6 are found on 3,000 chunks (16: 100 %, 4:
/// 90 %; `tests/index.rs`), for about 0.8 ms of re-scoring per 10k chunks.
const RESCORE_FACTOR: usize = 8;

/// The `k` chunks nearest to `query` by cosine: a Hamming scan of the sign
/// bits (`chunks_vec`, held in memory by `bits.rs`) for `k × RESCORE_FACTOR`
/// candidates, re-scored with their float vectors from the embedding cache.
fn vector_candidates(
    conn: &Connection,
    inner: &Inner,
    embedder: &EmbedderId,
    query: &[f32],
    k: usize,
) -> Result<Vec<(i64, f64)>, MemoryError> {
    if !has_vector_table(conn)? {
        return Ok(Vec::new());
    }
    // As many as sqlite-vec's KNN answered (at most 4096 per query).
    let coarse_k = (k * RESCORE_FACTOR).clamp(1, 4096);
    let coarse = inner
        .bits()
        .nearest(conn, &db::binary_blob(query), coarse_k)?;
    let bits = db::bit_dimensions(query.len());
    // One statement for every candidate, visited in rowid order.
    let mut exact = conn.prepare_cached(
        "SELECT c.id, e.vector FROM chunks c JOIN embedding_cache e
           ON e.provider = ?1 AND e.model = ?2 AND e.hash = c.hash
         WHERE c.id IN (SELECT value FROM json_each(?3))",
    )?;
    let ids = serde_json::to_string(&coarse.iter().map(|(id, _)| *id).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut vectors: std::collections::HashMap<i64, Vec<u8>> = exact
        .query_map(params![embedder.provider, embedder.model, ids], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
    let mut scored = Vec::with_capacity(coarse.len());
    for (id, hamming) in coarse {
        let similarity = match vectors.remove(&id) {
            Some(blob) if blob.len() == query.len() * 4 => {
                crate::embed::cosine(query, &db::blob_vector(&blob)) as f64
            }
            _ => db::cosine_from_hamming(f64::from(hamming), bits),
        };
        scored.push((id, similarity));
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    Ok(scored)
}

struct ChunkRow {
    path: String,
    source: String,
    start: u32,
    end: u32,
    text: String,
}

/// Decay, minimum score, MMR and snippets over the merged candidates.
fn rank(
    conn: &Connection,
    merged: Vec<Scored>,
    settings: &SearchSettings,
    limit: usize,
    min_score: f64,
    now_day: i64,
) -> Result<Vec<Hit>, MemoryError> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.path, f.source, c.start_line, c.end_line, c.text FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = ?1",
    )?;
    let mut rows: std::collections::HashMap<i64, ChunkRow> = std::collections::HashMap::new();
    let mut scored = Vec::new();
    for mut s in merged {
        let Some(row) = stmt
            .query_row([s.id], |r| {
                Ok(ChunkRow {
                    path: r.get(0)?,
                    source: r.get(1)?,
                    start: r.get(2)?,
                    end: r.get(3)?,
                    text: r.get(4)?,
                })
            })
            .optional()?
        else {
            continue;
        };
        let age = fuse::dated_note_day(&row.path).map(|day| (now_day - day) as f64);
        s.score *= fuse::decay(age, settings.half_life_days);
        if s.score >= min_score {
            scored.push(s);
            rows.insert(scored[scored.len() - 1].id, row);
        }
    }
    fuse::sort_best_first(&mut scored);
    let candidates: Vec<(Scored, &str)> = scored
        .into_iter()
        .map(|s| {
            let text = rows.get(&s.id).map(|r| r.text.as_str()).unwrap_or("");
            (s, text)
        })
        .collect();
    let picked = fuse::mmr(candidates, settings.mmr_lambda, limit);
    Ok(picked
        .into_iter()
        .filter_map(|s| {
            let row = rows.get(&s.id)?;
            Some(Hit {
                path: row.path.clone(),
                source: row.source.clone(),
                start_line: row.start,
                end_line: row.end,
                score: s.score,
                vector_score: s.vector,
                text_score: s.text,
                snippet: snippet(&row.text, settings.snippet_chars),
            })
        })
        .collect())
}

fn snippet(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    out.push('…');
    out
}
