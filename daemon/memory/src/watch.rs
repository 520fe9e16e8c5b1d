//! Keeps an index fresh (SPEC §10): file events through notify with a
//! debouncer re-index only the files they name, and a reconcile scan at
//! start and every `reconcile_every` heals whatever the events missed
//! (changes while the daemon was down, a watch that failed, an inotify
//! queue overflow). A failing watcher is visible in the index status and is
//! set up again at the next scan; it never fails silently.
//!
//! Only the memory folders are watched (the workspace itself without
//! recursion, `memory/` and the base folders of configured globs with it),
//! so a workspace holding a large project does not exhaust inotify.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::index::{MemoryIndex, Scope};

/// Watcher timings (SPEC §10 defaults: 300 ms, 10 min).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchSettings {
    pub debounce: Duration,
    pub reconcile_every: Duration,
    /// An embedding model unused this long is unloaded.
    pub release_model_after: Duration,
}

impl Default for WatchSettings {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(300),
            reconcile_every: Duration::from_secs(600),
            release_model_after: Duration::from_secs(120),
        }
    }
}

/// Runs the reconcile scan, then watches until `stop` is cancelled.
pub fn spawn(
    index: MemoryIndex,
    settings: WatchSettings,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(index, settings, stop))
}

async fn run(index: MemoryIndex, settings: WatchSettings, stop: CancellationToken) {
    let (tx, mut rx) = mpsc::unbounded_channel::<DebounceEventResult>();
    let mut debouncer = match new_debouncer(settings.debounce, None, move |res| {
        let _ = tx.send(res);
    }) {
        Ok(d) => Some(d),
        Err(e) => {
            index.set_watching(false, Some(format!("cannot start the file watcher: {e}")));
            tracing::error!(
                agent = index.agent(),
                "memory watcher unavailable: {e}; relying on the reconcile scan"
            );
            None
        }
    };
    // Watch first, then scan: a file saved during the scan is seen by the
    // scan, queued as an event, or both; never missed by both.
    let mut watched: BTreeSet<PathBuf> = BTreeSet::new();
    if let Some(d) = debouncer.as_mut() {
        ensure_watches(&index, d, &mut watched);
    }
    reconcile(&index).await;
    let mut scan = tokio::time::interval(settings.reconcile_every);
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    scan.tick().await;
    let mut idle = tokio::time::interval(Duration::from_secs(30));
    idle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(events) = rx.recv() => {
                let mut batch = vec![events];
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                handle_events(&index, batch).await;
                if let Some(d) = debouncer.as_mut() {
                    ensure_watches(&index, d, &mut watched);
                }
            }
            _ = scan.tick() => {
                reconcile(&index).await;
                if let Some(d) = debouncer.as_mut() {
                    ensure_watches(&index, d, &mut watched);
                }
            }
            _ = idle.tick() => {
                if let Some(e) = index.embedder() {
                    e.release_if_idle(settings.release_model_after);
                }
            }
        }
    }
    if let Some(d) = debouncer {
        d.stop_nonblocking();
    }
}

async fn reconcile(index: &MemoryIndex) {
    match index.sync(Scope::All, None).await {
        Ok(report) => {
            if report.files_changed + report.files_removed + report.chunks_embedded > 0 {
                tracing::info!(
                    agent = index.agent(),
                    changed = report.files_changed,
                    removed = report.files_removed,
                    embedded = report.chunks_embedded,
                    ms = report.elapsed_ms,
                    "memory index reconciled"
                );
            }
            if let Some(e) = report.embed_error {
                tracing::warn!(agent = index.agent(), "memory vectors not updated: {e}");
            }
        }
        Err(e) => tracing::error!(agent = index.agent(), "memory reconcile scan failed: {e}"),
    }
}

async fn handle_events(index: &MemoryIndex, batch: Vec<DebounceEventResult>) {
    let mut paths = BTreeSet::new();
    let mut rescan = false;
    for result in batch {
        match result {
            Ok(events) => {
                for event in events {
                    if event.need_rescan() {
                        rescan = true;
                    }
                    for path in &event.paths {
                        // A folder moved or deleted: its files are not named.
                        if path.is_dir() || path.extension().is_none() {
                            rescan = true;
                        }
                        paths.insert(path.clone());
                    }
                }
            }
            Err(errors) => {
                rescan = true;
                let text = errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ");
                tracing::warn!(agent = index.agent(), "memory watcher error: {text}");
                index.set_watching(true, Some(text));
            }
        }
    }
    let scope = if rescan {
        Scope::All
    } else {
        Scope::Paths(paths.into_iter().collect())
    };
    if let Err(e) = index.sync(scope, None).await {
        tracing::error!(agent = index.agent(), "memory re-index failed: {e}");
    }
}

/// Folders to watch and how.
fn roots(index: &MemoryIndex) -> Vec<(PathBuf, RecursiveMode)> {
    let sources = index.sources();
    let ws = &sources.workspace;
    let mut roots = vec![
        (ws.clone(), RecursiveMode::NonRecursive),
        (ws.join("memory"), RecursiveMode::Recursive),
    ];
    for glob in &sources.extra_globs {
        let base: PathBuf = Path::new(glob)
            .components()
            .take_while(|c| {
                !c.as_os_str()
                    .to_string_lossy()
                    .contains(['*', '?', '[', '{'])
            })
            .collect();
        if !base.as_os_str().is_empty() && !base.starts_with("memory") {
            roots.push((ws.join(base), RecursiveMode::Recursive));
        } else if base.as_os_str().is_empty() {
            roots[0].1 = RecursiveMode::Recursive;
        }
    }
    if let Some(dir) = &sources.sessions_dir {
        roots.push((dir.clone(), RecursiveMode::NonRecursive));
    }
    roots
}

fn ensure_watches<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    index: &MemoryIndex,
    debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
    watched: &mut BTreeSet<PathBuf>,
) {
    let mut problem = None;
    for (dir, mode) in roots(index) {
        if watched.contains(&dir) || !dir.is_dir() {
            continue;
        }
        match debouncer.watch(&dir, mode) {
            Ok(()) => {
                watched.insert(dir);
            }
            Err(e) => {
                tracing::warn!(agent = index.agent(), dir = %dir.display(), "cannot watch: {e}");
                problem = Some(format!("cannot watch {}: {e}", dir.display()));
            }
        }
    }
    // A folder that went away is watched again once it is back.
    watched.retain(|dir| dir.is_dir());
    index.set_watching(!watched.is_empty(), problem);
}
