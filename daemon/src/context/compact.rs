//! Compaction (SPEC §9): when the prompt nears the context window, older
//! history is summarised and the newest part kept verbatim.
//!
//! [`plan`] picks the cut: walking back from the newest entry until the
//! kept part holds `keep_recent` tokens, then back to the nearest entry
//! that starts a message (a user message or an assistant reply), so a tool
//! call is never kept without its result or the other way round.
//! [`summarise`] asks the compaction model for the summary, in pieces when
//! the old history is larger than that model's window, each piece folded
//! into the summary so far. The turn writes the result as a `compaction`
//! transcript entry; [`super::history::active`] reads it back.

use std::ops::Range;

use tokio_util::sync::CancellationToken;

use super::guard::without_thinking;
use super::history;
use super::tokens::estimate_text;
use crate::config::ModelTarget;
use crate::llm::client::ModelClient;
use crate::llm::{LlmError, Message, Request};
use crate::session::transcript::{Body, Entry};

/// Characters of one tool result shown to the summariser.
const RESULT_CHARS: usize = 2_000;
/// Tokens left for the summary itself in the compaction model's window.
const SUMMARY_TOKENS: u64 = 2_000;

pub const SYSTEM: &str = "You compress conversations between a user and an AI assistant so that the assistant can continue without the original. You never continue the conversation yourself.";

const INSTRUCTIONS: &str = "Write a summary of the conversation above for the assistant to continue from. Keep: the user's goals and requests (the latest one word for word), decisions, facts learned (names, numbers, paths, commands and their results), what is done and what is still open. Short Markdown bullet points; nothing that is not in the conversation.";

/// Which entries a compaction replaces.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Indices into the transcript of the entries summarised now.
    pub summarise: Range<usize>,
    /// The first entry kept verbatim; `None`: everything is summarised.
    pub first_kept: Option<String>,
}

/// Estimated tokens of one entry as the model sees it.
pub fn entry_tokens(e: &Entry) -> u64 {
    match &e.body {
        // Images as a vision model sees them: more than a text-only
        // model does, so the kept part errs on the small side.
        Body::User { text, images } => {
            estimate_text(text) + 4 + images.len() as u64 * super::tokens::IMAGE_TOKENS
        }
        Body::Assistant { text, .. } => estimate_text(text) + 4,
        Body::ToolCall {
            name, arguments, ..
        } => estimate_text(name) + estimate_text(arguments) + 4,
        Body::ToolResult { content, .. } => estimate_text(content) + 4,
        Body::Compaction { .. } | Body::Meta { .. } => 0,
    }
}

/// An entry a kept part may start with.
fn starts_message(e: &Entry) -> bool {
    matches!(e.body, Body::User { .. } | Body::Assistant { .. })
}

/// Where to cut. `None` when there is nothing worth summarising: the
/// history after the last compaction fits in `keep_recent` already. A
/// forced compaction (`pincer sessions compact`) then still summarises
/// everything before the last user message, if anything is there.
pub fn plan(entries: &[Entry], keep_recent: u64, force: bool) -> Option<Plan> {
    let (_, start) = history::active(entries);
    let mut kept = 0u64;
    let mut cut = None;
    for i in (start..entries.len()).rev() {
        kept += entry_tokens(&entries[i]);
        if kept >= keep_recent && starts_message(&entries[i]) {
            cut = Some(i);
            break;
        }
    }
    let cut = match cut {
        Some(i) => i,
        None if force => entries[start..]
            .iter()
            .rposition(|e| matches!(e.body, Body::User { .. }))
            .map(|i| start + i)?,
        None => return None,
    };
    let has_content = entries[start..cut].iter().any(|e| entry_tokens(e) > 0);
    if !has_content {
        return None;
    }
    Some(Plan {
        summarise: start..cut,
        first_kept: entries.get(cut).map(|e| e.id.clone()),
    })
}

/// The entries as plain text for the summariser.
pub fn render(entries: &[Entry]) -> String {
    let mut s = String::new();
    for e in entries {
        match &e.body {
            Body::User { text, .. } => s.push_str(&format!("User: {}\n\n", text.trim())),
            Body::Assistant { text, .. } => {
                let text = without_thinking(text);
                if !text.is_empty() {
                    s.push_str(&format!("Assistant: {text}\n\n"));
                }
            }
            Body::ToolCall {
                name, arguments, ..
            } => s.push_str(&format!("Assistant called {name} with {arguments}\n")),
            Body::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let chars = content.chars().count();
                let shown: String = content.chars().take(RESULT_CHARS).collect();
                let more = if chars > RESULT_CHARS {
                    format!(" [... {} more characters]", chars - RESULT_CHARS)
                } else {
                    String::new()
                };
                let kind = if *is_error { "failed" } else { "returned" };
                s.push_str(&format!("{name} {kind}: {shown}{more}\n\n"));
            }
            Body::Compaction { .. } | Body::Meta { .. } => {}
        }
    }
    s
}

/// Pieces of at most `max_chars` characters, cut at line ends where one
/// is near.
pub fn pieces(text: &str, max_chars: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max_chars {
        let hard = rest
            .char_indices()
            .nth(max_chars)
            .map_or(rest.len(), |(i, _)| i);
        let cut = match rest[..hard].rfind('\n') {
            Some(i) if i > hard / 2 => i + 1,
            _ => hard,
        };
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.trim().is_empty() || out.is_empty() {
        out.push(rest);
    }
    out
}

/// The request that folds one piece of history into the summary so far.
pub fn request(previous: Option<&str>, piece: &str) -> Request {
    let mut text = String::new();
    if let Some(p) = previous {
        text.push_str(&format!(
            "<summary-so-far>\n{}\n</summary-so-far>\n\n",
            p.trim()
        ));
    }
    text.push_str(&format!(
        "<conversation>\n{}\n</conversation>\n\n{INSTRUCTIONS}",
        piece.trim()
    ));
    Request {
        system: SYSTEM.into(),
        messages: vec![Message::user(text)],
        tools: Vec::new(),
    }
}

/// The summary of `text` (rendered history) on top of `previous`.
pub async fn summarise(
    client: &ModelClient,
    targets: &[ModelTarget],
    previous: Option<&str>,
    text: &str,
    cancel: &CancellationToken,
) -> Result<String, LlmError> {
    let window = crate::llm::windows::window_of(targets);
    // Room for the instructions, the summary so far and the answer.
    let budget = window.saturating_sub(2 * SUMMARY_TOKENS + 500).max(1_000);
    let piece_chars = usize::try_from(budget * 3).unwrap_or(usize::MAX);
    let mut summary = previous.map(str::to_string);
    for piece in pieces(text, piece_chars) {
        let req = request(summary.as_deref(), piece);
        let (reply, _) = client.complete(targets, &req, &mut |_| {}, cancel).await?;
        let text = without_thinking(&reply.text);
        if text.trim().is_empty() {
            return Err(LlmError::Protocol(
                "the compaction model returned an empty summary".into(),
            ));
        }
        summary = Some(text);
    }
    summary.ok_or_else(|| LlmError::Protocol("there was nothing to summarise".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, body: Body) -> Entry {
        Entry {
            id: id.into(),
            parent: None,
            ts: "t".into(),
            turn: None,
            body,
        }
    }

    fn user(id: &str, text: &str) -> Entry {
        entry(
            id,
            Body::User {
                text: text.into(),
                images: Vec::new(),
            },
        )
    }

    fn assistant(id: &str, text: &str) -> Entry {
        entry(
            id,
            Body::Assistant {
                text: text.into(),
                model: "m".into(),
                usage: None,
                stop: "stop".into(),
            },
        )
    }

    fn call(id: &str) -> Entry {
        entry(
            id,
            Body::ToolCall {
                call_id: format!("c-{id}"),
                name: "read".into(),
                arguments: "{}".into(),
            },
        )
    }

    fn result(id: &str, call: &str, chars: usize) -> Entry {
        entry(
            id,
            Body::ToolResult {
                call_id: format!("c-{call}"),
                name: "read".into(),
                content: "r".repeat(chars),
                is_error: false,
                duration_ms: 1,
            },
        )
    }

    /// Ten turns: question, a call with a 4000-char result, an answer.
    fn conversation() -> Vec<Entry> {
        let mut v = Vec::new();
        for t in 0..10 {
            v.push(user(&format!("u{t}"), &format!("question {t}")));
            v.push(assistant(&format!("a{t}"), ""));
            v.push(call(&format!("k{t}")));
            v.push(result(&format!("r{t}"), &format!("k{t}"), 4_000));
            v.push(assistant(&format!("f{t}"), &format!("answer {t}")));
        }
        v
    }

    #[test]
    fn the_cut_keeps_the_recent_tokens_and_never_splits_a_call_from_its_result() {
        let entries = conversation();
        // Each turn is a little over 1000 tokens; keep 2500.
        let p = plan(&entries, 2_500, false).unwrap();
        let first_kept = p.first_kept.clone().unwrap();
        let cut = entries.iter().position(|e| e.id == first_kept).unwrap();
        assert_eq!(p.summarise, 0..cut);
        assert!(matches!(
            entries[cut].body,
            Body::User { .. } | Body::Assistant { .. }
        ));
        let kept: u64 = entries[cut..].iter().map(entry_tokens).sum();
        assert!(kept >= 2_500, "{kept}");
        assert!(
            kept < 2_500 + 1_100,
            "no more than one turn too many: {kept}"
        );
        // Every kept result has its call kept, and the other way round.
        let calls: Vec<String> = entries[cut..]
            .iter()
            .filter_map(|e| match &e.body {
                Body::ToolCall { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        let results: Vec<String> = entries[cut..]
            .iter()
            .filter_map(|e| match &e.body {
                Body::ToolResult { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(calls, results);
    }

    #[test]
    fn a_second_compaction_starts_after_the_first() {
        let mut entries = conversation();
        let first = plan(&entries, 2_500, false).unwrap();
        entries.push(entry(
            "c1",
            Body::Compaction {
                summary: "s".into(),
                tokens_before: 1,
                tokens_after: 1,
                first_kept: first.first_kept.clone(),
                reason: "threshold".into(),
            },
        ));
        let kept_from = first.summarise.end;
        assert_eq!(
            plan(&entries, 2_500, false),
            None,
            "nothing new to summarise"
        );
        for t in 10..14 {
            entries.push(user(&format!("u{t}"), "more"));
            entries.push(call(&format!("k{t}")));
            entries.push(result(&format!("r{t}"), &format!("k{t}"), 4_000));
        }
        let second = plan(&entries, 2_500, false).unwrap();
        assert_eq!(second.summarise.start, kept_from);
    }

    #[test]
    fn small_histories_compact_only_when_forced() {
        let entries = vec![
            user("u0", "hi"),
            assistant("a0", "hello"),
            user("u1", "again"),
        ];
        assert_eq!(plan(&entries, 20_000, false), None);
        let forced = plan(&entries, 20_000, true).unwrap();
        assert_eq!(forced.summarise, 0..2);
        assert_eq!(forced.first_kept.as_deref(), Some("u1"));
        assert_eq!(plan(&entries[..1], 20_000, true), None);
    }

    #[test]
    fn rendering_shows_calls_and_cut_results() {
        let text = render(&[
            user("u", "read it"),
            call("k"),
            result("r", "k", 2_500),
            assistant("a", "<think>hmm</think>It says r."),
        ]);
        assert!(text.contains("User: read it"));
        assert!(text.contains("Assistant called read with {}"));
        assert!(text.contains("[... 500 more characters]"));
        assert!(text.contains("Assistant: It says r."));
        assert!(!text.contains("hmm"));
    }

    #[test]
    fn pieces_cover_the_text_and_respect_the_size() {
        let text = "line of text\n".repeat(1000);
        let parts = pieces(&text, 1_000);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| p.chars().count() <= 1_000));
        assert!(parts[0].ends_with('\n'));
        assert_eq!(pieces("short", 100), ["short"]);
    }
}
