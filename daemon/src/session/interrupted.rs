//! Turns that pincerd's death interrupted (a crash, `kill -9`, power
//! loss) are reported at the next start: the transcript gets a
//! `turn_interrupted` entry, the session its last error, and the log one
//! warning naming them. Only sessions the registry marks as running a turn
//! are read, so a clean start costs one indexed query.

use std::path::Path;

use super::registry::{Registry, RegistryError};
use super::transcript::{Body, Entry, Transcript};
use crate::home::Home;

/// The turn of `entries` that started and has no end, with the time of the
/// last entry written: a `user` entry with a turn id, and after it neither
/// a final assistant reply nor a `turn_error`/`turn_aborted`/
/// `turn_interrupted` entry.
pub fn unfinished(entries: &[Entry]) -> Option<(String, String)> {
    let start = entries
        .iter()
        .rposition(|e| matches!(e.body, Body::User { .. }) && e.turn.is_some())?;
    let turn = entries[start].turn.clone()?;
    let own: Vec<&Entry> = entries[start..]
        .iter()
        .filter(|e| e.turn.as_deref() == Some(turn.as_str()))
        .collect();
    let ended = own.iter().any(|e| {
        matches!(&e.body, Body::Meta { event, .. }
            if matches!(event.as_str(), "turn_error" | "turn_aborted" | "turn_interrupted"))
    }) || own
        .last()
        .is_some_and(|e| matches!(&e.body, Body::Assistant { stop, .. } if stop != "tool_calls"));
    let last = entries.last().map(|e| e.ts.clone()).unwrap_or_default();
    (!ended).then_some((turn, last))
}

/// Reports every interrupted turn; returns the keys of their sessions.
pub async fn report(home: &Home, registry: &Registry) -> Result<Vec<String>, RegistryError> {
    let marked = registry.turns_in_progress().await?;
    let mut keys = Vec::new();
    for row in marked {
        let path = home.transcript(&row.agent, &row.id);
        let error = match mark(&path) {
            Ok(error) => error,
            Err(e) => {
                tracing::warn!(session = %row.key, "cannot check the transcript for an interrupted turn: {e}");
                None
            }
        };
        if error.is_some() {
            keys.push(row.key.clone());
        }
        registry.end_interrupted(&row.id, error).await?;
    }
    if !keys.is_empty() {
        tracing::warn!(
            sessions = %keys.join(", "),
            "pincerd stopped during a turn of {} session(s) ({}); each has a `turn_interrupted` entry and its last error says so",
            keys.len(),
            keys.join(", ")
        );
    }
    Ok(keys)
}

/// Appends `turn_interrupted` to the transcript at `path` if its last turn
/// has no end; the sentence recorded, if so.
fn mark(path: &Path) -> std::io::Result<Option<String>> {
    if !path.exists() {
        return Ok(None);
    }
    // Opening repairs a torn last line, as the hub would.
    let (mut transcript, entries, _) = Transcript::open(path)?;
    let Some((turn, at)) = unfinished(&entries) else {
        return Ok(None);
    };
    let sentence = format!(
        "the turn was interrupted when pincerd stopped at {at} (its last transcript entry); send the message again to retry"
    );
    transcript.append(
        Some(&turn),
        Body::Meta {
            event: "turn_interrupted".into(),
            detail: sentence.clone(),
        },
    )?;
    transcript.sync()?;
    Ok(Some(sentence))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(turn: &str, body: Body) -> Entry {
        Entry {
            id: uuid::Uuid::now_v7().to_string(),
            parent: None,
            ts: "2026-01-01T00:00:00Z".into(),
            turn: Some(turn.into()),
            body,
        }
    }

    fn user(turn: &str) -> Entry {
        entry(
            turn,
            Body::User {
                text: "hi".into(),
                images: Vec::new(),
            },
        )
    }

    fn reply(turn: &str, stop: &str) -> Entry {
        entry(
            turn,
            Body::Assistant {
                text: String::new(),
                model: "m".into(),
                usage: None,
                stop: stop.into(),
            },
        )
    }

    fn meta(turn: &str, event: &str) -> Entry {
        entry(
            turn,
            Body::Meta {
                event: event.into(),
                detail: String::new(),
            },
        )
    }

    fn call(turn: &str) -> Entry {
        entry(
            turn,
            Body::ToolCall {
                call_id: "c".into(),
                name: "exec".into(),
                arguments: "{}".into(),
            },
        )
    }

    #[test]
    fn a_turn_without_an_end_is_unfinished() {
        let cut = [
            user("a"),
            reply("a", "stop"),
            user("b"),
            reply("b", "tool_calls"),
            call("b"),
        ];
        assert_eq!(unfinished(&cut).map(|u| u.0), Some("b".into()));
        assert_eq!(unfinished(&[user("a")]).map(|u| u.0), Some("a".into()));
    }

    #[test]
    fn finished_failed_aborted_or_reported_turns_are_not() {
        for end in [
            reply("a", "stop"),
            reply("a", "length"),
            meta("a", "turn_error"),
            meta("a", "turn_aborted"),
            meta("a", "turn_interrupted"),
        ] {
            assert_eq!(
                unfinished(&[user("a"), call("a"), end.clone()]),
                None,
                "{end:?}"
            );
        }
        assert_eq!(unfinished(&[]), None);
    }
}
