//! A session's transcript as a turn holds it ([`SessionLog`]: the file,
//! its entries in memory, the loop-detection window and the token anchor)
//! and the callback a turn reports its events through ([`Emit`]). Shared by
//! the turn, compaction and a recorded tool step, so none of them depends
//! on another for it.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Event, Runtime};
use crate::context::tokens::Anchor;
use crate::session::registry::{NewSession, RegistryError};
use crate::session::transcript::{Body, Entry, Transcript};
use crate::session::{Principal, SessionKey};
use crate::tools::loops::LoopDetector;

pub type Emit = Arc<dyn Fn(Event) + Send + Sync>;

/// Transcripts up to this size are opened on the calling task (a few
/// dozen entries, read and parsed in tens of microseconds).
pub const INLINE_OPEN_BYTES: u64 = 16 * 1024;

/// A transcript entry could not be written: the turn, compaction or step
/// that wanted it stops, since what it would say next could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the transcript {}: {source}", path.display())]
pub struct TranscriptWriteError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// A session could not be opened for a run outside a chat turn.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Transcript(#[from] std::io::Error),
}

/// A session's transcript and its entries in memory.
pub struct SessionLog {
    /// The registry id the transcript belongs to (it changes on reset).
    pub session_id: String,
    pub transcript: Transcript,
    pub entries: Vec<Entry>,
    /// The session's loop-detection window (SPEC §8.4).
    pub loops: LoopDetector,
    /// The provider's token count of the last call, for estimates.
    pub anchor: Option<Anchor>,
}

impl SessionLog {
    pub fn new(session_id: String, transcript: Transcript, entries: Vec<Entry>) -> Self {
        Self {
            session_id,
            transcript,
            entries,
            loops: LoopDetector::default(),
            anchor: None,
        }
    }

    /// Opens the transcript at `path` of session `session_id` (it is read
    /// whole, and a torn last line repaired): off the async threads, unless
    /// it is missing (a new session) or under [`INLINE_OPEN_BYTES`], where
    /// the few syscalls cost less than the trip to the blocking pool and
    /// back.
    pub async fn open(path: std::path::PathBuf, session_id: String) -> std::io::Result<Self> {
        let small = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta.len() <= INLINE_OPEN_BYTES,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        let (transcript, entries, _recovery) = if small {
            Transcript::open(&path)?
        } else {
            tokio::task::spawn_blocking(move || Transcript::open(&path))
                .await
                .map_err(std::io::Error::other)??
        };
        Ok(Self::new(session_id, transcript, entries))
    }

    /// Opens session `key` of `agent` for a run outside a chat turn (a
    /// workflow run, a schedule's or a trigger's command): its registry
    /// row, made for `principal` the first time, and its transcript.
    pub async fn open_session(
        rt: &Runtime,
        agent: &str,
        key: &SessionKey,
        principal: Principal,
    ) -> Result<Self, OpenError> {
        let row = rt
            .registry()
            .get_or_create(
                &key.to_string(),
                agent,
                key.channel(),
                NewSession::of(principal),
            )
            .await?;
        let path = rt.home().transcript(agent, &row.id);
        Ok(Self::open(path, row.id).await?)
    }

    pub fn append(&mut self, turn: &str, body: Body) -> Result<(), TranscriptWriteError> {
        let entry =
            self.transcript
                .append(Some(turn), body)
                .map_err(|source| TranscriptWriteError {
                    path: self.transcript.path().to_path_buf(),
                    source,
                })?;
        self.entries.push(entry);
        Ok(())
    }
}
