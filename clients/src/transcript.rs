//! Showing sessions: a transcript entry as one line for people, and a
//! session's registry row as JSON.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::out::outln;
use crate::render::one_line;

pub fn session_json(s: &pb::SessionInfo) -> serde_json::Value {
    json!({"key": s.key, "id": s.id, "agent": s.agent, "channel": s.channel, "created_at": s.created_at,
           "updated_at": s.updated_at, "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
           "compactions": s.compactions, "last_error": s.last_error, "failure_summary": s.failure_summary,
           "entries": s.entries, "running": s.running})
}

/// One transcript line (JSONL) as text; lines that are not JSON are skipped.
pub fn print_entry(line: &str) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    let s = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let ts = s("ts");
    let ts = ts.get(11..19).unwrap_or("");
    match s("kind").as_str() {
        "user" => outln!("{ts} you:       {}", s("text")),
        "assistant" if s("stop") == "aborted" => {
            outln!("{ts} assistant: {} [aborted]", s("text"))
        }
        "assistant" if !s("text").is_empty() => outln!("{ts} assistant: {}", s("text")),
        "assistant" => {}
        "tool_call" => outln!("{ts}   ⚙ {} {}", s("name"), one_line(&s("arguments"), 120)),
        "tool_result" => {
            let mark = if v.get("is_error").and_then(|b| b.as_bool()).unwrap_or(false) {
                "✗"
            } else {
                "✓"
            };
            outln!(
                "{ts}   {mark} {} {}",
                s("name"),
                one_line(&s("content"), 120)
            );
        }
        "meta" => outln!("{ts}   · {} {}", s("event"), s("detail")),
        "compaction" => outln!(
            "{ts}   · compaction ({}): older history summarised\n{}",
            s("reason"),
            s("summary")
        ),
        other => outln!("{ts}   · {other}"),
    }
}
