//! The watcher on real files: a workspace that does not exist when the
//! watcher starts is waited for from its nearest existing parent, and a
//! note saved in it is searchable long before the reconcile scan.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pincer_memory::watch::{WatchSettings, spawn};
use pincer_memory::{IndexSettings, MemoryIndex, Query, Sources};
use tokio_util::sync::CancellationToken;

mod common {
    pub mod projection;
}
use common::projection::ProjectionEmbedder;

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

/// Indexing loads the embedding model; the watcher lets it go right after,
/// at start and after a save, so an idle daemon does not hold it. A scan
/// that embedded nothing asks nothing.
#[tokio::test(flavor = "multi_thread")]
async fn the_model_is_released_right_after_the_watcher_indexed() {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("workspace");
    std::fs::create_dir_all(workspace.join("memory")).unwrap();
    std::fs::write(workspace.join("MEMORY.md"), "Ada likes green tea.\n").unwrap();
    let embedder = Arc::new(ProjectionEmbedder::new("p", 16));
    let index = MemoryIndex::open(
        "main",
        root.path().join("memory.db"),
        Sources::new(workspace.clone(), Vec::new(), None).unwrap(),
        IndexSettings::default(),
        Some(embedder.clone()),
        "",
    )
    .unwrap();
    let settings = WatchSettings {
        debounce: Duration::from_millis(50),
        reconcile_every: Duration::from_secs(3600),
        ..WatchSettings::default()
    };
    let stop = CancellationToken::new();
    let task = spawn(index.clone(), settings, stop.clone());
    let released = |n: usize| {
        let embedder = embedder.clone();
        async move {
            let started = Instant::now();
            loop {
                // Right away, not the idle check's `release_model_after`.
                let releases: Vec<Duration> = embedder
                    .releases
                    .lock()
                    .unwrap()
                    .iter()
                    .copied()
                    .filter(|idle| idle.is_zero())
                    .collect();
                if releases.len() >= n {
                    return releases;
                }
                assert!(started.elapsed() < Duration::from_secs(10), "{releases:?}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    assert_eq!(
        released(1).await,
        [Duration::ZERO],
        "after the start-up scan"
    );
    std::fs::write(workspace.join("memory/2026-11-27.md"), "Bo has the keys.\n").unwrap();
    assert_eq!(released(2).await, [Duration::ZERO; 2], "after the save");
    assert!(found(&index, "keys").await);
    stop.cancel();
    task.await.unwrap();
}
