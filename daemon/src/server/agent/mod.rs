//! `pincer.v1.Agent`: Chat streams a turn's events; Abort stops a turn.
//! Requests are checked and events converted in `pb`; the handlers
//! call the hub.

pub(super) mod pb;

use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status};

use super::State;
use pb::ChatInput;
use pb::chat_event::Event as PbEvent;

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
        let req = ChatInput::try_from(request.into_inner())?;
        let key = self.state.hub.resolve_key(&req.agent, &req.session)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = crate::routing::owner(&key);
        self.state.hub.chat(key, req.message, origin, tx).await?;
        let stream = tokio_stream::StreamExt::map(UnboundedReceiverStream::new(rx), |e| {
            Ok(pb::ChatEvent::from(e))
        });
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
