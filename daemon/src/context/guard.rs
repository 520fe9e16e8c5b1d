//! The history guard (SPEC §9): shapes the conversation rebuilt from the
//! transcript before each model call. The transcript on disk keeps
//! everything; only what is sent changes.
//!
//! In order: keep the last N turns (when configured); drop calls of earlier
//! turns to tools this chat no longer offers, with their results, so the
//! model does not learn to call them (calls of the running turn stay: the
//! model must see why its own call failed); replace tool results older than the last K with a
//! marker (MiroThinker's keep-K); cap any single result at a share of the
//! window; strip thinking blocks from earlier replies; and fix the turn
//! order providers insist on (alternating roles, a user message first).

use std::collections::HashSet;

use crate::llm::{Message, Part, Role};

/// What the guard needs to know about this call.
#[derive(Debug, Clone)]
pub struct Guard<'a> {
    /// Tool results kept whole, counted from the newest.
    pub keep_tool_results: usize,
    /// Characters one tool result may have (50 % of the window).
    pub max_result_chars: usize,
    /// Turns kept; `None`: all.
    pub max_turns: Option<usize>,
    /// Tools this chat is offered now; `None`: keep every call.
    pub allowed: Option<&'a HashSet<String>>,
}

/// Text that stands in for a tool result left out by keep-K.
pub fn omitted_marker(chars: usize) -> String {
    format!("[tool result omitted: {chars} chars]")
}

/// Sent in front of a history whose first message was cut away.
pub const CONTINUES: &str = "[earlier conversation omitted]";

pub fn apply(mut messages: Vec<Message>, g: &Guard<'_>) -> Vec<Message> {
    if let Some(n) = g.max_turns {
        keep_last_turns(&mut messages, n);
    }
    if let Some(allowed) = g.allowed {
        drop_disallowed_calls(&mut messages, allowed);
    }
    keep_last_results(&mut messages, g.keep_tool_results);
    cap_results(&mut messages, g.max_result_chars);
    strip_thinking(&mut messages);
    drop_orphan_results(&mut messages);
    fix_order(messages)
}

/// A tool result must answer a call of the assistant message right before
/// it; providers reject any other (a cut history, a hand-edited
/// transcript).
fn drop_orphan_results(messages: &mut [Message]) {
    let mut open: HashSet<String> = HashSet::new();
    for m in messages.iter_mut() {
        match m.role {
            Role::Assistant => {
                open = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall(c) => Some(c.id.clone()),
                        _ => None,
                    })
                    .collect();
            }
            Role::User => {
                m.parts.retain(|p| match p {
                    Part::ToolResult { call_id, .. } => open.remove(call_id),
                    _ => true,
                });
            }
        }
    }
}

/// A user message with text starts a turn (tool results do not).
fn starts_turn(m: &Message) -> bool {
    m.role == Role::User && m.parts.iter().any(|p| matches!(p, Part::Text(_)))
}

fn keep_last_turns(messages: &mut Vec<Message>, n: usize) {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| starts_turn(m))
        .map(|(i, _)| i)
        .collect();
    if starts.len() > n {
        let cut = starts[starts.len() - n];
        messages.drain(..cut);
    }
}

fn drop_disallowed_calls(messages: &mut [Message], allowed: &HashSet<String>) {
    let current_turn = messages.iter().rposition(starts_turn).unwrap_or(0);
    let mut dropped: HashSet<String> = HashSet::new();
    for m in messages[..current_turn].iter_mut() {
        m.parts.retain(|p| match p {
            Part::ToolCall(c) if !allowed.contains(&c.name) => {
                dropped.insert(c.id.clone());
                false
            }
            Part::ToolResult { call_id, .. } => !dropped.contains(call_id),
            _ => true,
        });
    }
}

fn keep_last_results(messages: &mut [Message], keep: usize) {
    let mut seen = 0usize;
    for m in messages.iter_mut().rev() {
        for p in m.parts.iter_mut().rev() {
            if let Part::ToolResult { content, .. } = p {
                seen += 1;
                if seen <= keep {
                    continue;
                }
                let chars = content.chars().count();
                let marker = omitted_marker(chars);
                // A result shorter than the marker costs less as it is.
                if chars > marker.len() {
                    *content = marker;
                }
            }
        }
    }
}

fn cap_results(messages: &mut [Message], max_chars: usize) {
    for m in messages.iter_mut() {
        for p in m.parts.iter_mut() {
            if let Part::ToolResult { content, .. } = p {
                let chars = content.chars().count();
                if chars > max_chars {
                    *content = cut_middle(content, chars, max_chars);
                }
            }
        }
    }
}

/// The head and tail of `text` within `max` characters, with a marker.
pub fn cut_middle(text: &str, chars: usize, max: usize) -> String {
    let head = max * 7 / 10;
    let tail = max * 2 / 10;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(chars - tail)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n[... {} characters of this tool result omitted: it is larger than half of the context window ...]\n{}",
        &text[..head_end],
        chars - head - tail,
        &text[tail_start..]
    )
}

/// Reasoning that local models write as `<think>…</think>` is for the call
/// that produced it; sending it back wastes the window and confuses
/// providers that reject foreign thinking blocks.
fn strip_thinking(messages: &mut [Message]) {
    for m in messages.iter_mut().filter(|m| m.role == Role::Assistant) {
        for p in m.parts.iter_mut() {
            if let Part::Text(t) = p
                && t.contains("<think")
            {
                *t = without_thinking(t);
            }
        }
        m.parts
            .retain(|p| !matches!(p, Part::Text(t) if t.trim().is_empty()));
    }
}

pub fn without_thinking(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let open = ["<think>", "<thinking>"]
            .iter()
            .filter_map(|tag| rest.find(tag).map(|i| (i, *tag)))
            .min_by_key(|(i, _)| *i);
        let Some((start, tag)) = open else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..start]);
        let close = if tag == "<think>" {
            "</think>"
        } else {
            "</thinking>"
        };
        match rest[start..].find(close) {
            Some(end) => rest = &rest[start + end + close.len()..],
            // An unclosed block is all thinking (the reply was cut).
            None => break,
        }
    }
    out.trim().to_string()
}

/// Merges neighbours of the same role and makes sure a user message comes
/// first: both providers reject anything else.
fn fix_order(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages.into_iter().filter(|m| !m.parts.is_empty()) {
        match out.last_mut() {
            Some(last) if last.role == m.role => {
                if m.role == Role::User {
                    // Tool results must come before text in one user message.
                    let (results, text): (Vec<Part>, Vec<Part>) = last
                        .parts
                        .drain(..)
                        .chain(m.parts)
                        .partition(|p| matches!(p, Part::ToolResult { .. }));
                    last.parts = results.into_iter().chain(text).collect();
                } else {
                    last.parts.extend(m.parts);
                }
            }
            _ => out.push(m),
        }
    }
    if out.first().is_some_and(|m| m.role == Role::Assistant) {
        out.insert(0, Message::user(CONTINUES));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn call(id: &str, name: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        })
    }

    fn result(id: &str, content: &str) -> Part {
        Part::ToolResult {
            call_id: id.into(),
            name: "read".into(),
            content: content.into(),
            is_error: false,
        }
    }

    fn assistant(parts: Vec<Part>) -> Message {
        Message {
            role: Role::Assistant,
            parts,
        }
    }

    fn results(parts: Vec<Part>) -> Message {
        Message {
            role: Role::User,
            parts,
        }
    }

    fn guard(allowed: Option<&HashSet<String>>) -> Guard<'_> {
        Guard {
            keep_tool_results: 5,
            max_result_chars: 1_000_000,
            max_turns: None,
            allowed,
        }
    }

    /// A turn with twelve calls, one per model reply, the seventh huge.
    fn twelve_calls() -> Vec<Message> {
        let mut m = vec![Message::user("read all twelve notes")];
        for i in 0..12 {
            let id = format!("c{i}");
            m.push(assistant(vec![call(&id, "read")]));
            let content = if i == 6 {
                "x".repeat(50_000)
            } else {
                format!("note {i}: {}", "y".repeat(200))
            };
            m.push(results(vec![result(&id, &content)]));
        }
        m
    }

    fn result_texts(m: &[Message]) -> Vec<String> {
        m.iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolResult { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn keep_k_omits_all_but_the_last_five_results_of_a_twelve_call_turn() {
        let out = apply(twelve_calls(), &guard(None));
        let texts = result_texts(&out);
        assert_eq!(texts.len(), 12, "every call keeps a result");
        for (i, t) in texts.iter().enumerate().take(7) {
            let original = if i == 6 {
                50_000
            } else {
                207 + i.to_string().len()
            };
            assert_eq!(t, &omitted_marker(original), "result {i}");
        }
        for (i, t) in texts.iter().enumerate().skip(7) {
            assert!(
                t.starts_with(&format!("note {i}: ")),
                "result {i} is whole: {t}"
            );
        }
    }

    #[test]
    fn the_result_cap_cuts_a_kept_result_to_half_the_window() {
        let mut g = guard(None);
        g.keep_tool_results = 12;
        g.max_result_chars = 8_000;
        let out = apply(twelve_calls(), &g);
        let texts = result_texts(&out);
        let big = &texts[6];
        assert!(big.chars().count() < 8_200, "{}", big.len());
        assert!(
            big.contains("42800 characters of this tool result omitted"),
            "{big}"
        );
        assert!(big.starts_with(&"x".repeat(5_600)));
        assert!(
            texts[5].starts_with("note 5: "),
            "small results are untouched"
        );
    }

    #[test]
    fn calls_to_tools_no_longer_offered_go_with_their_results() {
        let allowed: HashSet<String> = ["read".to_string()].into();
        let history = vec![
            Message::user("go"),
            assistant(vec![
                Part::Text("checking".into()),
                call("a", "exec"),
                call("b", "read"),
            ]),
            results(vec![result("a", "ran"), result("b", "file")]),
            assistant(vec![call("c", "exec")]),
            results(vec![result("c", "ran again")]),
            assistant(vec![Part::Text("done".into())]),
            Message::user("next"),
            assistant(vec![call("d", "exec")]),
            results(vec![result("d", "not offered here")]),
        ];
        let out = apply(history, &guard(Some(&allowed)));
        let names: Vec<String> = out
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(c.name.clone()),
                _ => None,
            })
            .collect();
        // The running turn's own exec call stays, so its error is seen.
        assert_eq!(names, ["read", "exec"]);
        assert_eq!(result_texts(&out), ["file", "not offered here"]);
        // The emptied exec-only exchange is gone and roles still alternate.
        for pair in out.windows(2) {
            assert_ne!(pair[0].role, pair[1].role, "{out:?}");
        }
        assert_eq!(out[3].parts, vec![Part::Text("done".into())]);
    }

    #[test]
    fn the_turn_limit_keeps_whole_turns() {
        let mut history = Vec::new();
        for t in 0..4 {
            history.push(Message::user(format!("question {t}")));
            history.push(assistant(vec![call(&format!("c{t}"), "read")]));
            history.push(results(vec![result(&format!("c{t}"), "r")]));
            history.push(assistant(vec![Part::Text(format!("answer {t}"))]));
        }
        let mut g = guard(None);
        g.max_turns = Some(2);
        let out = apply(history, &g);
        assert_eq!(out.len(), 8);
        assert_eq!(out[0], Message::user("question 2"));
    }

    #[test]
    fn thinking_is_stripped_and_order_repaired() {
        let history = vec![
            assistant(vec![Part::Text("<think>plan</think>Hello".into())]),
            Message::user("a"),
            Message::user("b"),
            assistant(vec![Part::Text("<think>only thoughts, cut off".into())]),
            assistant(vec![Part::Text("<thinking>x</thinking> fine".into())]),
        ];
        let out = apply(history, &guard(None));
        assert_eq!(out[0], Message::user(CONTINUES));
        assert_eq!(out[1].parts, vec![Part::Text("Hello".into())]);
        assert_eq!(
            out[2].parts,
            vec![Part::Text("a".into()), Part::Text("b".into())]
        );
        assert_eq!(out[3].parts, vec![Part::Text("fine".into())]);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn results_without_their_call_are_dropped() {
        let history = vec![
            results(vec![result("gone", "answer to a call cut away")]),
            Message::user("hi"),
            assistant(vec![call("a", "read")]),
            results(vec![
                result("a", "r"),
                result("a", "duplicate"),
                result("x", "stray"),
            ]),
        ];
        let out = apply(history, &guard(None));
        assert_eq!(result_texts(&out), ["r"]);
        assert_eq!(out[0], Message::user("hi"));
    }

    #[test]
    fn results_come_before_text_when_user_messages_merge() {
        let history = vec![
            Message::user("go"),
            assistant(vec![call("a", "read")]),
            results(vec![result("a", "r")]),
            Message::user("[pincer] limit reached"),
        ];
        let out = apply(history, &guard(None));
        assert_eq!(out.len(), 3);
        assert!(matches!(out[2].parts[0], Part::ToolResult { .. }));
        assert!(matches!(out[2].parts[1], Part::Text(_)));
    }
}
