//! `pincer chat` and `pincer send`: stream a turn's events; Ctrl-C aborts
//! the running turn (the daemon records the partial turn). A message over
//! pincerd's 1 MiB limit is refused before it is sent. When pincerd cannot
//! be reached, `chat` keeps the typed line and sends it again on an empty
//! line once pincerd answers.

use pincer_proto::v1 as pb;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::Ctx;
use crate::cli::Target;
use crate::error::CliError;
use crate::out::{self, err, errln};
use crate::render::{self, End};
use crate::rpc::{self, Clients, During};

/// pincerd's limit on one message (`daemon/src/server/mod.rs`).
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// A turn that did not end with a turn event.
struct Failure {
    error: CliError,
    /// The daemon got the message (the stream had started).
    delivered: bool,
}

/// Refuses a message pincerd would refuse, with the limit in words.
fn check_size(text: &str) -> Result<(), CliError> {
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(CliError::failed(format!(
            "the message is {} bytes; the limit is {MAX_MESSAGE_BYTES} bytes (1 MiB): save it as a file in the agent's workspace and send a message that names the file instead",
            text.len()
        )));
    }
    Ok(())
}

/// Sends one message; prints the streamed reply (or JSON lines).
pub async fn send(ctx: &Ctx, target: Target, text: String) -> Result<u8, CliError> {
    let text = if text == "-" {
        let mut buf = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf)
            .map_err(|e| CliError::failed(format!("cannot read the message from stdin: {e}")))?;
        buf
    } else {
        text
    };
    check_size(&text)?;
    let mut clients = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let agent = target.agent.unwrap_or_default();
    let session = target.session.unwrap_or_default();
    match turn(&mut clients, &agent, &session, text, ctx.json).await {
        Ok(End::Finished { stop_reason }) if stop_reason == "aborted" => Ok(130),
        Ok(End::Finished { .. }) => Ok(0),
        Ok(End::Failed { .. }) => Ok(1),
        Err(f) if f.delivered => Err(rpc::explain(
            f.error,
            &ctx.home,
            ctx.explicit_home,
            During::Turn,
        )),
        Err(f) if f.error.lost_connection => Err(rpc::reachable(&ctx.home, ctx.explicit_home)
            .err()
            .unwrap_or_else(|| {
                rpc::lost_connection(&ctx.home, ctx.explicit_home, During::Command)
            })),
        Err(f) => Err(f.error),
    }
}

/// Runs one turn, rendering events until it ends; Ctrl-C sends Abort.
async fn turn(
    clients: &mut Clients,
    agent: &str,
    session: &str,
    text: String,
    json: bool,
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
    loop {
        let next = tokio::select! {
            next = stream.message() => next,
            _ = tokio::signal::ctrl_c(), if !abort_sent => {
                abort_sent = true;
                errln!("\n  ■ aborting…");
                let abort = pb::AbortRequest { agent: agent.to_string(), session: session.to_string() };
                clients.agent.abort(abort).await.map_err(|s| delivered(s.into()))?;
                continue;
            }
        };
        let event = next.map_err(|s| delivered(s.into()))?;
        let Some(event) = event else {
            let mut error = CliError::failed("the stream ended before the turn did");
            error.lost_connection = true;
            return Err(delivered(error));
        };
        let Some(event) = event.event else { continue };
        let end = if json {
            out::json(&render::json(&event));
            render::end_of(&event)
        } else {
            render::human(&event, &mut reply)
        };
        if let Some(end) = end {
            return Ok(end);
        }
    }
}

/// The interactive loop.
pub async fn interactive(ctx: &Ctx, target: Target) -> Result<u8, CliError> {
    let mut clients = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let agent = target.agent.unwrap_or_default();
    let session = target.session.unwrap_or_default();
    let status = clients
        .daemon
        .status(pb::StatusRequest {})
        .await?
        .into_inner();
    if !status.provider_problem.is_empty() {
        errln!("note: {}", status.provider_problem);
    }
    errln!(
        "pincer chat — {} (Ctrl-C aborts a turn, Ctrl-D or /exit leaves, /reset starts afresh)",
        if session.is_empty() {
            "main session"
        } else {
            session.as_str()
        }
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    // A message that could not be sent, kept for an empty line to resend.
    let mut kept: Option<String> = None;
    // The connection broke: connect afresh before the next request.
    let mut reconnect = false;
    loop {
        err!("› ");
        let line = tokio::select! {
            line = lines.next_line() => line.map_err(|e| CliError::failed(format!("cannot read stdin: {e}")))?,
            _ = tokio::signal::ctrl_c() => { errln!(); return Ok(130); }
        };
        let Some(line) = line else {
            errln!();
            return Ok(0);
        };
        let text = match line.trim() {
            "" => match kept.take() {
                Some(k) => k,
                None => continue,
            },
            "/exit" | "/quit" => return Ok(0),
            t => t.to_string(),
        };
        if reconnect {
            match rpc::connect(&ctx.home, ctx.explicit_home).await {
                Ok(c) => {
                    clients = c;
                    reconnect = false;
                }
                Err(e) if text.starts_with('/') => {
                    errln!("error: {}", e.message);
                    continue;
                }
                Err(e) => {
                    keep(&mut kept, text, &e.message);
                    continue;
                }
            }
        }
        if text == "/new" || text == "/reset" {
            let target = if session.is_empty() { "main" } else { &session };
            let reset = pb::SessionRef {
                agent: agent.clone(),
                session: target.to_string(),
            };
            match clients.sessions.reset(reset).await {
                Ok(_) => errln!("  session reset; the old transcript is kept on disk"),
                Err(s) if s.code() == tonic::Code::NotFound => errln!("  nothing to reset yet"),
                Err(s) => {
                    let e = CliError::from(s);
                    reconnect |= e.lost_connection;
                    let e = rpc::explain(e, &ctx.home, ctx.explicit_home, During::Command);
                    errln!("error: {}", e.message);
                }
            }
            continue;
        }
        if let Err(e) = check_size(&text) {
            errln!("error: {}", e.message);
            continue;
        }
        match turn(&mut clients, &agent, &session, text.clone(), false).await {
            Ok(_) => {}
            Err(f) if f.error.lost_connection && !f.delivered => {
                reconnect = true;
                let why = match rpc::reachable(&ctx.home, ctx.explicit_home) {
                    Err(e) => e.message,
                    Ok(()) => "the connection to pincerd closed".to_string(),
                };
                keep(&mut kept, text, &why);
            }
            Err(f) if f.error.lost_connection => {
                reconnect = true;
                let e = rpc::lost_connection(&ctx.home, ctx.explicit_home, During::Turn);
                errln!("\nerror: {}", e.message);
            }
            Err(f) => errln!("error: {}", f.error.message),
        }
    }
}

/// Keeps a message that was not sent and says how to send it again.
fn keep(kept: &mut Option<String>, text: String, why: &str) {
    errln!(
        "  ! this message was not sent: {}\n  ! it is kept: once pincerd answers, press Enter on an empty line to send it again (or type another message):\n  {}",
        why.trim_end_matches('.'),
        text
    );
    *kept = Some(text);
}
