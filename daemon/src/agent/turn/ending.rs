//! How a turn ends other than with an answer: failed (the error written
//! to the transcript with a summary for the session, and told to the
//! client) or aborted (what streamed so far kept); and a provider's
//! failure as the sentence the user reads.

use super::{Outcome, Turn};
use crate::agent::Event;
use crate::agent::session_log::SessionLog;
use crate::llm::LlmError;
use crate::session::transcript::Body;

impl Turn<'_> {
    pub(super) fn fail(
        &self,
        log: &mut SessionLog,
        code: &'static str,
        message: String,
    ) -> Outcome {
        tracing::warn!(session = %self.key, code, error = %message, "turn failed");
        let summary = crate::agent::failure::summary(log.entries(), &self.turn_id, &message);
        let _ = log.append(
            &self.turn_id,
            Body::Meta {
                event: "turn_error".into(),
                detail: message.clone(),
            },
        );
        (self.emit)(Event::Error {
            code,
            message: message.clone(),
        });
        Some((message, summary))
    }

    /// The turn was aborted: what streamed of the call under way is kept,
    /// after the text of the calls before it (`segments`).
    pub(super) fn aborted(
        &self,
        log: &mut SessionLog,
        partial: &str,
        mut segments: Vec<String>,
    ) -> Outcome {
        if !partial.is_empty() {
            let _ = log.append(
                &self.turn_id,
                Body::Assistant {
                    text: partial.to_string(),
                    model: String::new(),
                    usage: None,
                    stop: "aborted".into(),
                },
            );
        }
        let _ = log.append(
            &self.turn_id,
            Body::Meta {
                event: "turn_aborted".into(),
                detail: String::new(),
            },
        );
        if !partial.is_empty() {
            segments.push(partial.to_string());
        }
        (self.emit)(Event::Finished {
            text: partial.to_string(),
            segments,
            stop_reason: "aborted",
            model_calls: 0,
            tool_calls: 0,
        });
        None
    }
}

/// A provider failure as a sentence for the user.
pub(super) fn provider_sentence(e: &LlmError) -> String {
    match e {
        LlmError::NotConfigured(s) => s.clone(),
        // Already one sentence naming the provider, its address and what
        // to check; it was not retried.
        LlmError::Unreachable { .. } => e.to_string(),
        LlmError::Http {
            status: 401 | 403,
            message,
            ..
        } => {
            format!(
                "the provider rejected the API key (HTTP 401/403: {message}); check the key pincerd uses (`pincer doctor`)"
            )
        }
        LlmError::Http {
            status: 404,
            message,
            ..
        } => {
            format!(
                "the provider does not know this model or endpoint (HTTP 404: {message}); check `model` and `base_url`"
            )
        }
        other => format!("the model call failed after retries and fallbacks: {other}"),
    }
}

/// The error code of a provider failure: `unreachable` when no connection
/// could be made at all (the model was never reached: a schedule retries
/// such a run), else `provider`.
pub(super) fn provider_code(e: &LlmError) -> &'static str {
    if matches!(e, LlmError::Unreachable { .. }) {
        "unreachable"
    } else {
        "provider"
    }
}
