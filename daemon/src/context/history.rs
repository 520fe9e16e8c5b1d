//! Rebuilds the provider-neutral conversation from transcript entries.
//!
//! The transcript keeps everything, including turns cut short by an abort
//! or a crash; this makes them valid for providers: every tool call gets a
//! result (a synthetic "interrupted" error where none was written). After a
//! compaction the model sees its summary in place of the entries it
//! replaced ([`active`]). A turn that was aborted, failed or interrupted
//! before the model said anything leaves its message in the transcript
//! only: the model never sees it again, so it is not answered merged with
//! the next message. A user message's images become image parts after its
//! text when the request has an [`ImageLoader`] (the agent's model has
//! vision); an image that cannot be read is left out.

use super::images::ImageLoader;
use crate::llm::{Message, Part, Role, ToolCall};
use crate::session::transcript::{Body, Entry};

pub const INTERRUPTED: &str = "the call was interrupted before it finished (turn aborted or daemon stopped); its result is unknown";

/// Opens the summary message that stands for compacted history.
pub const SUMMARY_HEADER: &str =
    "[Summary of the earlier conversation, written when it was compacted]";

/// What the model still sees of a transcript: the summary of the last
/// compaction, if any, and the index of the first entry sent verbatim.
pub fn active(entries: &[Entry]) -> (Option<&str>, usize) {
    let Some(at) = entries
        .iter()
        .rposition(|e| matches!(e.body, Body::Compaction { .. }))
    else {
        return (None, 0);
    };
    let Body::Compaction {
        summary,
        first_kept,
        ..
    } = &entries[at].body
    else {
        return (None, 0);
    };
    let start = first_kept
        .as_ref()
        .and_then(|id| entries[..at].iter().position(|e| &e.id == id))
        .unwrap_or(at + 1);
    (Some(summary.as_str()), start)
}

/// The conversation the model sees: the last compaction's summary, then
/// every entry from its first kept one on; with `images`, the user
/// messages' images too.
pub fn messages(entries: &[Entry], images: Option<&ImageLoader>) -> Vec<Message> {
    let (summary, start) = active(entries);
    let mut out = verbatim(&entries[start..], images);
    if let Some(summary) = summary {
        out.insert(0, Message::user(format!("{SUMMARY_HEADER}\n{summary}")));
    }
    out
}

/// Meta events that end a turn without an answer.
const UNANSWERED: &[&str] = &["turn_aborted", "turn_error", "turn_interrupted"];

/// Turns that ended without an answer and produced nothing the model said
/// (no text, no tool call): their user messages are left out.
fn void_turns(entries: &[Entry]) -> std::collections::HashSet<&str> {
    let ended: std::collections::HashSet<&str> = entries
        .iter()
        .filter(
            |e| matches!(&e.body, Body::Meta { event, .. } if UNANSWERED.contains(&event.as_str())),
        )
        .filter_map(|e| e.turn.as_deref())
        .collect();
    let spoke: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| match &e.body {
            Body::Assistant { text, .. } => !text.is_empty(),
            Body::ToolCall { .. } => true,
            _ => false,
        })
        .filter_map(|e| e.turn.as_deref())
        .collect();
    ended.difference(&spoke).copied().collect()
}

/// Entries as messages, with interrupted calls closed.
fn verbatim(entries: &[Entry], images: Option<&ImageLoader>) -> Vec<Message> {
    let void = void_turns(entries);
    let mut out: Vec<Message> = Vec::new();
    // Calls of the last assistant message still waiting for their results.
    let mut open_calls: Vec<(String, String)> = Vec::new();

    fn close_open(out: &mut Vec<Message>, open: &mut Vec<(String, String)>) {
        if open.is_empty() {
            return;
        }
        let parts = open
            .drain(..)
            .map(|(call_id, name)| Part::ToolResult {
                call_id,
                name,
                content: INTERRUPTED.to_string(),
                is_error: true,
            })
            .collect();
        push_results(out, parts);
    }

    for entry in entries {
        match &entry.body {
            Body::User { .. } if entry.turn.as_deref().is_some_and(|t| void.contains(t)) => {}
            Body::User {
                text,
                images: paths,
            } => {
                close_open(&mut out, &mut open_calls);
                let mut message = Message::user(text.clone());
                if let Some(loader) = images {
                    message
                        .parts
                        .extend(paths.iter().filter_map(|p| loader.load(p)));
                }
                out.push(message);
            }
            Body::Assistant { text, .. } => {
                close_open(&mut out, &mut open_calls);
                out.push(Message {
                    role: Role::Assistant,
                    parts: if text.is_empty() {
                        Vec::new()
                    } else {
                        vec![Part::Text(text.clone())]
                    },
                });
            }
            Body::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                let call = Part::ToolCall(ToolCall {
                    id: call_id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                });
                match out.last_mut() {
                    Some(m) if m.role == Role::Assistant => m.parts.push(call),
                    _ => out.push(Message {
                        role: Role::Assistant,
                        parts: vec![call],
                    }),
                }
                open_calls.push((call_id.clone(), name.clone()));
            }
            Body::ToolResult {
                call_id,
                name,
                content,
                is_error,
                ..
            } => {
                let Some(pos) = open_calls.iter().position(|(id, _)| id == call_id) else {
                    continue; // a result without its call cannot be sent
                };
                open_calls.remove(pos);
                push_results(
                    &mut out,
                    vec![Part::ToolResult {
                        call_id: call_id.clone(),
                        name: name.clone(),
                        content: content.clone(),
                        is_error: *is_error,
                    }],
                );
            }
            Body::Compaction { .. } | Body::Meta { .. } => {}
        }
    }
    close_open(&mut out, &mut open_calls);
    // Drop assistant messages left empty (an aborted call that said nothing).
    out.retain(|m| !m.parts.is_empty());
    out
}

fn push_results(out: &mut Vec<Message>, parts: Vec<Part>) {
    match out.last_mut() {
        Some(m)
            if m.role == Role::User
                && m.parts.iter().all(|p| matches!(p, Part::ToolResult { .. })) =>
        {
            m.parts.extend(parts)
        }
        _ => out.push(Message {
            role: Role::User,
            parts,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages_of(entries: &[Entry]) -> Vec<Message> {
        messages(entries, None)
    }

    fn e(body: Body) -> Entry {
        Entry {
            id: "i".into(),
            parent: None,
            ts: "t".into(),
            turn: None,
            body,
        }
    }

    fn call(id: &str) -> Body {
        Body::ToolCall {
            call_id: id.into(),
            name: "exec".into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str) -> Body {
        Body::ToolResult {
            call_id: id.into(),
            name: "exec".into(),
            content: "ok".into(),
            is_error: false,
            duration_ms: 1,
        }
    }

    #[test]
    fn calls_join_their_assistant_message_and_results_follow() {
        let m = messages_of(&[
            e(Body::User {
                text: "hi".into(),
                images: Vec::new(),
            }),
            e(Body::Assistant {
                text: "looking".into(),
                model: "m".into(),
                usage: None,
                stop: "tool_calls".into(),
            }),
            e(call("a")),
            e(call("b")),
            e(result("a")),
            e(result("b")),
            e(Body::Assistant {
                text: "done".into(),
                model: "m".into(),
                usage: None,
                stop: "stop".into(),
            }),
        ]);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].parts.len(), 3);
        assert_eq!(m[2].role, Role::User);
        assert_eq!(m[2].parts.len(), 2);
    }

    #[test]
    fn interrupted_calls_get_a_synthetic_error_result() {
        let m = messages_of(&[
            e(Body::User {
                text: "run it".into(),
                images: Vec::new(),
            }),
            e(Body::Assistant {
                text: String::new(),
                model: "m".into(),
                usage: None,
                stop: "tool_calls".into(),
            }),
            e(call("a")),
            // crash here; after restart the user speaks again
            e(Body::User {
                text: "still there?".into(),
                images: Vec::new(),
            }),
        ]);
        assert_eq!(m.len(), 4);
        match &m[2].parts[0] {
            Part::ToolResult {
                call_id,
                is_error,
                content,
                ..
            } => {
                assert_eq!(call_id, "a");
                assert!(is_error);
                assert_eq!(content, INTERRUPTED);
            }
            other => panic!("expected a tool result, got {other:?}"),
        }
    }

    #[test]
    fn empty_aborted_assistant_messages_are_dropped() {
        let m = messages_of(&[
            e(Body::User {
                text: "x".into(),
                images: Vec::new(),
            }),
            e(Body::Assistant {
                text: String::new(),
                model: "m".into(),
                usage: None,
                stop: "aborted".into(),
            }),
            e(Body::Meta {
                event: "turn_aborted".into(),
                detail: String::new(),
            }),
        ]);
        assert_eq!(m.len(), 1);
    }

    fn in_turn(turn: &str, body: Body) -> Entry {
        Entry {
            turn: Some(turn.into()),
            ..e(body)
        }
    }

    fn meta(event: &str) -> Body {
        Body::Meta {
            event: event.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn an_unanswered_turns_message_is_not_sent_again_with_the_next() {
        for ended in ["turn_aborted", "turn_error", "turn_interrupted"] {
            let m = messages_of(&[
                in_turn(
                    "t1",
                    Body::User {
                        text: "first, then aborted".into(),
                        images: Vec::new(),
                    },
                ),
                in_turn("t1", meta(ended)),
                in_turn(
                    "t2",
                    Body::User {
                        text: "second".into(),
                        images: Vec::new(),
                    },
                ),
            ]);
            assert_eq!(m.len(), 1, "{ended}: {m:?}");
            assert_eq!(m[0].parts, vec![Part::Text("second".into())], "{ended}");
        }
    }

    #[test]
    fn an_aborted_turn_that_got_somewhere_stays_in_the_history() {
        let m = messages_of(&[
            in_turn(
                "t1",
                Body::User {
                    text: "look it up".into(),
                    images: Vec::new(),
                },
            ),
            in_turn("t1", call("a")),
            in_turn("t1", meta("turn_aborted")),
            in_turn(
                "t2",
                Body::User {
                    text: "and now?".into(),
                    images: Vec::new(),
                },
            ),
        ]);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m[0].parts, vec![Part::Text("look it up".into())]);
    }

    /// A workspace with `inbox/p.jpg` and a transcript whose message names
    /// it and a file that is gone.
    fn photo_history() -> (tempfile::TempDir, Vec<Entry>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("inbox")).unwrap();
        std::fs::write(dir.path().join("inbox/p.jpg"), b"\xff\xd8\xff\xe0").unwrap();
        let entries = vec![e(Body::User {
            text: "what is this?\n\n[photo saved as inbox/p.jpg (4 bytes)]".into(),
            images: vec!["inbox/p.jpg".into(), "inbox/gone.jpg".into()],
        })];
        (dir, entries)
    }

    #[test]
    fn a_vision_model_gets_the_messages_images_after_its_text() {
        let (dir, entries) = photo_history();
        let loader = ImageLoader::new(dir.path().to_path_buf(), Default::default());
        let m = messages(&entries, Some(&loader));
        assert_eq!(m.len(), 1);
        assert!(matches!(&m[0].parts[0], Part::Text(t) if t.contains("inbox/p.jpg")));
        assert_eq!(
            m[0].parts[1..],
            [Part::Image {
                media_type: "image/jpeg".into(),
                data: "/9j/4A==".into(),
            }],
            "the missing file is skipped"
        );
    }

    #[test]
    fn without_vision_only_the_text_note_is_sent() {
        let (_dir, entries) = photo_history();
        let m = messages(&entries, None);
        assert_eq!(
            m[0].parts,
            vec![Part::Text(
                "what is this?\n\n[photo saved as inbox/p.jpg (4 bytes)]".into()
            )]
        );
    }

    #[test]
    fn a_vision_agent_gets_a_loader_and_others_none() {
        let config = crate::config::load::parse(
            &crate::home::Home::at("/tmp/pincer-history-test"),
            std::path::Path::new("/h/config.toml"),
            "[providers.p]\nkind = \"openai\"\n[models.seeing]\nprovider = \"p\"\nmodel = \"m\"\nvision = true\n[agents.main]\nmodel = \"p/m\"\n[agents.eyes]\nmodel = \"seeing\"\n",
            &|| None,
        )
        .unwrap();
        let fs = Default::default();
        assert!(ImageLoader::for_agent(config.agent("main").unwrap(), fs).is_none());
        assert!(ImageLoader::for_agent(config.agent("eyes").unwrap(), fs).is_some());
    }

    #[test]
    fn a_transcript_line_without_images_reads_as_before() {
        let body: Body = serde_json::from_str(r#"{"kind":"user","text":"hi"}"#).unwrap();
        assert_eq!(
            body,
            Body::User {
                text: "hi".into(),
                images: Vec::new()
            }
        );
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"kind":"user","text":"hi"}"#,
            "no images, no key"
        );
    }
}
