//! Retrieval quality on data we did not write: the BFCL v4 `memory`
//! category (PyPI `bfcl-eval`, fetched by `tests/setup.sh`). Each scenario's
//! prerequisite conversations become notes (`memory/<conversation>.md`, one
//! paragraph per user turn), its questions are the queries, and the turn
//! holding the accepted answer is the relevant one. Prints recall@6 and MRR
//! for full-text only, vector only and hybrid; hybrid must beat both legs.
#![cfg(feature = "local-embedder")]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use pincer_memory::embed::local::LocalEmbedder;
use pincer_memory::{Embedder, IndexSettings, Legs, MemoryIndex, Query, Scope, Sources};
use pincer_testkit::peers::{bfcl_data, minilm_dir};
use serde_json::Value;

/// A question and where its answer was said.
struct Case {
    scenario: String,
    question: String,
    file: String,
    line: u32,
}

#[derive(Default)]
struct Score {
    found: usize,
    reciprocal_ranks: f64,
    total: usize,
}

impl Score {
    fn recall(&self) -> f64 {
        self.found as f64 / self.total.max(1) as f64
    }
    fn mrr(&self) -> f64 {
        self.reciprocal_ranks / self.total.max(1) as f64
    }
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Lower case, single spaces, no quote marks (the answer sources quote
/// with other marks than the conversations).
fn normalise(s: &str) -> String {
    s.replace(
        ['\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}', '"', '\''],
        "",
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ")
    .to_lowercase()
}

/// Writes each scenario's conversations as notes under `root/<scenario>/`
/// and returns the cases whose answer turn could be located.
fn build(root: &Path) -> (Vec<Case>, usize) {
    let data = bfcl_data();
    let questions = read_lines(&data.join("BFCL_v4_memory.json"));
    let answers: BTreeMap<String, Value> =
        read_lines(&data.join("possible_answer/BFCL_v4_memory.json"))
            .into_iter()
            .map(|a| (a["id"].as_str().unwrap().to_string(), a))
            .collect();
    // scenario -> [(file, line, normalised turn)]
    let mut turns: BTreeMap<String, Vec<(String, u32, String)>> = BTreeMap::new();
    for entry in std::fs::read_dir(data.join("memory_prereq_conversation")).unwrap() {
        let path = entry.unwrap().path();
        let scenario = path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("memory_")
            .to_string();
        let dir = root.join(&scenario).join("memory");
        std::fs::create_dir_all(&dir).unwrap();
        for conversation in read_lines(&path) {
            let id = conversation["id"].as_str().unwrap().to_string();
            let file = format!("memory/{id}.md");
            let mut text = format!("# {}\n", conversation["topic"].as_str().unwrap_or(&id));
            let mut line = 1;
            for turn in conversation["question"].as_array().unwrap() {
                for message in turn.as_array().unwrap() {
                    let content = message["content"]
                        .as_str()
                        .unwrap_or_default()
                        .replace('\n', " ");
                    text.push('\n');
                    text.push_str(&content);
                    text.push('\n');
                    line += 2;
                    turns.entry(scenario.clone()).or_default().push((
                        file.clone(),
                        line,
                        normalise(&content),
                    ));
                }
            }
            std::fs::write(dir.join(format!("{id}.md")), text).unwrap();
        }
    }
    let mut cases = Vec::new();
    let mut unmatched = 0;
    for q in questions {
        let id = q["id"].as_str().unwrap();
        let scenario = q["scenario"].as_str().unwrap().to_string();
        let question = q["question"][0][0]["content"].as_str().unwrap().to_string();
        let source = answers[id]["source"].as_str().unwrap_or_default();
        // Sources quote the answer turn in pieces ("a... b", "Label: fact").
        let fragments: Vec<String> = source
            .split("...")
            .flat_map(|f| f.split(": "))
            .map(|f| normalise(f).trim_matches([' ', ',', '.']).to_string())
            .filter(|f| f.len() >= 4)
            .collect();
        let found = turns.get(&scenario).and_then(|ts| {
            ts.iter().find(|(_, _, t)| {
                !fragments.is_empty() && fragments.iter().all(|f| t.contains(f.as_str()))
            })
        });
        match found {
            Some((file, line, _)) => cases.push(Case {
                scenario,
                question,
                file: file.clone(),
                line: *line,
            }),
            None => unmatched += 1,
        }
    }
    (cases, unmatched)
}

async fn index(root: &Path, scenario: &str, embedder: Arc<dyn Embedder>) -> MemoryIndex {
    let workspace = root.join(scenario);
    let sources = Sources::new(workspace.clone(), Vec::new(), None).unwrap();
    let index = MemoryIndex::open(
        scenario,
        root.join(format!("{scenario}.db")),
        sources,
        IndexSettings::default(),
        Some(embedder),
        "",
    )
    .unwrap();
    let report = index.sync(Scope::All, None).await.unwrap();
    assert!(report.embed_error.is_none(), "{report:?}");
    index
}

async fn evaluate(
    cases: &[Case],
    indexes: &BTreeMap<String, MemoryIndex>,
    legs: Legs,
    min_score: Option<f64>,
) -> Score {
    let mut score = Score::default();
    for case in cases {
        let outcome = indexes[&case.scenario]
            .search(Query {
                text: case.question.clone(),
                limit: Some(6),
                min_score,
                legs,
            })
            .await
            .unwrap();
        score.total += 1;
        if let Some(rank) = outcome.hits.iter().position(|h| {
            h.path == case.file && h.start_line <= case.line && case.line <= h.end_line
        }) {
            score.found += 1;
            score.reciprocal_ranks += 1.0 / (rank + 1) as f64;
        }
    }
    score
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_search_beats_each_leg_on_bfcl_memory() {
    let root = tempfile::tempdir().unwrap();
    let (cases, unmatched) = build(root.path());
    assert!(
        cases.len() >= 140,
        "only {} of 155 BFCL memory questions could be tied to the turn holding their answer ({unmatched} not)",
        cases.len()
    );
    // The default embedder must make hybrid search pay; others (built in
    // with `--features bundled-embedder`) are measured for comparison.
    #[allow(unused_mut)]
    let mut embedders: Vec<(&str, Arc<dyn Embedder>, bool)> = vec![(
        "all-MiniLM-L6-v2 (local)",
        Arc::new(LocalEmbedder::open(&minilm_dir()).unwrap()),
        true,
    )];
    #[cfg(feature = "bundled-embedder")]
    embedders.push((
        "paraphrase-MiniLM-L3-v2 q4 (bundled)",
        Arc::new(pincer_memory::embed::bundled::BundledEmbedder::default()),
        false,
    ));

    println!(
        "\nBFCL v4 memory: {} questions over {} scenarios ({unmatched} without a locatable answer turn)",
        cases.len(),
        cases
            .iter()
            .map(|c| &c.scenario)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    println!("| embedder | legs | recall@6 | MRR |\n|---|---|---|---|");
    for (name, embedder, must_win) in embedders {
        let started = std::time::Instant::now();
        let mut indexes = BTreeMap::new();
        for scenario in cases
            .iter()
            .map(|c| c.scenario.clone())
            .collect::<std::collections::BTreeSet<_>>()
        {
            indexes.insert(
                scenario.clone(),
                index(root.path(), &scenario, embedder.clone()).await,
            );
        }
        let indexed = started.elapsed();
        let mut chunks = 0;
        for index in indexes.values() {
            chunks += index.status().await.unwrap().chunks;
        }
        // Ranking quality: no minimum score, so every leg fills its six.
        let text = evaluate(&cases, &indexes, Legs::TextOnly, Some(0.0)).await;
        let vector = evaluate(&cases, &indexes, Legs::VectorOnly, Some(0.0)).await;
        let hybrid = evaluate(&cases, &indexes, Legs::Hybrid, Some(0.0)).await;
        let defaults = evaluate(&cases, &indexes, Legs::Hybrid, None).await;
        for (legs, s) in [
            ("full text only", &text),
            ("vector only", &vector),
            ("hybrid", &hybrid),
            ("hybrid, min score 0.35 (defaults)", &defaults),
        ] {
            println!("| {name} | {legs} | {:.3} | {:.3} |", s.recall(), s.mrr());
        }
        println!(
            "({name}: {chunks} chunks indexed in {:.1} s, {:.1} chunks/s)",
            indexed.as_secs_f64(),
            chunks as f64 / indexed.as_secs_f64()
        );
        if !must_win {
            continue;
        }
        assert!(
            hybrid.recall() > text.recall() && hybrid.recall() > vector.recall(),
            "{name}: hybrid recall@6 {:.3} must beat full text {:.3} and vector {:.3}",
            hybrid.recall(),
            text.recall(),
            vector.recall()
        );
        assert!(
            hybrid.mrr() > text.mrr() && hybrid.mrr() > vector.mrr(),
            "{name}: hybrid MRR {:.3} must beat full text {:.3} and vector {:.3}",
            hybrid.mrr(),
            text.mrr(),
            vector.mrr()
        );
    }
}
