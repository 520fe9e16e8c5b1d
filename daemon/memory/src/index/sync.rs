//! Syncing files into a [`MemoryIndex`]: [`MemoryIndex::sync`] over a
//! [`Scope`], [`MemoryIndex::clear`], and embedding the chunks that have no
//! vector yet.
//!
//! Syncing is incremental: a file whose size and mtime are unchanged is not
//! read, a file whose hash is unchanged is not re-chunked, and a chunk is
//! embedded only when the embedding cache has no vector for its hash. Each
//! file is replaced in one transaction, so a crash mid-sync leaves the
//! previous state of that file, and the next sync finishes the work.
//! Full-text rows are written with the chunks, so new text is searchable
//! before its vectors exist. Every write to `chunks_vec` is recorded in a
//! `BitChanges` and applied to the in-memory sign bits once its transaction
//! has committed, under the same lock of the connection.

use std::path::PathBuf;
use std::time::{Instant, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use time::OffsetDateTime;

use super::bits::BitChanges;
use super::{Inner, MemoryIndex, has_vector_table};
use crate::MemoryError;
use crate::chunk::chunk_markdown;
use crate::db;
use crate::fts;
use crate::sources::{MAX_FILE_BYTES, SourceFile};

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

impl MemoryIndex {
    /// Forgets every file and chunk (the embedding cache stays, so a
    /// rebuild embeds only texts it has never seen); the next sync builds
    /// the index again from the files.
    pub async fn clear(&self) -> Result<(), MemoryError> {
        let _one_at_a_time = self.inner.sync_lock.lock().await;
        self.with_conn(|conn, inner| {
            let tx = conn.unchecked_transaction()?;
            let mut changes = BitChanges::default();
            tx.execute("DELETE FROM chunks_fts", [])?;
            if has_vector_table(&tx)? {
                tx.execute("DELETE FROM chunks_vec", [])?;
                changes.clear();
            }
            tx.execute("DELETE FROM chunks", [])?;
            tx.execute("DELETE FROM files", [])?;
            tx.commit()?;
            inner.bits().apply(changes);
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
        if self
            .with_conn(|conn, _| db::upgrade_embedding_cache(conn))
            .await?
        {
            tracing::info!(
                agent = %self.inner.agent,
                "memory index: the embedding cache was rewritten in its faster layout (once)"
            );
        }
        // The vector table must fit the embedder before chunks use it.
        let mut embedder_ready = false;
        if let Some(embedder) = self.inner.embedder.clone() {
            match embedder.dimensions().await {
                Ok(dims) => {
                    let id = embedder.id().to_string();
                    let rebuilt = self
                        .with_conn(move |conn, inner| {
                            let table = db::ensure_vector_table(conn, &id, dims)?;
                            if table != db::VectorTable::Kept {
                                inner.bits().invalidate();
                            }
                            Ok(table == db::VectorTable::Rebuilt)
                        })
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
                .with_conn(move |conn, inner| remove_missing(conn, inner, &listed))
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
            self.with_conn(move |conn, inner| {
                let tx = conn.unchecked_transaction()?;
                let mut changes = BitChanges::default();
                for ((chunk, hash, _), vector) in pending.iter().zip(&vectors) {
                    let blob = db::vector_blob(vector);
                    tx.execute(
                        "INSERT OR REPLACE INTO embedding_cache (provider, model, hash, vector) VALUES (?1, ?2, ?3, ?4)",
                        params![id.provider, id.model, hash, blob],
                    )?;
                    tx.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [chunk])?;
                    changes.insert(*chunk, db::insert_vector(&tx, *chunk, vector)?);
                    tx.execute("UPDATE chunks SET embedded = 1 WHERE id = ?1", [chunk])?;
                }
                tx.commit()?;
                inner.bits().apply(changes);
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
            return Ok(if delete_file(conn, inner, &file.rel)? {
                FileOutcome::Removed
            } else {
                FileOutcome::Unchanged
            });
        }
    };
    if meta.len() > MAX_FILE_BYTES {
        delete_file(conn, inner, &file.rel)?;
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
    let mut changes = BitChanges::default();
    if let Some((id, ..)) = &known {
        delete_chunks(&tx, *id, &mut changes)?;
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
                    let bits = db::insert_vector(&tx, chunk_id, &db::blob_vector(&vector))?;
                    changes.insert(chunk_id, bits);
                    tx.execute("UPDATE chunks SET embedded = 1 WHERE id = ?1", [chunk_id])?;
                    cache_hits += 1;
                }
            }
        }
    }
    tx.commit()?;
    inner.bits().apply(changes);
    Ok(FileOutcome::Changed {
        chunks: chunks.len(),
        cache_hits,
    })
}

fn delete_chunks(
    conn: &Connection,
    file_id: i64,
    changes: &mut BitChanges,
) -> Result<(), MemoryError> {
    let ids: Vec<i64> = conn
        .prepare_cached("SELECT id FROM chunks WHERE file_id = ?1")?
        .query_map([file_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let vectors = has_vector_table(conn)?;
    for id in &ids {
        conn.execute("DELETE FROM chunks_fts WHERE rowid = ?1", [id])?;
        if vectors {
            conn.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [id])?;
            changes.remove(*id);
        }
    }
    conn.execute("DELETE FROM chunks WHERE file_id = ?1", [file_id])?;
    Ok(())
}

/// Forgets one file; true when it was indexed.
fn delete_file(conn: &Connection, inner: &Inner, rel: &str) -> Result<bool, MemoryError> {
    let id: Option<i64> = conn
        .query_row("SELECT id FROM files WHERE path = ?1", [rel], |r| r.get(0))
        .optional()?;
    let Some(id) = id else {
        return Ok(false);
    };
    let tx = conn.unchecked_transaction()?;
    let mut changes = BitChanges::default();
    delete_chunks(&tx, id, &mut changes)?;
    tx.execute("DELETE FROM files WHERE id = ?1", [id])?;
    tx.commit()?;
    inner.bits().apply(changes);
    Ok(true)
}

fn remove_missing(
    conn: &Connection,
    inner: &Inner,
    listed: &[String],
) -> Result<usize, MemoryError> {
    let listed: std::collections::HashSet<&str> = listed.iter().map(String::as_str).collect();
    let known: Vec<String> = conn
        .prepare("SELECT path FROM files")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut removed = 0;
    for path in known.iter().filter(|p| !listed.contains(p.as_str())) {
        if delete_file(conn, inner, path)? {
            removed += 1;
        }
    }
    Ok(removed)
}
