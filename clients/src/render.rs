//! Showing a turn's events: as text for people (streamed answer, tool calls
//! as they happen) or as JSON lines for programs (`--json`). Model and tool
//! text is printed through `out`, which shows its control characters; the
//! answer is Markdown in a terminal and plain elsewhere (`markdown.rs`).
//! Notes (tool calls, retries) start a line of their own, with no blank
//! line between them, so a run of tool calls reads as a compact list. The
//! text of the model call after them starts after a blank line, so the
//! texts of a turn's calls never run together on stdout (`--json` has
//! them apart as `turn_finished.segments`).

use pincer_proto::v1::chat_event::Event;
use serde_json::json;

use crate::out::{self, errln};

/// How a turn ended, for the exit code.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    Finished { stop_reason: String },
    Failed { message: String },
}

/// Prints one event for a person (the reply's text to `reply`, the rest
/// on stderr); returns `Some` when the turn ended.
pub fn human(event: &Event, reply: &mut out::Stream) -> Option<End> {
    match event {
        Event::TurnStarted(_) | Event::Usage(_) => None,
        Event::Compaction(c) if c.error.is_empty() => {
            reply.before_note();
            errln!(
                "  · history compacted ({}): ~{} → ~{} tokens",
                c.reason,
                c.tokens_before,
                c.tokens_after
            );
            None
        }
        Event::Compaction(c) => {
            reply.before_note();
            errln!("  ! {}", c.error);
            None
        }
        Event::TextDelta(t) => {
            reply.text(&t.text);
            None
        }
        Event::ToolCallStarted(t) => {
            reply.before_note();
            reply.next_segment();
            out::err_brief(format_args!(
                "  ⚙ {} {}",
                t.name,
                one_line(&t.arguments_json, 160)
            ));
            None
        }
        Event::ToolCallFinished(t) => {
            let mark = match t.status.as_str() {
                "ok" => "✓",
                "aborted" => "■",
                _ => "✗",
            };
            reply.before_note();
            out::err_brief(format_args!(
                "  {mark} {} {} ms {}",
                t.name,
                t.duration_ms,
                one_line(&t.result, 160)
            ));
            None
        }
        Event::Retrying(r) => {
            reply.before_note();
            // The call starts over: what it wrote so far stays apart.
            reply.next_segment();
            errln!(
                "  ↻ retry {} of {} in {:.1} s: {}",
                r.attempt,
                r.model,
                r.delay_ms as f64 / 1000.0,
                one_line(&r.reason, 200)
            );
            None
        }
        Event::ApprovalRequested(a) => {
            reply.before_note();
            errln!(
                "  ? {} {} needs your approval: `pincer approvals allow {}` or `pincer approvals deny {}` (denied in {} s)",
                a.tool,
                one_line(&a.arguments_json, 120),
                a.id,
                a.id,
                a.expires_in_s
            );
            None
        }
        Event::Queued(q) => {
            reply.before_note();
            errln!(
                "  … queued behind the running turn (position {}); it will be answered next",
                q.position
            );
            None
        }
        Event::TurnFinished(f) => {
            reply.end();
            match f.stop_reason.as_str() {
                "aborted" => {
                    errln!("  ■ turn aborted");
                }
                "limit" => {
                    errln!(
                        "  ■ the turn reached its limit; this answer came from a last call without tools"
                    );
                }
                "loop" => {
                    errln!(
                        "  ■ loop detection stopped the tool calls; this answer came from a last call without tools"
                    );
                }
                _ => {}
            }
            Some(End::Finished {
                stop_reason: f.stop_reason.clone(),
            })
        }
        Event::Error(e) => {
            reply.end();
            errln!("error: {}", e.message);
            Some(End::Failed {
                message: e.message.clone(),
            })
        }
    }
}

/// One JSON object per event (`--json`).
pub fn json(event: &Event) -> serde_json::Value {
    match event {
        Event::TurnStarted(t) => {
            json!({"type": "turn_started", "session_key": t.session_key, "session_id": t.session_id, "turn_id": t.turn_id, "agent": t.agent, "model": t.model})
        }
        Event::TextDelta(t) => json!({"type": "text_delta", "text": t.text}),
        Event::ToolCallStarted(t) => {
            json!({"type": "tool_call_started", "call_id": t.call_id, "name": t.name, "arguments": t.arguments_json})
        }
        Event::ToolCallFinished(t) => {
            json!({"type": "tool_call_finished", "call_id": t.call_id, "name": t.name, "status": t.status, "result": t.result, "duration_ms": t.duration_ms})
        }
        Event::Usage(u) => {
            json!({"type": "usage", "model": u.model, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens})
        }
        Event::TurnFinished(f) => {
            json!({"type": "turn_finished", "text": f.text, "segments": f.segments, "stop_reason": f.stop_reason, "model_calls": f.model_calls, "tool_calls": f.tool_calls})
        }
        Event::Error(e) => json!({"type": "error", "code": e.code, "message": e.message}),
        Event::Queued(q) => json!({"type": "queued", "position": q.position}),
        Event::ApprovalRequested(a) => {
            json!({"type": "approval_requested", "id": a.id, "tool": a.tool, "arguments": a.arguments_json, "expires_in_s": a.expires_in_s})
        }
        Event::Retrying(r) => {
            json!({"type": "retrying", "attempt": r.attempt, "delay_ms": r.delay_ms, "reason": r.reason, "model": r.model})
        }
        Event::Compaction(c) => {
            json!({"type": "compaction", "tokens_before": c.tokens_before, "tokens_after": c.tokens_after, "reason": c.reason, "error": c.error})
        }
    }
}

pub fn end_of(event: &Event) -> Option<End> {
    match event {
        Event::TurnFinished(f) => Some(End::Finished {
            stop_reason: f.stop_reason.clone(),
        }),
        Event::Error(e) => Some(End::Failed {
            message: e.message.clone(),
        }),
        _ => None,
    }
}

/// First line of `s`, at most `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = flat.chars().take(max).collect();
    if flat.chars().count() > max {
        out.push('…');
    }
    out
}
