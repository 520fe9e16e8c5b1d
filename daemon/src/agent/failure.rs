//! The failure summary of a turn (after MiroThinker's "failure experience
//! summary"): what was asked, what the agent did and where it stopped, in
//! a few lines for `pincer sessions show`. It is written from the
//! transcript, not by the model: a turn usually fails because the model
//! could not be reached, so asking the model would fail too.

use crate::session::transcript::{Body, Entry};
use crate::util::preview;

pub fn summary(entries: &[Entry], turn: &str, error: &str) -> String {
    let mine: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.turn.as_deref() == Some(turn))
        .collect();
    let asked = mine.iter().find_map(|e| match &e.body {
        Body::User { text, .. } => Some(one_line(text, 120)),
        _ => None,
    });
    let replies = mine
        .iter()
        .filter(|e| matches!(e.body, Body::Assistant { .. }))
        .count();
    let mut tools: Vec<(String, usize)> = Vec::new();
    let mut failed = 0usize;
    let mut last_failure = None;
    for e in &mine {
        match &e.body {
            Body::ToolCall { name, .. } => match tools.iter_mut().find(|(n, _)| n == name) {
                Some((_, count)) => *count += 1,
                None => tools.push((name.clone(), 1)),
            },
            Body::ToolResult {
                name,
                content,
                is_error: true,
                ..
            } => {
                failed += 1;
                last_failure = Some(format!("{name}: {}", one_line(content, 100)));
            }
            _ => {}
        }
    }
    let last_reply = mine.iter().rev().find_map(|e| match &e.body {
        Body::Assistant { text, .. } if !text.trim().is_empty() => Some(one_line(text, 120)),
        _ => None,
    });

    let mut s = String::new();
    if let Some(asked) = asked {
        s.push_str(&format!("Asked: \"{asked}\". "));
    }
    let calls: usize = tools.iter().map(|(_, n)| n).sum();
    s.push_str(&format!("{replies} model replies, {calls} tool calls"));
    if !tools.is_empty() {
        let list: Vec<String> = tools.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
        s.push_str(&format!(" ({})", list.join(", ")));
    }
    s.push('.');
    if let Some(f) = last_failure {
        s.push_str(&format!(" {failed} failed; the last: {f}."));
    }
    if let Some(r) = last_reply {
        s.push_str(&format!(" Last reply: \"{r}\"."));
    }
    s.push_str(&format!(" Stopped by: {}", one_line(error, 200)));
    s
}

fn one_line(s: &str, max: usize) -> String {
    preview(&s.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(turn: &str, body: Body) -> Entry {
        Entry {
            id: "i".into(),
            parent: None,
            ts: "t".into(),
            turn: Some(turn.into()),
            body,
        }
    }

    #[test]
    fn says_what_was_asked_done_and_where_it_stopped() {
        let entries = vec![
            e(
                "old",
                Body::User {
                    text: "earlier".into(),
                    images: Vec::new(),
                },
            ),
            e(
                "t",
                Body::User {
                    text: "deploy   the\nsite".into(),
                    images: Vec::new(),
                },
            ),
            e(
                "t",
                Body::Assistant {
                    text: "Building first.".into(),
                    model: "m".into(),
                    usage: None,
                    stop: "tool_calls".into(),
                },
            ),
            e(
                "t",
                Body::ToolCall {
                    call_id: "a".into(),
                    name: "exec".into(),
                    arguments: "{}".into(),
                },
            ),
            e(
                "t",
                Body::ToolResult {
                    call_id: "a".into(),
                    name: "exec".into(),
                    content: "make: *** No rule to make target".into(),
                    is_error: true,
                    duration_ms: 3,
                },
            ),
        ];
        let s = summary(
            &entries,
            "t",
            "the model call failed after retries: HTTP 503",
        );
        assert!(s.starts_with("Asked: \"deploy the site\"."), "{s}");
        assert!(s.contains("1 model replies, 1 tool calls (exec ×1)"), "{s}");
        assert!(
            s.contains("1 failed; the last: exec: make: *** No rule"),
            "{s}"
        );
        assert!(s.contains("Last reply: \"Building first.\""), "{s}");
        assert!(
            s.ends_with("Stopped by: the model call failed after retries: HTTP 503"),
            "{s}"
        );
        assert!(!s.contains("earlier"));
    }
}
