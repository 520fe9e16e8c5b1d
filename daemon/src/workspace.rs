//! Every file and folder pincerd itself creates, writes or removes in an
//! agent's workspace, and the one way it does so: through the workspace
//! opener (`pincer-fs`), beneath the workspace root and never through a
//! symbolic link (SPEC §8.3). A model, and a command `exec` runs, may make
//! links in a workspace; pincerd runs outside the sandbox, so writing by
//! path would follow such a link wherever it points.
//!
//! | path in the workspace | what pincerd does there | where |
//! |---|---|---|
//! | the workspace itself | created if missing (its configured path's own links resolved once, at start; a link put on its resolved path later is refused) | [`create`]: `daemon.rs` at start, `agent/call_env.rs` before a turn's tools |
//! | `inbox/` | made; the owner's attachments | [`chat_inbox`]: `channels/host.rs` |
//! | `inbox/<channel>-dm-<id>/`, `inbox/<channel>-group-<id>/` | made; a chat's attachments (`session::Principal::folder`) | [`chat_inbox`]: `channels/host.rs` |
//! | `inbox/…/<message>-<n>-<name>` | an attachment, created exclusively through the opened folder, removed through it when the download fails | `pincer-channel`'s `bridge.rs` (the folder comes from [`chat_inbox`]) |
//! | `memory/`, `memory/<YYYY-MM-DD>.md` | made; the memory flush before a compaction appended (a regular file with one name only) | [`append_memory_notes`]: `agent/compaction.rs` |
//! | a file `write`, `edit` or `apply_patch` writes, the folders on its way, and `.pincer-write-*` beside it | made; the file replaced atomically through the temporary file | [`write_file`]: `tools/write.rs` for `tools/fs.rs` and `tools/patch.rs` |
//! | a file `apply_patch` deletes or moves away | removed (a link as a link) | [`remove_file`]: `tools/write.rs` for `tools/patch.rs` |
//! | a chat's own folder (`inbox/<channel>-…`) before its `exec` | made | [`make_dir`]: `tools/write.rs` for `tools/exec.rs` |
//!
//! What a program started by `exec`, a hook or an MCP server writes is the
//! sandbox's business (`sandbox/`); reads go through the file tools' own
//! checks (`tools/paths.rs`, `tools/open.rs`). The tests below plant a
//! link at each of these paths (pincer-fs's own tests plant them at the
//! temporary names too).
//!
//! A refused link is logged here, as a warning naming it; the caller puts
//! the same sentence where the user or the model reads it (a chat's note,
//! a tool's result, the transcript).

use std::io::Write;
use std::path::Path;

use pincer_fs::{Dir, FsError, Root};

use crate::session::Principal;

/// The folder of a workspace the memory flush writes in.
pub const MEMORY: &str = "memory";

/// Creates the workspace at `configured` if it is missing, and opens it.
pub fn create(configured: &Path) -> Result<Root, FsError> {
    Root::create(configured)
}

/// The attachments folder of `principal`'s chats in `workspace`
/// (`inbox` for the owner, `inbox/<channel>-dm-<id>` or
/// `inbox/<channel>-group-<id>` for anyone else), made if missing and
/// opened.
pub fn chat_inbox(workspace: &Path, principal: &Principal) -> Result<Dir, FsError> {
    logged(Root::create(workspace).and_then(|root| root.create_dir_all(principal.folder())))
}

/// Appends `text` to `memory/<file>` in `workspace` (created if missing);
/// answers the file's workspace-relative name.
pub fn append_memory_notes(workspace: &Path, file: &str, text: &str) -> Result<String, FsError> {
    logged((|| {
        let root = Root::create(workspace)?;
        let memory = root.create_dir_all(MEMORY)?;
        let mut notes = memory.open_append(file)?;
        notes
            .write_all(text.as_bytes())
            .map_err(|source| FsError::Io {
                action: "append to",
                path: memory.path().join(file),
                source,
            })?;
        Ok(format!("{MEMORY}/{file}"))
    })())
}

/// Replaces the file `rel` of `workspace` with `bytes`, making the folders
/// on its way.
pub fn write_file(workspace: &Path, rel: &Path, bytes: &[u8]) -> Result<(), FsError> {
    logged((|| {
        let root = Root::open(workspace)?;
        let name = rel.file_name().ok_or_else(|| FsError::NoFileName {
            folder: root.path().join(rel),
        })?;
        let folder = root.create_dir_all(rel.parent().unwrap_or(Path::new("")))?;
        folder.write_atomic(name, bytes)
    })())
}

/// Removes the file `rel` of `workspace`.
pub fn remove_file(workspace: &Path, rel: &Path) -> Result<(), FsError> {
    logged(Root::open(workspace).and_then(|root| root.remove_file(rel)))
}

/// Makes the folder `rel` of `workspace` and those on its way.
pub fn make_dir(workspace: &Path, rel: &Path) -> Result<(), FsError> {
    logged(Root::create(workspace).and_then(|root| root.create_dir_all(rel).map(drop)))
}

/// `result`, with a refused link logged: something in the workspace tried
/// to send pincerd's write elsewhere.
fn logged<T>(result: Result<T, FsError>) -> Result<T, FsError> {
    if let Err(e) = &result
        && e.is_link()
    {
        tracing::warn!("{e}");
    }
    result
}

#[cfg(test)]
mod tests;
