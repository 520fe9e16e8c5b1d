//! pincer-fs: how pincerd itself creates, writes, appends to, renames and
//! removes files inside an agent's workspace (SPEC §8.3: "every file the
//! daemon itself writes in a workspace is opened under the workspace root
//! without following links").
//!
//! A workspace holds what a model and a sandboxed `exec` may have made,
//! symbolic links included; pincerd runs outside the sandbox, as the user.
//! Writing by path would follow such a link out of the workspace: an
//! `inbox` turned into a link to `~/.ssh` would have the next attachment
//! written there, with a name a chat member chooses. So nothing here takes
//! a path from the root of the file system: a workspace is opened as a
//! [`Root`] (its configured path's own links, which are the user's,
//! resolved the first time the process opens it — at the daemon's start —
//! and its resolved path reached without a link ever after), and every
//! folder and file beneath it is opened relative to an opened folder
//! ([`Dir`]):
//!
//! - with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` on Linux 5.6 and
//!   later: one call, and the kernel refuses any link and any way out;
//! - elsewhere (older kernels, macOS, a seccomp filter that refuses
//!   `openat2`), one component at a time with `openat(O_NOFOLLOW)`, each
//!   relative to the folder opened before it (`resolve.rs`).
//!
//! A link found on the way is refused with a sentence naming it
//! ([`FsError::Link`]); an append also refuses anything but a regular file
//! with one name ([`FsError::HardLinked`]: another name may be outside the
//! workspace), and never blocks on a FIFO. Opened folders cross seams
//! instead of paths (the channel layer saves attachments through the
//! [`Dir`] the daemon opened), so a folder swapped for a link after it was
//! opened changes nothing.
//!
//! Which paths of a workspace pincerd writes, and who writes each, is
//! listed in the daemon's `workspace` module.

mod dir;
mod error;
mod resolve;

pub use dir::{Dir, Root};
pub use error::FsError;

#[cfg(test)]
mod tests;
