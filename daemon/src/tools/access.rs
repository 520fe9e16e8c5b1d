//! What one turn's file tools, `message`'s files and `exec` may touch in
//! the agent's workspace ([`FileAccess`]): the data boundary's rule for
//! files (SPEC §8.3), built from the turn's origin and decided here once.
//!
//! - **The owner** reaches the whole workspace (and nothing outside it:
//!   [`confine`]).
//! - **Anyone else** (a person in a DM, a group) never reads, lists,
//!   searches or sends the owner's memory — `MEMORY.md`, `memory/` and the
//!   `[memory] paths` globs, unless the agent's memory is `shared` — nor the
//!   attachments folder of another chat: the inbox is hidden but for the
//!   chat's own folder (`session::Principal::folder`). They write only in
//!   that folder, and with `exec` (only where their chat's own layers name
//!   it) their commands run in the sandbox with the same rules. `message`
//!   sends a workspace file for them only when their chat is offered
//!   `read`: sending a file is reading it into the chat.
//!
//! - **Workflow files** (`workflows/`, SPEC §13) are the owner's to edit,
//!   by hand: no turn's file tools write there (a workflow's own steps
//!   neither), unless `[tools.fs] edit_workflows = true`.
//!
//! The rules judge the path a name resolves to (symbolic links included),
//! so a link in a chat's own folder cannot lead to the owner's memory.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::paths::confine;
use crate::config::MemoryScope;
use crate::session::Principal;
use crate::session::principal::INBOX;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a workspace path at all (outside it, a NUL byte).
    Invalid(String),
    /// The data boundary: the path is the owner's or another chat's.
    Boundary(String),
}

impl Refusal {
    /// The refusal as a tool's output: the boundary's is recorded as such.
    pub fn output(self) -> super::ToolOutput {
        match self {
            Self::Invalid(why) => super::ToolOutput::error(why),
            Self::Boundary(why) => super::ToolOutput::refused(why),
        }
    }
}

/// The rules for a chat that is not the owner's.
#[derive(Debug, Clone)]
struct Stranger {
    /// Workspace-relative paths no read reaches (with everything below).
    hidden: Vec<PathBuf>,
    /// `[memory] paths` globs, when the memory is the owner's.
    hidden_globs: GlobSet,
    /// The chat's own folder, relative: the only place it writes, and the
    /// one part of the inbox it reads.
    own: PathBuf,
    /// Its chat is offered `read`: `message` may send files for it.
    may_read: bool,
}

/// The file rules of one turn.
#[derive(Debug, Clone)]
pub struct FileAccess {
    root: PathBuf,
    /// `root` with its links resolved (once: walks ask for every entry).
    real_root: PathBuf,
    stranger: Option<Stranger>,
    /// The workflow files' folder, relative, when no tool may write there.
    workflows: Option<PathBuf>,
}

/// The folder of a workspace that holds its workflow files.
pub const WORKFLOWS: &str = "workflows";

impl FileAccess {
    /// The owner's: the whole workspace.
    pub fn owner(workspace: &Path) -> Self {
        Self {
            root: workspace.to_path_buf(),
            real_root: canonical(workspace),
            stranger: None,
            workflows: Some(PathBuf::from(WORKFLOWS)),
        }
    }

    /// These rules with the workflow files writable (`true`) or not.
    pub fn workflows_writable(mut self, writable: bool) -> Self {
        self.workflows = (!writable).then(|| PathBuf::from(WORKFLOWS));
        self
    }

    /// The rules for `principal` in `workspace`: the owner's, or a
    /// stranger's with the agent's `memory` scope, the `[memory] paths`
    /// globs and whether the chat is offered `read`.
    pub fn new(
        workspace: &Path,
        principal: &Principal,
        memory: MemoryScope,
        memory_globs: &[String],
        read_offered: bool,
    ) -> Self {
        if principal.is_owner() {
            return Self::owner(workspace);
        }
        let mut hidden = vec![PathBuf::from(INBOX)];
        let mut globs = GlobSetBuilder::new();
        if memory == MemoryScope::Owner {
            hidden.push(PathBuf::from("MEMORY.md"));
            hidden.push(PathBuf::from("memory"));
            for g in memory_globs {
                // The config check refused globs that do not compile.
                if let Ok(glob) = Glob::new(g) {
                    globs.add(glob);
                }
            }
        }
        Self {
            root: workspace.to_path_buf(),
            real_root: canonical(workspace),
            stranger: Some(Stranger {
                hidden,
                hidden_globs: globs.build().unwrap_or_else(|_| GlobSet::empty()),
                own: PathBuf::from(principal.folder()),
                may_read: read_offered,
            }),
            workflows: Some(PathBuf::from(WORKFLOWS)),
        }
    }

    /// The workspace.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether these are the owner's rules (no boundary inside the
    /// workspace).
    pub fn is_owner(&self) -> bool {
        self.stranger.is_none()
    }

    /// The chat's own folder, relative to the workspace, for anyone but
    /// the owner.
    pub fn own_relative(&self) -> Option<&Path> {
        self.stranger.as_ref().map(|s| s.own.as_path())
    }

    /// The chat's own folder (absolute) for anyone but the owner: where it
    /// writes, where its commands start.
    pub fn own_folder(&self) -> Option<PathBuf> {
        self.stranger.as_ref().map(|s| self.root.join(&s.own))
    }

    /// `requested` as a path to read (or list), or why not.
    pub fn read(&self, requested: &str) -> Result<PathBuf, Refusal> {
        let path = confine(&self.root, requested).map_err(|e| Refusal::Invalid(e.to_string()))?;
        if self.hides(&path) {
            return Err(Refusal::Boundary(self.hidden_sentence(requested)));
        }
        Ok(path)
    }

    /// `requested` as a path to write (create, replace, remove), or why
    /// not: anywhere in the workspace for the owner, only in the chat's
    /// own folder for anyone else.
    pub fn write(&self, requested: &str) -> Result<PathBuf, Refusal> {
        let path = confine(&self.root, requested).map_err(|e| Refusal::Invalid(e.to_string()))?;
        if let (Some(w), Some(rel)) = (&self.workflows, self.relative(&path))
            && rel.starts_with(w)
        {
            return Err(Refusal::Boundary(format!(
                "`{requested}` is in {}/: workflow files are the owner's to edit, not a tool's (the owner may set [tools.fs] edit_workflows = true)",
                w.display()
            )));
        }
        let Some(s) = &self.stranger else {
            return Ok(path);
        };
        match self.relative(&path) {
            Some(rel) if rel.starts_with(&s.own) && rel != s.own => Ok(path),
            _ => Err(Refusal::Boundary(format!(
                "`{requested}` is outside this chat's folder ({}): a chat that is not the owner's writes only there",
                s.own.display()
            ))),
        }
    }

    /// `requested` as a file `message` may send: one this turn may read,
    /// and for anyone but the owner only when the chat is offered `read`.
    pub fn send(&self, requested: &str) -> Result<PathBuf, Refusal> {
        if let Some(s) = &self.stranger
            && !s.may_read
        {
            return Err(Refusal::Boundary(
                "this chat is not offered `read`, so `message` sends no workspace file for it (sending a file is reading it into the chat)".into(),
            ));
        }
        self.read(requested)
    }

    /// Whether the resolved `path` is out of this turn's reach: the
    /// owner's memory, or the inbox outside the chat's own folder (its
    /// way there, `inbox` itself, stays listable). Walks (`ls`, `glob`,
    /// `grep`) skip what this says.
    pub fn hides(&self, path: &Path) -> bool {
        let Some(s) = &self.stranger else {
            return false;
        };
        let Some(rel) = self.relative(path) else {
            return false;
        };
        if rel.starts_with(&s.own) || s.own.starts_with(&rel) {
            return false;
        }
        s.hidden.iter().any(|h| rel.starts_with(h)) || s.hidden_globs.is_match(&rel)
    }

    /// What a sandboxed command of this turn may read, write and must not
    /// see, besides the system: `None` for the owner (the workspace,
    /// read-write). The hidden list names what exists now (a glob's
    /// matches included), so it can be carved out of the workspace.
    pub fn jail(&self) -> Option<JailPaths> {
        let s = self.stranger.as_ref()?;
        let root = self.real_root.clone();
        let mut hidden: Vec<PathBuf> = s.hidden.iter().map(|h| root.join(h)).collect();
        if !s.hidden_globs.is_empty() {
            let walk = ignore::WalkBuilder::new(&root)
                .hidden(false)
                .git_ignore(false)
                .build();
            for entry in walk.flatten() {
                if let Ok(rel) = entry.path().strip_prefix(&root)
                    && s.hidden_globs.is_match(rel)
                {
                    hidden.push(entry.path().to_path_buf());
                }
            }
        }
        Some(JailPaths {
            read: vec![root.clone()],
            write: vec![root.join(&s.own)],
            hidden,
        })
    }

    /// What these rules let a turn touch, as a sentence (`pincer tools
    /// list`).
    pub fn describe(&self) -> String {
        match &self.stranger {
            None => "files: the whole workspace".into(),
            Some(s) => format!(
                "files: reads the workspace but {}other chats' attachments; writes only in {}{}",
                if s.hidden.iter().any(|h| h == Path::new("MEMORY.md")) {
                    "the owner's memory and "
                } else {
                    ""
                },
                s.own.display(),
                if s.may_read {
                    ""
                } else {
                    "; `message` sends no workspace file (no `read` here)"
                }
            ),
        }
    }

    /// A path [`Self::read`] or [`Self::write`] answered, relative to the
    /// workspace (what the workspace opener takes); `None` outside it.
    pub fn relative_path(&self, path: &Path) -> Option<PathBuf> {
        self.relative(path)
    }

    /// `path` relative to the workspace, both resolved.
    fn relative(&self, path: &Path) -> Option<PathBuf> {
        path.strip_prefix(&self.real_root)
            .ok()
            .map(Path::to_path_buf)
            .or_else(|| path.strip_prefix(&self.root).ok().map(Path::to_path_buf))
    }

    fn hidden_sentence(&self, requested: &str) -> String {
        let own = self
            .stranger
            .as_ref()
            .map(|s| s.own.display().to_string())
            .unwrap_or_default();
        format!(
            "`{requested}` is not this chat's to read: the owner's memory and other chats' attachments are out of reach here (this chat's own files are in {own})"
        )
    }
}

/// A stranger's sandbox: read-only folders, the one writable folder, and
/// what is carved out of them.
#[derive(Debug, Clone, PartialEq)]
pub struct JailPaths {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> Principal {
        Principal::Group {
            channel: "telegram".into(),
            chat: "-100".into(),
        }
    }

    /// A workspace with memory, notes, two chats' folders and the owner's
    /// attachments.
    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        for d in [
            "memory",
            "notes",
            "src",
            "inbox/telegram-group--100",
            "inbox/telegram-group--200",
        ] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        for f in [
            "MEMORY.md",
            "memory/2026-11-26.md",
            "notes/private.md",
            "src/lib.rs",
            "inbox/owner-photo.jpg",
            "inbox/telegram-group--100/mine.txt",
            "inbox/telegram-group--200/theirs.txt",
        ] {
            std::fs::write(ws.join(f), "x").unwrap();
        }
        dir
    }

    fn stranger(ws: &Path, memory: MemoryScope, read: bool) -> FileAccess {
        FileAccess::new(ws, &group(), memory, &["notes/**/*.md".into()], read)
    }

    #[test]
    fn no_tool_writes_a_workflow_file_unless_the_owner_lets_them() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let owner = FileAccess::owner(ws);
        let e = owner.write("workflows/daily.toml").unwrap_err();
        assert!(
            matches!(&e, Refusal::Boundary(why) if why.contains("workflow files are the owner's to edit")),
            "{e:?}"
        );
        assert!(owner.write("./workflows/../workflows/x.toml").is_err());
        assert!(owner.write("notes/workflows.md").is_ok());
        assert!(
            owner.read("workflows/daily.toml").is_ok(),
            "reading is fine"
        );
        let open = FileAccess::owner(ws).workflows_writable(true);
        assert!(open.write("workflows/daily.toml").is_ok());
    }

    #[test]
    fn the_owner_reaches_the_whole_workspace_and_nothing_outside() {
        let dir = workspace();
        let a = FileAccess::new(
            dir.path(),
            &Principal::Owner,
            MemoryScope::Owner,
            &[],
            false,
        );
        for p in [
            "MEMORY.md",
            "inbox/telegram-group--200/theirs.txt",
            "x/new.txt",
        ] {
            assert!(a.read(p).is_ok(), "{p}");
            assert!(a.write(p).is_ok(), "{p}");
        }
        assert!(matches!(a.read("../x"), Err(Refusal::Invalid(_))));
        assert!(a.jail().is_none());
        assert!(a.send("MEMORY.md").is_ok());
    }

    #[test]
    fn a_stranger_never_reads_the_owners_memory_nor_another_chats_folder() {
        let dir = workspace();
        let a = stranger(dir.path(), MemoryScope::Owner, true);
        for p in [
            "MEMORY.md",
            "./memory/../MEMORY.md",
            "memory",
            "memory/2026-11-26.md",
            "notes/private.md",
            "inbox/owner-photo.jpg",
            "inbox/telegram-group--200/theirs.txt",
            "inbox/telegram-group--200",
        ] {
            match a.read(p) {
                Err(Refusal::Boundary(why)) => assert!(why.contains("not this chat's"), "{why}"),
                other => panic!("{p}: {other:?}"),
            }
        }
        for p in [
            "src/lib.rs",
            "inbox",
            "inbox/telegram-group--100/mine.txt",
            ".",
        ] {
            assert!(a.read(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn a_link_in_the_chats_own_folder_does_not_lead_to_the_memory() {
        let dir = workspace();
        let own = dir.path().join("inbox/telegram-group--100");
        std::os::unix::fs::symlink(dir.path().join("MEMORY.md"), own.join("m")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("memory"), own.join("d")).unwrap();
        let a = stranger(dir.path(), MemoryScope::Owner, true);
        for p in [
            "inbox/telegram-group--100/m",
            "inbox/telegram-group--100/d/2026-11-26.md",
        ] {
            assert!(matches!(a.read(p), Err(Refusal::Boundary(_))), "{p}");
        }
    }

    #[test]
    fn a_stranger_writes_only_in_its_own_folder() {
        let dir = workspace();
        let a = stranger(dir.path(), MemoryScope::Shared, true);
        assert!(a.write("inbox/telegram-group--100/new.md").is_ok());
        for p in [
            "src/lib.rs",
            "MEMORY.md",
            "inbox/telegram-group--100",
            "inbox/telegram-group--200/x",
            "inbox/x",
        ] {
            assert!(matches!(a.write(p), Err(Refusal::Boundary(_))), "{p}");
        }
        assert_eq!(
            a.own_folder(),
            Some(dir.path().join("inbox/telegram-group--100"))
        );
    }

    #[test]
    fn shared_memory_is_readable_by_everyone_but_other_chats_are_not() {
        let dir = workspace();
        let a = stranger(dir.path(), MemoryScope::Shared, true);
        assert!(a.read("MEMORY.md").is_ok());
        assert!(a.read("memory/2026-11-26.md").is_ok());
        assert!(a.read("notes/private.md").is_ok());
        assert!(a.read("inbox/telegram-group--200/theirs.txt").is_err());
    }

    #[test]
    fn message_sends_a_strangers_file_only_where_read_is_offered() {
        let dir = workspace();
        let without = stranger(dir.path(), MemoryScope::Owner, false);
        assert!(matches!(
            without.send("src/lib.rs"),
            Err(Refusal::Boundary(why)) if why.contains("not offered `read`")
        ));
        let with = stranger(dir.path(), MemoryScope::Owner, true);
        assert!(with.send("src/lib.rs").is_ok());
        assert!(matches!(with.send("MEMORY.md"), Err(Refusal::Boundary(_))));
    }

    #[test]
    fn the_jail_reads_the_workspace_writes_the_chats_folder_and_hides_the_rest() {
        let dir = workspace();
        let root = dir.path().canonicalize().unwrap();
        let jail = stranger(dir.path(), MemoryScope::Owner, false)
            .jail()
            .unwrap();
        assert_eq!(jail.read, std::slice::from_ref(&root));
        assert_eq!(jail.write, [root.join("inbox/telegram-group--100")]);
        for h in ["inbox", "MEMORY.md", "memory", "notes/private.md"] {
            assert!(
                jail.hidden.contains(&root.join(h)),
                "{h}: {:?}",
                jail.hidden
            );
        }
    }
}
