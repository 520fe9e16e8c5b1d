//! The watcher on real files: a workspace that does not exist when the
//! watcher starts is waited for from its nearest existing parent, and a
//! note saved in it is searchable long before the reconcile scan.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use pincer_memory::watch::{WatchSettings, spawn};
use pincer_memory::{IndexSettings, MemoryIndex, Query, Sources};
use tokio_util::sync::CancellationToken;

fn open(db: &Path, workspace: &Path) -> MemoryIndex {
    MemoryIndex::open(
        "main",
        db.to_path_buf(),
        Sources::new(workspace.to_path_buf(), Vec::new(), None).unwrap(),
        IndexSettings::default(),
        None,
        "[memory] embedder = \"none\"",
    )
    .unwrap()
}

async fn found(index: &MemoryIndex, text: &str) -> bool {
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
        .any(|h| h.snippet.contains(text))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_created_two_levels_down_after_start_is_watched() {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("home/workspace");
    let index = open(&root.path().join("memory.db"), &workspace);
    let settings = WatchSettings {
        debounce: Duration::from_millis(50),
        // Far away: only the watcher can find the note in time.
        reconcile_every: Duration::from_secs(3600),
        ..WatchSettings::default()
    };
    let stop = CancellationToken::new();
    let task = spawn(index.clone(), settings, stop.clone());
    // The start-up scan has run (and found nothing) before the folder exists.
    let started = Instant::now();
    while index.status().await.unwrap().last_sync.is_none() {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!workspace.exists());
    assert!(index.status().await.unwrap().watching);

    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("MEMORY.md"),
        "# Boat\n\nThe boat is named Aurora.\n",
    )
    .unwrap();
    let saved = Instant::now();
    while !found(&index, "Aurora").await {
        assert!(
            saved.elapsed() < Duration::from_secs(5),
            "MEMORY.md in a workspace made after start was not indexed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The watch now follows the folder itself: a later edit is seen too.
    std::fs::write(
        workspace.join("MEMORY.md"),
        "# Boat\n\nThe boat is named Aurora.\n\nThe dinghy is named Pip.\n",
    )
    .unwrap();
    let saved = Instant::now();
    while !found(&index, "Pip").await {
        assert!(
            saved.elapsed() < Duration::from_secs(5),
            "the edit was missed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    task.await.unwrap();
}
