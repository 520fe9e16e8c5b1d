//! The full-text leg of a search (SPEC §10): bm25 over the informative
//! query terms, normalised.
//!
//! FTS5 scores every row that matches any term, and its `bm25()` costs
//! about 0.5 µs a row (a `%_docsize` lookup for the row's length, the
//! position lists of every phrase), so on 100k chunks a query whose terms
//! match 15 % of them spent 7 of its 9 ms there; `ORDER BY rank` is no
//! faster (FTS5 has no top-k shortcut: it scores all rows, then sorts).
//! Two cuts, each returning what the plain query returns:
//!
//! - words in more than a fifth of the chunks are left out of the query
//!   while a rarer word remains (they hardly move bm25, their idf is under
//!   1.4), as before;
//! - the most common word left usually matches most of the rows, yet a row
//!   with only that word scores below `(k1 + 1) · idf` (2.2 × its idf). So
//!   the rows with a rarer word are scored in two queries, without it
//!   (`rare NOT common`) and with it (`rare AND common`, FTS5 walks the
//!   rare rows and skips through the common word's list), and when their
//!   best `k` all score above that bound they are the answer; else the
//!   plain query runs. bm25 sums the same phrases in the same order in all
//!   three (a phrase a row lacks adds 0, and FTS5's idf of a phrase is its
//!   own), so the scores are the same to the bit.

use rusqlite::{Connection, OptionalExtension, params};

use crate::MemoryError;
use crate::fts;
use crate::fuse;

/// Indexes smaller than this search every query term.
const PRUNE_FROM_CHUNKS: i64 = 2000;
/// A term in more than this share of the chunks is dropped from the query
/// when a rarer one is left: it hardly moves bm25 (its idf is under 1.4)
/// yet makes FTS5 score most of the index.
const COMMON_TERM_SHARE: f64 = 0.2;
/// Long queries (a pasted paragraph) keep their rarest terms.
const MAX_TERMS: usize = 12;
/// The most common term is split off when it is in at least this many
/// chunks; below, the plain query is as fast as the two.
const SPLIT_FROM_DOCS: i64 = 500;
/// FTS5's bm25 `k1` + 1: what a term adds to a row's score is less than
/// this times its idf, however often it occurs.
const BM25_MAX_PER_IDF: f64 = 2.2;

/// A kept query term and the chunks holding it, when they were counted.
struct Term {
    text: String,
    docs: Option<i64>,
}

/// The full-text leg: bm25 over the informative query terms, normalised.
pub(super) fn leg(conn: &Connection, text: &str, k: usize) -> Result<Vec<(i64, f64)>, MemoryError> {
    // One snapshot for the counts and the queries, so the bound that
    // leaves rows out holds for the rows the queries see.
    let snapshot = conn.unchecked_transaction()?;
    let (terms, total) = informative_terms(&snapshot, fts::keywords(text))?;
    let hits = match split_common(&snapshot, &terms, total, k)? {
        Some(hits) => hits,
        None => {
            let texts: Vec<String> = terms.into_iter().map(|t| t.text).collect();
            match fts::terms_expression(&texts) {
                Some(expr) => ranked(&snapshot, &expr, k)?,
                None => Vec::new(),
            }
        }
    };
    snapshot.commit()?;
    Ok(fuse::normalise_bm25(&hits))
}

/// The query terms worth matching on a big index, rarest first, and the
/// number of chunks.
fn informative_terms(
    conn: &Connection,
    terms: Vec<String>,
) -> Result<(Vec<Term>, i64), MemoryError> {
    let total: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
    if total < PRUNE_FROM_CHUNKS || terms.len() <= 1 {
        let terms = terms
            .into_iter()
            .map(|text| Term { text, docs: None })
            .collect();
        return Ok((terms, total));
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
        counted.push(Term {
            text: term,
            docs: Some(docs),
        });
    }
    counted.sort_by_key(|t| t.docs);
    let limit = (total as f64 * COMMON_TERM_SHARE) as i64;
    let keep = counted
        .iter()
        .take(MAX_TERMS)
        .filter(|t| t.docs.is_some_and(|d| d <= limit))
        .count()
        .max(1);
    counted.truncate(keep);
    Ok((counted, total))
}

/// FTS5's idf of a term in `docs` of `total` rows (its floor included).
fn idf(total: i64, docs: i64) -> f64 {
    let idf = ((total - docs) as f64 + 0.5) / (docs as f64 + 0.5);
    idf.ln().max(1e-6)
}

/// The best `k` rows with a rarer term, scored in two queries around the
/// most common term, when they provably are the plain query's best `k`.
fn split_common(
    conn: &Connection,
    terms: &[Term],
    total: i64,
    k: usize,
) -> Result<Option<Vec<(i64, f64)>>, MemoryError> {
    let [rare @ .., common] = terms else {
        return Ok(None);
    };
    let Some(docs) = common.docs else {
        return Ok(None);
    };
    // The bound needs FTS5's own count of the phrase: one token only.
    let one_token = fts::index_text(&common.text).split_whitespace().count() == 1;
    if rare.is_empty() || docs < SPLIT_FROM_DOCS || !one_token {
        return Ok(None);
    }
    // A hair above the bound, for rounding in FTS5's sums.
    let common_only = BM25_MAX_PER_IDF * idf(total, docs) * (1.0 + 1e-6);
    // The rarer terms cannot outscore it: no need to try. (A phrase counted
    // by its first token looks commoner than it is: this errs on the side
    // of the plain query.)
    let rare_best: f64 = rare
        .iter()
        .map(|t| BM25_MAX_PER_IDF * idf(total, t.docs.unwrap_or(total)))
        .sum();
    if rare_best <= common_only {
        return Ok(None);
    }
    let texts: Vec<String> = rare.iter().map(|t| t.text.clone()).collect();
    let (Some(rare_expr), Some(common_expr)) = (
        fts::terms_expression(&texts),
        fts::terms_expression(std::slice::from_ref(&common.text)),
    ) else {
        return Ok(None);
    };
    let mut hits = ranked(conn, &format!("({rare_expr}) NOT {common_expr}"), k)?;
    hits.extend(ranked(
        conn,
        &format!("({rare_expr}) AND {common_expr}"),
        k,
    )?);
    hits.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    hits.truncate(k);
    // bm25() is negative: the k-th best row must beat any common-only row.
    Ok(match hits.last() {
        Some(&(_, kth)) if hits.len() == k && -kth > common_only => Some(hits),
        _ => None,
    })
}

/// The best `k` rows for the FTS5 expression `expr`, with their bm25.
fn ranked(conn: &Connection, expr: &str, k: usize) -> Result<Vec<(i64, f64)>, MemoryError> {
    let mut stmt = conn.prepare_cached(
        "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY bm25(chunks_fts) LIMIT ?2",
    )?;
    let rows = stmt
        .query_map(params![expr, k as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db;

    /// An index of `n` chunks of 30 or 3 words drawn from 400 with a skew
    /// like real text (a few words in most chunks, most words in few).
    fn index(n: i64) -> (tempfile::TempDir, Connection) {
        let mut words = Words(0x9e37_79b9_7f4a_7c15);
        // Some chunks are a few words: a common word there can outscore a
        // rare one in a long chunk.
        with_chunks((1..=n).map(|id| words.sentence(if id % 4 == 0 { 3 } else { 30 })))
    }

    fn with_chunks(texts: impl Iterator<Item = String>) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = db::open(&dir.path().join("m.db")).unwrap();
        conn.execute(
            "INSERT INTO files (id, path, source, hash, mtime, size) VALUES (1, 'm.md', 'memory', 'h', 0, 0)",
            [],
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for (id, text) in (1i64..).zip(texts) {
            tx.execute(
                "INSERT INTO chunks (id, file_id, start_line, end_line, text, hash) VALUES (?1, 1, 1, 1, ?2, '')",
                params![id, text],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO chunks_fts (rowid, text) VALUES (?1, ?2)",
                params![id, text],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        (dir, conn)
    }

    struct Words(u64);

    impl Words {
        fn sentence(&mut self, n: usize) -> String {
            (0..n)
                .map(|_| {
                    self.0 ^= self.0 << 13;
                    self.0 ^= self.0 >> 7;
                    self.0 ^= self.0 << 17;
                    let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
                    format!("w{}", (u * u * u * 400.0) as usize)
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    #[test]
    fn splitting_off_the_most_common_term_returns_the_plain_querys_rows() {
        let (_dir, conn) = index(6000);
        let mut words = Words(0x2545_f491_4f6c_dd1d);
        let (mut split, mut plain_only) = (0, 0);
        for _ in 0..120 {
            let (terms, total) =
                informative_terms(&conn, fts::keywords(&words.sentence(4))).unwrap();
            let texts: Vec<String> = terms.iter().map(|t| t.text.clone()).collect();
            for k in [6, 24] {
                let mut plain = ranked(&conn, &fts::terms_expression(&texts).unwrap(), k).unwrap();
                plain.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                match split_common(&conn, &terms, total, k).unwrap() {
                    Some(hits) => {
                        assert_eq!(hits, plain, "{texts:?}, k = {k}");
                        split += 1;
                    }
                    None => plain_only += 1,
                }
            }
        }
        assert!(split >= 60, "split {split} times, plain {plain_only}");
    }

    /// Short chunks saying "common" three times outscore the long chunks
    /// with the rare word: the split's rows are not the best, and the
    /// plain query answers.
    #[test]
    fn a_common_word_that_outscores_the_rare_rows_falls_back_to_the_plain_query() {
        let filler = |i: usize| {
            (0..20)
                .map(|j| format!("f{}", (i * 7 + j) % 90))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let texts = (0..3000usize).map(|i| match i {
            0..30 => format!(
                "rare {} {}",
                filler(i),
                filler(i + 1) + " " + &filler(i + 2)
            ),
            30..130 => "common common common".to_string(),
            130..600 => format!("common {}", filler(i)),
            _ => filler(i),
        });
        let (_dir, conn) = with_chunks(texts);
        let (terms, total) = informative_terms(&conn, fts::keywords("rare common")).unwrap();
        assert_eq!(
            terms.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(),
            ["rare", "common"]
        );
        assert_eq!(split_common(&conn, &terms, total, 24).unwrap(), None);
        let hits = leg(&conn, "rare common", 24).unwrap();
        assert!(
            hits.iter().any(|(id, _)| (31..=130).contains(id)),
            "{hits:?}"
        );
    }

    #[test]
    fn the_leg_answers_on_small_and_big_indexes() {
        for n in [300, 3000] {
            let (_dir, conn) = index(n);
            let hits = leg(&conn, "w1 w30 w250", 24).unwrap();
            assert_eq!(hits.len(), 24, "{n}");
            assert_eq!(hits[0].1, 1.0);
            assert!(leg(&conn, "the", 24).unwrap().is_empty());
        }
    }
}
