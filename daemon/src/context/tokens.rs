//! Token estimates for deciding when to compact (SPEC §9).
//!
//! The provider's own count of the last call is exact; only what was added
//! since is estimated. [`Anchor`] keeps that count next to our estimate of
//! the same prompt, so the estimator's error is confined to the new
//! content. A [`Counter`] counts a prompt for one model: with the
//! `exact-tokens` feature, OpenAI models are counted with their own BPE
//! (o200k or cl100k); everything else, and every build without the
//! feature, with an estimate of about four characters per token for ASCII
//! text and one per CJK character (chars/4 would undercount Chinese
//! about fourfold). The vocabularies cost 2 MB of binary and 22 MB of
//! memory once loaded, more than SPEC §14 leaves a default build, for an
//! error confined to the delta.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use crate::llm::{Message, Part, Request, ToolSpec};

/// Tool schemas whose count is kept (the core tools and those of a few MCP
/// servers; dropped ones are let go first).
const MAX_SCHEMAS_KEPT: usize = 1024;

/// Per-message overhead of the wire formats (role, separators).
const MESSAGE_OVERHEAD: u64 = 4;

/// What one image is counted as, whatever its size: a fixed amount,
/// because its real cost depends on its pixels and the provider (Anthropic
/// about width × height / 750, at most about 1,600; OpenAI 85 plus 170 per
/// 512-pixel tile, 765 for 1024 × 1024), and a Telegram photo is at most
/// 1280 pixels on its long side. The next call's reported usage corrects
/// the estimate anyway (the anchor).
pub const IMAGE_TOKENS: u64 = 1_000;

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

/// Counts the tokens of one model's prompts.
#[derive(Clone, Copy)]
pub struct Counter {
    #[cfg(feature = "exact-tokens")]
    bpe: Option<&'static tiktoken::CoreBpe>,
}

impl Counter {
    /// The estimate, for any model.
    pub const ESTIMATE: Self = Self {
        #[cfg(feature = "exact-tokens")]
        bpe: None,
    };

    /// The best counter this build has for `model`.
    pub fn for_model(model: &str) -> Self {
        #[cfg(feature = "exact-tokens")]
        {
            Self {
                bpe: exact::for_model(model),
            }
        }
        #[cfg(not(feature = "exact-tokens"))]
        {
            let _ = model;
            Self::ESTIMATE
        }
    }

    /// Whether this counter uses the model's own vocabulary.
    pub fn is_exact(&self) -> bool {
        #[cfg(feature = "exact-tokens")]
        {
            self.bpe.is_some()
        }
        #[cfg(not(feature = "exact-tokens"))]
        {
            false
        }
    }

    pub fn text(&self, text: &str) -> u64 {
        #[cfg(feature = "exact-tokens")]
        if let Some(bpe) = self.bpe {
            return bpe.count(text) as u64;
        }
        estimate_text(text)
    }

    pub fn message(&self, m: &Message) -> u64 {
        MESSAGE_OVERHEAD
            + m.parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => self.text(t),
                    Part::ToolCall(c) => self.text(&c.name) + self.text(&c.arguments) + 4,
                    Part::ToolResult { content, .. } => self.text(content) + 4,
                    Part::Image { .. } => IMAGE_TOKENS,
                })
                .sum::<u64>()
    }

    /// Tokens of the tool schemas a request offers (providers count them
    /// as prompt); the same for every call of a turn, so computed once.
    pub fn tools(&self, tools: &[ToolSpec]) -> u64 {
        tools
            .iter()
            .map(|t| self.text(&t.name) + self.text(&t.description) + self.schema(&t.parameters))
            .sum()
    }

    /// Tokens of a tool's schema written as JSON. Every turn offers the
    /// same schemas (one `Arc` per tool, shared with its definition), so
    /// each is written out and counted once per counter, not per turn
    /// (writing two dozen schemas cost more than the rest of a turn's
    /// prompt work). Kept by address with a `Weak`, which holds the
    /// allocation, so an address is never another schema's while kept.
    fn schema(&self, schema: &Arc<serde_json::Value>) -> u64 {
        type Kept = HashMap<(usize, usize), (Weak<serde_json::Value>, u64)>;
        static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(Default::default);
        let key = (Arc::as_ptr(schema) as usize, self.vocabulary());
        let lock = || KEPT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((kept, tokens)) = lock().get(&key)
            && kept.upgrade().is_some_and(|k| Arc::ptr_eq(&k, schema))
        {
            return *tokens;
        }
        let tokens = self.text(&schema.to_string());
        let mut kept = lock();
        if kept.len() >= MAX_SCHEMAS_KEPT {
            kept.retain(|_, (weak, _)| weak.strong_count() > 0);
            if kept.len() >= MAX_SCHEMAS_KEPT {
                kept.clear();
            }
        }
        kept.insert(key, (Arc::downgrade(schema), tokens));
        tokens
    }

    /// Which vocabulary counts (0: the estimate).
    fn vocabulary(&self) -> usize {
        #[cfg(feature = "exact-tokens")]
        if let Some(bpe) = self.bpe {
            return std::ptr::from_ref(bpe) as usize;
        }
        0
    }

    /// Prompt tokens of a request whose tools were counted at
    /// `tool_tokens` (0 when it offers none).
    pub fn request(&self, r: &Request, tool_tokens: u64) -> u64 {
        let tools = if r.tools.is_empty() { 0 } else { tool_tokens };
        self.text(&r.system) + r.messages.iter().map(|m| self.message(m)).sum::<u64>() + tools
    }
}

/// OpenAI's vocabularies, each loaded on first use (about 0.1 s).
#[cfg(feature = "exact-tokens")]
mod exact {
    use std::sync::OnceLock;

    use tiktoken::CoreBpe;

    static O200K: OnceLock<CoreBpe> = OnceLock::new();
    static CL100K: OnceLock<CoreBpe> = OnceLock::new();

    pub fn for_model(model: &str) -> Option<&'static CoreBpe> {
        let m = model.to_ascii_lowercase();
        let m = m.rsplit('/').next().unwrap_or(&m);
        // Only these two vocabularies are linked in (`get_encoding` would
        // pull in every one the crate ships).
        let o200k = m.starts_with("gpt-5") || tiktoken::model_to_encoding(m) == Some("o200k_base");
        if o200k {
            Some(O200K.get_or_init(tiktoken::encoding::o200k_base))
        } else if tiktoken::model_to_encoding(m) == Some("cl100k_base") {
            Some(CL100K.get_or_init(tiktoken::encoding::cl100k_base))
        } else {
            None
        }
    }
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
    fn a_schema_is_counted_once_and_as_it_is_now() {
        let spec = |schema: &Arc<serde_json::Value>| ToolSpec {
            name: "tool".into(),
            description: "does things".into(),
            parameters: schema.clone(),
        };
        let c = Counter::ESTIMATE;
        let fresh = |schema: &Arc<serde_json::Value>| {
            c.text("tool") + c.text("does things") + c.text(&schema.to_string())
        };
        let small = Arc::new(serde_json::json!({"type": "object"}));
        assert_eq!(c.tools(&[spec(&small)]), fresh(&small));
        assert_eq!(c.tools(&[spec(&small)]), fresh(&small));
        // Schemas made and dropped one after another (a reload's): each is
        // counted for what it holds, never for an earlier one's count.
        for n in 0..300 {
            let schema =
                Arc::new(serde_json::json!({"type": "object", "description": "y".repeat(n * 8)}));
            assert_eq!(c.tools(&[spec(&schema)]), fresh(&schema), "schema {n}");
        }
        assert_eq!(c.tools(&[spec(&small), spec(&small)]), 2 * fresh(&small));
    }

    #[test]
    fn models_without_a_known_vocabulary_are_estimated() {
        assert!(!Counter::for_model("claude-sonnet-4-5").is_exact());
        assert!(!Counter::for_model("qwen2.5:7b").is_exact());
        assert_eq!(Counter::ESTIMATE.text("记忆索引"), 4);
    }

    /// Runs in `tests/run.sh`'s `exact-tokens` lane.
    #[cfg(feature = "exact-tokens")]
    #[test]
    fn openai_models_are_counted_with_their_own_vocabulary() {
        let gpt = Counter::for_model("openai/gpt-4o-mini");
        assert!(gpt.is_exact());
        // o200k: "hello" + " world"; cl100k agrees here.
        assert_eq!(gpt.text("hello world"), 2);
        assert!(Counter::for_model("gpt-5").is_exact());
        let old = Counter::for_model("gpt-4-0613");
        assert!(old.is_exact());
        // The vocabularies differ where it matters: Chinese text.
        let zh = "长期记忆索引和混合检索";
        assert_ne!(gpt.text(zh), estimate_text(zh));
        assert!(gpt.text(zh) > 0 && old.text(zh) > 0);
    }

    #[test]
    fn ascii_is_about_four_characters_a_token_and_cjk_one() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_text("记忆索引"), 4);
        assert_eq!(estimate_text("héllo"), 1 + 1);
    }

    #[test]
    fn an_image_counts_a_fixed_amount_whatever_its_size() {
        let image = |bytes: usize| Message {
            role: crate::llm::Role::User,
            parts: vec![
                Part::Text("abcd".into()),
                Part::Image {
                    media_type: "image/jpeg".into(),
                    data: "A".repeat(bytes).into(),
                },
            ],
        };
        let small = Counter::ESTIMATE.message(&image(8));
        assert_eq!(small, MESSAGE_OVERHEAD + 1 + IMAGE_TOKENS);
        assert_eq!(Counter::ESTIMATE.message(&image(4_000_000)), small);
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
