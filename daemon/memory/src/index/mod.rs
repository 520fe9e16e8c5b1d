//! [`MemoryIndex`]: one agent's index (SPEC §10), a cloneable handle.
//!
//! This file owns the handle: opening it, its two connections and the state
//! of its last sync, whether the vector leg is on ([`VectorLeg`]), what it
//! holds ([`IndexStatus`]), and reading a source file's lines
//! ([`MemoryIndex::get`]). Bringing it up to date with the files is
//! `sync.rs`'s, searching it is `search.rs`'s; both run their SQL on the
//! blocking pool through the handle's `with_conn`. The sign bits the vector
//! leg scans are held in memory by `bits.rs`, guarded with the connection.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension};

use crate::MemoryError;
use crate::chunk::ChunkSize;
use crate::db;
use crate::embed::Embedder;
use crate::sources::Sources;

mod bits;
mod search;
mod sync;
mod text;

pub use search::{Hit, Legs, Query, SearchOutcome, SearchSettings};
pub use sync::{Progress, Scope, SyncReport};

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
    /// The sign bits of `chunks_vec` in memory, for the vector leg; locked
    /// only by a holder of `conn`, whose writes it follows.
    bits: Mutex<bits::SignBits>,
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
                bits: Mutex::new(bits::SignBits::default()),
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

    /// Lets go of the index file's pages that searches read through
    /// mmap, on both connections ([`db::remap`]). The watcher calls it
    /// when the embedding model is unloaded, the moment a search's pages
    /// are known to be done with.
    pub async fn release_mapped_pages(&self) -> Result<(), MemoryError> {
        self.with_conn(|conn, inner| {
            db::remap(conn)?;
            let reader = inner.reader.lock().unwrap_or_else(|e| e.into_inner());
            db::remap(&reader)
        })
        .await
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
    /// `Inner::bits` may be locked inside, never the other way round.
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

impl Inner {
    /// The in-memory sign bits; lock only while holding `conn`.
    fn bits(&self) -> std::sync::MutexGuard<'_, bits::SignBits> {
        self.bits.lock().unwrap_or_else(|e| e.into_inner())
    }
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
