//! Running a compaction for a session (SPEC §9): plan the cut, optionally
//! let the model save durable notes to `memory/YYYY-MM-DD.md`, summarise
//! with the compaction model, write the `compaction` entry, count it in the
//! registry and tell the client. A failure is written and reported, never
//! swallowed: the history stays whole and the caller decides what next.

use tokio_util::sync::CancellationToken;

use super::session_log::{Emit, SessionLog, TranscriptWriteError};
use super::{Event, Runtime};
use crate::config::{AgentSettings, Config};
use crate::context::compact::{self, Plan};
use crate::context::guard::without_thinking;
use crate::context::history;
use crate::context::tokens::estimate_text;
use crate::llm::windows::ContextWindow;
use crate::llm::{LlmError, Message, Request};
use crate::session::SessionKey;
use crate::session::transcript::Body;

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub enum Compacted {
    Done {
        tokens_before: u64,
        tokens_after: u64,
        summary: String,
    },
    /// The history after the last compaction is already small.
    Nothing,
}

/// Why a compaction did not complete; the history is kept whole in every
/// case.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// `[context] compaction = false`.
    #[error("compaction is off ([context] compaction = false)")]
    Off,
    /// The summary could not be written by the compaction model.
    #[error("compaction failed ({reason}): {source}; the history was kept whole")]
    Summary {
        reason: &'static str,
        source: LlmError,
    },
    /// The summary was written but could not be kept.
    #[error("compaction failed: {0}")]
    Transcript(#[from] TranscriptWriteError),
}

/// Everything a compaction needs besides the session's log.
pub struct Compactor<'a> {
    pub rt: &'a Runtime,
    pub config: &'a Config,
    pub agent: &'a AgentSettings,
    pub key: &'a SessionKey,
    pub session_id: &'a str,
    /// Only the owner's sessions flush notes into the agent's memory.
    pub owner: bool,
    pub emit: &'a Emit,
    pub cancel: &'a CancellationToken,
}

const FLUSH_SYSTEM: &str = "You keep the long-term notes of a personal AI assistant.";
const FLUSH_INSTRUCTIONS: &str = "The conversation above is about to be compressed. List what in it is worth remembering for weeks or months: facts about the user, their preferences, decisions, names, dates, and where things are. One Markdown bullet per fact, nothing else. If nothing is worth keeping, answer exactly NOTHING.";

impl Compactor<'_> {
    /// Tokens of the history the model sees now, by our estimate.
    pub fn active_tokens(log: &SessionLog) -> u64 {
        let (summary, start) = history::active(log.entries());
        summary.map_or(0, estimate_text)
            + log.entries()[start..]
                .iter()
                .map(compact::entry_tokens)
                .sum::<u64>()
    }

    pub async fn run(
        &self,
        log: &mut SessionLog,
        turn: &str,
        reason: &'static str,
        force: bool,
        system_tokens: u64,
    ) -> Result<Compacted, CompactionError> {
        let window = self.agent.context_window();
        let keep = self.config.context.keep_recent_for(window);
        let Some(plan) = compact::plan(log.entries(), keep, force) else {
            return Ok(Compacted::Nothing);
        };
        let tokens_before = system_tokens + Self::active_tokens(log);
        let result = self.summarise(log, &plan, turn).await;
        let summary = match result {
            Ok(summary) => summary,
            Err(source) => {
                let error = CompactionError::Summary { reason, source };
                let message = error.to_string();
                tracing::warn!(session = %self.key, "{message}");
                let _ = log.append(
                    turn,
                    Body::Meta {
                        event: "compaction_failed".into(),
                        detail: message.clone(),
                    },
                );
                (self.emit)(Event::Compaction {
                    tokens_before,
                    tokens_after: tokens_before,
                    reason,
                    error: message,
                });
                return Err(error);
            }
        };
        let kept: u64 = log.entries()[plan.summarise.end..]
            .iter()
            .map(compact::entry_tokens)
            .sum();
        let tokens_after = system_tokens + estimate_text(&summary) + kept;
        log.append(
            turn,
            Body::Compaction {
                summary: summary.clone(),
                tokens_before,
                tokens_after,
                first_kept: plan.first_kept.clone(),
                reason: reason.into(),
            },
        )?;
        log.anchor = None;
        if let Err(e) = self.rt.registry.add_compaction(self.session_id).await {
            tracing::warn!(error = %e, "cannot count the compaction");
        }
        tracing::info!(session = %self.key, reason, tokens_before, tokens_after, "history compacted");
        (self.emit)(Event::Compaction {
            tokens_before,
            tokens_after,
            reason,
            error: String::new(),
        });
        Ok(Compacted::Done {
            tokens_before,
            tokens_after,
            summary,
        })
    }

    fn targets(&self) -> &[crate::config::ModelTarget] {
        if self.agent.compaction_models.is_empty() {
            &self.agent.models
        } else {
            &self.agent.compaction_models
        }
    }

    async fn summarise(
        &self,
        log: &mut SessionLog,
        plan: &Plan,
        turn: &str,
    ) -> Result<String, LlmError> {
        let text = compact::render(&log.entries()[plan.summarise.clone()]);
        if self.config.context.memory_flush && self.owner {
            self.flush_memory(log, &text, turn).await;
        }
        let previous = history::active(log.entries()).0.map(str::to_string);
        let models = self.rt.models();
        compact::summarise(
            &models,
            self.targets(),
            previous.as_deref(),
            &text,
            self.cancel,
        )
        .await
    }

    /// The silent pre-compaction turn: one call without tools whose answer
    /// is appended to today's `memory/YYYY-MM-DD.md`. Failures are logged
    /// and written to the transcript; they do not stop the compaction.
    async fn flush_memory(&self, log: &mut SessionLog, text: &str, turn: &str) {
        let window = crate::llm::windows::window_of(self.targets());
        let max_chars = usize::try_from(window.saturating_sub(2_000) * 3).unwrap_or(usize::MAX);
        let piece: String = {
            let chars = text.chars().count();
            text.chars().skip(chars.saturating_sub(max_chars)).collect()
        };
        let request = Request {
            system: FLUSH_SYSTEM.into(),
            messages: vec![Message::user(format!(
                "<conversation>\n{}\n</conversation>\n\n{FLUSH_INSTRUCTIONS}",
                piece.trim()
            ))],
            tools: Vec::new(),
        };
        let models = self.rt.models();
        let outcome = match models
            .complete(self.targets(), &request, &mut |_| {}, self.cancel)
            .await
        {
            Ok((reply, _)) => {
                let notes = without_thinking(&reply.text);
                if notes.trim().is_empty() || notes.trim() == "NOTHING" {
                    Ok(None)
                } else {
                    self.append_notes(&notes).map(Some)
                }
            }
            Err(e) => Err(e.to_string()),
        };
        let (event, detail) = match outcome {
            Ok(Some(path)) => ("memory_flush", path),
            Ok(None) => ("memory_flush", "nothing worth keeping".to_string()),
            Err(e) => ("memory_flush_failed", e),
        };
        let _ = log.append(
            turn,
            Body::Meta {
                event: event.into(),
                detail,
            },
        );
    }

    /// Appends the notes to today's file through the workspace opener:
    /// `memory/` or the file turned into a link, or the file given a second
    /// name, is refused rather than followed (model-written text must not
    /// land in a file outside the workspace).
    fn append_notes(&self, notes: &str) -> Result<String, String> {
        let now = chrono::Local::now();
        let text = format!(
            "\n## Saved before compaction ({}, {})\n\n{}\n",
            self.key,
            now.format("%H:%M"),
            notes.trim()
        );
        crate::workspace::append_memory_notes(
            &self.agent.workspace,
            &format!("{}.md", now.format("%Y-%m-%d")),
            &text,
        )
        .map_err(|e| {
            // A refused link is logged by the opener already.
            if !e.is_link() {
                tracing::warn!(session = %self.key, "The memory flush before compaction was not saved: {e}");
            }
            e.to_string()
        })
    }
}
