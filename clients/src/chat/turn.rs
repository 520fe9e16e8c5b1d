//! One turn: sends the message, renders the streamed events until the turn
//! ends; Ctrl-C sends Abort (the daemon records the partial turn). In a
//! chat on a terminal an approval request is asked inline
//! (`approval.rs`); elsewhere the event says which command answers it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pincer_proto::v1 as pb;
use pincer_proto::v1::chat_event::Event;
use tokio::sync::oneshot;

use super::approval::{self, Answer, Asking};
use super::editor::Terminal;
use crate::error::CliError;
use crate::out::{self, errln};
use crate::render::{self, End};
use crate::rpc::Clients;

/// A turn that did not end with a turn event.
pub struct Failure {
    pub error: CliError,
    /// The daemon got the message (the stream had started).
    pub delivered: bool,
}

/// Where the turn is shown: JSON lines, or for people; `ask` is the
/// terminal that answers approvals inline.
pub struct Show<'a> {
    pub json: bool,
    pub ask: Option<&'a Terminal>,
}

/// What woke the turn up.
enum Next {
    Event(Result<Option<pb::ChatEvent>, tonic::Status>),
    CtrlC,
    Key(Option<char>),
}

/// Runs one turn, rendering events until it ends.
pub async fn run(
    clients: &mut Clients,
    agent: &str,
    session: &str,
    text: String,
    show: Show<'_>,
) -> Result<End, Failure> {
    let request = pb::ChatRequest {
        agent: agent.to_string(),
        session: session.to_string(),
        message: text,
    };
    let mut stream = match clients.agent.chat(request).await {
        Ok(r) => r.into_inner(),
        Err(s) => {
            return Err(Failure {
                error: s.into(),
                delivered: false,
            });
        }
    };
    let delivered = |error: CliError| Failure {
        error,
        delivered: true,
    };
    let mut reply = out::Stream::default();
    let mut abort_sent = false;
    // The approval being asked, and the key that will answer it.
    let mut asking: Option<(Asking, oneshot::Receiver<Option<char>>)> = None;
    loop {
        let next = tokio::select! {
            next = stream.message() => Next::Event(next),
            _ = tokio::signal::ctrl_c(), if !abort_sent => Next::CtrlC,
            key = async {
                match asking.as_mut() {
                    Some((_, key)) => key.await.ok().flatten(),
                    None => std::future::pending().await,
                }
            } => Next::Key(key),
        };
        let event = match next {
            Next::CtrlC => {
                abort_sent = true;
                stop_asking(&mut asking).await;
                reply.before_note();
                errln!("  ■ aborting…");
                let abort = pb::AbortRequest {
                    agent: agent.to_string(),
                    session: session.to_string(),
                };
                clients
                    .agent
                    .abort(abort)
                    .await
                    .map_err(|s| delivered(s.into()))?;
                continue;
            }
            Next::Key(key) => {
                if let Some((a, _)) = asking.take()
                    && let Some(answer) = key.and_then(Answer::from_key)
                {
                    approval::decide(clients, &a.id, answer).await;
                }
                continue;
            }
            Next::Event(e) => e,
        };
        let event = event.map_err(|s| delivered(s.into()))?;
        let Some(event) = event else {
            stop_asking(&mut asking).await;
            let mut error = CliError::failed("the stream ended before the turn did");
            error.lost_connection = true;
            return Err(delivered(error));
        };
        let Some(event) = event.event else { continue };
        if show.json {
            out::json(&render::json(&event));
            if let Some(end) = render::end_of(&event) {
                return Ok(end);
            }
            continue;
        }
        // Something happened while the question was open (the call was
        // answered elsewhere, or its time ran out): stop asking first.
        stop_asking(&mut asking).await;
        if let (Event::ApprovalRequested(a), Some(terminal)) = (&event, show.ask) {
            reply.before_note();
            approval::show(a);
            let cancel = Arc::new(AtomicBool::new(false));
            // The key is read on the editor's thread; the turn waits for
            // it next to the stream.
            let rx = terminal.key(approval::PROMPT, cancel.clone());
            let id = a.id.clone();
            asking = Some((Asking { id, cancel }, rx));
            continue;
        }
        if let Some(end) = render::human(&event, &mut reply) {
            return Ok(end);
        }
    }
}

/// Cancels an open question and waits until the terminal is given back.
async fn stop_asking(asking: &mut Option<(Asking, oneshot::Receiver<Option<char>>)>) {
    if let Some((a, key)) = asking.take() {
        a.cancel.store(true, Ordering::SeqCst);
        let _ = key.await;
    }
}
