//! A session's transcript as a turn holds it ([`SessionLog`]: the file,
//! its entries in memory, the loop-detection window and the token anchor)
//! and the callback a turn reports its events through ([`Emit`]). Shared by
//! the turn, compaction and a recorded tool step, so none of them depends
//! on another for it.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Event, Runtime};
use crate::context::history;
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

/// A session's transcript and the part of it a turn still needs in
/// memory: what the model sees (from the last compaction's first kept
/// entry on) and the whole of the turn that compacted. What a compaction
/// summarised stays on disk only, where `sessions show` reads it; keeping
/// it would grow an open session by every message it ever had.
pub struct SessionLog {
    /// The registry id the transcript belongs to (it changes on reset).
    pub session_id: String,
    pub transcript: Transcript,
    entries: Vec<Entry>,
    /// Entries of the transcript dropped from the front of `entries`.
    forgotten: usize,
    /// The session's loop-detection window (SPEC §8.4).
    pub loops: LoopDetector,
    /// The provider's token count of the last call, for estimates.
    pub anchor: Option<Anchor>,
}

impl SessionLog {
    pub fn new(session_id: String, transcript: Transcript, entries: Vec<Entry>) -> Self {
        let mut log = Self {
            session_id,
            transcript,
            entries,
            forgotten: 0,
            loops: LoopDetector::default(),
            anchor: None,
        };
        log.forget_summarised();
        log
    }

    /// The entries in memory (see [`SessionLog`]): enough for the model's
    /// history, a compaction and the current turn's failure summary.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// A mark for [`Self::since`]: the count of entries ever written.
    pub fn mark(&self) -> usize {
        self.forgotten + self.entries.len()
    }

    /// The entries appended after `mark` (indices into `entries` shift
    /// when a compaction lets older ones go; a mark does not).
    pub fn since(&self, mark: usize) -> &[Entry] {
        let from = mark.saturating_sub(self.forgotten).min(self.entries.len());
        &self.entries[from..]
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
        let compacted = matches!(entry.body, Body::Compaction { .. });
        self.entries.push(entry);
        if compacted {
            self.forget_summarised();
        }
        Ok(())
    }

    /// Drops the entries before what the model sees since the last
    /// compaction, keeping all of that compaction's turn.
    fn forget_summarised(&mut self) {
        let (_, start) = history::active(&self.entries);
        let Some(compaction) = self
            .entries
            .iter()
            .rposition(|e| matches!(e.body, Body::Compaction { .. }))
        else {
            return;
        };
        let turn = self.entries[compaction].turn.clone();
        let turn_start = self.entries[..compaction]
            .iter()
            .position(|e| turn.is_some() && e.turn == turn)
            .unwrap_or(compaction);
        let cut = start.min(turn_start);
        if cut > 0 {
            self.entries.drain(..cut);
            self.entries.shrink_to_fit();
            self.forgotten += cut;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Body {
        Body::User {
            text: text.into(),
            images: Vec::new(),
        }
    }

    fn answer(text: &str) -> Body {
        Body::Assistant {
            text: text.into(),
            model: "m".into(),
            usage: None,
            stop: "stop".into(),
        }
    }

    fn texts(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match &e.body {
                Body::User { text, .. } | Body::Assistant { text, .. } => text.clone(),
                other => other.kind().to_string(),
            })
            .collect()
    }

    /// Four turns, then turn t4 compacts keeping t3 onward.
    fn compacted(path: &std::path::Path) -> SessionLog {
        let (transcript, entries, _) = Transcript::open(path).unwrap();
        let mut log = SessionLog::new("s".into(), transcript, entries);
        for t in 0..4 {
            log.append(&format!("t{t}"), user(&format!("q{t}")))
                .unwrap();
            log.append(&format!("t{t}"), answer(&format!("a{t}")))
                .unwrap();
        }
        log.append("t4", user("q4")).unwrap();
        let first_kept = log.entries()[6].id.clone();
        log.append(
            "t4",
            Body::Compaction {
                summary: "earlier".into(),
                tokens_before: 100,
                tokens_after: 10,
                first_kept: Some(first_kept),
                reason: "auto".into(),
            },
        )
        .unwrap();
        log
    }

    #[test]
    fn a_compaction_lets_go_of_what_it_summarised_but_not_of_its_own_turn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut log = compacted(&path);
        assert_eq!(
            texts(log.entries()),
            ["q3", "a3", "q4", "compaction"],
            "from the first kept entry on"
        );
        let mark = log.mark();
        assert_eq!(mark, 10, "a mark counts every entry written");
        log.append("t4", answer("a4")).unwrap();
        assert_eq!(texts(log.since(mark)), ["a4"]);

        let (summary, _) = history::active(log.entries());
        assert_eq!(summary, Some("earlier"));
        let seen: Vec<_> = history::messages(log.entries(), None)
            .iter()
            .map(|m| m.role)
            .collect();
        assert_eq!(seen.len(), 5, "summary, q3, a3, q4, a4: {seen:?}");

        // The file keeps everything; a reopened log holds what it did.
        let (all, _) = Transcript::read(&path).unwrap();
        assert_eq!(all.len(), 11);
        let (transcript, entries, _) = Transcript::open(&path).unwrap();
        let reopened = SessionLog::new("s".into(), transcript, entries);
        assert_eq!(
            texts(reopened.entries()),
            ["q3", "a3", "q4", "compaction", "a4"]
        );
    }

    #[test]
    fn a_compaction_in_the_middle_of_a_turn_keeps_that_turn_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (transcript, entries, _) = Transcript::open(&dir.path().join("s.jsonl")).unwrap();
        let mut log = SessionLog::new("s".into(), transcript, entries);
        log.append("t0", user("q0")).unwrap();
        log.append("t1", user("q1")).unwrap();
        log.append("t1", answer("step")).unwrap();
        log.append("t1", answer("more")).unwrap();
        let first_kept = log.entries()[3].id.clone();
        log.append(
            "t1",
            Body::Compaction {
                summary: "earlier".into(),
                tokens_before: 100,
                tokens_after: 10,
                first_kept: Some(first_kept),
                reason: "overflow".into(),
            },
        )
        .unwrap();
        assert_eq!(
            texts(log.entries()),
            ["q1", "step", "more", "compaction"],
            "the failure summary of t1 still sees its question"
        );
        let seen = history::messages(log.entries(), None);
        assert_eq!(seen.len(), 2, "the model sees the summary and `more`");
    }
}
