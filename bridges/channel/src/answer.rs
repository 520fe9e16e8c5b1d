//! An answer planned for a chat: cut into messages within the platform's
//! limits ([`crate::chunk`]), and bounded. An answer that would take more
//! than the channel's `max_messages_per_answer` messages (default
//! [`DEFAULT_MAX_MESSAGES`]) is sent as its first `max − 1` messages, and
//! the rest of it — from where they end, verbatim — as one Markdown file
//! ([`REST_FILE`]): the answer never takes more than `max` messages, the
//! file included. A chat is not flooded by a runaway answer (a model that
//! writes a book, a tool result read back whole), and a platform's rate
//! limits are not spent on it.
//!
//! The plan is stored in the delivery ledger before anything is sent, the
//! file as a chunk like the others ([`Chunk::File`]): a restart sends only
//! what is owed, the file exactly once.

use crate::chunk::chunks_within;
use crate::ledger::Chunk;
use crate::message::Capabilities;

/// Messages one answer takes at most unless the channel says otherwise.
pub const DEFAULT_MAX_MESSAGES: usize = 10;

/// The name of the file that carries the rest of a long answer.
pub const REST_FILE: &str = "answer.md";

/// The file's caption.
pub const REST_CAPTION: &str = "The rest of the answer, too long for more messages.";

/// The chunks of `text` for a platform with `caps`, at most `max_messages`
/// of them (at least 1), the last one a file when the text takes more.
pub fn plan(text: &str, caps: &Capabilities, max_messages: usize) -> Vec<Chunk> {
    let (kept, rest) = chunks_within(text, caps, max_messages);
    let mut plan: Vec<Chunk> = kept.into_iter().map(Chunk::Text).collect();
    if let Some(rest) = rest {
        plan.push(Chunk::File {
            name: REST_FILE.to_string(),
            content: rest,
        });
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Formatting;

    fn telegram() -> Capabilities {
        Capabilities {
            max_chars: 4000,
            max_lines: None,
            edits: true,
            typing: Some(std::time::Duration::from_secs(4)),
            edit_every: std::time::Duration::from_secs(1),
            threads: true,
            formatting: Formatting::Html,
        }
    }

    #[test]
    fn a_short_answer_is_messages_only() {
        assert_eq!(
            plan("hello", &telegram(), DEFAULT_MAX_MESSAGES),
            vec![Chunk::from("hello")]
        );
    }

    #[test]
    fn a_long_answer_takes_the_bound_with_the_rest_as_one_file() {
        let words: Vec<String> = (0..200_000).map(|i| format!("w{i}")).collect();
        let text = words.join(" ");
        assert!(text.chars().count() > 1_000_000);
        let planned = plan(&text, &telegram(), 10);
        assert_eq!(planned.len(), 10, "nine messages and the file");
        let mut shown = String::new();
        for chunk in &planned[..9] {
            let Chunk::Text(t) = chunk else {
                panic!("a file before the end: {chunk:?}")
            };
            assert!(t.chars().count() <= 4000);
            shown.push_str(t);
            shown.push(' ');
        }
        let Chunk::File { name, content } = &planned[9] else {
            panic!("no file at the end")
        };
        assert_eq!(name, "answer.md");
        shown.push_str(content);
        assert_eq!(shown, text, "every word once, in order");
        let one = plan(&text, &telegram(), 1);
        assert_eq!(
            one,
            vec![Chunk::File {
                name: REST_FILE.into(),
                content: text.clone()
            }],
            "a bound of one: the whole answer as the file"
        );
    }
}
