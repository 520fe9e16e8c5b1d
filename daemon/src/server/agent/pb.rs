//! The Agent service's wire types and their conversions. `pincer.v1` is
//! re-exported here, so the handlers name its messages `pb::X`; a chat
//! request is checked into [`ChatInput`], and a turn's [`Event`] becomes a
//! `ChatEvent` with each text capped ([`fit::EVENT_CHARS`]) so that no
//! event outgrows a client's message limit, whatever the model sent (the
//! transcript keeps them whole).

pub(super) use pincer_proto::v1::*;

use pincer_proto::v1 as pb;
use pincer_proto::v1::chat_event::Event as PbEvent;

use crate::agent::Event;
use crate::server::request::RequestError;
use crate::server::{MAX_MESSAGE_BYTES, fit};
use crate::tools::arguments::shorten;

/// A chat request, checked: a message to send to a session.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct ChatInput {
    pub agent: String,
    pub session: String,
    pub message: String,
}

impl TryFrom<pb::ChatRequest> for ChatInput {
    type Error = RequestError;

    fn try_from(req: pb::ChatRequest) -> Result<Self, RequestError> {
        if req.message.trim().is_empty() {
            return Err(RequestError::EmptyMessage);
        }
        if req.message.len() > MAX_MESSAGE_BYTES {
            return Err(RequestError::MessageTooLarge {
                bytes: req.message.len(),
            });
        }
        Ok(Self {
            agent: req.agent,
            session: req.session,
            message: req.message,
        })
    }
}

impl From<Event> for pb::ChatEvent {
    fn from(event: Event) -> Self {
        let event = match event {
            Event::TurnStarted {
                session_key,
                session_id,
                turn_id,
                agent,
                model,
            } => PbEvent::TurnStarted(pb::TurnStarted {
                session_key,
                session_id,
                turn_id,
                agent,
                model,
            }),
            Event::Text(text) => PbEvent::TextDelta(pb::TextDelta {
                text: fit::text(text, fit::EVENT_CHARS),
            }),
            Event::ToolStarted {
                call_id,
                name,
                arguments,
            } => PbEvent::ToolCallStarted(pb::ToolCallStarted {
                call_id: fit::text(call_id, 300),
                name: fit::text(name, 300),
                arguments_json: shorten(&arguments, fit::EVENT_CHARS).into_owned(),
            }),
            Event::ToolFinished {
                call_id,
                name,
                status,
                result,
                duration_ms,
            } => PbEvent::ToolCallFinished(pb::ToolCallFinished {
                call_id: fit::text(call_id, 300),
                name: fit::text(name, 300),
                status: status.into(),
                result,
                duration_ms,
            }),
            Event::Usage {
                model,
                input,
                output,
            } => PbEvent::Usage(pb::Usage {
                model,
                input_tokens: input,
                output_tokens: output,
            }),
            Event::Retrying {
                attempt,
                delay_ms,
                reason,
                model,
            } => PbEvent::Retrying(pb::Retrying {
                attempt,
                delay_ms,
                reason,
                model,
            }),
            Event::Queued { position } => PbEvent::Queued(pb::Queued { position }),
            Event::Compaction {
                tokens_before,
                tokens_after,
                reason,
                error,
            } => PbEvent::Compaction(pb::Compaction {
                tokens_before,
                tokens_after,
                reason: reason.into(),
                error,
            }),
            Event::ApprovalRequested {
                id,
                tool,
                arguments,
                expires_in_s,
            } => PbEvent::ApprovalRequested(pb::ApprovalRequested {
                id,
                tool,
                arguments_json: shorten(&arguments, fit::EVENT_CHARS).into_owned(),
                expires_in_s,
            }),
            Event::Finished {
                text,
                segments,
                stop_reason,
                model_calls,
                tool_calls,
            } => PbEvent::TurnFinished(pb::TurnFinished {
                text: fit::text(text, fit::EVENT_CHARS),
                segments: fit::segments(segments),
                stop_reason: stop_reason.into(),
                model_calls,
                tool_calls,
            }),
            Event::Error { code, message } => PbEvent::Error(pb::TurnError {
                code: code.into(),
                message: fit::text(message, fit::NOTE_CHARS),
            }),
        };
        pb::ChatEvent { event: Some(event) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(message: &str) -> pb::ChatRequest {
        pb::ChatRequest {
            agent: "main".into(),
            session: "s".into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_message_parses_with_its_session() {
        let input = ChatInput::try_from(request("hello")).unwrap();
        assert_eq!(
            input,
            ChatInput {
                agent: "main".into(),
                session: "s".into(),
                message: "hello".into(),
            }
        );
    }

    #[test]
    fn an_empty_or_oversized_message_is_refused() {
        let empty = ChatInput::try_from(request(" \n")).unwrap_err();
        assert_eq!(
            empty.to_string(),
            "the message is empty; type something to send"
        );
        let big = "x".repeat(MAX_MESSAGE_BYTES + 1);
        let too_large = ChatInput::try_from(request(&big)).unwrap_err();
        assert_eq!(
            too_large.to_string(),
            format!(
                "the message is {} bytes; the limit is 1048576 bytes (1 MiB): send a file path instead",
                MAX_MESSAGE_BYTES + 1
            )
        );
        assert!(ChatInput::try_from(request(&big[1..])).is_ok());
    }

    #[test]
    fn an_event_keeps_its_fields() {
        let started = pb::ChatEvent::from(Event::TurnStarted {
            session_key: "agent:main:s".into(),
            session_id: "id".into(),
            turn_id: "t1".into(),
            agent: "main".into(),
            model: "m".into(),
        });
        let Some(PbEvent::TurnStarted(t)) = started.event else {
            panic!("not TurnStarted: {started:?}");
        };
        assert_eq!(
            (
                t.session_key.as_str(),
                t.session_id.as_str(),
                t.turn_id.as_str()
            ),
            ("agent:main:s", "id", "t1")
        );
        let finished = pb::ChatEvent::from(Event::Finished {
            text: "done".into(),
            segments: vec!["done".into()],
            stop_reason: "end_turn",
            model_calls: 2,
            tool_calls: 1,
        });
        let Some(PbEvent::TurnFinished(f)) = finished.event else {
            panic!("not TurnFinished: {finished:?}");
        };
        assert_eq!(f.text, "done");
        assert_eq!(f.stop_reason, "end_turn");
        assert_eq!((f.model_calls, f.tool_calls), (2, 1));
    }

    #[test]
    fn an_event_text_is_capped() {
        let long = "y".repeat(fit::EVENT_CHARS * 2);
        let event = pb::ChatEvent::from(Event::Text(long));
        let Some(PbEvent::TextDelta(d)) = event.event else {
            panic!("not a TextDelta");
        };
        assert!(d.text.chars().count() < fit::EVENT_CHARS * 2);
    }
}
