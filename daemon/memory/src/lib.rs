//! Long-term memory of pincer agents (SPEC §10).
//!
//! One [`MemoryIndex`] per agent: a SQLite file with the chunks of the
//! agent's notes ([`sources`], cut by [`chunk`]), a full-text table (FTS5,
//! [`fts`]) and a vector table (sqlite-vec, [`db`]) filled by an
//! [`embed::Embedder`]. [`MemoryIndex::search`] runs both legs and merges
//! them ([`fuse`]); [`watch`] keeps the index fresh from file events and a
//! periodic reconcile scan.
//!
//! The crate knows nothing of the daemon: it is given paths, settings and
//! an embedder, and the daemon wires it to config, tools and gRPC.

pub mod chunk;
pub mod db;
pub mod embed;
pub mod fts;
pub mod fuse;
pub mod index;
pub mod sources;
pub mod watch;

pub use embed::{EmbedError, Embedder, EmbedderId};
pub use index::{
    Hit, IndexSettings, IndexStatus, Legs, MemoryIndex, Progress, Query, Scope, SearchOutcome,
    SearchSettings, SyncReport, VectorLeg,
};
pub use sources::Sources;

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("memory index: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("`{0}` is not a memory file (MEMORY.md, memory/**/*.md or a configured source)")]
    NotASource(String),
    #[error("memory task failed: {0}")]
    Task(String),
}
