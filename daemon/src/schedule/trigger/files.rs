//! A `files` trigger: a file created or changed under a workspace glob
//! fires once per burst. The folder the glob starts in is watched with
//! the kernel's notifications (notify: inotify, FSEvents), which wake
//! this task only when something changes; the events of a burst — a file
//! written in several pieces, a dozen files copied at once — are
//! gathered until the folder has been quiet for [`QUIET`], then fire
//! once with every file they touched. No timer runs between bursts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use super::Watch;
use super::event::Event;
use super::limit::Limiter;

/// How long the folder must be quiet before a burst fires.
pub const QUIET: Duration = Duration::from_millis(1500);

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

pub async fn watch(w: Watch, glob: &str, mut limiter: Limiter) {
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
    let matcher = match globset::Glob::new(glob) {
        Ok(g) => g.compile_matcher(),
        Err(e) => {
            tracing::error!(trigger = %name, error = %e, "the glob does not compile");
            return;
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = match notify::recommended_watcher(move |res| {
        let _ = tx.send(res);
    }) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(trigger = %name, error = %e, "cannot watch files");
            return;
        }
    };
    let dir = existing(&workspace, &base_of(glob));
    if let Err(e) = watcher.watch(&dir, RecursiveMode::Recursive) {
        tracing::error!(trigger = %name, folder = %dir.display(), error = %e, "cannot watch the folder");
        return;
    }
    tracing::info!(trigger = %name, folder = %dir.display(), "watching files {glob}");
    let mut pending: BTreeSet<String> = BTreeSet::new();
    loop {
        // Asleep until a file under the glob changes (other events —
        // a folder opened, a file read — are let pass).
        loop {
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                () = w.cancel.cancelled() => return,
            };
            let Some(ev) = ev else { return };
            if take(&workspace, &matcher, ev, &mut pending) {
                break;
            }
        }
        // The burst goes on while such changes keep coming.
        let mut quiet = tokio::time::Instant::now() + QUIET;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => if take(&workspace, &matcher, ev, &mut pending) {
                        quiet = tokio::time::Instant::now() + QUIET;
                    },
                    None => return,
                },
                () = tokio::time::sleep_until(quiet) => break,
                () = w.cancel.cancelled() => return,
            }
        }
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
                        take(&workspace, &matcher, ev, &mut pending);
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

/// Adds the files `event` created or changed that match the glob, as
/// paths relative to the workspace; whether it had any.
fn take(
    workspace: &Path,
    matcher: &globset::GlobMatcher,
    event: notify::Result<notify::Event>,
    pending: &mut BTreeSet<String>,
) -> bool {
    let Ok(event) = event else { return false };
    if !matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_)) {
        return false;
    }
    let mut any = false;
    for path in event.paths {
        if let Ok(rel) = path.strip_prefix(workspace)
            && matcher.is_match(rel)
            && let Some(rel) = rel.to_str()
        {
            pending.insert(rel.to_string());
            any = true;
        }
    }
    any
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
