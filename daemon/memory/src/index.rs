//! [`MemoryIndex`]: one agent's index (SPEC §10), a cloneable handle.
//!
//! Syncing is incremental: a file whose size and mtime are unchanged is not
//! read, a file whose hash is unchanged is not re-chunked, and a chunk is
//! embedded only when the embedding cache has no vector for its hash. Each
//! file is replaced in one transaction, so a crash mid-sync leaves the
//! previous state of that file, and the next sync finishes the work.
//! Full-text rows are written with the chunks, so new text is searchable
//! before its vectors exist.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Instant, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use time::OffsetDateTime;

use crate::MemoryError;
use crate::chunk::{ChunkSize, chunk_markdown};
use crate::db;
use crate::embed::{Embedder, EmbedderId};
use crate::fts;
use crate::fuse::{self, Fusion, Scored};
use crate::sources::{MAX_FILE_BYTES, SourceFile, Sources};

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

/// Whether the vector leg took part, and if not, why.
#[derive(Debug, Clone, PartialEq)]
pub enum VectorLeg {
    On { embedder: String },
    Off { reason: String },
}

impl VectorLeg {
    pub fn is_on(&self) -> bool {
        matches!(self, Self::On { .. })
    }

    /// The sentence every result list and `pincer doctor` show.
    pub fn describe(&self) -> String {
        match self {
            Self::On { embedder } => format!("hybrid search (vectors by {embedder} + full text)"),
            Self::Off { reason } => {
                format!("the vector leg is off ({reason}): full-text search only")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub hits: Vec<Hit>,
    pub vector_leg: VectorLeg,
}

/// What the index holds and how its last sync went.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexStatus {
    pub agent: String,
    pub db_path: PathBuf,
    pub files: u64,
    pub chunks: u64,
    pub embedded_chunks: u64,
    pub vector_leg: VectorLeg,
    pub dimensions: Option<usize>,
    /// Unix seconds of the last sync that finished without error.
    pub last_sync: Option<i64>,
    pub last_error: Option<String>,
    /// Files skipped at the last sync, with why.
    pub skipped: Vec<String>,
    /// Whether the watcher runs (set by [`crate::watch`]).
    pub watching: bool,
    pub watcher_error: Option<String>,
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncReport {
    pub files_seen: usize,
    pub files_changed: usize,
    pub files_removed: usize,
    pub chunks_added: usize,
    pub chunks_embedded: usize,
    pub cache_hits: usize,
    /// The embedder changed, so every vector was dropped and is rebuilt.
    pub vectors_rebuilt: bool,
    pub embed_error: Option<String>,
    pub elapsed_ms: u64,
}

/// Progress of a sync, for progress bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Files { done: usize, total: usize },
    Embedding { done: usize, total: usize },
}

/// Which files a sync looks at.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every source, and forget files that are gone (the reconcile scan).
    All,
    /// These paths only (watcher events), present or deleted.
    Paths(Vec<PathBuf>),
}

/// Index settings beyond search.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexSettings {
    pub chunk: ChunkSize,
    pub search: SearchSettings,
}

/// One agent's index; clone freely.
#[derive(Clone)]
pub struct MemoryIndex {
    inner: Arc<Inner>,
}

struct Inner {
    agent: String,
    db_path: PathBuf,
    conn: Mutex<Connection>,
    /// A second connection for the full-text leg, so a hybrid search runs
    /// both legs at once (WAL: it reads the last committed state).
    reader: Mutex<Connection>,
    sources: Sources,
    settings: IndexSettings,
    embedder: Option<Arc<dyn Embedder>>,
    /// Why there is no embedder, when there is none.
    no_embedder: String,
    state: Mutex<State>,
    sync_lock: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    last_sync: Option<i64>,
    last_error: Option<String>,
    /// The embedder failed (endpoint down, model unreadable).
    vector_error: Option<String>,
    skipped: Vec<String>,
    watching: bool,
    watcher_error: Option<String>,
}

impl MemoryIndex {
    /// Opens the index at `db_path`. Without an embedder, `no_embedder`
    /// says why, in the words results and `pincer doctor` show.
    pub fn open(
        agent: &str,
        db_path: PathBuf,
        sources: Sources,
        settings: IndexSettings,
        embedder: Option<Arc<dyn Embedder>>,
        no_embedder: &str,
    ) -> Result<Self, MemoryError> {
        let conn = db::open(&db_path)?;
        if embedder.is_none() {
            db::drop_vector_table(&conn)?;
        }
        let reader = db::open_reader(&db_path)?;
        Ok(Self {
            inner: Arc::new(Inner {
                agent: agent.to_string(),
                db_path,
                conn: Mutex::new(conn),
                reader: Mutex::new(reader),
                sources,
                settings,
                embedder,
                no_embedder: no_embedder.to_string(),
                state: Mutex::new(State::default()),
                sync_lock: tokio::sync::Mutex::new(()),
            }),
        })
    }

    pub fn agent(&self) -> &str {
        &self.inner.agent
    }

    pub fn sources(&self) -> &Sources {
        &self.inner.sources
    }

    pub fn settings(&self) -> &IndexSettings {
        &self.inner.settings
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.inner.embedder.as_ref()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_watching(&self, watching: bool, error: Option<String>) {
        let mut state = self.state();
        state.watching = watching;
        state.watcher_error = error;
    }

    /// The vector leg as it stands now.
    pub fn vector_leg(&self) -> VectorLeg {
        match (&self.inner.embedder, &self.state().vector_error) {
            (None, _) => VectorLeg::Off {
                reason: self.inner.no_embedder.clone(),
            },
            (Some(e), Some(error)) => VectorLeg::Off {
                reason: format!("{} failed: {error}", e.id()),
            },
            (Some(e), None) => VectorLeg::On {
                embedder: e.id().to_string(),
            },
        }
    }

    /// Runs `f` with the connection on tokio's blocking pool.
    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection, &Inner) -> Result<T, MemoryError> + Send + 'static,
    ) -> Result<T, MemoryError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let conn = inner.conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&conn, &inner)
        })
        .await
        .map_err(|e| MemoryError::Task(e.to_string()))?
    }

    /// Forgets every file and chunk (the embedding cache stays, so a
    /// rebuild embeds only texts it has never seen); the next sync builds
    /// the index again from the files.
    pub async fn clear(&self) -> Result<(), MemoryError> {
        let _one_at_a_time = self.inner.sync_lock.lock().await;
        self.with_conn(|conn, _| {
            let tx = conn.unchecked_transaction()?;
            tx.execute("DELETE FROM chunks_fts", [])?;
            if has_vector_table(&tx)? {
                tx.execute("DELETE FROM chunks_vec", [])?;
            }
            tx.execute("DELETE FROM chunks", [])?;
            tx.execute("DELETE FROM files", [])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Brings the index up to date with the files in `scope`.
    pub async fn sync(
        &self,
        scope: Scope,
        progress: Option<&(dyn Fn(Progress) + Send + Sync)>,
    ) -> Result<SyncReport, MemoryError> {
        let _one_at_a_time = self.inner.sync_lock.lock().await;
        let started = Instant::now();
        let mut report = SyncReport::default();
        let result = self.sync_inner(scope, progress, &mut report).await;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        let mut state = self.state();
        match &result {
            Ok(()) => {
                state.last_sync = Some(OffsetDateTime::now_utc().unix_timestamp());
                state.last_error = None;
            }
            Err(e) => state.last_error = Some(e.to_string()),
        }
        state.vector_error = report.embed_error.clone();
        drop(state);
        result.map(|()| report)
    }

    async fn sync_inner(
        &self,
        scope: Scope,
        progress: Option<&(dyn Fn(Progress) + Send + Sync)>,
        report: &mut SyncReport,
    ) -> Result<(), MemoryError> {
        // The vector table must fit the embedder before chunks use it.
        let mut embedder_ready = false;
        if let Some(embedder) = self.inner.embedder.clone() {
            match embedder.dimensions().await {
                Ok(dims) => {
                    let id = embedder.id().to_string();
                    let rebuilt = self
                        .with_conn(move |conn, _| db::ensure_vector_table(conn, &id, dims))
                        .await?;
                    if rebuilt {
                        tracing::warn!(
                            agent = %self.inner.agent,
                            embedder = %embedder.id(),
                            "the embedder or its dimension changed: every chunk is embedded again"
                        );
                    }
                    report.vectors_rebuilt = rebuilt;
                    embedder_ready = true;
                }
                Err(e) => report.embed_error = Some(e.to_string()),
            }
        }

        let files = match &scope {
            Scope::All => self.inner.sources.list(),
            Scope::Paths(paths) => paths
                .iter()
                .filter_map(|p| self.inner.sources.classify(p))
                .collect(),
        };
        report.files_seen = files.len();
        let full_scan = matches!(scope, Scope::All);
        let total = files.len();
        let cache_key = self
            .inner
            .embedder
            .as_ref()
            .filter(|_| embedder_ready)
            .map(|e| (e.id().provider.clone(), e.id().model.clone()));
        // Files in batches so progress moves and the connection is shared.
        let mut done = 0;
        let mut skipped = Vec::new();
        for batch in files.chunks(64) {
            let batch = batch.to_vec();
            let key = cache_key.clone();
            let (counts, skips) = self
                .with_conn(move |conn, inner| {
                    let mut counts = FileCounts::default();
                    let mut skips = Vec::new();
                    for file in &batch {
                        match sync_file(conn, inner, file, key.as_ref(), !full_scan)? {
                            FileOutcome::Skipped(why) => skips.push(format!("{}: {why}", file.rel)),
                            outcome => counts.add(outcome),
                        }
                    }
                    Ok((counts, skips))
                })
                .await?;
            report.files_changed += counts.changed;
            report.files_removed += counts.removed;
            report.chunks_added += counts.chunks_added;
            report.cache_hits += counts.cache_hits;
            skipped.extend(skips);
            done += 64.min(total - done);
            if let Some(p) = progress {
                p(Progress::Files { done, total });
            }
        }
        if full_scan {
            let listed: Vec<String> = files.iter().map(|f| f.rel.clone()).collect();
            report.files_removed += self
                .with_conn(move |conn, _| remove_missing(conn, &listed))
                .await?;
            self.state().skipped = skipped;
        }
        if embedder_ready && let Err(e) = self.embed_pending(progress, report).await {
            report.embed_error = Some(e.to_string());
        }
        Ok(())
    }

    /// Embeds every chunk that has no vector yet, in batches.
    async fn embed_pending(
        &self,
        progress: Option<&(dyn Fn(Progress) + Send + Sync)>,
        report: &mut SyncReport,
    ) -> Result<(), MemoryError> {
        let Some(embedder) = self.inner.embedder.clone() else {
            return Ok(());
        };
        let total: usize = self
            .with_conn(|conn, _| {
                Ok(
                    conn.query_row("SELECT count(*) FROM chunks WHERE embedded = 0", [], |r| {
                        r.get::<_, i64>(0)
                    })? as usize,
                )
            })
            .await?;
        let batch_size = embedder.batch_size().max(1);
        let mut done = 0;
        while done < total {
            let pending: Vec<(i64, String, String)> = self
                .with_conn(move |conn, _| {
                    let mut stmt = conn.prepare(
                        "SELECT id, hash, text FROM chunks WHERE embedded = 0 ORDER BY id LIMIT ?1",
                    )?;
                    let rows = stmt
                        .query_map([batch_size as i64], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                        })?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(rows)
                })
                .await?;
            if pending.is_empty() {
                break;
            }
            let texts: Vec<String> = pending.iter().map(|(_, _, t)| t.clone()).collect();
            let vectors = embedder.embed(&texts).await?;
            if vectors.len() != pending.len() {
                return Err(MemoryError::Embed(crate::embed::EmbedError::Inference(
                    format!("{} vectors for {} texts", vectors.len(), pending.len()),
                )));
            }
            let id = embedder.id().clone();
            let n = pending.len();
            self.with_conn(move |conn, _| {
                let tx = conn.unchecked_transaction()?;
                for ((chunk, hash, _), vector) in pending.iter().zip(&vectors) {
                    let blob = db::vector_blob(vector);
                    tx.execute(
                        "INSERT OR REPLACE INTO embedding_cache (provider, model, hash, vector) VALUES (?1, ?2, ?3, ?4)",
                        params![id.provider, id.model, hash, blob],
                    )?;
                    tx.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [chunk])?;
                    db::insert_vector(&tx, *chunk, vector)?;
                    tx.execute("UPDATE chunks SET embedded = 1 WHERE id = ?1", [chunk])?;
                }
                tx.commit()?;
                Ok(())
            })
            .await?;
            done += n;
            report.chunks_embedded += n;
            if let Some(p) = progress {
                p(Progress::Embedding {
                    done: done.min(total),
                    total,
                });
            }
        }
        Ok(())
    }

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
                let _ = text_tx.send(text_leg(&reader, &text, candidates));
            });
        } else {
            drop(text_tx);
        }
        let hits = self
            .with_conn(move |conn, _| {
                let now_day = OffsetDateTime::now_utc().unix_timestamp() / 86_400;
                let vector_hits = match (&query_vector, &embedder_id) {
                    (Some(v), Some(id)) => Some(vector_candidates(conn, id, v, candidates)?),
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

    /// Lines `from..from+lines` (1-based) of a source file, read from disk;
    /// refuses paths that are not memory sources.
    pub fn get(
        &self,
        path: &str,
        from: Option<usize>,
        lines: Option<usize>,
    ) -> Result<(String, usize, usize), MemoryError> {
        let not_source = || MemoryError::NotASource(path.to_string());
        let abs = self
            .inner
            .sources
            .resolve(path.trim_start_matches("./"))
            .ok_or_else(not_source)?;
        let file = self.inner.sources.classify(&abs).ok_or_else(not_source)?;
        let text = self.inner.sources.read(&file).map_err(|source| {
            if source.kind() == std::io::ErrorKind::PermissionDenied {
                not_source()
            } else {
                MemoryError::Io {
                    path: path.to_string(),
                    source,
                }
            }
        })?;
        let all: Vec<&str> = text.lines().collect();
        let start = from.unwrap_or(1).max(1);
        let count = lines.unwrap_or(200).clamp(1, 2000);
        let end = (start + count - 1).min(all.len());
        if start > all.len() {
            return Ok((String::new(), start, start.saturating_sub(1)));
        }
        Ok((all[start - 1..end].join("\n"), start, end))
    }

    pub async fn status(&self) -> Result<IndexStatus, MemoryError> {
        let (files, chunks, embedded, dims) = self
            .with_conn(|conn, _| {
                let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
                let dims = db::meta(conn, "dimensions")?.and_then(|d| d.parse().ok());
                Ok((
                    count("SELECT count(*) FROM files")? as u64,
                    count("SELECT count(*) FROM chunks")? as u64,
                    count("SELECT count(*) FROM chunks WHERE embedded = 1")? as u64,
                    dims,
                ))
            })
            .await?;
        let vector_leg = self.vector_leg();
        let state = self.state();
        Ok(IndexStatus {
            agent: self.inner.agent.clone(),
            db_path: self.inner.db_path.clone(),
            files,
            chunks,
            embedded_chunks: embedded,
            dimensions: if vector_leg.is_on() { dims } else { None },
            vector_leg,
            last_sync: state.last_sync,
            last_error: state.last_error.clone(),
            skipped: state.skipped.clone(),
            watching: state.watching,
            watcher_error: state.watcher_error.clone(),
        })
    }
}

enum FileOutcome {
    Unchanged,
    Changed { chunks: usize, cache_hits: usize },
    Removed,
    Skipped(String),
}

#[derive(Default)]
struct FileCounts {
    changed: usize,
    removed: usize,
    chunks_added: usize,
    cache_hits: usize,
}

impl FileCounts {
    fn add(&mut self, outcome: FileOutcome) {
        match outcome {
            FileOutcome::Changed { chunks, cache_hits } => {
                self.changed += 1;
                self.chunks_added += chunks;
                self.cache_hits += cache_hits;
            }
            FileOutcome::Removed => self.removed += 1,
            FileOutcome::Unchanged | FileOutcome::Skipped(_) => {}
        }
    }
}

/// Brings one file's rows up to date, in one transaction.
fn sync_file(
    conn: &Connection,
    inner: &Inner,
    file: &SourceFile,
    cache_key: Option<&(String, String)>,
    forced: bool,
) -> Result<FileOutcome, MemoryError> {
    let meta = match std::fs::symlink_metadata(&file.abs) {
        Ok(m) if m.is_file() => m,
        _ => {
            return Ok(if delete_file(conn, &file.rel)? {
                FileOutcome::Removed
            } else {
                FileOutcome::Unchanged
            });
        }
    };
    if meta.len() > MAX_FILE_BYTES {
        delete_file(conn, &file.rel)?;
        return Ok(FileOutcome::Skipped(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES / 1024 / 1024
        )));
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    let size = meta.len() as i64;
    let known: Option<(i64, String, i64, i64)> = conn
        .query_row(
            "SELECT id, hash, mtime, size FROM files WHERE path = ?1",
            [&file.rel],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    if let Some((_, _, m, s)) = &known
        && *m == mtime
        && *s == size
        && !forced
    {
        return Ok(FileOutcome::Unchanged);
    }
    let text = match inner.sources.read(file) {
        Ok(t) => t,
        Err(e) => return Ok(FileOutcome::Skipped(format!("cannot read: {e}"))),
    };
    let hash = crate::chunk::text_hash(&text);
    if let Some((id, old_hash, _, _)) = &known
        && *old_hash == hash
    {
        conn.execute(
            "UPDATE files SET mtime = ?2, size = ?3 WHERE id = ?1",
            params![id, mtime, size],
        )?;
        return Ok(FileOutcome::Unchanged);
    }
    let chunks = chunk_markdown(&text, inner.settings.chunk);
    let tx = conn.unchecked_transaction()?;
    if let Some((id, ..)) = &known {
        delete_chunks(&tx, *id)?;
    }
    tx.execute(
        "INSERT INTO files (path, source, hash, mtime, size) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(path) DO UPDATE SET source = excluded.source, hash = excluded.hash,
             mtime = excluded.mtime, size = excluded.size",
        params![file.rel, file.kind.as_str(), hash, mtime, size],
    )?;
    let file_id: i64 = tx.query_row("SELECT id FROM files WHERE path = ?1", [&file.rel], |r| {
        r.get(0)
    })?;
    let mut cache_hits = 0;
    {
        let mut insert_chunk = tx.prepare_cached(
            "INSERT INTO chunks (file_id, start_line, end_line, text, hash, embedded) VALUES (?1, ?2, ?3, ?4, ?5, 0)",
        )?;
        let mut insert_fts =
            tx.prepare_cached("INSERT INTO chunks_fts (rowid, text) VALUES (?1, ?2)")?;
        let mut cached = tx.prepare_cached(
            "SELECT vector FROM embedding_cache WHERE provider = ?1 AND model = ?2 AND hash = ?3",
        )?;
        for chunk in &chunks {
            insert_chunk.execute(params![
                file_id,
                chunk.start_line as i64,
                chunk.end_line as i64,
                chunk.text,
                chunk.hash
            ])?;
            let chunk_id = tx.last_insert_rowid();
            insert_fts.execute(params![chunk_id, fts::index_text(&chunk.text)])?;
            if let Some((provider, model)) = cache_key {
                let vector: Option<Vec<u8>> = cached
                    .query_row(params![provider, model, chunk.hash], |r| r.get(0))
                    .optional()?;
                // A cache key means an embedder, so `chunks_vec` exists.
                if let Some(vector) = vector {
                    db::insert_vector(&tx, chunk_id, &db::blob_vector(&vector))?;
                    tx.execute("UPDATE chunks SET embedded = 1 WHERE id = ?1", [chunk_id])?;
                    cache_hits += 1;
                }
            }
        }
    }
    tx.commit()?;
    Ok(FileOutcome::Changed {
        chunks: chunks.len(),
        cache_hits,
    })
}

fn has_vector_table(conn: &Connection) -> Result<bool, MemoryError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'",
            [],
            |_| Ok(true),
        )
        .optional()?
        .unwrap_or(false))
}

fn delete_chunks(conn: &Connection, file_id: i64) -> Result<(), MemoryError> {
    let ids: Vec<i64> = conn
        .prepare_cached("SELECT id FROM chunks WHERE file_id = ?1")?
        .query_map([file_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let vectors = has_vector_table(conn)?;
    for id in &ids {
        conn.execute("DELETE FROM chunks_fts WHERE rowid = ?1", [id])?;
        if vectors {
            conn.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [id])?;
        }
    }
    conn.execute("DELETE FROM chunks WHERE file_id = ?1", [file_id])?;
    Ok(())
}

/// Forgets one file; true when it was indexed.
fn delete_file(conn: &Connection, rel: &str) -> Result<bool, MemoryError> {
    let id: Option<i64> = conn
        .query_row("SELECT id FROM files WHERE path = ?1", [rel], |r| r.get(0))
        .optional()?;
    let Some(id) = id else {
        return Ok(false);
    };
    let tx = conn.unchecked_transaction()?;
    delete_chunks(&tx, id)?;
    tx.execute("DELETE FROM files WHERE id = ?1", [id])?;
    tx.commit()?;
    Ok(true)
}

fn remove_missing(conn: &Connection, listed: &[String]) -> Result<usize, MemoryError> {
    let listed: std::collections::HashSet<&str> = listed.iter().map(String::as_str).collect();
    let known: Vec<String> = conn
        .prepare("SELECT path FROM files")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut removed = 0;
    for path in known.iter().filter(|p| !listed.contains(p.as_str())) {
        if delete_file(conn, path)? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// How many bit-scan candidates are re-scored by exact cosine per vector
/// candidate wanted: sign bits misorder close neighbours, rarely far ones.
/// At 8, 96 % of the exact top 6 are found on 3,000 chunks (16: 100 %, 4:
/// 90 %; `tests/index.rs`), for about 0.8 ms of re-scoring per 10k chunks.
const RESCORE_FACTOR: usize = 8;

/// The `k` chunks nearest to `query` by cosine: a Hamming scan of the sign
/// bits in `chunks_vec` for `k × RESCORE_FACTOR` candidates, re-scored with
/// their float vectors from the embedding cache.
fn vector_candidates(
    conn: &Connection,
    embedder: &EmbedderId,
    query: &[f32],
    k: usize,
) -> Result<Vec<(i64, f64)>, MemoryError> {
    if !has_vector_table(conn)? {
        return Ok(Vec::new());
    }
    // sqlite-vec answers at most 4096 neighbours per query.
    let coarse_k = (k * RESCORE_FACTOR).clamp(1, 4096);
    let mut knn = conn.prepare_cached(
        "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH vec_bit(?1) AND k = ?2 ORDER BY distance",
    )?;
    let coarse: Vec<(i64, f64)> = knn
        .query_map(params![db::binary_blob(query), coarse_k as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
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
            _ => db::cosine_from_hamming(hamming, bits),
        };
        scored.push((id, similarity));
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    Ok(scored)
}

/// Indexes smaller than this search every query term.
const PRUNE_FROM_CHUNKS: i64 = 2000;
/// A term in more than this share of the chunks is dropped from the query
/// when a rarer one is left: it hardly moves bm25 (its idf is under 1.4)
/// yet makes FTS5 score most of the index.
const COMMON_TERM_SHARE: f64 = 0.2;
/// Long queries (a pasted paragraph) keep their rarest terms.
const MAX_TERMS: usize = 12;

/// The query terms worth matching on a big index.
fn informative_terms(conn: &Connection, terms: Vec<String>) -> Result<Vec<String>, MemoryError> {
    let total: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
    if total < PRUNE_FROM_CHUNKS || terms.len() <= 1 {
        return Ok(terms);
    }
    let mut df = conn.prepare_cached("SELECT doc FROM chunks_fts_vocab WHERE term = ?1")?;
    let mut counted = Vec::with_capacity(terms.len());
    for term in terms {
        // A phrase (CJK pairs, quoted words) counts by its first token.
        let first = fts::index_text(&term)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_lowercase();
        let docs: i64 = df.query_row([first], |r| r.get(0)).optional()?.unwrap_or(0);
        counted.push((docs, term));
    }
    counted.sort_by_key(|(docs, _)| *docs);
    let limit = (total as f64 * COMMON_TERM_SHARE) as i64;
    let keep = counted
        .iter()
        .take(MAX_TERMS)
        .filter(|(docs, _)| *docs <= limit)
        .count()
        .max(1);
    Ok(counted.into_iter().take(keep).map(|(_, t)| t).collect())
}

fn text_candidates(
    conn: &Connection,
    expr: &str,
    k: usize,
) -> Result<Vec<(i64, f64)>, MemoryError> {
    let mut stmt = conn.prepare_cached(
        "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY bm25(chunks_fts) LIMIT ?2",
    )?;
    let rows = stmt
        .query_map(params![expr, k as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The full-text leg: bm25 over the informative query terms, normalised.
fn text_leg(conn: &Connection, text: &str, k: usize) -> Result<Vec<(i64, f64)>, MemoryError> {
    let terms = informative_terms(conn, fts::keywords(text))?;
    Ok(match fts::terms_expression(&terms) {
        Some(expr) => fuse::normalise_bm25(&text_candidates(conn, &expr, k)?),
        None => Vec::new(),
    })
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
