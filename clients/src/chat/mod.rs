//! `pincer chat` and `pincer send`: the chat's loop lives here; a turn in
//! `turn.rs`, the line editor in `editor.rs`, local commands in
//! `commands.rs`, inline approvals in `approval.rs`, the daemon watcher in
//! `watch.rs`. A message over pincerd's 1 MiB limit is refused before it
//! is sent. When pincerd cannot be reached, `chat` keeps the typed
//! message: on a terminal it is put back into the prompt; piped, an empty
//! line sends it again once pincerd answers.

mod approval;
mod commands;
mod editor;
mod termios;
mod turn;
mod watch;

use pincer_proto::v1 as pb;

use crate::Ctx;
use crate::cli::Target;
use crate::error::CliError;
use crate::out::errln;
use crate::render::End;
use crate::rpc::{self, Clients, During};
use commands::{Input, Local};
use editor::Read;
use turn::Show;
use watch::Watch;

/// pincerd's limit on one message (`daemon/src/server/mod.rs`).
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

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
    let show = Show {
        json: ctx.json,
        ask: None,
    };
    match turn::run(&mut clients, &agent, &session, text, show).await {
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
        "pincer chat — {} (/help lists commands and keys; Ctrl-C aborts a turn, Ctrl-D or /exit leaves)",
        if session.is_empty() {
            "main session"
        } else {
            session.as_str()
        }
    );
    let (mut input, printer) = editor::Input::open(ctx.home.join("chat_history"));
    let watch = printer.map(|p| {
        Watch::spawn(
            ctx.home.clone(),
            ctx.explicit_home,
            clients.daemon.clone(),
            status.pid,
            p,
        )
    });
    let on_terminal = input.terminal().is_some();
    // A message that could not be sent: put back into the prompt on a
    // terminal, sent again by an empty line when piped.
    let mut kept: Option<String> = None;
    // The connection broke: connect afresh before the next request.
    let mut reconnect = false;
    // Ctrl-C on an empty prompt once: a second one leaves.
    let mut interrupted = false;
    loop {
        let initial = if on_terminal { kept.take() } else { None };
        if let Some(w) = &watch {
            w.set_idle(true);
        }
        let read = input.read("› ", initial.as_deref().unwrap_or("")).await;
        if let Some(w) = &watch {
            w.set_idle(false);
            reconnect |= w.take_reconnected();
        }
        let line = match read? {
            Read::Line(line) => line,
            Read::Eof => {
                errln!();
                return Ok(0);
            }
            Read::Interrupted if on_terminal && !interrupted => {
                interrupted = true;
                errln!("\n  (Ctrl-C again or Ctrl-D leaves; /help lists commands)");
                continue;
            }
            Read::Interrupted => {
                errln!();
                return Ok(130);
            }
        };
        interrupted = false;
        let text = match commands::parse(&line) {
            Input::Empty => match kept.take() {
                Some(k) => k,
                None => continue,
            },
            Input::Local(Local::Help) => {
                errln!("{}", commands::help(on_terminal));
                continue;
            }
            Input::Local(Local::Exit) => return Ok(0),
            Input::Unknown(name) => {
                errln!(
                    "  unknown command {name}: /help lists them (start the line with // to send it to the model)"
                );
                continue;
            }
            Input::Local(Local::Reset) => {
                if let Err(e) = connect_again(ctx, &mut clients, &mut reconnect).await {
                    errln!("error: {}", e.message);
                    continue;
                }
                reconnect |= reset(ctx, &mut clients, &agent, &session).await;
                continue;
            }
            Input::Message(text) => text,
        };
        if let Err(e) = check_size(&text) {
            errln!("error: {}", e.message);
            continue;
        }
        if let Err(e) = connect_again(ctx, &mut clients, &mut reconnect).await {
            keep(&mut kept, text, &e.message, on_terminal);
            continue;
        }
        let show = Show {
            json: false,
            ask: input.terminal(),
        };
        let quiet = if on_terminal {
            termios::Saved::quiet_controls()
        } else {
            None
        };
        let ran = turn::run(&mut clients, &agent, &session, text.clone(), show).await;
        drop(quiet);
        match ran {
            Ok(_) => {}
            Err(f) if f.error.lost_connection && !f.delivered => {
                reconnect = true;
                let why = match rpc::reachable(&ctx.home, ctx.explicit_home) {
                    Err(e) => e.message,
                    Ok(()) => "the connection to pincerd closed".to_string(),
                };
                keep(&mut kept, text, &why, on_terminal);
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

/// Connects afresh when the last request found the connection broken
/// (`reconnect`), which is cleared once a connection is made.
async fn connect_again(
    ctx: &Ctx,
    clients: &mut Clients,
    reconnect: &mut bool,
) -> Result<(), CliError> {
    if *reconnect {
        *clients = rpc::connect(&ctx.home, ctx.explicit_home).await?;
        *reconnect = false;
    }
    Ok(())
}

/// `/new`: resets the session; true when the connection broke.
async fn reset(ctx: &Ctx, clients: &mut Clients, agent: &str, session: &str) -> bool {
    let target = if session.is_empty() { "main" } else { session };
    let reset = pb::SessionRef {
        agent: agent.to_string(),
        session: target.to_string(),
    };
    match clients.sessions.reset(reset).await {
        Ok(_) => errln!("  session reset; the old transcript is kept on disk"),
        Err(s) if s.code() == tonic::Code::NotFound => errln!("  nothing to reset yet"),
        Err(s) => {
            let e = CliError::from(s);
            let lost = e.lost_connection;
            let e = rpc::explain(e, &ctx.home, ctx.explicit_home, During::Command);
            errln!("error: {}", e.message);
            return lost;
        }
    }
    false
}

/// Keeps a message that was not sent and says how to send it again.
fn keep(kept: &mut Option<String>, text: String, why: &str, on_terminal: bool) {
    let why = why.trim_end_matches('.');
    if on_terminal {
        errln!(
            "  ! this message was not sent: {why}\n  ! it is back in the prompt: press Enter to send it once pincerd answers"
        );
    } else {
        errln!(
            "  ! this message was not sent: {why}\n  ! it is kept: once pincerd answers, press Enter on an empty line to send it again (or type another message):\n  {text}"
        );
    }
    *kept = Some(text);
}
