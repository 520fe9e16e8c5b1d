//! The index database of one agent (SPEC §10): opening it, its schema and
//! migrations, the `meta` table, and the `chunks_vec` table whose dimension
//! follows the embedder.
//!
//! `chunks_vec` holds each vector binary-quantised (one sign bit per
//! dimension, `bit[n]`, Hamming distance): sqlite-vec's float cosine scan
//! alone took 5.7 ms for 10k × 384-d on the reference machine, over the whole
//! search budget, while the bit scan is a popcount per 64 dimensions. It is
//! the durable store of the bits; the search scans a copy held in memory
//! (`index::bits`). The float vectors stay in `embedding_cache`, and the
//! search re-scores the bit scan's best candidates by exact cosine
//! (`index::search::vector_candidates`).
//!
//! `embedding_cache` is an ordinary rowid table with a unique key: a
//! `WITHOUT ROWID` table keeps each row in its key's B-tree, where a
//! 1.5 KB vector cannot fit (it overflowed to a page of its own and left a
//! few entries per interior page), so the 192 reads of a search's
//! re-scoring cost about twice as much; [`upgrade_embedding_cache`]
//! rewrites a file made with that layout, keeping its vectors.
//!
//! sqlite-vec is compiled into the binary and registered once per process
//! as an auto-extension, so every connection opened afterwards has `vec0`.

use std::path::Path;
use std::sync::Once;

use rusqlite::{Connection, OptionalExtension, params};

use crate::MemoryError;

/// Bumped when the tables below change shape; an index written by another
/// version is rebuilt from the sources (it holds nothing that is not there).
pub const SCHEMA_VERSION: i64 = 2;

/// The embedding cache's columns, shared by [`SCHEMA`] and
/// [`upgrade_embedding_cache`], which makes the same table under another
/// name and so must not drift from it.
macro_rules! embedding_cache_columns {
    () => {
        "
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    UNIQUE (provider, model, hash)
"
    };
}

const SCHEMA: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    hash TEXT NOT NULL,
    mtime INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    hash TEXT NOT NULL,
    embedded INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_unembedded ON chunks(embedded) WHERE embedded = 0;
CREATE TABLE IF NOT EXISTS embedding_cache (",
    embedding_cache_columns!(),
    ");
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab(chunks_fts, 'row');
"
);

/// Registers sqlite-vec with SQLite for every later connection.
pub fn register_sqlite_vec() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_vec_init` has the signature SQLite expects of an
        // extension entry point; the transmute only erases it to the
        // `Option<unsafe extern "C" fn()>` that `sqlite3_auto_extension` takes.
        unsafe {
            type Entry = unsafe extern "C" fn(
                *mut rusqlite::ffi::sqlite3,
                *mut *mut std::os::raw::c_char,
                *const rusqlite::ffi::sqlite3_api_routines,
            ) -> std::os::raw::c_int;
            let entry: Entry = std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
            rusqlite::ffi::sqlite3_auto_extension(Some(entry));
        }
    });
}

/// How much of the index file SQLite reads through mmap (all of it).
const MMAP_SIZE: u64 = 1 << 30;

/// Per-connection settings, for the writer and the reader alike: wait for
/// a lock instead of failing, a small page cache, reads through mmap.
fn connection_pragmas() -> String {
    format!(
        "PRAGMA busy_timeout = 5000; PRAGMA cache_size = -2000; PRAGMA mmap_size = {MMAP_SIZE};"
    )
}

/// Maps the file afresh: every page a search read through the mapping
/// stays counted in the process's RSS (27.8 MB of a 10k-chunk index's 44
/// MB after one search with the local model, measured with
/// `pincer-idle-rss`) until the mapping goes. A changed `mmap_size` makes
/// SQLite unmap the file; the next read maps it again, empty. The pages
/// stay in the page cache. Run between statements (SQLite keeps the
/// mapping while a statement holds a page of it).
pub fn remap(conn: &Connection) -> Result<(), MemoryError> {
    conn.execute_batch(&format!(
        "PRAGMA mmap_size = 0; PRAGMA mmap_size = {MMAP_SIZE};"
    ))?;
    Ok(())
}

/// Opens (creating when missing) the index at `path` with its tables.
pub fn open(path: &Path) -> Result<Connection, MemoryError> {
    register_sqlite_vec();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| MemoryError::Io {
            path: dir.display().to_string(),
            source,
        })?;
    }
    let conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
    )?;
    conn.execute_batch(&connection_pragmas())?;
    let version: Option<i64> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get::<_, String>(0),
        )
        .optional()
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok());
    if version.is_some_and(|v| v != SCHEMA_VERSION) {
        tracing::warn!(
            index = %path.display(),
            found = ?version,
            wanted = SCHEMA_VERSION,
            "memory index written by another version; rebuilding it from the sources"
        );
        drop_all(&conn)?;
    }
    conn.execute_batch(SCHEMA)?;
    set_meta(&conn, "schema_version", &SCHEMA_VERSION.to_string())?;
    Ok(conn)
}

/// A second connection to an index [`open`] has set up, for reads only.
pub fn open_reader(path: &Path) -> Result<Connection, MemoryError> {
    let conn = Connection::open(path)?;
    conn.execute_batch(&connection_pragmas())?;
    Ok(conn)
}

/// Rewrites an embedding cache of the first layout (`WITHOUT ROWID`) as a
/// rowid table, its vectors kept (each costs a model run to make again);
/// true when it did. Run by a sync, not by [`open`]: one transaction of
/// about 0.6 s per 10k vectors that the daemon's start does not wait for.
/// Both layouts answer the same SQL, so searches work before it ran.
pub fn upgrade_embedding_cache(conn: &Connection) -> Result<bool, MemoryError> {
    let sql: Option<String> = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'embedding_cache'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if !sql.is_some_and(|sql| sql.to_ascii_uppercase().contains("WITHOUT ROWID")) {
        return Ok(false);
    }
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(concat!(
        "CREATE TABLE embedding_cache_3 (",
        embedding_cache_columns!(),
        ");
         INSERT INTO embedding_cache_3 (provider, model, hash, vector)
             SELECT provider, model, hash, vector FROM embedding_cache;
         DROP TABLE embedding_cache;
         ALTER TABLE embedding_cache_3 RENAME TO embedding_cache;"
    ))?;
    tx.commit()?;
    Ok(true)
}

fn drop_all(conn: &Connection) -> Result<(), MemoryError> {
    conn.execute_batch(
        "DROP TABLE IF EXISTS chunks_vec; DROP TABLE IF EXISTS chunks_fts_vocab; DROP TABLE IF EXISTS chunks_fts;
         DROP TABLE IF EXISTS chunks; DROP TABLE IF EXISTS files;
         DROP TABLE IF EXISTS embedding_cache; DROP TABLE IF EXISTS meta;",
    )?;
    Ok(())
}

pub fn meta(conn: &Connection, key: &str) -> Result<Option<String>, MemoryError> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?)
}

pub fn set_meta(conn: &Connection, key: &str, value: &str) -> Result<(), MemoryError> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

/// What [`ensure_vector_table`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorTable {
    /// It fitted already.
    Kept,
    /// It was made for the first embedder.
    Created,
    /// The vectors of another embedder or dimension were dropped: every
    /// chunk must be embedded again.
    Rebuilt,
}

/// Makes `chunks_vec` fit the embedder `identity` with `dims` dimensions.
pub fn ensure_vector_table(
    conn: &Connection,
    identity: &str,
    dims: usize,
) -> Result<VectorTable, MemoryError> {
    let current = meta(conn, "embedder")?;
    let current_dims = meta(conn, "dimensions")?;
    let exists: bool = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'",
            [],
            |_| Ok(true),
        )
        .optional()?
        .unwrap_or(false);
    let same = current.as_deref() == Some(identity)
        && current_dims.as_deref() == Some(&dims.to_string())
        && exists;
    if same {
        return Ok(VectorTable::Kept);
    }
    conn.execute_batch("DROP TABLE IF EXISTS chunks_vec; UPDATE chunks SET embedded = 0;")?;
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding bit[{}])",
        bit_dimensions(dims)
    ))?;
    set_meta(conn, "embedder", identity)?;
    set_meta(conn, "dimensions", &dims.to_string())?;
    Ok(if current.is_some() {
        VectorTable::Rebuilt
    } else {
        VectorTable::Created
    })
}

/// Forgets the vectors when no embedder is configured (full-text only).
pub fn drop_vector_table(conn: &Connection) -> Result<(), MemoryError> {
    conn.execute_batch(
        "DROP TABLE IF EXISTS chunks_vec; UPDATE chunks SET embedded = 0;
         DELETE FROM meta WHERE key IN ('embedder', 'dimensions');",
    )?;
    Ok(())
}

/// Stores `vector`'s sign bits as the `chunks_vec` row of chunk `rowid`;
/// returns the bits stored.
pub fn insert_vector(
    conn: &Connection,
    rowid: i64,
    vector: &[f32],
) -> Result<Vec<u8>, MemoryError> {
    let bits = binary_blob(vector);
    conn.prepare_cached("INSERT INTO chunks_vec (rowid, embedding) VALUES (?1, vec_bit(?2))")?
        .execute(params![rowid, bits])?;
    Ok(bits)
}

/// Bits per quantised vector: `dims` rounded up to whole bytes (the padding
/// bits are 0 in every vector, so they never add to a distance).
pub fn bit_dimensions(dims: usize) -> usize {
    dims.div_ceil(8) * 8
}

/// The sign bits of `vector`, least significant bit first, as `vec_bit()`
/// takes them.
pub fn binary_blob(vector: &[f32]) -> Vec<u8> {
    let mut bits = vec![0u8; vector.len().div_ceil(8)];
    for (i, x) in vector.iter().enumerate() {
        if *x > 0.0 {
            bits[i / 8] |= 1 << (i % 8);
        }
    }
    bits
}

/// The cosine similarity that a Hamming distance between sign bits
/// estimates (random-hyperplane LSH), for a vector whose float copy is gone.
pub fn cosine_from_hamming(distance: f64, bits: usize) -> f64 {
    (std::f64::consts::PI * distance / bits.max(1) as f64).cos()
}

/// A vector as the embedding cache stores it: little-endian f32.
pub fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn blob_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec0_is_registered_and_knn_uses_hamming_on_sign_bits() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("m.db")).unwrap();
        assert_eq!(
            ensure_vector_table(&conn, "test/model", 12).unwrap(),
            VectorTable::Created
        );
        let near = [
            1.0f32, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0,
        ];
        let half = [
            1.0f32, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0,
        ];
        let far = [-1.0f32; 12];
        for (id, v) in [(1, near), (2, far), (3, half)] {
            insert_vector(&conn, id, &v).unwrap();
        }
        let mut stmt = conn
            .prepare("SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH vec_bit(?1) AND k = 2 ORDER BY distance")
            .unwrap();
        let hits: Vec<(i64, f64)> = stmt
            .query_map([binary_blob(&[1.0; 12])], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(hits, vec![(1, 1.0), (3, 6.0)]);
    }

    #[test]
    fn sign_bits_are_packed_least_significant_first() {
        assert_eq!(
            binary_blob(&[1.0, -1.0, 0.5, 0.0, -0.1, 2.0, 0.0, 0.0, 3.0]),
            vec![0b0010_0101, 0b1]
        );
        assert_eq!(bit_dimensions(384), 384);
        assert_eq!(bit_dimensions(12), 16);
        assert!((cosine_from_hamming(0.0, 384) - 1.0).abs() < 1e-9);
        assert!(cosine_from_hamming(192.0, 384).abs() < 1e-9);
    }

    #[test]
    fn a_new_embedder_or_dimension_rebuilds_the_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("m.db")).unwrap();
        let ensure = |id, dims| ensure_vector_table(&conn, id, dims).unwrap();
        assert_eq!(ensure("a/m", 3), VectorTable::Created);
        assert_eq!(ensure("a/m", 3), VectorTable::Kept);
        assert_eq!(ensure("a/m", 4), VectorTable::Rebuilt);
        assert_eq!(ensure("b/m", 4), VectorTable::Rebuilt);
        assert_eq!(meta(&conn, "embedder").unwrap().as_deref(), Some("b/m"));
        assert_eq!(meta(&conn, "dimensions").unwrap().as_deref(), Some("4"));
    }

    #[test]
    fn an_embedding_cache_of_the_first_layout_is_rewritten_with_its_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&SCHEMA.replace(
                "id INTEGER PRIMARY KEY,\n    provider TEXT NOT NULL,\n    model TEXT NOT NULL,\n    hash TEXT NOT NULL,\n    vector BLOB NOT NULL,\n    UNIQUE (provider, model, hash)\n);",
                "provider TEXT NOT NULL,\n    model TEXT NOT NULL,\n    hash TEXT NOT NULL,\n    vector BLOB NOT NULL,\n    PRIMARY KEY (provider, model, hash)\n) WITHOUT ROWID;",
            ))
            .unwrap();
            let sql: String = conn
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE name = 'embedding_cache'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(sql.contains("WITHOUT ROWID"), "the first layout: {sql}");
            conn.execute_batch(
                "INSERT INTO files (path, source, hash, mtime, size) VALUES ('a', 'memory', 'h', 0, 0);
                 INSERT INTO embedding_cache VALUES ('local', 'm', 'h1', x'0000803f');
                 INSERT INTO meta VALUES ('schema_version', '2');",
            )
            .unwrap();
        }
        let conn = open(&path).unwrap();
        assert!(upgrade_embedding_cache(&conn).unwrap());
        assert!(!upgrade_embedding_cache(&conn).unwrap(), "once");
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(count("SELECT count(*) FROM files"), 1);
        let vector: Vec<u8> = conn
            .query_row(
                "SELECT vector FROM embedding_cache WHERE provider = 'local' AND model = 'm' AND hash = 'h1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(blob_vector(&vector), vec![1.0]);
        assert_eq!(
            count("SELECT id FROM embedding_cache"),
            1,
            "a rowid table now"
        );
        // The unique key still replaces a vector of the same text.
        conn.execute(
            "INSERT OR REPLACE INTO embedding_cache (provider, model, hash, vector) VALUES ('local', 'm', 'h1', x'00000040')",
            [],
        )
        .unwrap();
        assert_eq!(count("SELECT count(*) FROM embedding_cache"), 1);
    }

    #[test]
    fn an_index_of_another_schema_version_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        {
            let conn = open(&path).unwrap();
            conn.execute(
                "INSERT INTO files (path, source, hash, mtime, size) VALUES ('a', 'memory', 'h', 0, 0)",
                [],
            )
            .unwrap();
            set_meta(&conn, "schema_version", "0").unwrap();
        }
        let conn = open(&path).unwrap();
        let files: i64 = conn
            .query_row("SELECT count(*) FROM files", [], |r| r.get(0))
            .unwrap();
        assert_eq!(files, 0);
    }
}
