//! `files` triggers: a file created or changed under a workspace glob
//! fires once per burst. The folder the glob starts in is watched with
//! the kernel's notifications (notify: inotify, FSEvents). The events of
//! a burst — a file written in several pieces, a dozen files copied at
//! once — are gathered until the folder has been quiet for [`QUIET`],
//! then fire once with every file they touched. No timer runs between
//! bursts.
//!
//! All the `files` triggers of a config share one kernel watcher and one
//! task ([`watch_all`]): the watcher's thread sends a created or changed
//! path, and the task hands it to the triggers whose folder holds it.
//! A trigger is a few hundred bytes of state ([`Burst`]), not a task and
//! a channel of its own — a hundred of them would hold a quarter of a
//! megabyte for nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc::unbounded_channel;
use tokio::time::Instant;

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

/// A `files` trigger of the config in force: the folder it watches and
/// its burst.
struct FileTrigger {
    w: Watch,
    dir: PathBuf,
    burst: Burst,
}

impl FileTrigger {
    /// Sets `w` up to watch `glob` (under its agent's workspace) with
    /// `watcher`; `None`, logged, when it cannot.
    fn new(
        w: Watch,
        glob: &str,
        limiter: Limiter,
        watcher: &mut notify::RecommendedWatcher,
    ) -> Option<Self> {
        let name = &w.spec.name;
        let workspace = w
            .config()
            .agent(&w.spec.agent)
            .map(|a| a.workspace.clone())?;
        // Names are matched as notify reports them: under the
        // workspace's real path.
        let workspace = std::fs::canonicalize(&workspace).unwrap_or(workspace);
        let dir = existing(&workspace, &base_of(glob));
        if let Err(e) = watcher.watch(&dir, RecursiveMode::Recursive) {
            tracing::error!(trigger = %name, folder = %dir.display(), error = %e, "cannot watch the folder");
            return None;
        }
        tracing::info!(trigger = %name, folder = %dir.display(), "watching files {glob}");
        Some(Self {
            dir,
            burst: Burst::new(workspace, glob, limiter),
            w,
        })
    }

    fn fire(&self, files: Vec<String>) {
        self.w.fire(Event {
            kind: "files",
            summary: match files.len() {
                1 => files[0].clone(),
                n => format!("{n} files"),
            },
            data: files.join("\n"),
        });
    }
}

/// Watches the `files` triggers of a config until they are cancelled
/// (they share the cancel and the clock of their [`Watch`]).
pub async fn watch_all(triggers: Vec<(Watch, String, Limiter)>) {
    let (tx, mut rx) = unbounded_channel::<PathBuf>();
    // Only creations and changes: a folder opened or a file read wakes
    // nobody.
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else { return };
        if matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_)) {
            for path in event.paths {
                let _ = tx.send(path);
            }
        }
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            for (w, ..) in &triggers {
                tracing::error!(trigger = %w.spec.name, error = %e, "cannot watch files");
            }
            return;
        }
    };
    let mut list: Vec<FileTrigger> = triggers
        .into_iter()
        .filter_map(|(w, glob, limiter)| FileTrigger::new(w, &glob, limiter, &mut watcher))
        .collect();
    list.shrink_to_fit();
    let Some(any) = list.first().map(|t| t.w.clone()) else {
        return;
    };
    loop {
        let soon = list.iter().filter_map(|t| t.burst.wake()).min();
        let held = list.iter().filter_map(|t| t.burst.held()).min();
        tokio::select! {
            path = rx.recv() => {
                let Some(path) = path else { return };
                let now = Instant::now();
                for t in list.iter_mut().filter(|t| path.starts_with(&t.dir)) {
                    t.burst.saw(&path, now);
                }
            }
            () = tokio::time::sleep_until(soon.unwrap_or_else(Instant::now)), if soon.is_some() => {
                let (now, at) = (Instant::now(), any.now());
                for t in &mut list {
                    if t.burst.wake().is_some_and(|d| d <= now)
                        && let Some(files) = t.burst.quiet(at, &Path::is_file)
                    {
                        t.fire(files);
                    }
                }
            }
            go = any.sleep_until(held.unwrap_or(Timestamp::MAX)), if held.is_some() => {
                if !go {
                    return;
                }
                let at = any.now();
                for t in &mut list {
                    if t.burst.held().is_some_and(|until| until <= at)
                        && let Some(files) = t.burst.release(at, &Path::is_file)
                    {
                        t.fire(files);
                    }
                }
            }
            () = any.cancel.cancelled() => return,
        }
    }
}

/// Where a trigger's burst stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Asleep. Events its glob let pass compiled the glob: it goes at
    /// `forget`, once they stop.
    Idle { forget: Option<Instant> },
    /// Gathering files until the folder is quiet at `quiet`.
    Gathering { quiet: Instant },
    /// Over its limits until `until` (the scheduler's clock), still
    /// gathering.
    Held { until: Timestamp },
}

/// One `files` trigger's files and limits. The caller passes the
/// instants and says which paths are files (one gone again by the end of
/// its burst, a temporary file, fires nothing).
struct Burst {
    workspace: PathBuf,
    matcher: Matcher,
    pending: BTreeSet<String>,
    limiter: Limiter,
    phase: Phase,
}

impl Burst {
    fn new(workspace: PathBuf, glob: &str, limiter: Limiter) -> Self {
        Self {
            workspace,
            matcher: Matcher {
                glob: glob.into(),
                compiled: None,
            },
            pending: BTreeSet::new(),
            limiter,
            phase: Phase::Idle { forget: None },
        }
    }

    /// `path` was created or changed at `now`: a name the glob takes
    /// starts a burst or makes it go on.
    fn saw(&mut self, path: &Path, now: Instant) {
        let taken = take(&self.workspace, &mut self.matcher, path, &mut self.pending);
        self.phase = match self.phase {
            Phase::Idle { .. } | Phase::Gathering { .. } if taken => {
                Phase::Gathering { quiet: now + QUIET }
            }
            Phase::Idle { .. } => Phase::Idle {
                forget: Some(now + QUIET),
            },
            other => other,
        };
    }

    /// When it next has something to do on the monotonic clock.
    fn wake(&self) -> Option<Instant> {
        match self.phase {
            Phase::Idle { forget } => forget,
            Phase::Gathering { quiet } => Some(quiet),
            Phase::Held { .. } => None,
        }
    }

    /// Until when its limits hold it.
    fn held(&self) -> Option<Timestamp> {
        match self.phase {
            Phase::Held { until } => Some(until),
            _ => None,
        }
    }

    /// Its [`Burst::wake`] instant has come (`now` on the scheduler's
    /// clock): a burst ends, a glob compiled for nothing goes. The files
    /// to fire with, if any.
    fn quiet(&mut self, now: Timestamp, is_file: &dyn Fn(&Path) -> bool) -> Option<Vec<String>> {
        match self.phase {
            Phase::Gathering { .. } => self.release(now, is_file),
            _ => {
                self.rest();
                None
            }
        }
    }

    /// The files gathered, if the limits let them fire at `now`; else
    /// they are held until the limits do.
    fn release(&mut self, now: Timestamp, is_file: &dyn Fn(&Path) -> bool) -> Option<Vec<String>> {
        let workspace = &self.workspace;
        self.pending.retain(|rel| is_file(&workspace.join(rel)));
        if self.pending.is_empty() {
            self.rest();
            return None;
        }
        match self.limiter.check(now) {
            Ok(()) => {
                self.limiter.record(now);
                self.rest();
                Some(std::mem::take(&mut self.pending).into_iter().collect())
            }
            Err(until) => {
                self.phase = Phase::Held { until };
                None
            }
        }
    }

    fn rest(&mut self) {
        self.matcher.compiled = None;
        self.phase = Phase::Idle { forget: None };
    }
}

/// A trigger's glob, compiled only while its folder has events: a
/// compiled glob is a regex of several kilobytes, which a hundred idle
/// triggers would hold for nothing.
struct Matcher {
    /// As written (the config checked that it compiles).
    glob: Box<str>,
    compiled: Option<Box<globset::GlobMatcher>>,
}

impl Matcher {
    fn is_match(&mut self, rel: &Path) -> bool {
        if self.compiled.is_none() {
            match globset::Glob::new(&self.glob) {
                Ok(g) => self.compiled = Some(Box::new(g.compile_matcher())),
                Err(e) => {
                    tracing::error!(glob = %self.glob, error = %e, "the glob does not compile");
                    return false;
                }
            }
        }
        self.compiled.as_ref().is_some_and(|m| m.is_match(rel))
    }
}

/// Adds `path` (created or changed) if it matches the glob, relative to
/// the workspace; whether it did.
fn take(
    workspace: &Path,
    matcher: &mut Matcher,
    path: &Path,
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
    use std::time::Duration;

    use super::*;
    use crate::config::triggers::Limits;

    #[test]
    fn a_glob_is_watched_from_its_literal_folder() {
        assert_eq!(base_of("inbox/**"), PathBuf::from("inbox"));
        assert_eq!(base_of("docs/in/*.pdf"), PathBuf::from("docs/in"));
        assert_eq!(base_of("*.md"), PathBuf::from(""));
    }

    fn burst(min_interval: u64) -> Burst {
        Burst::new(
            PathBuf::from("/ws"),
            "inbox/**/*.pdf",
            Limiter::new(Limits {
                min_interval: Duration::from_secs(min_interval),
                per_hour: 10,
            }),
        )
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const ALL: &dyn Fn(&Path) -> bool = &|_| true;

    #[test]
    fn a_burst_fires_once_with_every_file_once_the_folder_is_quiet() {
        let mut b = burst(0);
        let t0 = Instant::now();
        b.saw(Path::new("/ws/inbox/a.pdf"), t0);
        b.saw(
            Path::new("/ws/inbox/a.pdf"),
            t0 + Duration::from_millis(500),
        );
        b.saw(
            Path::new("/ws/inbox/x/b.pdf"),
            t0 + Duration::from_millis(900),
        );
        // Each event the glob takes puts the end off.
        assert_eq!(b.wake(), Some(t0 + Duration::from_millis(900) + QUIET));
        let files = b.quiet(at("2026-11-27T08:00:00Z"), ALL);
        assert_eq!(
            files,
            Some(vec!["inbox/a.pdf".to_string(), "inbox/x/b.pdf".to_string()])
        );
        // Asleep again, the compiled glob gone.
        assert_eq!(b.wake(), None);
        assert!(b.matcher.compiled.is_none());
    }

    #[test]
    fn names_the_glob_leaves_out_start_no_burst_and_its_regex_goes_after_them() {
        let mut b = burst(0);
        let t0 = Instant::now();
        b.saw(Path::new("/ws/inbox/notes.txt"), t0);
        b.saw(Path::new("/elsewhere/a.pdf"), t0);
        assert_eq!(
            b.phase,
            Phase::Idle {
                forget: Some(t0 + QUIET)
            }
        );
        assert!(b.matcher.compiled.is_some());
        assert_eq!(b.quiet(at("2026-11-27T08:00:00Z"), ALL), None);
        assert_eq!(b.phase, Phase::Idle { forget: None });
        assert!(b.matcher.compiled.is_none());
    }

    #[test]
    fn files_gone_by_the_end_fire_nothing() {
        let mut b = burst(0);
        b.saw(Path::new("/ws/inbox/tmp.pdf"), Instant::now());
        assert_eq!(b.quiet(at("2026-11-27T08:00:00Z"), &|_| false), None);
        assert_eq!(b.wake(), None);
        assert!(b.pending.is_empty());
    }

    #[test]
    fn a_burst_over_the_limits_is_held_and_fires_with_what_came_meanwhile() {
        let mut b = burst(60);
        let t0 = Instant::now();
        b.saw(Path::new("/ws/inbox/a.pdf"), t0);
        let first = b.quiet(at("2026-11-27T08:00:00Z"), ALL);
        assert_eq!(first, Some(vec!["inbox/a.pdf".to_string()]));
        b.saw(Path::new("/ws/inbox/b.pdf"), t0 + QUIET);
        assert_eq!(b.quiet(at("2026-11-27T08:00:02Z"), ALL), None);
        assert_eq!(b.held(), Some(at("2026-11-27T08:01:00Z")));
        assert_eq!(b.wake(), None);
        // Held, it still gathers.
        b.saw(Path::new("/ws/inbox/c.pdf"), t0 + QUIET * 2);
        assert_eq!(b.held(), Some(at("2026-11-27T08:01:00Z")));
        let second = b.release(at("2026-11-27T08:01:00Z"), ALL);
        assert_eq!(
            second,
            Some(vec!["inbox/b.pdf".to_string(), "inbox/c.pdf".to_string()])
        );
        assert_eq!(b.held(), None);
    }
}
