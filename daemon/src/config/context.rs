//! `[context]` (SPEC §9): the caps of the bootstrap files, the history
//! guard and compaction, validated with errors that point into the file;
//! and the per-agent [`PromptMode`].

use toml::Spanned;

use super::ConfigError;
use super::file::ContextSection;
use super::locate::Locator;
use super::memory::within;

/// How much of the system prompt an agent gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PromptMode {
    /// `minimal` for models with a context window of 16k tokens or less,
    /// `full` otherwise.
    #[default]
    Auto,
    /// Every section of SPEC §9.
    Full,
    /// Identity line, safety, tooling, runtime, and only `AGENTS.md` and
    /// `TOOLS.md` of the project context: for sub-agents and small models.
    Minimal,
    /// The identity line and the agent's own `system_prompt` only.
    None,
}

impl PromptMode {
    /// Windows at or below this many tokens get `minimal` under `auto`.
    pub const SMALL_WINDOW: u64 = 16_384;

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => Self::Auto,
            "full" => Self::Full,
            "minimal" => Self::Minimal,
            "none" => Self::None,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Full => "full",
            Self::Minimal => "minimal",
            Self::None => "none",
        }
    }

    /// The concrete mode for a model with this window; sub-agents never
    /// get more than `minimal`.
    pub fn resolve(self, context_window: u64, subagent: bool) -> Self {
        let mode = match self {
            Self::Auto if context_window <= Self::SMALL_WINDOW => Self::Minimal,
            Self::Auto => Self::Full,
            other => other,
        };
        if subagent && mode == Self::Full {
            Self::Minimal
        } else {
            mode
        }
    }
}

/// The validated `[context]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSettings {
    /// Characters of one bootstrap file (head 70 % + tail 20 % beyond it).
    pub bootstrap_file_chars: usize,
    /// Characters of all bootstrap files together.
    pub bootstrap_total_chars: usize,
    /// Tool results kept whole; older ones are replaced by a marker.
    pub keep_tool_results: usize,
    /// Turns of history sent; `None`: all of them.
    pub max_history_turns: Option<usize>,
    pub compaction: bool,
    /// Tokens kept free below the window; passing it triggers compaction.
    pub reserve_tokens: u64,
    /// Tokens of the newest history a compaction keeps verbatim.
    pub keep_recent_tokens: u64,
    pub memory_flush: bool,
}

impl Default for ContextSettings {
    fn default() -> Self {
        Self {
            bootstrap_file_chars: 20_000,
            bootstrap_total_chars: 60_000,
            keep_tool_results: 5,
            max_history_turns: None,
            compaction: true,
            reserve_tokens: 20_000,
            keep_recent_tokens: 20_000,
            memory_flush: false,
        }
    }
}

impl ContextSettings {
    /// The reserve for a window: at most a quarter of it, so that small
    /// local models (8k) still have room to talk before compacting.
    pub fn reserve_for(&self, window: u64) -> u64 {
        self.reserve_tokens.min(window / 4)
    }

    /// The verbatim tail of a compaction for a window: at most a quarter
    /// of it, so that summary plus tail land well below the threshold.
    pub fn keep_recent_for(&self, window: u64) -> u64 {
        self.keep_recent_tokens.min(window / 4)
    }

    /// The bootstrap budget for a window: the configured total, but never
    /// more than about a quarter of the window (4 characters per token).
    pub fn bootstrap_total_for(&self, window: u64) -> usize {
        self.bootstrap_total_chars
            .min(usize::try_from(window).unwrap_or(usize::MAX))
    }
}

pub(super) fn settings(
    loc: &Locator<'_>,
    c: &ContextSection,
) -> Result<ContextSettings, ConfigError> {
    let d = ContextSettings::default();
    let file_chars = within(
        loc,
        &c.bootstrap_max_chars,
        d.bootstrap_file_chars,
        200..=1_000_000,
    )?;
    let total = within(
        loc,
        &c.bootstrap_total_max_chars,
        d.bootstrap_total_chars,
        200..=4_000_000,
    )?;
    Ok(ContextSettings {
        bootstrap_file_chars: file_chars,
        bootstrap_total_chars: total,
        keep_tool_results: within(loc, &c.keep_tool_results, d.keep_tool_results, 1..=1000)?,
        max_history_turns: match &c.max_history_turns {
            None => None,
            Some(n) => Some(within(loc, &Some(n.clone()), 1, 1..=100_000)?),
        },
        compaction: c.compaction.unwrap_or(d.compaction),
        reserve_tokens: within(loc, &c.reserve_tokens, d.reserve_tokens, 256..=1_000_000)?,
        keep_recent_tokens: within(
            loc,
            &c.keep_recent_tokens,
            d.keep_recent_tokens,
            256..=1_000_000,
        )?,
        memory_flush: c.memory_flush.unwrap_or(d.memory_flush),
    })
}

/// `prompt_mode` of an agent.
pub(super) fn prompt_mode(
    loc: &Locator<'_>,
    value: Option<&Spanned<String>>,
) -> Result<PromptMode, ConfigError> {
    match value {
        None => Ok(PromptMode::Auto),
        Some(v) => PromptMode::parse(v.get_ref()).ok_or_else(|| {
            loc.at(
                v.span(),
                format!(
                    "unknown prompt_mode `{}`: use auto, full, minimal or none",
                    v.get_ref()
                ),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, PromptMode, load::Problem, load::parse};
    use crate::home::Home;

    const PROVIDERS: &str = "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[models.default]\nprovider = \"p\"\nmodel = \"big\"\ncontext_window = 128000\n\n[models.cheap]\nprovider = \"p\"\nmodel = \"small\"\n\n";

    fn load(text: &str) -> Result<Config, ConfigError> {
        parse(
            &Home::at("/tmp/pincer-test-home"),
            Path::new("/h/config.toml"),
            &format!("{PROVIDERS}{text}"),
            &|| None,
        )
    }

    fn problem(text: &str) -> Problem {
        match load(text) {
            Err(ConfigError::Invalid(p)) => *p,
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_spec_defaults() {
        let c = load("[agents.main]\nmodel = \"default\"\n").unwrap();
        let s = &c.context;
        assert_eq!(
            (s.bootstrap_file_chars, s.bootstrap_total_chars),
            (20_000, 60_000)
        );
        assert_eq!(s.keep_tool_results, 5);
        assert_eq!(s.max_history_turns, None);
        assert!(s.compaction && !s.memory_flush);
        assert_eq!((s.reserve_tokens, s.keep_recent_tokens), (20_000, 20_000));
        // Small windows scale the reserve and the kept tail down.
        assert_eq!(s.reserve_for(8_192), 2_048);
        assert_eq!(s.reserve_for(200_000), 20_000);
        assert_eq!(s.bootstrap_total_for(8_192), 8_192);
        let main = c.agent("main").unwrap();
        assert_eq!(main.prompt_mode, PromptMode::Auto);
        assert!(
            main.compaction_models.is_empty(),
            "default: the agent's model"
        );
    }

    #[test]
    fn the_compaction_model_comes_from_the_agent_or_the_context_table() {
        let c = load(
            "[context]\ncompaction_model = \"cheap\"\n\n[agents.main]\nmodel = \"default\"\n\n[agents.other]\nmodel = \"default\"\ncompaction_model = \"default\"\n",
        )
        .unwrap();
        assert_eq!(c.agent("main").unwrap().compaction_models[0].model, "small");
        assert_eq!(c.agent("other").unwrap().compaction_models[0].model, "big");
    }

    #[test]
    fn bad_values_name_their_key() {
        let p = problem("[agents.main]\nmodel = \"default\"\nprompt_mode = \"tiny\"\n");
        assert_eq!(p.key.as_deref(), Some("agents.main.prompt_mode"));
        assert!(
            p.reason.contains("auto, full, minimal or none"),
            "{}",
            p.reason
        );
        let p = problem("[context]\nkeep_tool_results = 0\n");
        assert_eq!(p.key.as_deref(), Some("context.keep_tool_results"));
        let p = problem("[context]\ncompaction_model = \"nope\"\n");
        assert!(p.reason.contains("unknown model `nope`"), "{}", p.reason);
        let p = problem("[context]\nreserve_tokenz = 1\n");
        assert!(p.reason.contains("reserve_tokens"), "{}", p.reason);
        let p = problem("[models.tiny]\nprovider = \"p\"\nmodel = \"t\"\ncontext_window = 10\n");
        assert_eq!(p.key.as_deref(), Some("models.tiny.context_window"));
        assert!(p.reason.contains("at least 1024"), "{}", p.reason);
    }
}
