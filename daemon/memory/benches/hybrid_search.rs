//! Hybrid search latency (SPEC §14: 10k chunks × 384-d ≤ 3 ms p50, 100k ≤
//! 12 ms p50), the cost of embedding one query with the real
//! all-MiniLM-L6-v2, indexing throughput with it (chunks per second), and
//! save-to-searchable through the watcher (≤ 500 ms).
//!
//! The indexes are built from generated notes (one heading and a
//! 100-word paragraph per chunk, words drawn with a skew like real text) and
//! embedded by a bag-of-words random projection: 384-d unit vectors where
//! texts sharing words are near each other, computed in microseconds. That
//! isolates the index (the sign-bit scan and exact re-scoring, FTS5 bm25,
//! fusion, decay, MMR, snippets) from the model, whose query cost is
//! measured on its own. `memory_search_parts` times each part of a search
//! alone (`parts/mod.rs`), sqlite-vec's own KNN and the physical reference
//! (a popcount scan of the same bits in memory) among them; what opening an
//! index and its first vector search cost is printed.
//!
//! `cargo bench -p pincer-memory --bench hybrid_search` (set
//! `PINCER_BENCH_SIZES=10000` to skip the 100k index, which takes about a
//! minute to build).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use pincer_memory::chunk::ChunkSize;
use pincer_memory::{Embedder, IndexSettings, Legs, MemoryIndex, Query, Scope, Sources};

#[path = "parts/mod.rs"]
mod parts;
#[path = "../tests/common/projection.rs"]
mod projection;
use projection::ProjectionEmbedder;

const DIMS: usize = 384;
const WORDS_PER_CHUNK: usize = 100;
const CHUNKS_PER_FILE: usize = 200;

/// A vocabulary of 5,000 made-up words.
fn vocabulary() -> Vec<String> {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "do", "fe", "gu", "ha", "ji",
        "ko", "la", "ma", "no", "pe",
    ];
    (0..5000)
        .map(|i| {
            let mut w = String::new();
            let mut n = i + 20;
            while n > 0 {
                w.push_str(SYLLABLES[n % 20]);
                n /= 20;
            }
            w
        })
        .collect()
}

struct Words {
    vocab: Vec<String>,
    state: u64,
}

impl Words {
    /// Skewed toward the first words, as word frequencies are.
    fn next(&mut self) -> &str {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let u = (self.state >> 11) as f64 / (1u64 << 53) as f64;
        &self.vocab[((u * u * u) * self.vocab.len() as f64) as usize]
    }
    fn sentence(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| self.next().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn write_notes(workspace: &Path, chunks: usize, words: &mut Words) {
    let dir = workspace.join("memory");
    std::fs::create_dir_all(&dir).unwrap();
    for file in 0..chunks.div_ceil(CHUNKS_PER_FILE) {
        let mut text = String::new();
        for c in 0..CHUNKS_PER_FILE.min(chunks - file * CHUNKS_PER_FILE) {
            text.push_str(&format!(
                "## Note {c}\n\n{}\n\n",
                words.sentence(WORDS_PER_CHUNK)
            ));
        }
        std::fs::write(dir.join(format!("notes-{file:04}.md")), text).unwrap();
    }
}

fn build(rt: &tokio::runtime::Runtime, root: &Path, chunks: usize) -> MemoryIndex {
    let workspace = root.join(format!("ws-{chunks}"));
    let mut words = Words {
        vocab: vocabulary(),
        state: 0x9e37_79b9_7f4a_7c15,
    };
    write_notes(&workspace, chunks, &mut words);
    let embedder: Arc<dyn Embedder> = Arc::new(ProjectionEmbedder::new("projection-384", DIMS));
    let index = MemoryIndex::open(
        "bench",
        root.join(format!("memory-{chunks}.db")),
        Sources::new(workspace, Vec::new(), None).unwrap(),
        IndexSettings {
            chunk: ChunkSize {
                tokens: 400,
                overlap: 80,
            },
            ..IndexSettings::default()
        },
        Some(embedder),
        "",
    )
    .unwrap();
    let started = std::time::Instant::now();
    rt.block_on(index.sync(Scope::All, None)).unwrap();
    let status = rt.block_on(index.status()).unwrap();
    assert_eq!(status.chunks as usize, chunks, "one chunk per note");
    assert_eq!(status.embedded_chunks, status.chunks);
    eprintln!(
        "built a {chunks}-chunk index in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    index
}

fn queries() -> Vec<String> {
    let mut words = Words {
        vocab: vocabulary(),
        state: 0x2545_f491_4f6c_dd1d,
    };
    (0..64).map(|_| words.sentence(5)).collect()
}

/// `PINCER_BENCH_CPU=1`: every case measures the CPU time the process
/// spent (all its threads) instead of the time on the clock, for a machine
/// busy with other work, where waiting for a core swamps what is measured.
/// For one thread's work it is what the clock would say on an idle machine;
/// for hybrid, whose legs run at once, it is the sum of both legs.
pub fn cpu_time_mode() -> bool {
    std::env::var_os("PINCER_BENCH_CPU").is_some_and(|v| v == "1")
}

/// CPU time of this process so far.
pub fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn sizes() -> Vec<usize> {
    std::env::var("PINCER_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000])
}

fn search(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let queries = queries();
    for chunks in sizes() {
        let index = build(&rt, root.path(), chunks);
        let mut group = c.benchmark_group("memory_search");
        group.measurement_time(Duration::from_secs(8));
        for (name, legs) in [
            ("hybrid", Legs::Hybrid),
            ("vector_only", Legs::VectorOnly),
            ("text_only", Legs::TextOnly),
        ] {
            let mut i = 0;
            let queries = &queries;
            let mut next = move || {
                i = (i + 1) % queries.len();
                Query {
                    text: queries[i].clone(),
                    min_score: Some(0.0),
                    legs,
                    ..Query::default()
                }
            };
            group.bench_function(BenchmarkId::new(name, chunks), |b| {
                if cpu_time_mode() {
                    b.iter_custom(|iters| {
                        let started = cpu_time();
                        for _ in 0..iters {
                            let found = rt.block_on(index.search(next())).unwrap();
                            assert!(!found.hits.is_empty());
                        }
                        cpu_time() - started
                    })
                } else {
                    b.to_async(&rt).iter(|| {
                        let (index, q) = (index.clone(), next());
                        async move {
                            let found = index.search(q).await.unwrap();
                            assert!(!found.hits.is_empty());
                        }
                    })
                }
            });
        }
        group.finish();
        first_search_after_open(&rt, root.path(), chunks, &queries[0]);
        let projection = ProjectionEmbedder::new("projection-384", DIMS);
        parts::bench(
            c,
            &rt,
            &root.path().join(format!("memory-{chunks}.db")),
            chunks,
            &queries,
            |q| projection.project(q),
        );
    }
}

/// Prints what opening the built index costs and what its first vector
/// search costs (it reads the sign bits into memory) against the second,
/// the median of 5 opens.
fn first_search_after_open(rt: &tokio::runtime::Runtime, root: &Path, chunks: usize, text: &str) {
    let (mut opens, mut firsts, mut seconds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let embedder: Arc<dyn Embedder> = Arc::new(ProjectionEmbedder::new("projection-384", DIMS));
        let index = MemoryIndex::open(
            "bench",
            root.join(format!("memory-{chunks}.db")),
            Sources::new(root.join(format!("ws-{chunks}")), Vec::new(), None).unwrap(),
            IndexSettings::default(),
            Some(embedder),
            "",
        )
        .unwrap();
        opens.push(started.elapsed());
        for times in [&mut firsts, &mut seconds] {
            let started = std::time::Instant::now();
            let found = rt
                .block_on(index.search(Query {
                    text: text.to_string(),
                    min_score: Some(0.0),
                    legs: Legs::VectorOnly,
                    ..Query::default()
                }))
                .unwrap();
            assert!(!found.hits.is_empty());
            times.push(started.elapsed());
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    eprintln!(
        "{chunks} chunks: open {:.2} ms, first vector search {:.2} ms, second {:.2} ms (median of 5)",
        median(&mut opens),
        median(&mut firsts),
        median(&mut seconds)
    );
}

/// The all-MiniLM-L6-v2 folder that `tests/setup.sh` installs, or `None`
/// (said once per bench) when it is missing.
#[cfg(feature = "local-embedder")]
fn installed_minilm() -> Option<std::path::PathBuf> {
    let dir = pincer_testkit::peers::peers_dir().join("models/all-MiniLM-L6-v2");
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    eprintln!(
        "no all-MiniLM-L6-v2 in {}: run `bash tests/setup.sh` to measure with the real model",
        dir.display()
    );
    None
}

/// One query through the real all-MiniLM-L6-v2 (what a search adds on top
/// of the index with the default embedder), when the model is installed.
#[cfg(feature = "local-embedder")]
fn query_embedding(c: &mut Criterion) {
    let Some(dir) = installed_minilm() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let embedder = pincer_memory::embed::local::LocalEmbedder::open(&dir).unwrap();
    let query = vec!["what did we decide about the boat's new sails?".to_string()];
    rt.block_on(embedder.embed(&query)).unwrap();
    c.bench_function("query_embedding/all-MiniLM-L6-v2", |b| {
        b.to_async(&rt).iter(|| async {
            let v = embedder.embed(&query).await.unwrap();
            assert_eq!(v[0].len(), DIMS);
        })
    });
}

#[cfg(not(feature = "local-embedder"))]
fn query_embedding(_: &mut Criterion) {}

#[cfg(feature = "local-embedder")]
const PARAGRAPHS: [&str; 4] = [
    "We talked about moving the boat to the winter harbour before the storms start in November, and agreed to ask the marina about a berth with electricity so the heater can run.",
    "The quarterly report is due on Friday; Anna collects the numbers from sales, I write the summary, and we send the draft to the finance team for a last check before the board meeting.",
    "Grandma's recipe for the plum cake needs two hours: the dough rests for an hour, the plums are cut in halves, and the cake bakes at 180 degrees until the top is golden brown.",
    "My running plan for the half marathon: three short runs during the week, one long run on Sunday that grows by a kilometre each week, and a rest week every fourth week.",
];

/// Chunks embedded and indexed per second by a full sync with the real
/// all-MiniLM-L6-v2 (note-sized chunks of about 40 words).
#[cfg(feature = "local-embedder")]
fn indexing_throughput(c: &mut Criterion) {
    let Some(dir) = installed_minilm() else {
        return;
    };
    const CHUNKS: usize = 64;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let embedder: Arc<dyn Embedder> =
        Arc::new(pincer_memory::embed::local::LocalEmbedder::open(&dir).unwrap());
    let mut group = c.benchmark_group("indexing");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements(CHUNKS as u64));
    let mut round = 0;
    group.bench_function("all-MiniLM-L6-v2", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                round += 1;
                let root = tempfile::tempdir().unwrap();
                let workspace = root.path().join("ws");
                std::fs::create_dir_all(workspace.join("memory")).unwrap();
                let mut text = String::new();
                for i in 0..CHUNKS {
                    text.push_str(&format!(
                        "## Note {round}-{i}\n\n{}\n\n",
                        PARAGRAPHS[i % PARAGRAPHS.len()]
                    ));
                }
                std::fs::write(workspace.join("memory/notes.md"), text).unwrap();
                let index = MemoryIndex::open(
                    "bench",
                    root.path().join("m.db"),
                    Sources::new(workspace, Vec::new(), None).unwrap(),
                    IndexSettings::default(),
                    Some(embedder.clone()),
                    "",
                )
                .unwrap();
                let started = std::time::Instant::now();
                let report = rt.block_on(index.sync(Scope::All, None)).unwrap();
                total += started.elapsed();
                assert_eq!(report.chunks_embedded, CHUNKS);
            }
            total
        })
    });
    group.finish();
}

/// A new line saved in `MEMORY.md` until `search` finds it, through the
/// watcher (300 ms debounce) and the real all-MiniLM-L6-v2.
#[cfg(feature = "local-embedder")]
fn save_to_searchable(c: &mut Criterion) {
    let Some(dir) = installed_minilm() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let memory_md = workspace.join("MEMORY.md");
    std::fs::write(&memory_md, format!("# Notes\n\n{}\n", PARAGRAPHS[0])).unwrap();
    let embedder: Arc<dyn Embedder> =
        Arc::new(pincer_memory::embed::local::LocalEmbedder::open(&dir).unwrap());
    let index = MemoryIndex::open(
        "bench",
        root.path().join("m.db"),
        Sources::new(workspace, Vec::new(), None).unwrap(),
        IndexSettings::default(),
        Some(embedder),
        "",
    )
    .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let _watcher = rt.enter();
    pincer_memory::watch::spawn(index.clone(), Default::default(), stop.clone());
    rt.block_on(async {
        while index.status().await.unwrap().last_sync.is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let mut group = c.benchmark_group("save_to_searchable");
    group.sample_size(10);
    let mut round = 0;
    group.bench_function("MEMORY.md", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                round += 1;
                // The file keeps its size: the new line replaces the last.
                let word = format!("zebracode{round}");
                let text = format!(
                    "# Notes\n\n{}\n\nThe locker code is {word}.\n",
                    PARAGRAPHS[0]
                );
                // Saves spaced as a person makes them: the events of the
                // last save are handled before this one starts the clock.
                std::thread::sleep(Duration::from_millis(600));
                let started = std::time::Instant::now();
                std::fs::write(&memory_md, text).unwrap();
                rt.block_on(async {
                    loop {
                        let found = index
                            .search(Query {
                                text: word.clone(),
                                min_score: Some(0.0),
                                ..Query::default()
                            })
                            .await
                            .unwrap();
                        if found.hits.iter().any(|h| h.snippet.contains(&word)) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                });
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
    stop.cancel();
}

#[cfg(not(feature = "local-embedder"))]
fn indexing_throughput(_: &mut Criterion) {}

#[cfg(not(feature = "local-embedder"))]
fn save_to_searchable(_: &mut Criterion) {}

criterion_group!(
    benches,
    search,
    query_embedding,
    indexing_throughput,
    save_to_searchable
);
criterion_main!(benches);
