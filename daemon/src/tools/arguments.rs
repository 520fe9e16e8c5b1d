//! The size of a tool call's arguments (`[tools] max_argument_chars`). A
//! model can write any amount into one call (a `write` of 5,000,000
//! characters); such a call is refused with a sentence the model can act
//! on ([`refusal`]), and kept in the transcript [`shorten`]ed, so that one
//! reply neither bloats every later prompt nor makes the session too big
//! to show. The audit table keeps a call's arguments masked and capped
//! the same way ([`for_audit`]).

use std::borrow::Cow;

use serde_json::Value;

use super::redact::Redactor;
use crate::util::{cap_head_tail, cap_json_strings};

/// The smallest string limit worth trying when fitting arguments: below
/// it, the call is kept as a head and a tail of its text instead.
const MIN_STRING_CHARS: usize = 64;

/// `None` when `raw` fits within `max_chars`; otherwise what the model is
/// told instead of running the call.
pub fn refusal(tool: &str, raw: &str, max_chars: usize) -> Option<String> {
    if raw.len() <= max_chars {
        return None;
    }
    let chars = raw.chars().count();
    (chars > max_chars).then(|| {
        format!(
            "this `{tool}` call was not run: its arguments are {chars} characters, more than the {max_chars} a call may have ([tools] max_argument_chars), and the transcript keeps them shortened. Split the work into smaller calls: for a large file, write a first part, then add the rest with further edit or apply_patch calls, or generate it with a command."
        )
    })
}

/// `raw` as the transcript keeps it: unchanged when it fits `max_chars`;
/// otherwise, if it is JSON, every long string value cut to its head and
/// tail around a marker that says how much was left out (so it stays a
/// valid call for the providers the history is sent to); else the head
/// and tail of the text.
pub fn shorten(raw: &str, max_chars: usize) -> Cow<'_, str> {
    if raw.len() <= max_chars || raw.chars().count() <= max_chars {
        return Cow::Borrowed(raw);
    }
    if let Ok(value) = serde_json::from_str::<Value>(raw) {
        let mut limit = max_chars;
        while limit >= MIN_STRING_CHARS {
            let mut shortened = value.clone();
            cap_json_strings(&mut shortened, limit);
            let text = shortened.to_string();
            if text.chars().count() <= max_chars {
                return Cow::Owned(text);
            }
            limit /= 2;
        }
    }
    Cow::Owned(cap_head_tail(raw, max_chars))
}

/// Characters of a call's arguments the audit table keeps.
pub const AUDIT_CHARS: usize = 2048;

/// A call's arguments as the audit table keeps them (`pincer tools
/// audit`): secrets masked first, so no cut can leave half of one, then
/// [`shorten`]ed to [`AUDIT_CHARS`], the cut marked.
pub fn for_audit(raw: &str, redactor: &Redactor) -> String {
    shorten(&redactor.redact_arguments(raw), AUDIT_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_keeps_arguments_masked_then_capped() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz";
        let redactor = Redactor::default();
        let raw = serde_json::json!({"command": format!("echo {key}")}).to_string();
        assert_eq!(
            for_audit(&raw, &redactor),
            r#"{"command":"echo [REDACTED]"}"#
        );
        // The key at the end of a long command: masked before the cut.
        let long =
            serde_json::json!({"command": format!("{} {key}", "y".repeat(10_000))}).to_string();
        let kept = for_audit(&long, &redactor);
        assert!(kept.chars().count() <= AUDIT_CHARS, "{}", kept.len());
        assert!(kept.contains("characters omitted"), "{kept}");
        assert!(kept.ends_with(r#"y [REDACTED]"}"#), "{kept}");
        assert!(serde_json::from_str::<Value>(&kept).is_ok(), "{kept}");
    }

    #[test]
    fn small_calls_pass_and_large_ones_are_refused_with_the_key() {
        assert!(refusal("write", r#"{"path": "a"}"#, 100).is_none());
        // 100 characters of 3 bytes each: bytes are not characters.
        assert!(refusal("write", &"数".repeat(100), 100).is_none());
        let why = refusal("write", &"x".repeat(101), 100).unwrap();
        assert!(why.contains("101 characters, more than the 100"), "{why}");
        assert!(why.contains("[tools] max_argument_chars"), "{why}");
    }

    #[test]
    fn a_huge_json_call_stays_json_and_says_what_was_left_out() {
        let content = "0123456789".repeat(500_000);
        let raw = serde_json::json!({"path": "big.txt", "content": content}).to_string();
        let kept = shorten(&raw, 1000);
        assert!(kept.chars().count() <= 1000, "{}", kept.len());
        let v: Value = serde_json::from_str(&kept).unwrap();
        assert_eq!(v["path"], "big.txt");
        let cut = v["content"].as_str().unwrap();
        assert!(cut.starts_with("0123456789"), "{cut}");
        assert!(cut.contains("characters omitted"), "{cut}");
        assert_eq!(shorten(r#"{"a": 1}"#, 1000), r#"{"a": 1}"#);
    }

    #[test]
    fn text_that_is_not_json_keeps_its_head_and_tail() {
        let raw = format!("{{broken {}", "y".repeat(10_000));
        let kept = shorten(&raw, 300);
        assert!(kept.starts_with("{broken"), "{kept}");
        assert!(kept.contains("characters omitted"), "{kept}");
    }
}
