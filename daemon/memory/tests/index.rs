//! The index on real files and a real SQLite database, with the projection
//! embedder standing in for the model: incremental sync by file and chunk
//! hash, the embedding cache, an embedder change rebuilding the vectors, an
//! embedder that fails, deletes, dated-note decay, and `get` staying inside
//! the memory sources.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common {
    pub mod projection;
}

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::projection::ProjectionEmbedder;
use pincer_memory::{Embedder, IndexSettings, Legs, MemoryIndex, Query, Scope, Sources};

fn open(root: &Path, embedder: Option<Arc<ProjectionEmbedder>>) -> MemoryIndex {
    MemoryIndex::open(
        "main",
        root.join("memory-main.db"),
        Sources::new(root.join("ws"), Vec::new(), None).unwrap(),
        IndexSettings::default(),
        embedder.map(|e| e as Arc<dyn Embedder>),
        "[memory] embedder = \"none\"",
    )
    .unwrap()
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join("ws").join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn search(index: &MemoryIndex, text: &str) -> Vec<String> {
    index
        .search(Query {
            text: text.into(),
            min_score: Some(0.0),
            ..Query::default()
        })
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| format!("{}:{}-{}", h.path, h.start_line, h.end_line))
        .collect()
}

const NOTES: &str =
    "# Boat\n\nThe boat Aurora is moored in Hydra.\n\n# Garden\n\nThe tomatoes need water daily.\n";

/// A memory folder with MEMORY.md (two sections) and memory/cats.md.
fn two_notes() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "MEMORY.md", NOTES);
    write(
        root.path(),
        "memory/cats.md",
        "# Cats\n\nMiso likes tuna.\n",
    );
    root
}

#[tokio::test]
async fn only_what_changed_is_read_and_embedded_again() {
    let root = two_notes();
    let embedder = Arc::new(ProjectionEmbedder::new("p", 64));
    let index = open(root.path(), Some(embedder.clone()));

    let first = index.sync(Scope::All, None).await.unwrap();
    assert_eq!((first.files_seen, first.files_changed), (2, 2));
    assert_eq!(first.chunks_added, 3);
    assert_eq!(first.chunks_embedded, 3);
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), 3);

    let again = index.sync(Scope::All, None).await.unwrap();
    assert_eq!((again.files_changed, again.chunks_embedded), (0, 0));
    assert_eq!(
        embedder.embedded.load(Ordering::SeqCst),
        3,
        "nothing re-embedded"
    );

    // One section edited: the file is re-chunked, but only the new text is
    // embedded; the unchanged section's vector comes from the cache.
    write(
        root.path(),
        "MEMORY.md",
        &NOTES.replace("daily", "every evening"),
    );
    let edit = index.sync(Scope::All, None).await.unwrap();
    assert_eq!(edit.files_changed, 1);
    assert_eq!((edit.chunks_added, edit.cache_hits), (2, 1));
    assert_eq!(edit.chunks_embedded, 1);
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), 4);
    assert_eq!(search(&index, "tomatoes evening").await[0], "MEMORY.md:5-7");

    let status = index.status().await.unwrap();
    assert_eq!(
        (status.files, status.chunks, status.embedded_chunks),
        (2, 3, 3)
    );
    assert_eq!(status.dimensions, Some(64));
    assert!(status.last_sync.is_some() && status.last_error.is_none());
}

#[tokio::test]
async fn a_deleted_file_leaves_the_index_and_a_path_scope_sees_it() {
    let root = two_notes();
    let index = open(
        root.path(),
        Some(Arc::new(ProjectionEmbedder::new("p", 64))),
    );
    index.sync(Scope::All, None).await.unwrap();
    assert_eq!(search(&index, "Miso tuna").await[0], "memory/cats.md:1-3");

    let gone = root.path().join("ws/memory/cats.md");
    std::fs::remove_file(&gone).unwrap();
    let report = index.sync(Scope::Paths(vec![gone]), None).await.unwrap();
    assert_eq!(report.files_removed, 1);
    assert!(
        !search(&index, "Miso tuna")
            .await
            .iter()
            .any(|h| h.starts_with("memory/cats.md"))
    );
    assert_eq!(index.status().await.unwrap().files, 1);
}

#[tokio::test]
async fn another_embedder_rebuilds_every_vector() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "MEMORY.md", NOTES);
    let first = Arc::new(ProjectionEmbedder::new("small", 32));
    open(root.path(), Some(first))
        .sync(Scope::All, None)
        .await
        .unwrap();

    let bigger = Arc::new(ProjectionEmbedder::new("large", 96));
    let index = open(root.path(), Some(bigger.clone()));
    let report = index.sync(Scope::All, None).await.unwrap();
    assert!(report.vectors_rebuilt, "{report:?}");
    assert_eq!(report.chunks_embedded, 2);
    assert_eq!(bigger.embedded.load(Ordering::SeqCst), 2);
    let status = index.status().await.unwrap();
    assert_eq!(status.dimensions, Some(96));
    assert_eq!(status.embedded_chunks, 2);
    let hits = index
        .search(Query {
            text: "boat Aurora".into(),
            min_score: Some(0.0),
            legs: Legs::VectorOnly,
            ..Query::default()
        })
        .await
        .unwrap();
    assert_eq!(hits.hits[0].path, "MEMORY.md");
    assert!(hits.hits[0].vector_score.unwrap() > 0.3, "{hits:?}");
}

#[tokio::test]
async fn a_failing_embedder_keeps_full_text_search_and_says_why() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "MEMORY.md", NOTES);
    let embedder = Arc::new(ProjectionEmbedder::new("p", 64));
    embedder.failing.store(true, Ordering::SeqCst);
    let index = open(root.path(), Some(embedder.clone()));
    let report = index.sync(Scope::All, None).await.unwrap();
    assert!(
        report
            .embed_error
            .as_deref()
            .is_some_and(|e| e.contains("connection refused")),
        "{report:?}"
    );
    let found = index
        .search(Query {
            text: "tomatoes".into(),
            min_score: Some(0.0),
            ..Query::default()
        })
        .await
        .unwrap();
    assert_eq!(found.hits[0].path, "MEMORY.md");
    assert!(!found.vector_leg.is_on());
    assert!(
        found
            .vector_leg
            .describe()
            .starts_with("the vector leg is off (projection/p failed: "),
        "{}",
        found.vector_leg.describe()
    );

    // The endpoint is back: the next sync embeds what was missing.
    embedder.failing.store(false, Ordering::SeqCst);
    let report = index.sync(Scope::All, None).await.unwrap();
    assert_eq!(report.chunks_embedded, 2, "{report:?}");
    assert!(index.vector_leg().is_on());
    assert_eq!(index.status().await.unwrap().embedded_chunks, 2);
}

#[tokio::test]
async fn older_dated_notes_rank_below_newer_ones() {
    let root = tempfile::tempdir().unwrap();
    let today = time::OffsetDateTime::now_utc().date();
    let text = "The dentist moved the appointment to Friday.\n";
    write(root.path(), "memory/2019-03-01.md", text);
    write(root.path(), &format!("memory/{today}.md"), text);
    let index = open(root.path(), None);
    index.sync(Scope::All, None).await.unwrap();
    let found = index
        .search(Query {
            text: "dentist appointment".into(),
            min_score: Some(0.0),
            ..Query::default()
        })
        .await
        .unwrap();
    assert_eq!(found.hits.len(), 2);
    assert_eq!(found.hits[0].path, format!("memory/{today}.md"));
    assert!(
        found.hits[1].score < found.hits[0].score / 100.0,
        "seven years at a 30-day half-life: {:?}",
        found.hits
    );
}

#[tokio::test]
async fn get_reads_memory_files_only() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "MEMORY.md", NOTES);
    write(root.path(), "src/main.rs", "fn main() {}\n");
    std::fs::write(root.path().join("config.toml"), "secret = 1\n").unwrap();
    std::os::unix::fs::symlink(
        root.path().join("config.toml"),
        root.path().join("ws/memory.md"),
    )
    .unwrap();
    std::fs::create_dir_all(root.path().join("ws/memory")).unwrap();
    std::os::unix::fs::symlink(
        root.path().join("config.toml"),
        root.path().join("ws/memory/link.md"),
    )
    .unwrap();
    let index = open(root.path(), None);

    let (text, from, to) = index.get("MEMORY.md", Some(3), Some(1)).unwrap();
    assert_eq!(
        (text.as_str(), from, to),
        ("The boat Aurora is moored in Hydra.", 3, 3)
    );
    for path in [
        "../config.toml",
        "src/main.rs",
        "memory/link.md",
        "/etc/passwd",
        "memory/../../config.toml",
    ] {
        let err = index.get(path, None, None).unwrap_err().to_string();
        assert!(err.contains("is not a memory file"), "{path}: {err}");
    }
}

/// The vector leg's hits for `text` (paths, lines and scores).
async fn vector_hits(index: &MemoryIndex, text: &str) -> Vec<(String, u32, f64)> {
    index
        .search(Query {
            text: text.into(),
            limit: Some(6),
            min_score: Some(0.0),
            legs: Legs::VectorOnly,
        })
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.path, h.start_line, h.vector_score.unwrap()))
        .collect()
}

/// Asserts that `index` answers `queries` as a newly opened index does.
async fn same_as_fresh(index: &MemoryIndex, root: &Path, queries: &[&str]) {
    let fresh = open(root, Some(Arc::new(ProjectionEmbedder::new("p", 384))));
    for q in queries {
        assert_eq!(
            vector_hits(index, q).await,
            vector_hits(&fresh, q).await,
            "{q}"
        );
    }
}

/// The vector leg scans a copy of the sign bits held in memory: after an
/// edit, a delete, another handle's writes and a clear, a long-lived index
/// answers as one opened afresh, which reads them from the store.
#[tokio::test]
async fn the_vector_leg_follows_every_write() {
    let root = tempfile::tempdir().unwrap();
    let notes = |from: usize| -> String {
        (from..from + 60)
            .map(|i| format!("## n{i}\n\nw{i}a w{i}b w{i}c w{}d\n\n", i % 7))
            .collect()
    };
    write(root.path(), "memory/a.md", &notes(0));
    write(root.path(), "memory/b.md", &notes(100));
    let embedder = Arc::new(ProjectionEmbedder::new("p", 384));
    let index = open(root.path(), Some(embedder.clone()));
    index.sync(Scope::All, None).await.unwrap();
    let queries = [
        "w3a w3b",
        "w120a w120c",
        "w5d w6d",
        "zebra quokka",
        "penguin",
    ];
    same_as_fresh(&index, root.path(), &queries).await;

    let a = root.path().join("ws/memory/a.md");
    std::fs::write(&a, notes(0) + "## new\n\nzebra quokka walrus\n").unwrap();
    index.sync(Scope::Paths(vec![a]), None).await.unwrap();
    assert_eq!(
        vector_hits(&index, "zebra quokka").await[0].0,
        "memory/a.md"
    );
    let b = root.path().join("ws/memory/b.md");
    std::fs::remove_file(&b).unwrap();
    index.sync(Scope::Paths(vec![b]), None).await.unwrap();
    assert!(
        vector_hits(&index, "w120a w120c")
            .await
            .iter()
            .all(|h| h.0 != "memory/b.md")
    );
    same_as_fresh(&index, root.path(), &queries).await;

    // Another handle on the same file writes (as a second process would).
    let other = open(root.path(), Some(embedder.clone()));
    write(root.path(), "memory/c.md", "# Birds\n\npenguin colony\n");
    other.sync(Scope::All, None).await.unwrap();
    assert_eq!(vector_hits(&index, "penguin").await[0].0, "memory/c.md");

    index.clear().await.unwrap();
    assert!(vector_hits(&index, "penguin").await.is_empty());
    index.sync(Scope::All, None).await.unwrap();
    same_as_fresh(&index, root.path(), &queries).await;
}

/// The sign-bit scan plus exact re-scoring finds what an exact cosine scan
/// over every vector finds, on an index big enough for the scan to matter.
#[tokio::test]
async fn the_quantised_vector_leg_finds_the_exact_nearest_chunks() {
    let root = tempfile::tempdir().unwrap();
    let words: Vec<String> = (0..600).map(|i| format!("w{i}")).collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut notes = String::new();
    let mut texts = Vec::new();
    for i in 0..3000 {
        let text: Vec<&str> = (0..12)
            .map(|_| words[(next() % 600) as usize].as_str())
            .collect();
        let text = text.join(" ");
        notes.push_str(&format!("## n{i}\n\n{text}\n\n"));
        texts.push((format!("## n{i}\n\n{text}\n"), i));
    }
    write(root.path(), "memory/notes.md", &notes);
    let embedder = Arc::new(ProjectionEmbedder::new("p", 384));
    let mut settings = IndexSettings::default();
    settings.search.mmr_lambda = 1.0; // rank by similarity alone
    let index = MemoryIndex::open(
        "main",
        root.path().join("memory-main.db"),
        Sources::new(root.path().join("ws"), Vec::new(), None).unwrap(),
        settings,
        Some(embedder.clone() as Arc<dyn Embedder>),
        "",
    )
    .unwrap();
    index.sync(Scope::All, None).await.unwrap();
    assert_eq!(index.status().await.unwrap().embedded_chunks, 3000);

    let (mut found, mut wanted) = (0, 0);
    for _ in 0..20 {
        let query: Vec<&str> = (0..4)
            .map(|_| words[(next() % 600) as usize].as_str())
            .collect();
        let query = query.join(" ");
        let q = embedder.project(&query);
        let mut exact: Vec<(f32, usize)> = texts
            .iter()
            .map(|(t, i)| (pincer_memory::embed::cosine(&q, &embedder.project(t)), *i))
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0));
        let hits = index
            .search(Query {
                text: query,
                limit: Some(6),
                min_score: Some(0.0),
                legs: Legs::VectorOnly,
            })
            .await
            .unwrap();
        let got: Vec<f64> = hits.hits.iter().map(|h| h.vector_score.unwrap()).collect();
        // Near-ties make "which six" arbitrary: a neighbour counts as found
        // when a hit at least as close (within 0.01) was returned.
        for (rank, (similarity, _)) in exact[..6].iter().enumerate() {
            wanted += 1;
            if got
                .get(rank)
                .is_some_and(|g| *g >= f64::from(*similarity) - 0.01)
            {
                found += 1;
            }
        }
    }
    let recall = found as f64 / wanted as f64;
    println!("recall of the exact top 6 through the quantised leg: {recall:.3}");
    assert!(recall >= 0.9, "recall {recall:.3}");
}

/// Resident kB of this process's mappings of `file` (`/proc/self/smaps`).
fn mapped_kb(file: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = file.to_string_lossy();
    let mut ours = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            ours = line.ends_with(name.as_ref());
        } else if ours && let Some(v) = line.strip_prefix("Rss:") {
            kb += v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap();
        }
    }
    kb
}

/// Searches read the index through mmap and those pages stay counted in
/// the process's RSS; letting go of them (as when the model is unloaded)
/// leaves none resident, and the next search reads the file again.
#[tokio::test]
async fn the_mapped_pages_a_search_read_can_be_let_go() {
    let root = tempfile::tempdir().unwrap();
    for n in 0..200 {
        write(
            root.path(),
            &format!("memory/topic-{n:03}.md"),
            &format!("# Topic {n}\n\nThe heron number {n} fishes in the reeds by the mill.\n"),
        );
    }
    let index = open(
        root.path(),
        Some(Arc::new(ProjectionEmbedder::new("p", 64))),
    );
    index.sync(Scope::All, None).await.unwrap();
    let db = root.path().join("memory-main.db");
    assert!(!search(&index, "heron mill").await.is_empty());
    let before = mapped_kb(&db);
    assert!(before > 0, "a search reads the index through its mapping");
    index.release_mapped_pages().await.unwrap();
    assert_eq!(
        mapped_kb(&db),
        0,
        "none of the file stays resident (was {before} kB)"
    );
    assert!(!search(&index, "heron mill").await.is_empty());
    assert!(mapped_kb(&db) > 0, "the next search maps the file again");
}
