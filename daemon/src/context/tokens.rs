//! Token estimates for deciding when to compact (SPEC §9).
//!
//! The provider's own count of the last call is exact; only what was added
//! since is estimated. [`Anchor`] keeps that count next to our estimate of
//! the same prompt, so the estimator's error is confined to the new
//! content. The estimator counts about four characters per token for
//! ASCII text and one token per CJK character (chars/4 would undercount
//! Chinese text about fourfold). A real BPE tokenizer would tighten the
//! estimate of the delta but costs megabytes of vocabulary in the binary
//! and in memory, and the delta is small next to the anchored count.

use crate::llm::{Message, Part, Request, ToolSpec};

/// Per-message overhead of the wire formats (role, separators).
const MESSAGE_OVERHEAD: u64 = 4;

/// Estimated tokens of a text.
pub fn estimate_text(text: &str) -> u64 {
    // The common case, checked a word at a time.
    if text.is_ascii() {
        return (text.len() as u64).div_ceil(4);
    }
    let mut ascii = 0u64;
    let mut wide = 0u64;
    let mut other = 0u64;
    for c in text.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else if is_wide(c) {
            wide += 1;
        } else {
            other += 1;
        }
    }
    ascii.div_ceil(4) + wide + other.div_ceil(2)
}

/// CJK ideographs, kana, hangul and full-width forms: about one token each.
fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x2E80..=0x9FFF | 0xA960..=0xA97F | 0xAC00..=0xD7FF
        | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFFEF | 0x20000..=0x3FFFF)
}

pub fn estimate_message(m: &Message) -> u64 {
    MESSAGE_OVERHEAD
        + m.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => estimate_text(t),
                Part::ToolCall(c) => estimate_text(&c.name) + estimate_text(&c.arguments) + 4,
                Part::ToolResult { content, .. } => estimate_text(content) + 4,
            })
            .sum::<u64>()
}

/// Estimated tokens of the tool schemas a request offers (providers count
/// them as prompt); the same for every call of a turn, so computed once.
pub fn estimate_tools(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|t| {
            estimate_text(&t.name)
                + estimate_text(&t.description)
                + estimate_text(&t.parameters.to_string())
        })
        .sum()
}

/// Estimated prompt tokens of a request whose tools were estimated at
/// `tool_tokens` (0 when it offers none).
pub fn estimate_request(r: &Request, tool_tokens: u64) -> u64 {
    let tools = if r.tools.is_empty() { 0 } else { tool_tokens };
    estimate_text(&r.system) + r.messages.iter().map(estimate_message).sum::<u64>() + tools
}

/// The provider's count of the last call's prompt and reply, with our
/// estimate of the same.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Anchor {
    pub reported: u64,
    pub estimated: u64,
}

impl Anchor {
    /// An anchor from a call's reported usage, unless the report is not
    /// believable: some OpenAI-compatible servers report 0 or 1 tokens for
    /// any prompt, and trusting that would postpone compaction forever.
    pub fn new(reported: u64, estimated: u64) -> Option<Self> {
        (reported > 0 && reported.saturating_mul(4) >= estimated).then_some(Self {
            reported,
            estimated,
        })
    }

    /// Tokens of a prompt we estimate at `estimate`: the reported count
    /// plus our estimate of the difference.
    pub fn project(&self, estimate: u64) -> u64 {
        let delta = estimate as i128 - self.estimated as i128;
        (self.reported as i128 + delta).max(0) as u64
    }
}

/// The best estimate of a prompt's tokens.
pub fn projected(anchor: Option<&Anchor>, estimate: u64) -> u64 {
    anchor.map_or(estimate, |a| a.project(estimate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_about_four_characters_a_token_and_cjk_one() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_text("记忆索引"), 4);
        assert_eq!(estimate_text("héllo"), 1 + 1);
    }

    #[test]
    fn anchored_projection_adds_only_the_estimated_delta() {
        let a = Anchor::new(1000, 800).unwrap();
        assert_eq!(a.project(800), 1000);
        assert_eq!(a.project(900), 1100);
        assert_eq!(a.project(300), 500);
    }

    #[test]
    fn unbelievable_reports_are_ignored() {
        assert!(Anchor::new(0, 500).is_none());
        assert!(Anchor::new(1, 500).is_none());
        assert!(Anchor::new(200, 500).is_some());
        assert_eq!(projected(None, 42), 42);
    }
}
