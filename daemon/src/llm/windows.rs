//! Context windows: how many tokens a model takes. The config keeps only the
//! window a user wrote (`ModelTarget::context_window`); for a model without
//! one, the window comes from the table of well-known families here, so
//! knowledge about models stays out of the config.
//!
//! [`ContextWindow`] puts `context_window()` on an agent's settings, where
//! the callers have always asked for it.

use crate::config::{AgentSettings, ModelTarget};

/// The window assumed for a model no family table knows.
pub const UNKNOWN_MODEL_WINDOW: u64 = 32_768;

/// Context windows of well-known model families (tokens); anything else
/// gets a conservative 32k until `context_window` is configured.
pub fn default_context_window(model: &str) -> u64 {
    let m = model.to_ascii_lowercase();
    // Most specific first: "gpt-4.1" before "gpt-4", "llama-3.1" before "llama3".
    const KNOWN: &[(&str, u64)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-4", 8_192),
        ("gpt-3.5", 16_385),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("claude", 200_000),
        ("gemini", 1_048_576),
        ("deepseek", 128_000),
        ("qwen3", 40_960),
        ("qwen2.5", 32_768),
        ("llama-3.1", 131_072),
        ("llama3.1", 131_072),
        ("llama-3.2", 131_072),
        ("llama3.2", 131_072),
        ("llama-3.3", 131_072),
        ("llama3.3", 131_072),
        ("llama3", 8_192),
        ("llama-3", 8_192),
        ("mistral-large", 131_072),
        ("mistral", 32_768),
        ("gemma", 8_192),
        ("phi-3", 4_096),
        ("smollm", 8_192),
    ];
    let base = m.rsplit('/').next().unwrap_or(&m);
    KNOWN
        .iter()
        .find(|(prefix, _)| {
            // At the start, or after a `-` (`meta-llama-3.1`); without
            // making a string per family on every lookup.
            base.starts_with(prefix)
                || base
                    .match_indices(prefix)
                    .any(|(at, _)| base[..at].ends_with('-'))
        })
        .map_or(UNKNOWN_MODEL_WINDOW, |(_, window)| *window)
}

/// The window of one target: the configured one, else its family's.
pub fn window(target: &ModelTarget) -> u64 {
    target
        .context_window
        .unwrap_or_else(|| default_context_window(&target.model))
}

/// The context window of the first of `targets`, or that of an unknown
/// model when there is none.
pub fn window_of(targets: &[ModelTarget]) -> u64 {
    targets.first().map_or(UNKNOWN_MODEL_WINDOW, window)
}

/// An agent's context window. A trait rather than a method of
/// [`AgentSettings`] because the config may not call up into `llm`.
pub trait ContextWindow {
    /// The context window of the model called first (the default for an
    /// unknown model when none is configured).
    fn context_window(&self) -> u64;
}

impl ContextWindow for AgentSettings {
    fn context_window(&self) -> u64 {
        window_of(&self.models)
    }
}

#[cfg(test)]
mod tests {
    use super::default_context_window as w;
    use crate::config::ModelTarget;

    #[test]
    fn known_model_families_get_their_windows() {
        assert_eq!(w("gpt-4.1-mini"), 1_047_576);
        assert_eq!(w("gpt-4o-mini"), 128_000);
        assert_eq!(w("gpt-4-0613"), 8_192);
        assert_eq!(w("claude-sonnet-4-5"), 200_000);
        assert_eq!(w("anthropic/claude-3-haiku"), 200_000);
        assert_eq!(w("meta-llama/Meta-Llama-3.1-8B-Instruct"), 131_072);
        assert_eq!(w("llama3:8b"), 8_192);
        assert_eq!(w("qwen2.5-coder:7b"), 32_768);
        assert_eq!(w("SmolLM2-135M-Instruct"), 8_192);
        assert_eq!(w("some-new-model"), 32_768);
    }

    #[test]
    fn a_configured_window_wins_over_the_family_table() {
        let mut t = ModelTarget {
            provider: "p".into(),
            model: "gpt-4o".into(),
            context_window: None,
            max_output_tokens: 1,
            temperature: None,
            vision: false,
            price: None,
        };
        assert_eq!(super::window(&t), 128_000);
        t.context_window = Some(2_048);
        assert_eq!(super::window_of(&[t]), 2_048);
        assert_eq!(super::window_of(&[]), super::UNKNOWN_MODEL_WINDOW);
    }
}
