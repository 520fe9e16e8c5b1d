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
//!
//! A memory folder that does not exist yet (a first start before the
//! workspace is made, a workspace deleted and made again) is waited for:
//! its nearest existing parent is watched without recursion, and each
//! creation under it moves the watch one level down until the folder
//! itself is watched, which is then scanned whole.

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
    let mut watches = Watches::default();
    if let Some(d) = debouncer.as_mut() {
        watches.ensure(&index, d);
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
                // Watch before re-indexing: a folder that just appeared is
                // watched first, then scanned whole, so a file written in
                // it meanwhile is seen by the scan or by the new watch.
                let appeared = debouncer
                    .as_mut()
                    .is_some_and(|d| watches.ensure(&index, d));
                handle_events(&index, batch, appeared).await;
            }
            _ = scan.tick() => {
                if let Some(d) = debouncer.as_mut() {
                    watches.ensure(&index, d);
                }
                reconcile(&index).await;
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

/// Indexing loaded the embedding model to embed what changed: it goes
/// again at once rather than after `release_model_after`, so a daemon that
/// only indexed its notes does not hold the model (about 95 MB) while
/// idle. A search loads it back.
fn release_after_indexing(index: &MemoryIndex, embedded: usize) {
    if embedded > 0
        && let Some(e) = index.embedder()
    {
        e.release_if_idle(Duration::ZERO);
    }
}

async fn reconcile(index: &MemoryIndex) {
    match index.sync(Scope::All, None).await {
        Ok(report) => {
            release_after_indexing(index, report.chunks_embedded);
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

async fn handle_events(index: &MemoryIndex, batch: Vec<DebounceEventResult>, appeared: bool) {
    let roots = roots(index);
    // Events from a parent watched while a memory folder is missing name
    // its other entries too; only paths inside the memory folders count.
    let ours = |path: &Path| roots.iter().any(|(root, _)| path.starts_with(root));
    let mut paths = BTreeSet::new();
    let mut rescan = appeared;
    for result in batch {
        match result {
            Ok(events) => {
                for event in events {
                    if event.need_rescan() {
                        rescan = true;
                    }
                    for path in event.paths.iter().filter(|p| ours(p)) {
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
    } else if paths.is_empty() {
        return;
    } else {
        Scope::Paths(paths.into_iter().collect())
    };
    match index.sync(scope, None).await {
        Ok(report) => release_after_indexing(index, report.chunks_embedded),
        Err(e) => tracing::error!(agent = index.agent(), "memory re-index failed: {e}"),
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

/// What the watcher watches now.
#[derive(Default)]
struct Watches {
    /// Memory folders, each in its own mode.
    folders: BTreeSet<PathBuf>,
    /// Nearest existing parents of memory folders that do not exist yet,
    /// watched without recursion.
    parents: BTreeSet<PathBuf>,
}

impl Watches {
    /// Watches every memory folder that exists and the nearest existing
    /// parent of each one that does not; returns whether a memory folder
    /// got its watch now (it must then be scanned whole).
    fn ensure<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
        &mut self,
        index: &MemoryIndex,
        debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
    ) -> bool {
        let mut problem = None;
        let mut appeared = false;
        // A folder that went away is watched again once it is back.
        self.folders.retain(|dir| dir.is_dir());
        let mut wanted = BTreeSet::new();
        for (dir, mode) in roots(index) {
            if self.folders.contains(&dir) {
                continue;
            }
            if !dir.is_dir() {
                if let Some(parent) = dir.ancestors().skip(1).find(|a| a.is_dir()) {
                    wanted.insert(parent.to_path_buf());
                }
                continue;
            }
            match debouncer.watch(&dir, mode) {
                Ok(()) => {
                    self.folders.insert(dir);
                    appeared = true;
                }
                Err(e) => {
                    tracing::warn!(agent = index.agent(), dir = %dir.display(), "cannot watch: {e}");
                    problem = Some(format!("cannot watch {}: {e}", dir.display()));
                }
            }
        }
        // A parent that is itself a watched memory folder already reports
        // what is created in it.
        wanted.retain(|p| !self.folders.contains(p));
        for gone in self.parents.difference(&wanted) {
            let _ = debouncer.unwatch(gone);
        }
        self.parents.retain(|p| wanted.contains(p));
        for parent in wanted {
            if self.parents.contains(&parent) {
                continue;
            }
            match debouncer.watch(&parent, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    tracing::debug!(agent = index.agent(), dir = %parent.display(), "waiting for a memory folder to appear");
                    self.parents.insert(parent);
                }
                Err(e) => {
                    tracing::warn!(agent = index.agent(), dir = %parent.display(), "cannot watch: {e}");
                    problem = Some(format!("cannot watch {}: {e}", parent.display()));
                }
            }
        }
        index.set_watching(
            !self.folders.is_empty() || !self.parents.is_empty(),
            problem,
        );
        appeared
    }
}
