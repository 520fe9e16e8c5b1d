//! `pincer sessions list|show|reset|delete|compact|prompt`. Session names
//! go to the daemon exactly as typed; it resolves short names.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::cli::{SessionArg, SessionsCommand};
use crate::error::CliError;
use crate::out::{self, out, outln};
use crate::render::one_line;
use crate::rpc::{self, Clients};
use crate::transcript::{print_entry, session_json};

pub async fn run(ctx: &Ctx, command: SessionsCommand) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    match command {
        SessionsCommand::List { agent } => list(ctx, &mut c, agent.agent).await,
        SessionsCommand::Show {
            session,
            limit,
            before,
        } => {
            show(
                ctx,
                &mut c,
                session,
                limit.unwrap_or(0),
                before.unwrap_or(0),
            )
            .await
        }
        SessionsCommand::Reset { session } => {
            let r = c.sessions.reset(session_ref(session)).await?.into_inner();
            if ctx.json {
                out::json(&json!({"old_id": r.old_id, "new_id": r.new_id}));
            } else {
                outln!(
                    "reset: new session id {} (the old transcript {} is kept)",
                    r.new_id,
                    r.old_id
                );
            }
            Ok(0)
        }
        SessionsCommand::Delete { session } => {
            let r = c.sessions.delete(session_ref(session)).await?.into_inner();
            if ctx.json {
                out::json(&json!({"deleted": r.deleted}));
            } else {
                outln!("deleted the session and its transcript");
            }
            Ok(0)
        }
        SessionsCommand::Compact { session } => {
            let r = c.sessions.compact(session_ref(session)).await?.into_inner();
            if ctx.json {
                out::json(
                    &json!({"compacted": r.compacted, "tokens_before": r.tokens_before, "tokens_after": r.tokens_after, "summary": r.summary, "note": r.note}),
                );
            } else if r.compacted {
                outln!(
                    "compacted: ~{} → ~{} tokens of history\n\n{}",
                    r.tokens_before,
                    r.tokens_after,
                    r.summary
                );
            } else {
                outln!("{}", r.note);
            }
            Ok(0)
        }
        SessionsCommand::Prompt { session } => {
            let p = c.sessions.prompt(session_ref(session)).await?.into_inner();
            if ctx.json {
                let messages: serde_json::Value =
                    serde_json::from_str(&p.messages_json).unwrap_or_default();
                out::json(
                    &json!({"model": p.model, "tool_format": p.tool_format, "sent_at": p.sent_at,
                       "estimated_tokens": p.estimated_tokens, "system": p.system,
                       "messages": messages, "tools": p.tools,
                       "note": (!p.note.is_empty()).then_some(&p.note)}),
                );
            } else {
                out!("{}", p.text);
                if !p.note.is_empty() {
                    outln!("\nnote: {}", p.note);
                }
            }
            Ok(0)
        }
    }
}

fn session_ref(s: SessionArg) -> pb::SessionRef {
    pb::SessionRef {
        agent: s.agent.unwrap_or_default(),
        session: s.session,
    }
}

async fn list(ctx: &Ctx, c: &mut Clients, agent: Option<String>) -> Result<u8, CliError> {
    let list = c
        .sessions
        .list(pb::ListSessionsRequest {
            agent: agent.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if ctx.json {
        let v: Vec<_> = list.sessions.iter().map(session_json).collect();
        out::json(&serde_json::Value::Array(v));
        return Ok(0);
    }
    let left_out = (list.left_out > 0).then(|| {
        format!(
            "note: the {} least recently used sessions did not fit in one reply; name one to see it",
            list.left_out
        )
    });
    if list.sessions.is_empty() {
        outln!("no sessions yet; `pincer chat` starts one");
        return Ok(0);
    }
    outln!(
        "{:<40} {:<20} {:>8} {:>14}  STATE",
        "KEY",
        "UPDATED",
        "ENTRIES",
        "TOKENS IN/OUT"
    );
    for s in &list.sessions {
        let state = if s.running {
            "running".to_string()
        } else if !s.last_error.is_empty() {
            format!("error: {}", one_line(&s.last_error, 60))
        } else {
            "idle".to_string()
        };
        outln!(
            "{:<40} {:<20} {:>8} {:>14}  {state}",
            s.key,
            s.updated_at.get(..19).unwrap_or(&s.updated_at),
            s.entries,
            format!("{}/{}", s.input_tokens, s.output_tokens)
        );
    }
    if let Some(note) = left_out {
        outln!("{note}");
    }
    Ok(0)
}

async fn show(
    ctx: &Ctx,
    c: &mut Clients,
    session: SessionArg,
    limit: u32,
    before: u64,
) -> Result<u8, CliError> {
    // The command that pages back, as the user would type it.
    let again = match &session.agent {
        Some(agent) => format!("pincer sessions show --agent {agent} {}", session.session),
        None => format!("pincer sessions show {}", session.session),
    };
    let h = c
        .sessions
        .history(pb::HistoryRequest {
            agent: session.agent.unwrap_or_default(),
            session: session.session,
            limit,
            before,
        })
        .await?
        .into_inner();
    let shortened = h.entries.iter().filter(|e| e.omitted_chars > 0).count();
    if ctx.json {
        let entries: Vec<serde_json::Value> = h
            .entries
            .iter()
            .filter_map(|e| serde_json::from_str(&e.json).ok())
            .collect();
        out::json(
            &json!({"session": h.session.as_ref().map(session_json), "entries": entries,
                    "recovered_torn_line": h.recovered_torn_line, "first_index": h.first_index,
                    "left_out": h.left_out, "shortened": shortened}),
        );
        return Ok(0);
    }
    if let Some(s) = &h.session {
        outln!(
            "{} (id {}, agent {}, channel {})",
            s.key,
            s.id,
            s.agent,
            s.channel
        );
        outln!(
            "created {}, updated {}, tokens {}/{}",
            s.created_at,
            s.updated_at,
            s.input_tokens,
            s.output_tokens
        );
        if s.compactions > 0 {
            outln!("compactions: {}", s.compactions);
        }
        if !s.last_error.is_empty() {
            outln!("last error: {}", s.last_error);
        }
        if !s.failure_summary.is_empty() {
            outln!("failed turn: {}", s.failure_summary);
        }
    }
    if h.recovered_torn_line {
        outln!("note: the transcript ended in a torn line (a crash mid-write); it was skipped");
    }
    outln!();
    for e in &h.entries {
        print_entry(&e.json);
    }
    if shortened > 0 {
        let chars: u64 = h.entries.iter().map(|e| e.omitted_chars).sum();
        outln!(
            "\nnote: {shortened} entries were too long to show whole: their long texts keep their head and tail ({chars} characters omitted, each place marked); the transcript file keeps them whole"
        );
    }
    if h.left_out > 0 {
        outln!(
            "note: the {} older entries asked for did not fit in one reply; `{again} --before {}` shows them",
            h.left_out,
            h.first_index
        );
    }
    Ok(0)
}
