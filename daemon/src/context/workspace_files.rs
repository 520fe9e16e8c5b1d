//! The workspace files a system prompt is made of — the bootstrap files
//! ([`super::bootstrap`]) and the skills ([`super::skills`]) — read once
//! and kept while they are unchanged, so that a turn pays a `stat` per
//! file instead of opening, reading and parsing each one (six bootstrap
//! files and three skills: about 0.1 ms a turn on ext4, the largest part
//! of assembling the prompt).
//!
//! A file counts as unchanged while its size, modification and change
//! times, inode and device are those it had just before it was read; an
//! edit, a replacement by rename, a new or removed file or skill folder
//! each changes one of them (a folder's times change when an entry is
//! added, removed or renamed in it). What was read is not kept when a file
//! was modified less than [`SETTLE`] before: a second write within the
//! file system's timestamp granularity could leave all of those as they
//! were (git's "racily clean" entries), so such files are read again on
//! the next turn until they have settled.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::bootstrap::{self, BootstrapFile, Caps};
use super::skills::{self, Skill};

/// How long a file must have been left alone before what was read of it is
/// kept (far above any file system's timestamp granularity).
pub const SETTLE: Duration = Duration::from_secs(2);

/// Workspaces × prompt variants kept; past this the cache starts over (a
/// daemon has a handful of agents, each with two or three variants).
const MAX_KEPT: usize = 64;

/// What a prompt takes from a workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceFiles {
    pub files: Vec<BootstrapFile>,
    pub skills: Vec<Skill>,
}

/// The bootstrap files `names` of `workspace` under `caps`, and its skills
/// when `with_skills`: from the cache while no file changed, else read.
pub fn load(
    workspace: &Path,
    names: &[&'static str],
    caps: Caps,
    with_skills: bool,
) -> Arc<WorkspaceFiles> {
    let key = Key {
        workspace: workspace.to_path_buf(),
        names: names.to_vec(),
        caps: (caps.file_chars, caps.total_chars),
        with_skills,
    };
    let kept = lock().get(&key).cloned();
    if let Some((stamps, files)) = kept
        && Stamps::take(workspace, names, with_skills, Some(&stamps.folders)) == stamps
    {
        return files;
    }
    let read_at = SystemTime::now();
    // Stamped before reading: a change during the read leaves a stamp older
    // than the content, which the next turn sees as a change.
    let stamps = Stamps::take(workspace, names, with_skills, None);
    let files = Arc::new(WorkspaceFiles {
        files: bootstrap::load(workspace, names, caps),
        skills: if with_skills {
            skills::discover(workspace)
        } else {
            Vec::new()
        },
    });
    if stamps.settled(read_at) {
        let mut cache = lock();
        if cache.len() >= MAX_KEPT {
            cache.clear();
        }
        cache.insert(key, (stamps, files.clone()));
    }
    files
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    workspace: PathBuf,
    names: Vec<&'static str>,
    caps: (usize, usize),
    with_skills: bool,
}

type Cache = HashMap<Key, (Stamps, Arc<WorkspaceFiles>)>;

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Default::default);
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// What identifies one version of a file (or folder); `None` in
/// [`Stamps`]: nothing there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    /// Nanoseconds since the epoch.
    modified: i128,
    changed: i128,
    ino: u64,
    dev: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Self> {
        std::fs::symlink_metadata(path).ok().map(|m| Self::from(&m))
    }
}

impl From<&Metadata> for Stamp {
    fn from(m: &Metadata) -> Self {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Self {
            len: m.len(),
            modified: ns(m.mtime(), m.mtime_nsec()),
            changed: ns(m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
        }
    }
}

/// The stamps of everything a load reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamps {
    files: Vec<Option<Stamp>>,
    /// `skills/` itself: its times change when a skill folder comes or goes.
    skills_dir: Option<Stamp>,
    /// Each skill folder and its `SKILL.md`.
    folders: Vec<(String, Option<Stamp>)>,
}

impl Stamps {
    /// Stamps `names` and the skills; the skill folders are listed unless
    /// `folders` gives those of the cached load (a folder added or removed
    /// since changes `skills/`'s stamp, which is compared too).
    fn take(
        workspace: &Path,
        names: &[&str],
        with_skills: bool,
        folders: Option<&[(String, Option<Stamp>)]>,
    ) -> Self {
        let files = names
            .iter()
            .map(|name| Stamp::of(&workspace.join(name)))
            .collect();
        if !with_skills {
            return Self {
                files,
                skills_dir: None,
                folders: Vec::new(),
            };
        }
        let dir = workspace.join("skills");
        let skills_dir = Stamp::of(&dir);
        let names: Vec<String> = match folders {
            Some(kept) => kept.iter().map(|(name, _)| name.clone()).collect(),
            None => std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .flatten()
                        .filter_map(|e| e.file_name().to_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let folders = names
            .into_iter()
            .map(|name| {
                let stamp = Stamp::of(&dir.join(&name).join("SKILL.md"));
                (name, stamp)
            })
            .collect();
        Self {
            files,
            skills_dir,
            folders,
        }
    }

    /// Whether every file was last written at least [`SETTLE`] before
    /// `read_at`. The modification time is the one a write moves (the
    /// change time, which a test cannot set back, only tells a change).
    fn settled(&self, read_at: SystemTime) -> bool {
        let Ok(since_epoch) = read_at.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let limit = since_epoch.saturating_sub(SETTLE).as_nanos() as i128;
        self.files
            .iter()
            .chain(std::iter::once(&self.skills_dir))
            .chain(self.folders.iter().map(|(_, stamp)| stamp))
            .flatten()
            .all(|s| s.modified < limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: Caps = Caps {
        file_chars: 20_000,
        total_chars: 150_000,
    };

    /// Writes `text` and dates the file `ago` back, as an edit made then.
    fn write_dated(path: &Path, text: &str, ago: Duration) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - ago).unwrap();
    }

    fn skill(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n")
    }

    /// The folders' and `skills/`'s own times, set back like the files'.
    fn settle_dirs(workspace: &Path) {
        for dir in [workspace.join("skills"), workspace.join("skills/release")] {
            if let Ok(d) = std::fs::File::open(&dir) {
                d.set_modified(SystemTime::now() - Duration::from_secs(3600))
                    .unwrap();
            }
        }
    }

    #[test]
    fn settled_files_are_kept_and_each_kind_of_change_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let hour = Duration::from_secs(3600);
        write_dated(&ws.join("AGENTS.md"), "rule one", hour);
        write_dated(
            &ws.join("skills/release/SKILL.md"),
            &skill("release", "Ship it."),
            hour,
        );
        settle_dirs(ws);
        let names = ["AGENTS.md", "TOOLS.md"];
        let first = load(ws, &names, CAPS, true);
        assert_eq!(first.files[0].content, "rule one");
        assert_eq!(first.skills[0].description, "Ship it.");
        let again = load(ws, &names, CAPS, true);
        assert!(Arc::ptr_eq(&first, &again), "read again while unchanged");

        // An edit of the same length, dated back but later.
        write_dated(
            &ws.join("AGENTS.md"),
            "rule two",
            hour - Duration::from_secs(60),
        );
        let edited = load(ws, &names, CAPS, true);
        assert_eq!(edited.files[0].content, "rule two");

        // A file that was missing appears.
        write_dated(&ws.join("TOOLS.md"), "use ls", hour);
        let added = load(ws, &names, CAPS, true);
        assert_eq!(added.files.len(), 2);
        assert_eq!(added.files[1].content, "use ls");

        // A skill's file changes.
        write_dated(
            &ws.join("skills/release/SKILL.md"),
            &skill("release", "Tag it."),
            hour - Duration::from_secs(60),
        );
        settle_dirs(ws);
        let skill_edited = load(ws, &names, CAPS, true);
        assert_eq!(skill_edited.skills[0].description, "Tag it.");

        // A new skill folder.
        write_dated(
            &ws.join("skills/review/SKILL.md"),
            &skill("review", "Read it."),
            hour,
        );
        let more = load(ws, &names, CAPS, true);
        assert_eq!(more.skills.len(), 2, "{:?}", more.skills);

        // A file removed.
        std::fs::remove_file(ws.join("TOOLS.md")).unwrap();
        let removed = load(ws, &names, CAPS, true);
        assert_eq!(removed.files.len(), 1);
    }

    #[test]
    fn a_file_written_just_now_is_read_again_until_it_settles() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("AGENTS.md"), "fresh").unwrap();
        let names = ["AGENTS.md"];
        let first = load(ws, &names, CAPS, false);
        let second = load(ws, &names, CAPS, false);
        assert_eq!(first, second);
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a file written within the timestamp granularity was kept"
        );
    }

    #[test]
    fn the_caps_and_names_are_part_of_what_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let hour = Duration::from_secs(3600);
        write_dated(&ws.join("AGENTS.md"), &"x".repeat(100), hour);
        write_dated(&ws.join("SOUL.md"), "calm", hour);
        let full = load(ws, &["SOUL.md", "AGENTS.md"], CAPS, false);
        let small = Caps {
            file_chars: 10,
            total_chars: 1000,
        };
        let capped = load(ws, &["SOUL.md", "AGENTS.md"], small, false);
        assert!(capped.files[1].trimmed.is_some());
        assert!(full.files[1].trimmed.is_none());
        let one = load(ws, &["AGENTS.md"], CAPS, false);
        assert_eq!(one.files.len(), 1);
    }
}
