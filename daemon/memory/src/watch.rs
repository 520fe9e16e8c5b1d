//! Keeps an index fresh (SPEC §10): file events through notify re-index
//! only the files they name, once the first event of a burst is `debounce`
//! old, and a reconcile scan at start and every `reconcile_every` heals
//! whatever the events missed (changes while the daemon was down, a watch
//! that failed, an inotify queue overflow). A failing watcher is visible in
//! the index status and is set up again at the next scan; it never fails
//! silently. A re-index that fails (a full disk) is tried again, whole,
//! with a growing wait ([`Retry`]), so the index catches up once the
//! cause is gone rather than at the next scan.
//!
//! Idle, the watcher wakes nobody: no timer runs between a burst's
//! deadline and the next scan (SPEC §14, "≈ 0 wake-ups between
//! deadlines"). So the debouncing is this task's own deadline rather than
//! notify-debouncer-full's, whose thread ticks every quarter of the
//! debounce for the daemon's life; and events that change nothing are
//! dropped in notify's thread: inotify's watch mask (fixed by notify)
//! includes `IN_OPEN`, and a scan opens every folder and note it reads, so
//! acting on opens re-scanned on every scan's own opens, round after round
//! (about 30,000 context switches a minute with 100 folders in the
//! workspace).
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

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;
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
    let (tx, mut rx) = mpsc::unbounded_channel::<notify::Result<Event>>();
    let mut watcher = match notify::recommended_watcher(move |res: notify::Result<Event>| {
        if res.as_ref().is_ok_and(|e| !changes_files(e)) {
            return;
        }
        let _ = tx.send(res);
    }) {
        Ok(w) => Some(w),
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
    if let Some(w) = watcher.as_mut() {
        watches.ensure(&index, w);
    }
    let mut retry = Retry::default();
    retry.after(reconcile(&index).await, settings.reconcile_every);
    let mut scan = tokio::time::interval(settings.reconcile_every);
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    scan.tick().await;
    // Only an embedder can hold a model to let go of; without one this
    // timer would only wake the daemon.
    let mut idle = index.embedder().is_some().then(|| {
        let mut idle = tokio::time::interval(Duration::from_secs(30));
        idle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        idle
    });
    let mut burst = Burst::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(event) = rx.recv() => {
                burst.add(event, settings.debounce);
                while let Ok(more) = rx.try_recv() {
                    burst.add(more, settings.debounce);
                }
            }
            () = tokio::time::sleep_until(burst.due.unwrap_or_else(Instant::now)), if burst.due.is_some() => {
                // Watch before re-indexing: a folder that just appeared is
                // watched first, then scanned whole, so a file written in
                // it meanwhile is seen by the scan or by the new watch.
                let appeared = watcher
                    .as_mut()
                    .is_some_and(|w| watches.ensure(&index, w));
                // A success here covers only the burst's files: a retry
                // pending for an earlier failure stays.
                if !handle_events(&index, std::mem::take(&mut burst), appeared).await {
                    retry.after(false, settings.reconcile_every);
                }
            }
            _ = scan.tick() => {
                if let Some(w) = watcher.as_mut() {
                    watches.ensure(&index, w);
                }
                retry.after(reconcile(&index).await, settings.reconcile_every);
            }
            () = tokio::time::sleep_until(retry.due().unwrap_or_else(Instant::now)), if retry.due().is_some() => {
                retry.after(reconcile(&index).await, settings.reconcile_every);
            }
            _ = async { idle.as_mut()?.tick().await; Some(()) }, if idle.is_some() => {
                if let Some(e) = index.embedder()
                    && e.release_if_idle(settings.release_model_after)
                    && let Err(e) = index.release_mapped_pages().await
                {
                    tracing::debug!(error = %e, "memory index: could not let go of its mapped pages");
                }
            }
        }
    }
}

/// Whether an event may mean a file changed: not an open, a read or a
/// close without writing (the scans' own, a reader's, an editor's look).
/// An overflowed queue (a rescan) always counts.
fn changes_files(event: &Event) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => event.need_rescan(),
        _ => true,
    }
}

/// The events gathered since the last re-index, and when they are due: a
/// burst's first event plus the debounce, so that a file written in
/// several pieces, or saved through a temporary file and a rename, is read
/// once, and a file written without pause is still read every debounce.
#[derive(Default)]
struct Burst {
    events: Vec<Event>,
    errors: Vec<notify::Error>,
    due: Option<Instant>,
}

impl Burst {
    fn add(&mut self, event: notify::Result<Event>, debounce: Duration) {
        match event {
            Ok(e) => self.events.push(e),
            Err(e) => self.errors.push(e),
        }
        self.due.get_or_insert_with(|| Instant::now() + debounce);
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

/// A scan of everything; whether it could be done.
async fn reconcile(index: &MemoryIndex) -> bool {
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
            true
        }
        Err(e) => {
            tracing::error!(agent = index.agent(), "memory reconcile scan failed: {e}");
            false
        }
    }
}

/// Re-indexes what a burst of events names; whether it could be done.
async fn handle_events(index: &MemoryIndex, burst: Burst, appeared: bool) -> bool {
    let roots = roots(index);
    // Events from a parent watched while a memory folder is missing name
    // its other entries too; only paths inside the memory folders count.
    let ours = |path: &Path| roots.iter().any(|(root, _)| path.starts_with(root));
    let mut paths = BTreeSet::new();
    let mut rescan = appeared;
    for event in burst.events {
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
    if !burst.errors.is_empty() {
        rescan = true;
        let text = burst
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        tracing::warn!(agent = index.agent(), "memory watcher error: {text}");
        index.set_watching(true, Some(text));
    }
    let scope = if rescan {
        Scope::All
    } else if paths.is_empty() {
        return true;
    } else {
        Scope::Paths(paths.into_iter().collect())
    };
    match index.sync(scope, None).await {
        Ok(report) => {
            release_after_indexing(index, report.chunks_embedded);
            true
        }
        Err(e) => {
            tracing::error!(agent = index.agent(), "memory re-index failed: {e}");
            false
        }
    }
}

/// When a failed re-index (a full disk, say) is tried again: after
/// [`RETRY_FIRST`], then twice as long each time up to the reconcile
/// interval. The index catches up soon after the cause goes away, and a
/// lasting failure wakes the daemon seldom; none is pending while the
/// index is fine, so an idle daemon still wakes nobody.
#[derive(Default)]
struct Retry {
    next: Option<(Instant, Duration)>,
}

/// The first wait before a failed re-index is tried again.
const RETRY_FIRST: Duration = Duration::from_secs(2);

impl Retry {
    fn after(&mut self, ok: bool, longest: Duration) {
        self.next = if ok {
            None
        } else {
            let wait = self.next.map_or(RETRY_FIRST, |(_, last)| {
                (last * 2).min(longest.max(RETRY_FIRST))
            });
            Some((Instant::now() + wait, wait))
        };
    }

    fn due(&self) -> Option<Instant> {
        self.next.map(|(at, _)| at)
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
    fn ensure(&mut self, index: &MemoryIndex, watcher: &mut impl Watcher) -> bool {
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
            match watcher.watch(&dir, mode) {
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
            let _ = watcher.unwatch(gone);
        }
        self.parents.retain(|p| wanted.contains(p));
        for parent in wanted {
            if self.parents.contains(&parent) {
                continue;
            }
            match watcher.watch(&parent, RecursiveMode::NonRecursive) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_reindex_is_retried_sooner_then_later_and_a_success_ends_it() {
        let longest = Duration::from_secs(600);
        let mut retry = Retry::default();
        assert!(
            retry.due().is_none(),
            "nothing pending while the index is fine"
        );
        let waits: Vec<Duration> = (0..11)
            .map(|_| {
                retry.after(false, longest);
                retry.next.map(|(_, wait)| wait).unwrap_or_default()
            })
            .collect();
        assert_eq!(waits[0], RETRY_FIRST);
        assert_eq!(waits[1], RETRY_FIRST * 2);
        assert_eq!(waits[10], longest, "{waits:?}");
        retry.after(true, longest);
        assert!(retry.due().is_none());
    }
}
