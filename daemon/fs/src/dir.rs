//! The opened workspace ([`Root`]) and the folders opened beneath it
//! ([`Dir`]), with the verbs pincerd writes with: make folders, create a
//! new file, open a file for appending, replace a file atomically, remove
//! a file. Every path a verb takes is relative to the folder it is called
//! on and is opened without following a link (`resolve.rs`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::ops::Deref;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::FsError;
use crate::resolve::{Resolver, describe, file_type, find_link, kind_at, open_beneath};

/// Temporary names tried before [`Dir::write_atomic`] gives up (a name
/// taken is a leftover of a crash, or something planted).
const TEMP_TRIES: u32 = 16;

/// The number of the next temporary name of this process.
static TEMP_COUNT: AtomicU64 = AtomicU64::new(0);

/// The `n`th temporary name of this process: `.pincer-write-<pid>-<n>`.
/// Predictable, so it is created exclusively and never through a link.
pub(crate) fn temp_name(n: u64) -> String {
    format!(".pincer-write-{}-{n}", std::process::id())
}

/// The number the next temporary name will have (for tests that plant
/// links there).
#[cfg(test)]
pub(crate) fn next_temp() -> u64 {
    TEMP_COUNT.load(Ordering::Relaxed)
}

/// A workspace, opened: the folder its configured path leads to, with
/// that path's own links (the user's: `~/.pincer/workspace` may well be a
/// link to a data disk) resolved once, here. Everything beneath it is
/// reached through [`Dir`]'s verbs, which follow no link.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
}

/// Each configured workspace path and where its links led the first time
/// this process opened it (at start, where the daemon creates its
/// workspaces). Later opens reach that resolved path from `/` without
/// following any link: the user's own links were resolved then, so a link
/// found on the way now was put in since — say a workspace configured
/// inside another agent's, whose commands replaced a folder of its path
/// with a link — and is refused, never followed.
static RESOLVED: std::sync::LazyLock<std::sync::Mutex<HashMap<PathBuf, PathBuf>>> =
    std::sync::LazyLock::new(Default::default);

impl Root {
    /// Opens the workspace at `configured`, its links resolved the first
    /// time this process opens it.
    pub fn open(configured: &Path) -> Result<Self, FsError> {
        Self::reach(configured, false)
    }

    /// Creates the workspace at `configured` if it is missing (folders on
    /// the way included: the configured path is the user's), then opens it.
    /// Once resolved, a missing folder of the resolved path is made again
    /// without following a link.
    pub fn create(configured: &Path) -> Result<Self, FsError> {
        Self::reach(configured, true)
    }

    fn reach(configured: &Path, create: bool) -> Result<Self, FsError> {
        let failed = |source: std::io::Error| FsError::Workspace {
            path: configured.to_path_buf(),
            source,
        };
        let known = RESOLVED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(configured)
            .cloned();
        let resolved = match known {
            Some(resolved) => resolved,
            None => {
                if create {
                    std::fs::create_dir_all(configured).map_err(failed)?;
                }
                let resolved = configured.canonicalize().map_err(failed)?;
                RESOLVED
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(configured.to_path_buf())
                    .or_insert(resolved)
                    .clone()
            }
        };
        let resolver = Resolver::detect();
        let slash = rustix::fs::open(
            "/",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| failed(e.into()))?;
        let system = Dir {
            fd: slash,
            root: Arc::from(Path::new("/")),
            relative: PathBuf::new(),
            resolver,
        };
        let below = resolved.strip_prefix("/").unwrap_or(&resolved);
        let dir = if create {
            system.create_dir_all(below)
        } else {
            system.open_dir(below)
        }
        .map_err(|e| match e {
            link @ FsError::Link { .. } => link,
            other => failed(std::io::Error::other(other.to_string())),
        })?;
        Ok(Self {
            dir: Dir {
                fd: dir.fd,
                root: Arc::from(resolved),
                relative: PathBuf::new(),
                resolver,
            },
        })
    }

    /// The same workspace, resolving paths by the walk with `O_NOFOLLOW`
    /// per component instead of `openat2`, as on a kernel before 5.6 or on
    /// macOS; for tests of that path on a machine that has `openat2`.
    pub fn walking(mut self) -> Self {
        self.dir.resolver = Resolver::Walk;
        self
    }

    /// The workspace's resolved path.
    pub fn path(&self) -> &Path {
        &self.dir.root
    }
}

/// A workspace is the folder at its root.
impl Deref for Root {
    type Target = Dir;
    fn deref(&self) -> &Dir {
        &self.dir
    }
}

/// A folder opened beneath a workspace's [`Root`] (or the root itself).
/// Its verbs open what they touch relative to this folder's descriptor,
/// so the folder's own path may change meaning afterwards (a component
/// swapped for a link) without effect.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// The workspace, resolved (for messages).
    root: Arc<Path>,
    /// This folder relative to the workspace; empty for the root.
    relative: PathBuf,
    resolver: Resolver,
}

impl Dir {
    /// This folder relative to the workspace (`inbox/telegram-dm-42`);
    /// empty for the workspace itself.
    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// This folder's path as the user finds it (for messages; pincerd
    /// never opens by it).
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.relative)
    }

    /// Opens the existing folder `rel` beneath this one.
    pub fn open_dir(&self, rel: impl AsRef<Path>) -> Result<Dir, FsError> {
        let names = self.names(rel.as_ref())?;
        self.open_dir_names(&names)
    }

    /// Makes the folders of `rel` beneath this one that are missing, like
    /// `mkdir -p`, and opens the last. A link on the way is refused, even
    /// one to a folder inside the workspace.
    pub fn create_dir_all(&self, rel: impl AsRef<Path>) -> Result<Dir, FsError> {
        let names = self.names(rel.as_ref())?;
        let mut here: Option<Dir> = None;
        for name in &names {
            let at = here.as_ref().unwrap_or(self);
            match rustix::fs::mkdirat(at.fd.as_fd(), *name, Mode::from_raw_mode(0o777)) {
                // Something is there: opened below only if it is a folder
                // and not a link.
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(at.failed(&[name], "create the folder", e, false)),
            }
            let next = at.open_dir_names(&[name])?;
            here = Some(next);
        }
        match here {
            Some(dir) => Ok(dir),
            None => self.open_dir_names(&[]),
        }
    }

    /// Creates the new file `rel` (its folder must exist) for writing:
    /// never over anything already there, a link included.
    pub fn create_new(&self, rel: impl AsRef<Path>) -> Result<File, FsError> {
        let (parent, name) = self.parent_of(rel.as_ref())?;
        let at = parent.as_ref().unwrap_or(self);
        at.open_file(
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            "create",
        )
    }

    /// Opens the file `rel` for appending, created if missing (its folder
    /// must exist). Only a regular file with one name: another name of it
    /// may be outside the workspace, and a FIFO would block.
    pub fn open_append(&self, rel: impl AsRef<Path>) -> Result<File, FsError> {
        let (parent, name) = self.parent_of(rel.as_ref())?;
        let at = parent.as_ref().unwrap_or(self);
        // O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead
        // of blocking; it changes nothing for a regular file.
        let file = at.open_file(
            name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NONBLOCK,
            "open for appending",
        )?;
        let path = at.path().join(name);
        let stat = rustix::fs::fstat(&file).map_err(|e| FsError::Io {
            action: "read the metadata of",
            path: path.clone(),
            source: e.into(),
        })?;
        let kind = file_type(&stat);
        if kind != FileType::RegularFile {
            return Err(FsError::NotRegular {
                path,
                kind: describe(kind),
            });
        }
        #[allow(clippy::useless_conversion)] // `st_nlink`'s width differs between platforms.
        let links = u64::from(stat.st_nlink);
        if links > 1 {
            return Err(FsError::HardLinked { path, links });
        }
        Ok(file)
    }

    /// Replaces the file `rel` (its folder must exist) with `bytes`: written
    /// to a new temporary file beside it, synced, then renamed over it, so
    /// a crash never leaves half a file. A link or anything but a regular
    /// file at `rel` is refused; the rename itself replaces a name and
    /// never writes through one.
    pub fn write_atomic(&self, rel: impl AsRef<Path>, bytes: &[u8]) -> Result<(), FsError> {
        let (parent, name) = self.parent_of(rel.as_ref())?;
        let at = parent.as_ref().unwrap_or(self);
        let target = at.path().join(name);
        match kind_at(at.fd.as_fd(), name) {
            None | Some(FileType::RegularFile) => {}
            Some(FileType::Symlink) => return Err(at.link(&[name])),
            Some(kind) => {
                return Err(FsError::NotRegular {
                    path: target,
                    kind: describe(kind),
                });
            }
        }
        let (temp, mut file) = at.temp_file()?;
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|source| FsError::Io {
                action: "write",
                path: target.clone(),
                source,
            })
            .and_then(|()| {
                rustix::fs::renameat(at.fd.as_fd(), temp.as_str(), at.fd.as_fd(), name).map_err(
                    |e| FsError::Io {
                        action: "replace",
                        path: target.clone(),
                        source: e.into(),
                    },
                )
            });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(at.fd.as_fd(), temp.as_str(), AtFlags::empty());
        }
        written
    }

    /// Removes the file `rel`. A link there is removed as a link; what it
    /// points to is never touched.
    pub fn remove_file(&self, rel: impl AsRef<Path>) -> Result<(), FsError> {
        let (parent, name) = self.parent_of(rel.as_ref())?;
        let at = parent.as_ref().unwrap_or(self);
        rustix::fs::unlinkat(at.fd.as_fd(), name, AtFlags::empty())
            .map_err(|e| at.failed(&[name], "remove", e, true))
    }

    /// `rel` as plain names, or the refusal of a path that could lead out.
    fn names<'p>(&self, rel: &'p Path) -> Result<Vec<&'p OsStr>, FsError> {
        let mut names = Vec::new();
        for component in rel.components() {
            match component {
                Component::Normal(name) => names.push(name),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(FsError::NotBeneath {
                        root: self.root.to_path_buf(),
                        path: self.relative.join(rel),
                    });
                }
            }
        }
        Ok(names)
    }

    fn open_dir_names(&self, names: &[&OsStr]) -> Result<Dir, FsError> {
        let fd = open_beneath(
            self.fd.as_fd(),
            names,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
            self.resolver,
        )
        .map_err(|e| self.failed(names, "open the folder", e, false))?;
        let mut relative = self.relative.clone();
        relative.extend(names);
        Ok(Dir {
            fd,
            root: self.root.clone(),
            relative,
            resolver: self.resolver,
        })
    }

    /// The folder `rel` is in (opened; `None`: this one) and its name.
    fn parent_of<'p>(&self, rel: &'p Path) -> Result<(Option<Dir>, &'p OsStr), FsError> {
        let names = self.names(rel)?;
        let Some((name, folders)) = names.split_last() else {
            return Err(FsError::NoFileName {
                folder: self.path(),
            });
        };
        let parent = if folders.is_empty() {
            None
        } else {
            Some(self.open_dir_names(folders)?)
        };
        Ok((parent, name))
    }

    /// Opens the file `name` of this folder with `flags` (no link).
    fn open_file(
        &self,
        name: &OsStr,
        flags: OFlags,
        action: &'static str,
    ) -> Result<File, FsError> {
        open_beneath(
            self.fd.as_fd(),
            &[name],
            flags,
            Mode::from_raw_mode(0o666),
            self.resolver,
        )
        .map(File::from)
        .map_err(|e| self.failed(&[name], action, e, true))
    }

    /// A new temporary file in this folder ([`temp_name`]), created
    /// exclusively; a name taken is skipped.
    fn temp_file(&self) -> Result<(String, File), FsError> {
        let mut last = None;
        for _ in 0..TEMP_TRIES {
            let name = temp_name(TEMP_COUNT.fetch_add(1, Ordering::Relaxed));
            match self.open_file(
                OsStr::new(&name),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                "create",
            ) {
                Ok(file) => return Ok((name, file)),
                Err(e @ (FsError::Exists { .. } | FsError::Link { .. })) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| FsError::Exists { path: self.path() }))
    }

    /// The refusal of a link at `names` (relative to this folder).
    fn link(&self, names: &[&OsStr]) -> FsError {
        let mut link = self.relative.clone();
        link.extend(names);
        FsError::Link {
            root: self.root.to_path_buf(),
            link,
        }
    }

    /// Why opening `names` failed with `errno`, as a sentence: the link on
    /// the way if there is one; for a file (`file`), something that is not
    /// a regular file; else what the system said.
    fn failed(&self, names: &[&OsStr], action: &'static str, errno: Errno, file: bool) -> FsError {
        if let Some(i) = find_link(self.fd.as_fd(), names) {
            return self.link(&names[..=i]);
        }
        let mut path = self.path();
        path.extend(names);
        if file
            && let Some((name, folders)) = names.split_last()
            && folders.is_empty()
            && let Some(kind) = kind_at(self.fd.as_fd(), name)
            && kind != FileType::RegularFile
            && errno != Errno::EXIST
        {
            return FsError::NotRegular {
                path,
                kind: describe(kind),
            };
        }
        match errno {
            Errno::EXIST => FsError::Exists { path },
            _ => FsError::Io {
                action,
                path,
                source: errno.into(),
            },
        }
    }
}
