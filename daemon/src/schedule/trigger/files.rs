//! A `files` trigger: a file created or changed under a workspace glob
//! fires once per burst. The folder the glob starts in is watched with
//! the kernel's notifications (notify: inotify, FSEvents) — one watcher
//! for all `files` triggers ([`FileEvents`]), whose thread hands a
//! creation or a change to the triggers whose folder holds it and wakes
//! nobody for anything else (a folder opened, a file read). The events of
//! a burst — a file written in several pieces, a dozen files copied at
//! once — are gathered until the folder has been quiet for [`QUIET`],
//! then fire once with every file they touched. No timer runs between
//! bursts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::Watch;
use super::event::Event;
use super::limit::Limiter;

/// How long the folder must be quiet before a burst fires.
pub const QUIET: Duration = Duration::from_millis(1500);

type Routes = Arc<Mutex<Vec<(PathBuf, UnboundedSender<PathBuf>)>>>;

/// One kernel watcher shared by the `files` triggers of a config.
#[derive(Default)]
pub struct FileEvents {
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    routes: Routes,
}

impl FileEvents {
    /// Watches `dir` (recursively) for one trigger: its receiver gets
    /// each path created or changed under it.
    pub fn subscribe(&self, dir: &Path) -> Result<UnboundedReceiver<PathBuf>, String> {
        let mut watcher = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if watcher.is_none() {
            let routes = self.routes.clone();
            let w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                let Ok(event) = res else { return };
                if !matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_)) {
                    return;
                }
                let routes = routes.lock().unwrap_or_else(|e| e.into_inner());
                for path in event.paths {
                    for (dir, tx) in routes.iter() {
                        if path.starts_with(dir) {
                            let _ = tx.send(path.clone());
                        }
                    }
                }
            })
            .map_err(|e| format!("cannot watch files: {e}"))?;
            *watcher = Some(w);
        }
        let (tx, rx) = unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((dir.to_path_buf(), tx));
        if let Some(w) = watcher.as_mut() {
            w.watch(dir, RecursiveMode::Recursive)
                .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
        }
        Ok(rx)
    }
}

/// The folder a glob starts in: its parts up to the first with a glob
/// character (`inbox/**/*.pdf` → `inbox`).
pub fn base_of(glob: &str) -> PathBuf {
    glob.split('/')
        .take_while(|part| !crate::config::tool_names::is_glob(part))
        .collect()
}

/// The nearest folder that exists at or above `dir`, not above `root`.
fn existing(root: &Path, dir: &Path) -> PathBuf {
    let mut d = root.join(dir);
    while !d.is_dir() && d != root {
        if !d.pop() {
            break;
        }
    }
    d
}

pub async fn watch(w: Watch, events: Arc<FileEvents>, glob: &str, mut limiter: Limiter) {
    let name = w.spec.name.clone();
    let Some(workspace) = w
        .runtime()
        .config()
        .agent(&w.spec.agent)
        .map(|a| a.workspace.clone())
    else {
        return;
    };
    // Names are matched as notify reports them: under the workspace's
    // real path.
    let workspace = std::fs::canonicalize(&workspace).unwrap_or(workspace);
    let mut matcher = match globset::Glob::new(glob) {
        Ok(glob) => Matcher {
            glob,
            compiled: None,
        },
        Err(e) => {
            tracing::error!(trigger = %name, error = %e, "the glob does not compile");
            return;
        }
    };
    let dir = existing(&workspace, &base_of(glob));
    let mut rx = match events.subscribe(&dir) {
        Ok(rx) => rx,
        Err(e) => {
            tracing::error!(trigger = %name, error = %e, "cannot watch the folder");
            return;
        }
    };
    tracing::info!(trigger = %name, folder = %dir.display(), "watching files {glob}");
    let mut pending: BTreeSet<String> = BTreeSet::new();
    loop {
        // Asleep until a file under the glob changes (other events —
        // a folder opened, a file read, a file the glob leaves out — are
        // let pass; the matcher they compiled goes once they stop).
        loop {
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                () = w.cancel.cancelled() => return,
                () = tokio::time::sleep(QUIET), if matcher.compiled.is_some() => {
                    matcher.compiled = None;
                    continue;
                }
            };
            let Some(ev) = ev else { return };
            if take(&workspace, &mut matcher, ev, &mut pending) {
                break;
            }
        }
        // The burst goes on while such changes keep coming.
        let mut quiet = tokio::time::Instant::now() + QUIET;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => if take(&workspace, &mut matcher, ev, &mut pending) {
                        quiet = tokio::time::Instant::now() + QUIET;
                    },
                    None => return,
                },
                () = tokio::time::sleep_until(quiet) => break,
                () = w.cancel.cancelled() => return,
            }
        }
        matcher.compiled = None;
        // Files that are gone again (a temporary file) fire nothing.
        pending.retain(|rel| workspace.join(rel).is_file());
        if pending.is_empty() {
            continue;
        }
        // Over its limits the trigger waits, still gathering files.
        while let Err(at) = limiter.check(w.now()) {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        take(&workspace, &mut matcher, ev, &mut pending);
                    }
                    None => return,
                },
                go = w.sleep_until(at) => if !go { return },
            }
        }
        pending.retain(|rel| workspace.join(rel).is_file());
        if pending.is_empty() {
            continue;
        }
        limiter.record(w.now());
        let files: Vec<String> = std::mem::take(&mut pending).into_iter().collect();
        w.fire(Event {
            kind: "files",
            summary: match files.len() {
                1 => files[0].clone(),
                n => format!("{n} files"),
            },
            data: files.join("\n"),
        });
    }
}

/// A trigger's glob, compiled only while its folder has events: a
/// compiled glob is a regex of several kilobytes, which a hundred idle
/// triggers would hold for nothing.
struct Matcher {
    glob: globset::Glob,
    compiled: Option<globset::GlobMatcher>,
}

impl Matcher {
    fn is_match(&mut self, rel: &Path) -> bool {
        let glob = &self.glob;
        self.compiled
            .get_or_insert_with(|| glob.compile_matcher())
            .is_match(rel)
    }
}

/// Adds `path` (created or changed) if it matches the glob, relative to
/// the workspace; whether it did.
fn take(
    workspace: &Path,
    matcher: &mut Matcher,
    path: PathBuf,
    pending: &mut BTreeSet<String>,
) -> bool {
    if let Ok(rel) = path.strip_prefix(workspace)
        && matcher.is_match(rel)
        && let Some(rel) = rel.to_str()
    {
        pending.insert(rel.to_string());
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_is_watched_from_its_literal_folder() {
        assert_eq!(base_of("inbox/**"), PathBuf::from("inbox"));
        assert_eq!(base_of("docs/in/*.pdf"), PathBuf::from("docs/in"));
        assert_eq!(base_of("*.md"), PathBuf::from(""));
    }
}
