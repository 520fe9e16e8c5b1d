//! Why a request is refused before it reaches the hub or a part:
//! [`RequestError`]. Each service's `pb.rs` parses its requests into it;
//! `status.rs` turns it into INVALID_ARGUMENT. Its sentences are what the
//! CLI prints, so they read as advice to the one who asked.

use super::MAX_MESSAGE_BYTES;
use crate::tools::approvals::Refusal;

/// A request whose fields cannot be used as they are.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("the message is empty; type something to send")]
    EmptyMessage,
    #[error(
        "the message is {bytes} bytes; the limit is {limit} bytes (1 MiB): send a file path instead",
        limit = MAX_MESSAGE_BYTES
    )]
    MessageTooLarge { bytes: usize },
    #[error("give at most one of edit_json, revise and input_json")]
    SeveralAnswers,
    #[error("`always` goes with allow: a call can be allowed always, never denied always")]
    AlwaysDeny,
    /// Edited data or an input that is not JSON (the approvals' own
    /// refusal, so the words are theirs).
    #[error(transparent)]
    Answer(Refusal),
    #[error("the query is empty")]
    EmptyQuery,
    #[error("unknown legs `{0}`: use hybrid, text or vector")]
    UnknownLegs(String),
    #[error("min_score must be between 0 and 1")]
    MinScore,
    #[error("name the sender's id (pincer pairing allowed lists them)")]
    NoSender,
    #[error("name the code the sender was given (pincer pairing list shows them)")]
    NoCode,
    #[error("`{0}` is not a way to settle a step: rerun, skip or fail")]
    UnknownSettle(String),
    /// `what` names the field (`fields_json`, `patch_json`).
    #[error("{what} must be a JSON object")]
    NotObject { what: &'static str },
    #[error("{what} is not JSON: {source}")]
    NotJson {
        what: &'static str,
        source: serde_json::Error,
    },
    /// JSON, but not a schedule's fields.
    #[error("schedule `{name}`: {source}")]
    BadSchedule {
        name: String,
        source: serde_json::Error,
    },
}
