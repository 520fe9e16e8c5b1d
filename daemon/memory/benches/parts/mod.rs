//! The parts of one hybrid search, each timed alone against the bench's
//! index file, so the table says where a search's time goes: the vector
//! leg's coarse scan (sqlite-vec's KNN over `chunks_vec`, and the physical
//! reference beside it: a popcount scan of the same sign bits held in
//! memory), the exact re-scoring reads of the float vectors, the full-text
//! leg's steps (the chunk count and document frequencies that prune the
//! query, FTS5 `MATCH` with bm25 as one query, and as the two queries
//! around the most common term that `index/text.rs` runs when it can), the
//! rows read for the merged candidates, MMR, and a hop to tokio's blocking
//! pool.
//!
//! The SQL here is the SQL `index/search.rs` and `index/text.rs` run
//! (copied: the crate keeps it private), so a change there should be made
//! here too.

use std::path::Path;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use pincer_memory::fuse::{self, Scored};
use pincer_memory::{db, fts};
use rusqlite::{Connection, OptionalExtension, params};

/// `max_results × candidate_multiplier`, the default candidates per leg.
const CANDIDATES: usize = 24;
/// The vector leg's re-scoring factor (`RESCORE_FACTOR` in `search.rs`).
const RESCORE_FACTOR: usize = 8;

/// Every chunk's sign bits, as the reference scan holds them.
pub struct Bits {
    ids: Vec<i64>,
    words: Vec<u64>,
    per: usize,
}

/// Reads every chunk's sign bits from `chunks_vec` (what an in-memory scan
/// must load once).
pub fn load_bits(conn: &Connection) -> Bits {
    let mut stmt = conn
        .prepare("SELECT rowid, embedding FROM chunks_vec")
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let (mut ids, mut words, mut per) = (Vec::new(), Vec::new(), 0);
    while let Some(row) = rows.next().unwrap() {
        let blob = row.get_ref(1).unwrap().as_blob().unwrap();
        per = blob.len().div_ceil(8);
        ids.push(row.get(0).unwrap());
        words.extend(pack(blob, per));
    }
    Bits { ids, words, per }
}

/// The same rows read as `index/bits.rs` reads them: sqlite-vec's chunk
/// tables, a few blobs of 1,024 rows each (the row-by-row read above costs
/// about 3 µs a row).
pub fn load_bits_from_chunk_tables(conn: &Connection) -> usize {
    let mut stmt = conn
        .prepare(
            "SELECT c.size, c.validity, c.rowids, v.vectors FROM chunks_vec_chunks c
               JOIN chunks_vec_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let size = row.get::<_, i64>(0).unwrap() as usize;
        let validity = row.get_ref(1).unwrap().as_blob().unwrap();
        let rowids = row.get_ref(2).unwrap().as_blob().unwrap();
        let vectors = row.get_ref(3).unwrap().as_blob().unwrap();
        let bytes = vectors.len() / size;
        for slot in (0..size).filter(|s| validity[s / 8] & (1 << (s % 8)) != 0) {
            let id = i64::from_ne_bytes(rowids[slot * 8..slot * 8 + 8].try_into().unwrap());
            out.push((id, vectors[slot * bytes..(slot + 1) * bytes].to_vec()));
        }
    }
    let counted: i64 = conn
        .query_row("SELECT count(*) FROM chunks_vec_rowids", [], |r| r.get(0))
        .unwrap();
    assert_eq!(counted as usize, out.len());
    out.sort_unstable_by_key(|(id, _)| *id);
    out.len()
}

fn pack(bytes: &[u8], per: usize) -> Vec<u64> {
    let mut out = vec![0u64; per];
    for (i, b) in bytes.iter().enumerate() {
        out[i / 8] |= u64::from(*b) << (8 * (i % 8));
    }
    out
}

/// The physical reference: the Hamming distance of every chunk to the
/// query, counted in a histogram, and the distance of the `k`-th nearest
/// (what any exact scan must at least do; collecting the `k` ids is on top).
pub fn popcount_scan(bits: &Bits, query: &[u8], k: usize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has `popcnt`, checked just above.
        return unsafe { popcount_scan_popcnt(bits, query, k) };
    }
    popcount_scan_portable(bits, query, k)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn popcount_scan_popcnt(bits: &Bits, query: &[u8], k: usize) -> u32 {
    popcount_scan_portable(bits, query, k)
}

#[inline(always)]
fn popcount_scan_portable(bits: &Bits, query: &[u8], k: usize) -> u32 {
    let q = pack(query, bits.per);
    let mut histogram = vec![0u32; bits.per * 64 + 1];
    // Plain loops: an iterator chain's `fold` may be left out of line, and
    // then it is not compiled with `popcnt`.
    for row in bits.words.chunks_exact(bits.per) {
        let mut d = 0;
        for j in 0..q.len() {
            d += (row[j] ^ q[j]).count_ones();
        }
        histogram[d as usize] += 1;
    }
    let mut seen = 0;
    for (d, n) in histogram.iter().enumerate() {
        seen += *n as usize;
        if seen >= k {
            return d as u32;
        }
    }
    histogram.len() as u32
}

fn knn(conn: &Connection, query: &[f32], k: usize) -> Vec<(i64, f64)> {
    conn.prepare_cached(
        "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH vec_bit(?1) AND k = ?2 ORDER BY distance",
    )
    .unwrap()
    .query_map(params![db::binary_blob(query), k as i64], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn rescore_reads(conn: &Connection, ids: &[i64]) -> usize {
    let ids = serde_json::to_string(ids).unwrap();
    conn.prepare_cached(
        "SELECT c.id, e.vector FROM chunks c JOIN embedding_cache e
           ON e.provider = ?1 AND e.model = ?2 AND e.hash = c.hash
         WHERE c.id IN (SELECT value FROM json_each(?3))",
    )
    .unwrap()
    .query_map(params!["projection", "projection-384", ids], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
    })
    .unwrap()
    .count()
}

fn chunk_count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
        .unwrap()
}

fn document_frequencies(conn: &Connection, terms: &[String]) -> Vec<(i64, String)> {
    let mut df = conn
        .prepare_cached("SELECT doc FROM chunks_fts_vocab WHERE term = ?1")
        .unwrap();
    terms
        .iter()
        .map(|t| {
            let docs: i64 = df
                .query_row([t.as_str()], |r| r.get(0))
                .optional()
                .unwrap()
                .unwrap_or(0);
            (docs, t.clone())
        })
        .collect()
}

/// The query terms `informative_terms` keeps on a big index, rarest first.
fn pruned(total: i64, mut counted: Vec<(i64, String)>) -> Vec<String> {
    counted.sort_by_key(|(d, _)| *d);
    let limit = (total as f64 * 0.2) as i64;
    let keep = counted
        .iter()
        .take(12)
        .filter(|(d, _)| *d <= limit)
        .count()
        .max(1);
    counted.into_iter().take(keep).map(|(_, t)| t).collect()
}

/// The two queries around the most common kept term (`rare NOT common`,
/// `rare AND common`), when there are two terms or more.
fn split_queries(kept: &[String]) -> Option<(String, String)> {
    let [rare @ .., common] = kept else {
        return None;
    };
    let rare = fts::terms_expression(rare)?;
    let common = fts::terms_expression(std::slice::from_ref(common))?;
    Some((
        format!("({rare}) NOT {common}"),
        format!("({rare}) AND {common}"),
    ))
}

fn text_match(conn: &Connection, sql: &str, expr: &str) -> Vec<(i64, f64)> {
    conn.prepare_cached(sql)
        .unwrap()
        .query_map(params![expr, CANDIDATES as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

const BY_BM25: &str = "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY bm25(chunks_fts) LIMIT ?2";
const BY_RANK: &str =
    "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2";

fn rows(conn: &Connection, ids: &[i64]) -> Vec<String> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT f.path, f.source, c.start_line, c.end_line, c.text FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = ?1",
        )
        .unwrap();
    ids.iter()
        .map(|id| stmt.query_row([id], |r| r.get(4)).unwrap())
        .collect()
}

/// What each query needs, computed once outside the timed parts.
struct Prepared {
    vector: Vec<f32>,
    bits: Vec<u8>,
    coarse: Vec<i64>,
    terms: Vec<String>,
    expr: String,
    split: Option<(String, String)>,
    merged: Vec<i64>,
}

/// Times each part over the index at `db_path`, for `chunks` chunks.
pub fn bench(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    db_path: &Path,
    chunks: usize,
    queries: &[String],
    embed: impl Fn(&str) -> Vec<f32>,
) {
    let conn = Connection::open(db_path).unwrap();
    conn.execute_batch(
        "PRAGMA cache_size = -2000; PRAGMA mmap_size = 1073741824; PRAGMA query_only = 1;",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let bits = load_bits(&conn);
    eprintln!(
        "loaded the sign bits of {} chunks row by row through sqlite-vec in {:.2} ms ({} KiB)",
        bits.ids.len(),
        started.elapsed().as_secs_f64() * 1e3,
        (bits.words.len() * 8 + bits.ids.len() * 8) / 1024
    );
    let started = std::time::Instant::now();
    assert_eq!(load_bits_from_chunk_tables(&conn), bits.ids.len());
    eprintln!(
        "read them from sqlite-vec's chunk tables in {:.2} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let coarse_k = CANDIDATES * RESCORE_FACTOR;
    let total = chunk_count(&conn);
    let prepared: Vec<Prepared> = queries
        .iter()
        .map(|q| {
            let vector = embed(q);
            let coarse: Vec<i64> = knn(&conn, &vector, coarse_k)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let terms = fts::keywords(q);
            let kept = pruned(total, document_frequencies(&conn, &terms));
            let expr = fts::terms_expression(&kept).unwrap();
            let split = split_queries(&kept);
            let text = text_match(&conn, BY_BM25, &expr);
            let mut merged: Vec<i64> = coarse.iter().take(CANDIDATES).copied().collect();
            merged.extend(text.iter().map(|(id, _)| *id));
            merged.sort_unstable();
            merged.dedup();
            Prepared {
                bits: db::binary_blob(&vector),
                vector,
                coarse,
                terms,
                expr,
                split,
                merged,
            }
        })
        .collect();
    let mut group = c.benchmark_group("memory_search_parts");
    group.measurement_time(Duration::from_secs(4));
    group.warm_up_time(Duration::from_secs(1));
    let mut run = |name: &str, f: &mut dyn FnMut(&Prepared)| {
        let mut i = 0;
        group.bench_function(BenchmarkId::new(name, chunks), |b| {
            let mut one = || {
                i = (i + 1) % prepared.len();
                f(&prepared[i]);
            };
            if super::cpu_time_mode() {
                b.iter_custom(|iters| {
                    let started = super::cpu_time();
                    (0..iters).for_each(|_| one());
                    super::cpu_time() - started
                })
            } else {
                b.iter(one)
            }
        });
    };
    run("vector_sqlite_vec_knn", &mut |p| {
        assert_eq!(knn(&conn, &p.vector, coarse_k).len(), coarse_k);
    });
    run("vector_popcount_in_memory", &mut |p| {
        assert!(popcount_scan(&bits, &p.bits, coarse_k) > 0);
    });
    run("vector_rescore_reads", &mut |p| {
        assert!(rescore_reads(&conn, &p.coarse) >= coarse_k);
    });
    run("vector_rescore_cosine", &mut |p| {
        let v = &p.vector;
        let s: f32 = (0..coarse_k)
            .map(|_| pincer_memory::embed::cosine(v, v))
            .sum();
        assert!(s > 0.0);
    });
    run("text_chunk_count", &mut |_| {
        assert_eq!(chunk_count(&conn), total);
    });
    run("text_document_frequencies", &mut |p| {
        assert_eq!(document_frequencies(&conn, &p.terms).len(), p.terms.len());
    });
    run("text_match_bm25", &mut |p| {
        text_match(&conn, BY_BM25, &p.expr);
    });
    run("text_match_rank", &mut |p| {
        text_match(&conn, BY_RANK, &p.expr);
    });
    run("text_match_split", &mut |p| match &p.split {
        Some((without, with)) => {
            text_match(&conn, BY_BM25, without);
            text_match(&conn, BY_BM25, with);
        }
        None => {
            text_match(&conn, BY_BM25, &p.expr);
        }
    });
    run("rank_row_reads", &mut |p| {
        assert_eq!(rows(&conn, &p.merged).len(), p.merged.len());
    });
    let texts: Vec<Vec<String>> = prepared.iter().map(|p| rows(&conn, &p.merged)).collect();
    let mut i = 0;
    group.bench_function(BenchmarkId::new("mmr", chunks), |b| {
        b.iter(|| {
            i = (i + 1) % prepared.len();
            let candidates: Vec<(Scored, &str)> = prepared[i]
                .merged
                .iter()
                .zip(&texts[i])
                .enumerate()
                .map(|(rank, (&id, text))| {
                    let score = 1.0 - rank as f64 / 100.0;
                    let s = Scored {
                        id,
                        score,
                        vector: None,
                        text: None,
                    };
                    (s, text.as_str())
                })
                .collect();
            assert_eq!(fuse::mmr(candidates, 0.7, 6).len(), 6);
        })
    });
    group.bench_function(BenchmarkId::new("blocking_pool_hop", chunks), |b| {
        b.to_async(rt)
            .iter(|| async { tokio::task::spawn_blocking(|| 1).await.unwrap() })
    });
    group.finish();
}
