//! `pincer.v1.Agent`: Chat streams a turn's events; Abort stops a turn.
//! Each event's texts are capped ([`fit::EVENT_CHARS`]) so that no event
//! outgrows a client's message limit, whatever the model sent; the
//! transcript keeps them whole.

use pincer_proto::v1 as pb;
use pincer_proto::v1::chat_event::Event as PbEvent;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status};

use super::{MAX_MESSAGE_BYTES, State, fit};
use crate::agent::Event;
use crate::tools::arguments::shorten;

pub struct AgentService {
    state: State,
}

impl AgentService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

type EventStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::ChatEvent, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_server::Agent for AgentService {
    type ChatStream = EventStream;

    async fn chat(
        &self,
        request: Request<pb::ChatRequest>,
    ) -> Result<Response<Self::ChatStream>, Status> {
        let req = request.into_inner();
        if req.message.trim().is_empty() {
            return Err(Status::invalid_argument(
                "the message is empty; type something to send",
            ));
        }
        if req.message.len() > MAX_MESSAGE_BYTES {
            return Err(Status::invalid_argument(format!(
                "the message is {} bytes; the limit is {MAX_MESSAGE_BYTES} bytes (1 MiB): send a file path instead",
                req.message.len()
            )));
        }
        let key = self.state.hub.resolve_key(&req.agent, &req.session)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = crate::routing::owner(&key);
        self.state.hub.chat(key, req.message, origin, tx).await?;
        let stream =
            tokio_stream::StreamExt::map(UnboundedReceiverStream::new(rx), |e| Ok(to_proto(e)));
        // End the stream after the turn's last event.
        let stream = EndAfterLast {
            inner: stream,
            done: false,
        };
        Ok(Response::new(Box::pin(stream)))
    }

    async fn abort(
        &self,
        request: Request<pb::AbortRequest>,
    ) -> Result<Response<pb::AbortResponse>, Status> {
        let req = request.into_inner();
        Ok(Response::new(pb::AbortResponse {
            aborted: self.state.hub.abort_named(&req.agent, &req.session)?,
        }))
    }
}

/// Ends an event stream right after `TurnFinished` or `TurnError`.
struct EndAfterLast<S> {
    inner: S,
    done: bool,
}

impl<S> tokio_stream::Stream for EndAfterLast<S>
where
    S: tokio_stream::Stream<Item = Result<pb::ChatEvent, Status>> + Unpin,
{
    type Item = Result<pb::ChatEvent, Status>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.done {
            return std::task::Poll::Ready(None);
        }
        let next = std::pin::Pin::new(&mut self.inner).poll_next(cx);
        if let std::task::Poll::Ready(Some(Ok(ev))) = &next
            && matches!(
                ev.event,
                Some(PbEvent::TurnFinished(_)) | Some(PbEvent::Error(_))
            )
        {
            self.done = true;
        }
        next
    }
}

pub fn to_proto(event: Event) -> pb::ChatEvent {
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
