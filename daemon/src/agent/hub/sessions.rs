//! The hub's session verbs: find a session by what a person typed, list,
//! history, reset, delete, compact, abort, the last prompt and the audit
//! rows. The gRPC services and (next) the chat commands only convert their
//! requests and call these, so each rule lives here once: how a name is
//! resolved, that reset and delete are refused while a turn runs, what is
//! removed from disk and from memory.

use std::path::PathBuf;

use super::{Hub, HubError};
use crate::agent::compaction::Compacted;
use crate::agent::last_prompt::{self, LastPrompt};
use crate::session::SessionKey;
use crate::session::registry::{AuditRecord, SessionRow};
use crate::session::transcript::{Entry, Transcript};

/// A session as `pincer sessions list|show` reports it.
#[derive(Debug, Clone)]
pub struct SessionStatus {
    pub row: SessionRow,
    /// A turn runs (or is queued) right now.
    pub running: bool,
    /// Lines in the transcript.
    pub entries: u64,
}

/// A session's transcript as read from disk.
#[derive(Debug)]
pub struct SessionHistory {
    pub status: SessionStatus,
    /// The newest entries asked for (all when no limit was asked for).
    pub entries: Vec<Entry>,
    /// The position of the first of them in the transcript.
    pub first_index: u64,
    /// A torn last line (a crash mid-write) was found and ignored.
    pub recovered_torn_line: bool,
}

impl Hub {
    /// Resolves the agent and session key a client named: a full key, or a
    /// short name of `agent`'s sessions (empty: the default agent's `main`).
    pub fn resolve_key(&self, agent: &str, session: &str) -> Result<SessionKey, HubError> {
        let agent = if session.starts_with("agent:") && agent.is_empty() {
            SessionKey::parse(session)
                .map_err(|e| HubError::BadSessionName(e.to_string()))?
                .agent()
                .to_string()
        } else {
            self.agent_id(agent)?
        };
        let key = SessionKey::from_client(&agent, session)
            .map_err(|e| HubError::BadSessionName(e.to_string()))?;
        self.agent_id(key.agent())?;
        Ok(key)
    }

    /// How many sessions the registry holds (0 when it cannot say).
    pub async fn session_count(&self) -> u64 {
        self.rt.registry.count().await.unwrap_or(0)
    }

    /// The session `key` (or registry id) names, if it exists yet.
    pub async fn session_of(&self, key: &str) -> Result<Option<SessionRow>, HubError> {
        Ok(self.rt.registry.find(key).await?)
    }

    /// Finds an existing session by registry id, full key, or short name —
    /// the one way every command resolves a session name.
    pub async fn find(&self, agent: &str, session: &str) -> Result<SessionRow, HubError> {
        if session.trim().is_empty() {
            return Err(HubError::BadSessionName(
                "name a session: a key such as agent:main:main, a short name, or an id".into(),
            ));
        }
        let registry = &self.rt.registry;
        if let Some(row) = registry.find(session.trim()).await? {
            return Ok(row);
        }
        let key = self.resolve_key(agent, session)?;
        registry
            .find(&key.to_string())
            .await?
            .ok_or_else(|| HubError::UnknownSession {
                name: session.to_string(),
                key: key.to_string(),
            })
    }

    /// Every session (of one agent, when named), most recent first.
    pub async fn list(&self, agent: &str) -> Result<Vec<SessionStatus>, HubError> {
        let filter = if agent.is_empty() {
            None
        } else {
            Some(self.agent_id(agent)?)
        };
        let rows = self.rt.registry.list(filter).await?;
        Ok(rows.into_iter().map(|row| self.status_of(row)).collect())
    }

    /// A session's state without its transcript.
    pub fn status_of(&self, row: SessionRow) -> SessionStatus {
        let entries = count_lines(&self.transcript_path(&row));
        SessionStatus {
            running: self.is_running(&row.key),
            row,
            entries,
        }
    }

    /// The transcript as recorded on disk: the `limit` newest entries (0:
    /// all) before position `before` (0: up to the newest).
    pub async fn history(
        &self,
        row: SessionRow,
        limit: usize,
        before: usize,
    ) -> Result<SessionHistory, HubError> {
        let path = self.transcript_path(&row);
        let (entries, recovery) = tokio::task::spawn_blocking(move || Transcript::read(&path))
            .await
            .map_err(|e| HubError::Transcript(std::io::Error::other(e)))?
            .map_err(HubError::Transcript)?;
        let total = entries.len();
        let end = if before == 0 {
            total
        } else {
            before.min(total)
        };
        let start = if limit == 0 {
            0
        } else {
            end.saturating_sub(limit)
        };
        Ok(SessionHistory {
            status: SessionStatus {
                running: self.is_running(&row.key),
                row,
                entries: total as u64,
            },
            entries: entries.into_iter().skip(start).take(end - start).collect(),
            first_index: start as u64,
            recovered_torn_line: recovery.torn_tail,
        })
    }

    /// Starts the session afresh under a new id; the old transcript stays
    /// on disk. Refused while a turn runs. Returns (old id, new id).
    pub async fn reset(&self, row: &SessionRow) -> Result<(String, String), HubError> {
        self.forget(&row.key)?;
        self.rt.prompts.forget(&row.id);
        // "Always" was for this session: the next one asks again.
        self.rt.approvals.forget_session(&row.id);
        let (old_id, new_id) =
            self.rt
                .registry
                .reset(&row.key)
                .await?
                .ok_or_else(|| HubError::UnknownSession {
                    name: row.key.clone(),
                    key: row.key.clone(),
                })?;
        tracing::info!(session = %row.key, %old_id, %new_id, "session reset; the old transcript is kept");
        Ok((old_id, new_id))
    }

    /// Removes the session, its transcript and its last prompt. Refused
    /// while a turn runs. False when the registry had no such row left.
    pub async fn delete(&self, row: &SessionRow) -> Result<bool, HubError> {
        self.forget(&row.key)?;
        self.rt.prompts.forget(&row.id);
        // "Always" was for this session: the next one asks again.
        self.rt.approvals.forget_session(&row.id);
        let deleted = self.rt.registry.delete(&row.key).await?;
        let path = self.transcript_path(row);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(HubError::Transcript(std::io::Error::new(
                    e.kind(),
                    format!(
                        "the session was removed but its transcript {} was not: {e}",
                        path.display()
                    ),
                )));
            }
        }
        let _ = std::fs::remove_file(last_prompt::path(&path));
        tracing::info!(session = %row.key, "session deleted");
        Ok(deleted.is_some())
    }

    /// Aborts the running turn of the session a client named; false if
    /// none runs.
    pub fn abort_named(&self, agent: &str, session: &str) -> Result<bool, HubError> {
        let key = self.resolve_key(agent, session)?;
        Ok(self.abort(&key.to_string()))
    }

    /// `pincer sessions compact` by name.
    pub async fn compact_named(&self, agent: &str, session: &str) -> Result<Compacted, HubError> {
        let row = self.find(agent, session).await?;
        self.compact(row).await
    }

    /// The exact prompt of the session's last model call.
    pub async fn last_prompt(&self, row: &SessionRow) -> Result<LastPrompt, HubError> {
        let transcript = self.transcript_path(row);
        let store = self.rt.prompts.clone();
        let id = row.id.clone();
        tokio::task::spawn_blocking(move || store.get(&id, &transcript))
            .await
            .map_err(|e| HubError::Transcript(std::io::Error::other(e)))?
            .map_err(HubError::Transcript)?
            .ok_or_else(|| HubError::NoPrompt(row.key.clone()))
    }

    /// The newest audit rows of one session (named as everywhere else) or
    /// of all sessions, oldest first, each with its time.
    pub async fn audit(
        &self,
        session: &str,
        limit: u32,
    ) -> Result<Vec<(String, AuditRecord)>, HubError> {
        let key = if session.trim().is_empty() {
            None
        } else {
            // A session that was deleted still has audit rows: fall back to
            // the key the name resolves to.
            Some(match self.find("", session).await {
                Ok(row) => row.key,
                Err(HubError::UnknownSession { key, .. }) => key,
                Err(e) => return Err(e),
            })
        };
        let limit = if limit == 0 { 50 } else { limit.min(10_000) };
        Ok(self.rt.registry.audit_rows(key, limit).await?)
    }

    fn transcript_path(&self, row: &SessionRow) -> PathBuf {
        self.rt.home.transcript(&row.agent, &row.id)
    }
}

fn count_lines(path: &std::path::Path) -> u64 {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .unwrap_or(0)
}
