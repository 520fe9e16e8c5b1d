//! The file tools' writes (`write`, `edit`, `apply_patch`, and `exec`
//! making a chat's own folder) through the workspace opener
//! (`crate::workspace`): a path [`FileAccess::write`] answered is turned
//! back into a path relative to the workspace and written beneath the
//! opened root without following a link, so a component swapped for a
//! link between the check and the write cannot send the write elsewhere.
//!
//! The owner's file tools still reach a file through a link that stays
//! inside the workspace: [`confine`](super::paths::confine) resolved that
//! link when the path was checked, and the path written here is its
//! target, with no link left in it. So the opener follows no link for
//! anyone: one it meets was put in after the check, and is refused.

use std::path::{Path, PathBuf};

use pincer_fs::FsError;

use super::access::FileAccess;

/// Replaces `path` (as [`FileAccess::write`] answered it) with `bytes`.
pub fn replace(files: &FileAccess, path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    crate::workspace::write_file(files.root(), &relative(files, path)?, bytes)
}

/// Removes `path` (as [`FileAccess::write`] answered it).
pub fn remove(files: &FileAccess, path: &Path) -> Result<(), FsError> {
    crate::workspace::remove_file(files.root(), &relative(files, path)?)
}

/// Makes the chat's own folder, for anyone but the owner; answers it,
/// relative to the workspace.
pub fn make_own_folder(files: &FileAccess) -> Result<Option<PathBuf>, FsError> {
    let Some(own) = files.own_relative() else {
        return Ok(None);
    };
    crate::workspace::make_dir(files.root(), own)?;
    Ok(Some(own.to_path_buf()))
}

fn relative(files: &FileAccess, path: &Path) -> Result<PathBuf, FsError> {
    files
        .relative_path(path)
        .ok_or_else(|| FsError::NotBeneath {
            root: files.root().to_path_buf(),
            path: path.to_path_buf(),
        })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::config::MemoryScope;
    use crate::session::Principal;

    /// The race the opener closes: a path checked by the rules, then a
    /// folder on its way swapped for a link to the outside before the
    /// write.
    #[test]
    fn a_folder_swapped_for_a_link_after_the_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(ws.join("notes")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let files = FileAccess::owner(&ws);
        let path = files.write("notes/today.md").unwrap();
        std::fs::rename(ws.join("notes"), ws.join("old-notes")).unwrap();
        symlink(&outside, ws.join("notes")).unwrap();
        let e = replace(&files, &path, b"x").unwrap_err();
        assert!(e.is_link(), "{e}");
        assert!(e.to_string().contains("`notes` in "), "{e}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

        // The same for a removal.
        std::fs::write(outside.join("keep"), "x").unwrap();
        let path = ws.canonicalize().unwrap().join("notes/keep");
        assert!(remove(&files, &path).unwrap_err().is_link());
        assert!(outside.join("keep").exists());
    }

    #[test]
    fn the_owner_writes_through_a_link_inside_the_workspace_as_before() {
        // `confine` resolves it when the path is checked: the write goes to
        // the target, and no link is followed by the opener.
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("real")).unwrap();
        symlink(ws.join("real"), ws.join("alias")).unwrap();
        let files = FileAccess::owner(&ws);
        let path = files.write("alias/x.md").unwrap();
        replace(&files, &path, b"through the alias").unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("real/x.md")).unwrap(),
            "through the alias"
        );
    }

    #[test]
    fn a_chats_own_folder_is_not_made_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let group = Principal::Group {
            channel: "telegram".into(),
            chat: "-100".into(),
        };
        let files = FileAccess::new(&ws, &group, MemoryScope::Owner, &[], false);
        assert_eq!(
            make_own_folder(&files).unwrap(),
            Some(PathBuf::from("inbox/telegram-group--100"))
        );
        assert!(ws.join("inbox/telegram-group--100").is_dir());
        assert_eq!(make_own_folder(&FileAccess::owner(&ws)).unwrap(), None);

        std::fs::remove_dir_all(ws.join("inbox")).unwrap();
        symlink(&outside, ws.join("inbox")).unwrap();
        assert!(make_own_folder(&files).unwrap_err().is_link());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }
}
