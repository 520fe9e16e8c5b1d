//! `pincer chat` and `pincer send`: stream a turn's events; Ctrl-C aborts
//! the running turn (the daemon records the partial turn).

use std::io::Write;

use pincer_proto::v1 as pb;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::Ctx;
use crate::render::{self, End};
use crate::rpc::{self, CliError, Clients};

/// Sends one message; prints the streamed reply (or JSON lines).
pub async fn send(
    ctx: &Ctx,
    agent: Option<String>,
    session: Option<String>,
    text: String,
) -> Result<u8, CliError> {
    let text = if text == "-" {
        let mut buf = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf)
            .map_err(|e| CliError::failed(format!("cannot read the message from stdin: {e}")))?;
        buf
    } else {
        text
    };
    let mut clients = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let agent = agent.unwrap_or_default();
    let session = session.unwrap_or_default();
    match turn(&mut clients, &agent, &session, text, ctx.json).await? {
        End::Finished { stop_reason } if stop_reason == "aborted" => Ok(130),
        End::Finished { .. } => Ok(0),
        End::Failed { .. } => Ok(1),
    }
}

/// Runs one turn, rendering events until it ends; Ctrl-C sends Abort.
async fn turn(
    clients: &mut Clients,
    agent: &str,
    session: &str,
    text: String,
    json: bool,
) -> Result<End, CliError> {
    let request = pb::ChatRequest {
        agent: agent.to_string(),
        session: session.to_string(),
        message: text,
    };
    let mut stream = clients.agent.chat(request).await?.into_inner();
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let mut abort_sent = false;
    loop {
        let next = tokio::select! {
            next = stream.message() => next,
            _ = tokio::signal::ctrl_c(), if !abort_sent => {
                abort_sent = true;
                let _ = writeln!(err, "\n  ■ aborting…");
                clients.agent.abort(pb::AbortRequest { agent: agent.to_string(), session: session.to_string() }).await?;
                continue;
            }
        };
        let Some(event) = next? else {
            return Err(CliError::failed(
                "the daemon closed the stream before the turn ended (was it stopped?)",
            ));
        };
        let Some(event) = event.event else { continue };
        let end = if json {
            let _ = writeln!(out, "{}", render::json(&event));
            render::end_of(&event)
        } else {
            render::human(&event, &mut out, &mut err)
        };
        if let Some(end) = end {
            return Ok(end);
        }
    }
}

/// The interactive loop.
pub async fn interactive(
    ctx: &Ctx,
    agent: Option<String>,
    session: Option<String>,
) -> Result<u8, CliError> {
    let mut clients = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let agent = agent.unwrap_or_default();
    let session = session.unwrap_or_default();
    let status = clients
        .daemon
        .status(pb::StatusRequest {})
        .await?
        .into_inner();
    if !status.provider_problem.is_empty() {
        eprintln!("note: {}", status.provider_problem);
    }
    eprintln!(
        "pincer chat — {} (Ctrl-C aborts a turn, Ctrl-D or /exit leaves, /reset starts afresh)",
        if session.is_empty() {
            "main session"
        } else {
            session.as_str()
        }
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        eprint!("› ");
        let _ = std::io::stderr().flush();
        let line = tokio::select! {
            line = lines.next_line() => line.map_err(|e| CliError::failed(format!("cannot read stdin: {e}")))?,
            _ = tokio::signal::ctrl_c() => { eprintln!(); return Ok(130); }
        };
        let Some(line) = line else {
            eprintln!();
            return Ok(0);
        };
        let text = line.trim();
        match text {
            "" => continue,
            "/exit" | "/quit" => return Ok(0),
            "/new" | "/reset" => {
                let target = if session.is_empty() {
                    "main".to_string()
                } else {
                    session.clone()
                };
                match clients
                    .sessions
                    .reset(pb::SessionRef {
                        agent: agent.clone(),
                        session: target,
                    })
                    .await
                {
                    Ok(_) => eprintln!("  session reset; the old transcript is kept on disk"),
                    Err(s) if s.code() == tonic::Code::NotFound => {
                        eprintln!("  nothing to reset yet")
                    }
                    Err(s) => eprintln!("error: {}", s.message()),
                }
                continue;
            }
            _ => {}
        }
        match turn(&mut clients, &agent, &session, text.to_string(), false).await {
            Ok(_) => {}
            Err(e) if e.code == rpc::NOT_RUNNING => return Err(e),
            Err(e) => eprintln!("error: {}", e.message),
        }
    }
}
