//! Keeping every reply under the gRPC message limit. Clients decode at
//! most 4 MiB a message by default (tonic, grpcurl, most gRPC libraries),
//! and a session holds whatever a model wrote: a 5 MB line in a transcript
//! written before tool arguments were capped, or one a provider's reply put
//! there. A reply that outgrew the limit would make the session unreadable
//! for good, so what a reply carries of a session is fitted here: long
//! strings keep their head and tail around a marker that says how much was
//! left out, and lists keep their newest items and say how many did not
//! fit.

use pincer_proto::v1 as pb;
use prost::Message;
use serde_json::Value;

use crate::agent::last_prompt::LastPrompt;
use crate::session::transcript::Entry;
use crate::util::{cap_head_tail, cap_json_strings};

/// Bytes a reply may carry: the 4 MiB limit less room for the framing and
/// the fields around the fitted content.
pub const REPLY_BYTES: usize = 3 * 1024 * 1024;
/// A string of a transcript entry or a prompt is shown whole up to this
/// many characters.
pub const FIELD_CHARS: usize = 100_000;
/// What one string keeps when even [`FIELD_CHARS`] is too much (an entry
/// of many long strings, a prompt of many long messages).
const SMALL_FIELD_CHARS: usize = 2_000;
/// Characters of one text in a Chat event (4 bytes a character at most:
/// 1 MiB), so a single streamed delta cannot outgrow the limit.
pub const EVENT_CHARS: usize = 256 * 1024;
/// Characters of a short free text (an error, a failure summary).
pub const NOTE_CHARS: usize = 8_000;

/// `text` with at most `max_chars` characters, head and tail kept.
pub fn text(text: String, max_chars: usize) -> String {
    if text.len() <= max_chars {
        text
    } else {
        cap_head_tail(&text, max_chars)
    }
}

/// A JSON value as text within `max_bytes`: whole; with its long strings
/// cut (head and tail kept); or, still too long (a list of many items),
/// a JSON string saying so. `None` is the empty text.
pub fn json(value: Option<&Value>, max_bytes: usize) -> String {
    let Some(value) = value else {
        return String::new();
    };
    let whole = value.to_string();
    if whole.len() <= max_bytes {
        return whole;
    }
    let mut cut = value.clone();
    cap_json_strings(&mut cut, SMALL_FIELD_CHARS.min(max_bytes / 2));
    let cut = cut.to_string();
    if cut.len() <= max_bytes {
        return cut;
    }
    Value::String(format!(
        "(a value of {} bytes, more than this reply carries; `state/workflows.db` keeps it whole)",
        whole.len()
    ))
    .to_string()
}

/// The texts of a turn's model calls (`TurnFinished.segments`) within
/// twice [`EVENT_CHARS`] together, each getting an equal share, so the
/// event stays under the limit however many calls the turn made.
pub fn segments(segments: Vec<String>) -> Vec<String> {
    let share = (2 * EVENT_CHARS / segments.len().max(1)).max(1);
    segments.into_iter().map(|s| text(s, share)).collect()
}

/// One transcript entry as it goes out, its strings capped.
pub fn entry(e: &Entry) -> pb::TranscriptEntry {
    let whole = entry_within(e, FIELD_CHARS);
    if whole.encoded_len() <= REPLY_BYTES / 4 {
        whole
    } else {
        entry_within(e, SMALL_FIELD_CHARS)
    }
}

fn entry_within(e: &Entry, max_chars: usize) -> pb::TranscriptEntry {
    let mut value = serde_json::to_value(e).unwrap_or(Value::Null);
    let omitted_chars = cap_json_strings(&mut value, max_chars);
    pb::TranscriptEntry {
        json: value.to_string(),
        kind: e.body.kind().into(),
        id: text(e.id.clone(), 200),
        parent_id: text(e.parent.clone().unwrap_or_default(), 200),
        timestamp: text(e.ts.clone(), 100),
        omitted_chars,
    }
}

/// The newest of `items` (oldest first) whose encoded size stays within
/// `budget` bytes, oldest first, and how many older ones were left out.
pub fn newest<T: Message>(items: Vec<T>, budget: usize) -> (Vec<T>, usize) {
    let mut used = 0usize;
    let mut kept = Vec::new();
    let total = items.len();
    for item in items.into_iter().rev() {
        // The field's tag and length prefix: at most 6 bytes under 4 GiB.
        let size = item.encoded_len() + 6;
        if used + size > budget {
            break;
        }
        used += size;
        kept.push(item);
    }
    kept.reverse();
    let left_out = total - kept.len();
    (kept, left_out)
}

/// The last prompt as a reply: whole if it fits; otherwise its long texts
/// shortened (more and more), then its oldest messages left out, with a
/// note saying which.
pub fn prompt(p: LastPrompt) -> pb::PromptResponse {
    let mut limit = FIELD_CHARS;
    loop {
        let mut shortened = p.clone();
        let mut omitted = 0;
        let mut system = Value::String(std::mem::take(&mut shortened.system));
        omitted += cap_json_strings(&mut system, limit);
        shortened.system = match system {
            Value::String(s) => s,
            _ => String::new(),
        };
        for m in &mut shortened.messages {
            omitted += cap_json_strings(m, limit);
        }
        if limit == SMALL_FIELD_CHARS {
            return drop_oldest(shortened, omitted);
        }
        let reply = prompt_reply(&shortened, note(omitted, 0));
        if reply.encoded_len() <= REPLY_BYTES {
            return reply;
        }
        limit = (limit / 4).max(SMALL_FIELD_CHARS);
    }
}

/// The prompt's oldest messages left out until it fits.
fn drop_oldest(mut p: LastPrompt, omitted: u64) -> pb::PromptResponse {
    let mut dropped = 0;
    loop {
        let reply = prompt_reply(&p, note(omitted, dropped));
        if reply.encoded_len() <= REPLY_BYTES || p.messages.len() <= 1 {
            return reply;
        }
        let n = (p.messages.len() / 4).max(1);
        p.messages.drain(..n);
        dropped += n;
    }
}

fn note(omitted_chars: u64, dropped_messages: usize) -> String {
    let mut parts = Vec::new();
    if omitted_chars > 0 {
        parts.push(format!(
            "long texts were shortened to their head and tail ({omitted_chars} characters left out, each place marked)"
        ));
    }
    if dropped_messages > 0 {
        parts.push(format!(
            "the {dropped_messages} oldest messages were left out"
        ));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "this prompt is too large to show whole in one reply (4 MiB): {}",
        parts.join(", and ")
    )
}

fn prompt_reply(p: &LastPrompt, note: String) -> pb::PromptResponse {
    pb::PromptResponse {
        text: p.render(),
        messages_json: Value::Array(p.messages.clone()).to_string(),
        model: p.model.clone(),
        tool_format: p.tool_format.clone(),
        sent_at: p.ts.clone(),
        estimated_tokens: p.estimated_tokens,
        system: p.system.clone(),
        tools: p.tools.clone(),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::transcript::Body;

    fn call(arguments: String) -> Entry {
        Entry {
            id: "e".into(),
            parent: None,
            ts: "2026-11-23T10:00:00Z".into(),
            turn: None,
            body: Body::ToolCall {
                call_id: "c".into(),
                name: "write".into(),
                arguments,
            },
        }
    }

    #[test]
    fn a_json_value_fits_whole_cut_or_as_a_sentence() {
        let small = serde_json::json!({"a": [1, 2]});
        assert_eq!(json(Some(&small), 100), small.to_string());
        assert_eq!(json(None, 100), "");
        // One long string: cut, still JSON of the same shape.
        let long = serde_json::json!({"text": "x".repeat(50_000)});
        let cut: Value = serde_json::from_str(&json(Some(&long), 10_000)).unwrap();
        assert!(cut["text"].as_str().unwrap().len() < 10_000);
        // Many short strings: a sentence saying how big it was.
        let many = Value::Array(
            (0..10_000)
                .map(|i| Value::from(format!("item {i}")))
                .collect(),
        );
        let said: Value = serde_json::from_str(&json(Some(&many), 10_000)).unwrap();
        assert!(said.as_str().unwrap().starts_with("(a value of "), "{said}");
    }

    #[test]
    fn a_five_megabyte_entry_is_shortened_and_says_so() {
        let e = entry(&call("x".repeat(5_000_000)));
        assert!(e.encoded_len() < 500_000, "{}", e.encoded_len());
        assert_eq!(e.omitted_chars, 5_000_000 - FIELD_CHARS as u64);
        let v: Value = serde_json::from_str(&e.json).unwrap();
        assert!(
            v["arguments"]
                .as_str()
                .unwrap()
                .contains("4900000 characters omitted")
        );
        let small = entry(&call("{}".into()));
        assert_eq!((small.omitted_chars, small.kind.as_str()), (0, "tool_call"));
    }

    #[test]
    fn a_turns_segments_fit_one_event_however_many_there_are() {
        for (count, chars) in [(1usize, 600_000), (3, 600_000), (100, 20_000)] {
            // Four bytes a character: the worst case.
            let long = "😀".repeat(chars);
            let event = pb::TurnFinished {
                text: text(long.clone(), EVENT_CHARS),
                segments: segments(vec![long; count]),
                ..Default::default()
            };
            assert_eq!(event.segments.len(), count);
            assert!(
                event
                    .segments
                    .iter()
                    .all(|s| s.contains("characters omitted"))
            );
            assert!(
                event.encoded_len() < 4 * 1024 * 1024,
                "{count}: {}",
                event.encoded_len()
            );
        }
        assert_eq!(segments(vec!["a".into(), "b".into()]), ["a", "b"]);
    }

    #[test]
    fn lists_keep_their_newest_items_within_the_budget() {
        let items: Vec<pb::TranscriptEntry> = (0..10)
            .map(|i| pb::TranscriptEntry {
                id: i.to_string(),
                json: "y".repeat(1000),
                ..Default::default()
            })
            .collect();
        let (kept, left_out) = newest(items, 3_500);
        assert_eq!(left_out, 7);
        assert_eq!(
            kept.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["7", "8", "9"]
        );
    }

    #[test]
    fn a_huge_prompt_fits_one_reply_with_a_note() {
        let big = LastPrompt {
            ts: "t".into(),
            model: "p/m".into(),
            tool_format: "native".into(),
            estimated_tokens: 1,
            system: "s".repeat(2_000_000),
            messages: (0..3)
                .map(|_| serde_json::json!({"role": "user", "parts": [{"type": "text", "text": "m".repeat(2_000_000)}]}))
                .collect(),
            tools: Vec::new(),
        };
        let reply = prompt(big.clone());
        assert!(
            reply.encoded_len() <= REPLY_BYTES,
            "{}",
            reply.encoded_len()
        );
        assert!(reply.note.contains("shortened"), "{}", reply.note);
        assert!(reply.text.contains("characters omitted"));
        let whole = LastPrompt {
            system: "s".into(),
            messages: Vec::new(),
            ..big
        };
        assert_eq!(prompt(whole).note, "");
        // Many messages, each small: the oldest go.
        let many = LastPrompt {
            system: String::new(),
            messages: (0..20_000)
                .map(|i| serde_json::json!({"role": "user", "parts": [{"type": "text", "text": format!("{i} {}", "z".repeat(300))}]}))
                .collect(),
            ..prompt_fixture()
        };
        let reply = prompt(many);
        assert!(
            reply.encoded_len() <= REPLY_BYTES,
            "{}",
            reply.encoded_len()
        );
        assert!(
            reply.note.contains("oldest messages were left out"),
            "{}",
            reply.note
        );
        assert!(reply.text.contains("19999 z"), "the newest message is kept");
    }

    fn prompt_fixture() -> LastPrompt {
        LastPrompt {
            ts: "t".into(),
            model: "p/m".into(),
            tool_format: "native".into(),
            estimated_tokens: 1,
            system: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
        }
    }
}
