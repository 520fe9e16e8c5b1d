//! `pincer tools audit`: the newest tool calls with their time, session,
//! outcome, what decided it and the arguments (secrets masked by the
//! daemon). `--session` goes to the daemon as typed.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::render::one_line;
use crate::rpc;

/// Characters of a call's arguments one row shows (`--json` has them
/// all, as the daemon keeps them).
const ARGUMENT_CHARS: usize = 60;

pub async fn run(ctx: &Ctx, session: Option<String>, limit: u32) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let reply = c
        .tools
        .audit(pb::AuditRequest {
            session: session.unwrap_or_default(),
            limit,
        })
        .await?
        .into_inner();
    let rows = reply.rows;
    if ctx.json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"ts": r.ts, "session": r.session_key, "agent": r.agent, "sender": r.sender,
                       "tool": r.tool, "call_id": r.call_id, "args_hash": r.args_hash, "arguments": r.arguments,
                       "outcome": r.outcome, "duration_ms": r.duration_ms,
                       "decided_by": r.decided_by, "detail": r.detail})
            })
            .collect();
        out::json(&serde_json::Value::Array(v));
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no tool calls recorded yet");
        return Ok(0);
    }
    let session_width = rows
        .iter()
        .map(|r| r.session_key.chars().count())
        .max()
        .unwrap_or(7)
        .clamp(7, 40);
    let arguments: Vec<String> = rows
        .iter()
        .map(|r| one_line(&r.arguments, ARGUMENT_CHARS))
        .collect();
    let arguments_width = arguments
        .iter()
        .map(|a| a.chars().count())
        .max()
        .unwrap_or(9)
        .max("ARGUMENTS".len());
    outln!(
        "{:<14} {:<session_width$} {:<16} {:<8} {:>7}  {:<24} {:<arguments_width$}  DETAIL",
        "TIME",
        "SESSION",
        "TOOL",
        "OUTCOME",
        "MS",
        "DECIDED BY",
        "ARGUMENTS"
    );
    for (r, arguments) in rows.iter().zip(&arguments) {
        outln!(
            "{:<14} {:<session_width$} {:<16} {:<8} {:>7}  {:<24} {:<arguments_width$}  {}",
            local_time(&r.ts),
            one_line(&r.session_key, session_width),
            one_line(&r.tool, 16),
            r.outcome,
            r.duration_ms,
            one_line(&r.decided_by, 24),
            arguments,
            one_line(&r.detail, 80)
        );
    }
    if reply.left_out > 0 {
        outln!(
            "note: the {} oldest rows asked for did not fit in one reply; ask for fewer with -n",
            reply.left_out
        );
    }
    Ok(0)
}

/// An RFC 3339 time as local `MM-DD HH:MM:SS`; what came if it does not parse.
fn local_time(ts: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => t
            .with_timezone(&chrono::Local)
            .format("%m-%d %H:%M:%S")
            .to_string(),
        Err(_) if ts.is_empty() => "-".to_string(),
        Err(_) => ts.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::local_time;

    #[test]
    fn times_are_compact_and_bad_ones_pass_through() {
        let t = local_time("2026-11-20T10:11:12.345Z");
        assert_eq!(t.len(), "11-20 10:11:12".len(), "{t}");
        assert!(t.ends_with(":12"), "{t}");
        assert_eq!(local_time(""), "-");
        assert_eq!(local_time("yesterday"), "yesterday");
    }
}
