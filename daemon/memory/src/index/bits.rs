//! The vector leg's coarse scan (SPEC §10): every chunk's sign bits held in
//! memory, scanned by popcount.
//!
//! `chunks_vec` (sqlite-vec) stays the durable store of the sign bits, but
//! its KNN picks each neighbour with a pass over every 1,024-row chunk
//! (`min_idx`: k × rows per chunk), which took 4–5 ms for 192 neighbours
//! of 10k chunks, while a popcount of the same 48 bytes per chunk held in
//! memory takes about 0.1 ms (`benches/parts`). [`SignBits`] is that copy:
//!
//! - loaded on the first vector search, not when the index opens (the
//!   daemon's start stays as it was), from `chunks_vec`'s own tables in a
//!   few reads (sqlite-vec's row-by-row scan costs 3 µs per row), checked
//!   against the rows sqlite-vec counts, else read through sqlite-vec;
//! - kept in step with every write the index makes: a write records its
//!   changes in [`BitChanges`], applied once its transaction has committed
//!   (a rolled-back write changes nothing), all under the connection's lock;
//! - reloaded when another connection wrote the file (`PRAGMA
//!   data_version` moves only for commits by other connections: another
//!   handle on the same file, another process).
//!
//! Memory: `8 + ⌈bits/64⌉ × 8` bytes per embedded chunk, 56 bytes for
//! 384-d: 0.56 MB for 10k chunks, 5.6 MB for 100k.

use std::collections::{BTreeMap, BinaryHeap};

use rusqlite::Connection;

use crate::MemoryError;

/// Writes to `chunks_vec` made in one transaction, for [`SignBits::apply`]
/// once it committed.
#[derive(Debug, Default)]
pub(crate) struct BitChanges {
    cleared: bool,
    /// The last write per chunk: its sign bits, or `None` when deleted.
    rows: BTreeMap<i64, Option<Vec<u8>>>,
}

impl BitChanges {
    pub fn insert(&mut self, id: i64, bits: Vec<u8>) {
        self.rows.insert(id, Some(bits));
    }

    pub fn remove(&mut self, id: i64) {
        self.rows.insert(id, None);
    }

    /// Every row was deleted.
    pub fn clear(&mut self) {
        self.cleared = true;
        self.rows.clear();
    }
}

/// The in-memory copy of `chunks_vec`, or nothing until a search needs it.
#[derive(Default)]
pub(crate) struct SignBits {
    loaded: Option<Loaded>,
}

struct Loaded {
    /// `PRAGMA data_version` when this copy was read.
    data_version: i64,
    /// Bytes of one vector's bits as sqlite-vec stores them; 0 while empty.
    bytes: usize,
    /// Chunk ids, ascending; `words` holds each one's bits at the same
    /// position, `bytes` rounded up to whole u64 words, zero-padded.
    ids: Vec<i64>,
    words: Vec<u64>,
}

impl Loaded {
    fn per(&self) -> usize {
        self.bytes.div_ceil(8)
    }

    fn push(&mut self, id: i64, bits: &[u8]) {
        let per = self.per();
        self.ids.push(id);
        let start = self.words.len();
        self.words.resize(start + per, 0);
        pack_into(bits, &mut self.words[start..]);
    }
}

fn pack_into(bits: &[u8], out: &mut [u64]) {
    for (i, b) in bits.iter().enumerate() {
        out[i / 8] |= u64::from(*b) << (8 * (i % 8));
    }
}

impl SignBits {
    /// Forgets the copy; the next search reads it again.
    pub fn invalidate(&mut self) {
        self.loaded = None;
    }

    /// Applies a committed transaction's writes to the copy, if there is one.
    pub fn apply(&mut self, changes: BitChanges) {
        let Some(set) = self.loaded.as_mut() else {
            return;
        };
        if changes.cleared {
            set.ids.clear();
            set.words.clear();
        }
        if changes.rows.is_empty() {
            return;
        }
        let fits = |b: &Option<Vec<u8>>| {
            b.as_ref()
                .is_none_or(|b| set.bytes == 0 || b.len() == set.bytes)
        };
        if !changes.rows.values().all(fits) {
            // Bits of another width than the table's: not a state sqlite-vec
            // allows, so read the table again rather than guess.
            self.loaded = None;
            return;
        }
        if set.bytes == 0 {
            set.bytes = changes
                .rows
                .values()
                .flatten()
                .map(Vec::len)
                .next()
                .unwrap_or(0);
        }
        let appends_only = changes.rows.values().all(Option::is_some)
            && set
                .ids
                .last()
                .is_none_or(|last| changes.rows.keys().next().is_some_and(|first| first > last));
        if appends_only {
            for (id, bits) in &changes.rows {
                if let Some(bits) = bits {
                    set.push(*id, bits);
                }
            }
            return;
        }
        // One merge pass of the sorted ids with the sorted changes.
        let per = set.per();
        let mut merged = Loaded {
            data_version: set.data_version,
            bytes: set.bytes,
            ids: Vec::with_capacity(set.ids.len() + changes.rows.len()),
            words: Vec::with_capacity(set.words.len() + changes.rows.len() * per),
        };
        let mut old = set
            .ids
            .iter()
            .zip(set.words.chunks_exact(per.max(1)))
            .peekable();
        for (id, bits) in &changes.rows {
            while let Some((old_id, old_words)) = old.next_if(|(old_id, _)| *old_id < id) {
                merged.ids.push(*old_id);
                merged.words.extend_from_slice(old_words);
            }
            old.next_if(|(old_id, _)| *old_id == id);
            if let Some(bits) = bits {
                merged.push(*id, bits);
            }
        }
        for (old_id, old_words) in old {
            merged.ids.push(*old_id);
            merged.words.extend_from_slice(old_words);
        }
        *set = merged;
    }

    /// The `k` chunks whose sign bits are nearest to `query` (sqlite-vec's
    /// `vec_bit` layout) by Hamming distance, nearest first, ties by id.
    pub fn nearest(
        &mut self,
        conn: &Connection,
        query: &[u8],
        k: usize,
    ) -> Result<Vec<(i64, u32)>, MemoryError> {
        let version = data_version(conn)?;
        if self
            .loaded
            .as_ref()
            .is_none_or(|l| l.data_version != version)
        {
            self.loaded = Some(load(conn, version)?);
        }
        let Some(set) = &self.loaded else {
            return Ok(Vec::new());
        };
        if set.ids.is_empty() || query.len() != set.bytes || k == 0 {
            return Ok(Vec::new());
        }
        let mut q = vec![0u64; set.per()];
        pack_into(query, &mut q);
        Ok(scan(&set.ids, &set.words, &q, k))
    }
}

fn data_version(conn: &Connection) -> Result<i64, MemoryError> {
    Ok(conn.query_row("PRAGMA data_version", [], |r| r.get(0))?)
}

/// Reads every row of `chunks_vec`: from its chunk tables when they hold
/// what sqlite-vec says they hold, else through sqlite-vec row by row.
fn load(conn: &Connection, data_version: i64) -> Result<Loaded, MemoryError> {
    let mut set = Loaded {
        data_version,
        bytes: 0,
        ids: Vec::new(),
        words: Vec::new(),
    };
    let rows = match from_chunk_tables(conn) {
        Some(rows) => rows,
        None => through_sqlite_vec(conn)?,
    };
    set.bytes = rows.first().map(|(_, b)| b.len()).unwrap_or(0);
    for (id, bits) in &rows {
        if bits.len() == set.bytes {
            set.push(*id, bits);
        }
    }
    Ok(set)
}

type Rows = Vec<(i64, Vec<u8>)>;

fn through_sqlite_vec(conn: &Connection) -> Result<Rows, MemoryError> {
    let exists: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'chunks_vec'",
        [],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare("SELECT rowid, embedding FROM chunks_vec ORDER BY rowid")?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// sqlite-vec keeps the vectors in blobs of `size` slots
/// (`chunks_vec_vector_chunks00`), with each chunk's slot validity bitmap
/// and rowids (native-endian i64) in `chunks_vec_chunks`. `None` when any
/// of that does not hold or the count differs from `chunks_vec_rowids`'s.
fn from_chunk_tables(conn: &Connection) -> Option<Rows> {
    let mut stmt = conn
        .prepare(
            "SELECT c.size, c.validity, c.rowids, v.vectors FROM chunks_vec_chunks c
               JOIN chunks_vec_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id",
        )
        .ok()?;
    let mut cursor = stmt.query([]).ok()?;
    let mut rows = Vec::new();
    while let Some(row) = cursor.next().ok()? {
        let size = usize::try_from(row.get::<_, i64>(0).ok()?).ok()?;
        let validity = row.get_ref(1).ok()?.as_blob().ok()?;
        let rowids = row.get_ref(2).ok()?.as_blob().ok()?;
        let vectors = row.get_ref(3).ok()?.as_blob().ok()?;
        if size == 0 || validity.len() * 8 < size || rowids.len() != size * 8 {
            return None;
        }
        if vectors.len() % size != 0 {
            return None;
        }
        let bytes = vectors.len() / size;
        for slot in 0..size {
            if validity[slot / 8] & (1 << (slot % 8)) == 0 {
                continue;
            }
            let id = i64::from_ne_bytes(rowids[slot * 8..slot * 8 + 8].try_into().ok()?);
            rows.push((id, vectors[slot * bytes..(slot + 1) * bytes].to_vec()));
        }
    }
    let counted: i64 = conn
        .query_row("SELECT count(*) FROM chunks_vec_rowids", [], |r| r.get(0))
        .ok()?;
    if usize::try_from(counted).ok()? != rows.len() {
        return None;
    }
    rows.sort_unstable_by_key(|(id, _)| *id);
    Some(rows)
}

/// The `k` nearest rows by Hamming distance, ties by id (rows are in id
/// order, so a later row never displaces an equal one).
fn scan(ids: &[i64], words: &[u64], q: &[u64], k: usize) -> Vec<(i64, u32)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has the `popcnt` instruction, checked just above.
        return unsafe { scan_popcnt(ids, words, q, k) };
    }
    scan_portable(ids, words, q, k)
}

/// The same loop compiled with the `popcnt` instruction (twice as fast at
/// 100k chunks as the portable bit-twiddling count).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn scan_popcnt(ids: &[i64], words: &[u64], q: &[u64], k: usize) -> Vec<(i64, u32)> {
    scan_portable(ids, words, q, k)
}

#[inline(always)]
fn scan_portable(ids: &[i64], words: &[u64], q: &[u64], k: usize) -> Vec<(i64, u32)> {
    let mut heap: BinaryHeap<(u32, i64)> = BinaryHeap::with_capacity(k + 1);
    let mut worst = u32::MAX;
    let mut consider = |d: u32, id: i64| {
        if d < worst {
            heap.push((d, id));
            if heap.len() > k {
                heap.pop();
            }
            if heap.len() == k {
                worst = heap.peek().map_or(u32::MAX, |top| top.0);
            }
        }
    };
    if let [q0, q1, q2, q3, q4, q5] = *q {
        // 384-d, the default models' size: a fixed count the compiler unrolls.
        for (row, &id) in words.chunks_exact(6).zip(ids) {
            let d = (row[0] ^ q0).count_ones()
                + (row[1] ^ q1).count_ones()
                + (row[2] ^ q2).count_ones()
                + (row[3] ^ q3).count_ones()
                + (row[4] ^ q4).count_ones()
                + (row[5] ^ q5).count_ones();
            consider(d, id);
        }
    } else {
        // Plain loops: an iterator chain's `fold` may be left out of line,
        // and then it is not compiled with `popcnt`.
        for (row, &id) in words.chunks_exact(q.len()).zip(ids) {
            let mut d = 0;
            for j in 0..q.len() {
                d += (row[j] ^ q[j]).count_ones();
            }
            consider(d, id);
        }
    }
    heap.into_sorted_vec()
        .into_iter()
        .map(|(d, id)| (id, d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db;

    /// A vector of `dims` values ±1 from a seed.
    fn vector(seed: u64, dims: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..dims)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x & 1 == 0 { 1.0 } else { -1.0 }
            })
            .collect()
    }

    fn table(dims: usize, rows: i64) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = db::open(&dir.path().join("m.db")).unwrap();
        db::ensure_vector_table(&conn, "test/m", dims).unwrap();
        for id in 1..=rows {
            db::insert_vector(&conn, id, &vector(id as u64, dims)).unwrap();
        }
        (dir, conn)
    }

    fn sqlite_vec_knn(conn: &Connection, query: &[u8], k: usize) -> Vec<(i64, u32)> {
        conn.prepare("SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH vec_bit(?1) AND k = ?2 ORDER BY distance")
            .unwrap()
            .query_map(rusqlite::params![query, k as i64], |r| Ok((r.get(0)?, r.get::<_, f64>(1)? as u32)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The same distances as sqlite-vec's KNN, rank for rank (which of
    /// equally distant rows comes first is sqlite-vec's slot order there,
    /// the id here), for 384-d and for a width that is not whole words.
    #[test]
    fn the_scan_finds_what_sqlite_vec_finds() {
        for dims in [384, 100] {
            // More than one of sqlite-vec's 1,024-row chunks.
            let (_dir, conn) = table(dims, 2500);
            let mut bits = SignBits::default();
            for seed in 0..20u64 {
                let query = db::binary_blob(&vector(seed * 7919 + 5, dims));
                for k in [1, 24, 192] {
                    let ours = bits.nearest(&conn, &query, k).unwrap();
                    let theirs = sqlite_vec_knn(&conn, &query, k);
                    let d = |l: &[(i64, u32)]| l.iter().map(|p| p.1).collect::<Vec<_>>();
                    assert_eq!(d(&ours), d(&theirs), "dims {dims}, k {k}");
                    // Every row strictly nearer than the last distance is in both.
                    let last = ours.last().unwrap().1;
                    let nearer = |l: &[(i64, u32)]| {
                        let mut ids: Vec<i64> =
                            l.iter().filter(|p| p.1 < last).map(|p| p.0).collect();
                        ids.sort_unstable();
                        ids
                    };
                    assert_eq!(nearer(&ours), nearer(&theirs));
                }
            }
        }
    }

    #[test]
    fn the_chunk_tables_read_what_sqlite_vec_reads() {
        let (_dir, conn) = table(384, 2100);
        for id in [1, 2, 700, 1024, 1025, 2100] {
            conn.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [id])
                .unwrap();
        }
        db::insert_vector(&conn, 5000, &vector(5000, 384)).unwrap();
        let fast = from_chunk_tables(&conn).expect("sqlite-vec's tables as this reader knows them");
        assert_eq!(fast.len(), 2100 - 6 + 1);
        assert_eq!(fast, through_sqlite_vec(&conn).unwrap());
    }

    #[test]
    fn committed_changes_keep_the_copy_equal_to_the_table() {
        let (_dir, conn) = table(384, 300);
        let mut bits = SignBits::default();
        let query = db::binary_blob(&vector(10_000, 384));
        bits.nearest(&conn, &query, 10).unwrap();
        let write = |changes: &mut BitChanges, id: i64, seed: u64| {
            conn.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [id])
                .unwrap();
            changes.insert(
                id,
                db::insert_vector(&conn, id, &vector(seed, 384)).unwrap(),
            );
        };
        let mut changes = BitChanges::default();
        for id in [5, 150, 300] {
            conn.execute("DELETE FROM chunks_vec WHERE rowid = ?1", [id])
                .unwrap();
            changes.remove(id);
        }
        write(&mut changes, 7, 1234);
        write(&mut changes, 301, 10_000);
        write(&mut changes, 150, 77);
        bits.apply(changes);
        let mut appended = BitChanges::default();
        write(&mut appended, 400, 400);
        bits.apply(appended);
        let fresh = load(&conn, 0).unwrap();
        let set = bits.loaded.as_ref().unwrap();
        assert_eq!(set.ids, fresh.ids);
        assert_eq!(set.words, fresh.words);
        assert_eq!(bits.nearest(&conn, &query, 1).unwrap(), vec![(301, 0)]);

        let mut cleared = BitChanges::default();
        conn.execute("DELETE FROM chunks_vec", []).unwrap();
        cleared.clear();
        bits.apply(cleared);
        assert!(bits.nearest(&conn, &query, 5).unwrap().is_empty());
    }

    #[test]
    fn another_connections_write_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let conn = db::open(&path).unwrap();
        db::ensure_vector_table(&conn, "test/m", 384).unwrap();
        db::insert_vector(&conn, 1, &vector(1, 384)).unwrap();
        let mut bits = SignBits::default();
        let query = db::binary_blob(&vector(2, 384));
        assert_eq!(bits.nearest(&conn, &query, 5).unwrap().len(), 1);
        let other = db::open(&path).unwrap();
        db::insert_vector(&other, 2, &vector(2, 384)).unwrap();
        assert_eq!(bits.nearest(&conn, &query, 5).unwrap()[0], (2, 0));
    }
}
