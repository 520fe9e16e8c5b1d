//! A session's transcript as a turn holds it ([`SessionLog`]: the file,
//! its entries in memory, the loop-detection window and the token anchor)
//! and the callback a turn reports its events through ([`Emit`]). Shared by
//! the turn, compaction and a recorded tool step, so none of them depends
//! on another for it.

use std::sync::Arc;

use super::Event;
use crate::context::tokens::Anchor;
use crate::session::transcript::{Body, Entry, Transcript};
use crate::tools::loops::LoopDetector;

pub type Emit = Arc<dyn Fn(Event) + Send + Sync>;

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

    /// Opens the transcript at `path` of session `session_id` off the
    /// async threads (it is read whole, and a torn last line repaired).
    pub async fn open(path: std::path::PathBuf, session_id: String) -> std::io::Result<Self> {
        let (transcript, entries, _recovery) =
            tokio::task::spawn_blocking(move || Transcript::open(&path))
                .await
                .map_err(std::io::Error::other)??;
        Ok(Self::new(session_id, transcript, entries))
    }

    pub fn append(&mut self, turn: &str, body: Body) -> Result<(), String> {
        let entry = self.transcript.append(Some(turn), body).map_err(|e| {
            format!(
                "cannot write the transcript {}: {e}",
                self.transcript.path().display()
            )
        })?;
        self.entries.push(entry);
        Ok(())
    }
}
