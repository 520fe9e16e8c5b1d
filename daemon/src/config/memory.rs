//! `[memory]` (SPEC §10): which embedder, which sources, and the search and
//! watcher settings, validated with errors that point into the file.

use std::path::PathBuf;
use std::time::Duration;

use pincer_memory::SearchSettings;
use pincer_memory::chunk::ChunkSize;
use pincer_memory::fuse::Fusion;
use pincer_memory::watch::WatchSettings;
use toml::Spanned;

use super::file::MemorySection;
use super::locate::{Locator, header_span};
use super::secret::api_key;
use super::url::check_http_url;
use super::{ApiKey, ConfigError};
use crate::home::{Home, expand_tilde};

/// Which embedder fills the vector leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The local model folder when it is there, else none (said plainly
    /// everywhere).
    Auto,
    Local,
    Openai,
    None,
}

impl EmbedderChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Local => "local",
            Self::Openai => "openai",
            Self::None => "none",
        }
    }
}

/// An OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenaiEmbedderSettings {
    pub base_url: String,
    pub model: String,
    pub api_key: ApiKey,
    pub dimensions: Option<usize>,
    pub timeout: Duration,
}

/// The validated `[memory]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySettings {
    pub enabled: bool,
    pub embedder: EmbedderChoice,
    /// The Hugging Face folder of the local model.
    pub model_dir: PathBuf,
    pub openai: OpenaiEmbedderSettings,
    pub chunk: ChunkSize,
    /// Workspace globs indexed besides `MEMORY.md` and `memory/**/*.md`.
    pub paths: Vec<String>,
    pub sessions: bool,
    pub auto_recall: bool,
    pub auto_recall_results: usize,
    pub search: SearchSettings,
    pub watch: WatchSettings,
}

/// The default local model folder, relative to `PINCER_HOME/models/`.
pub const DEFAULT_LOCAL_MODEL: &str = "all-MiniLM-L6-v2";

pub(super) fn settings(
    home: &Home,
    loc: &Locator<'_>,
    m: &MemorySection,
) -> Result<MemorySettings, ConfigError> {
    let embedder = match &m.embedder {
        None => EmbedderChoice::Auto,
        Some(e) => match e.get_ref().as_str() {
            "auto" => EmbedderChoice::Auto,
            "local" => EmbedderChoice::Local,
            "openai" => EmbedderChoice::Openai,
            "none" => EmbedderChoice::None,
            other => {
                return Err(loc.at(
                    e.span(),
                    format!("unknown embedder `{other}`; expected auto, local, openai or none"),
                ));
            }
        },
    };
    let model_dir = match &m.model_dir {
        Some(dir) => {
            let p = expand_tilde(dir);
            if p.is_absolute() {
                p
            } else {
                home.root().join(p)
            }
        }
        None => home.models_dir().join(DEFAULT_LOCAL_MODEL),
    };
    let o = &m.openai;
    let base_url = match &o.base_url {
        Some(url) => {
            let value = url.get_ref().trim_end_matches('/').to_string();
            if let Err(why) = check_http_url(&value) {
                return Err(loc.at(url.span(), why.to_string()));
            }
            value
        }
        None => "https://api.openai.com/v1".into(),
    };
    let openai = OpenaiEmbedderSettings {
        base_url,
        model: o
            .model
            .clone()
            .unwrap_or_else(|| "text-embedding-3-small".into()),
        api_key: api_key(
            home,
            "the memory embedder",
            o.api_key_env.as_deref(),
            o.api_key_file.as_deref(),
        ),
        dimensions: o.dimensions,
        timeout: Duration::from_secs(o.timeout_s.unwrap_or(60)),
    };

    let table = || header_span(loc.text, "memory");
    let chunk_tokens = within(loc, &m.chunk_tokens, 400, 32..=8192)?;
    let overlap = within(loc, &m.chunk_overlap, 80, 0..=4096)?;
    if overlap * 2 > chunk_tokens {
        let span = m.chunk_overlap.as_ref().map_or_else(table, Spanned::span);
        return Err(loc.at(
            span,
            format!(
                "chunk_overlap ({overlap}) must be at most half of chunk_tokens ({chunk_tokens})"
            ),
        ));
    }

    let mut paths = Vec::new();
    for glob in &m.paths {
        let g = glob.get_ref();
        if g.starts_with('/') || g.starts_with('~') || g.split('/').any(|part| part == "..") {
            return Err(loc.at(
                glob.span(),
                format!("`{g}` must be a glob inside the agent's workspace (relative, no `..`)"),
            ));
        }
        if let Err(e) = globset::Glob::new(g) {
            return Err(loc.at(glob.span(), format!("`{g}` is not a valid glob: {e}")));
        }
        paths.push(g.clone());
    }

    let defaults = SearchSettings::default();
    let fusion = match &m.fusion {
        None => defaults.fusion,
        Some(f) => match f.get_ref().as_str() {
            "weighted" => Fusion::Weighted,
            "rrf" => Fusion::Rrf,
            other => {
                return Err(loc.at(
                    f.span(),
                    format!("unknown fusion `{other}`; expected weighted or rrf"),
                ));
            }
        },
    };
    let search = SearchSettings {
        max_results: within(loc, &m.max_results, defaults.max_results, 1..=100)?,
        min_score: fraction(loc, &m.min_score, defaults.min_score)?,
        vector_weight: fraction(loc, &m.vector_weight, defaults.vector_weight)?,
        text_weight: fraction(loc, &m.text_weight, defaults.text_weight)?,
        fusion,
        candidate_multiplier: within(
            loc,
            &m.candidate_multiplier,
            defaults.candidate_multiplier,
            1..=50,
        )?,
        half_life_days: match &m.half_life_days {
            Some(h) if !(*h.get_ref() >= 0.0 && h.get_ref().is_finite()) => {
                return Err(loc.at(
                    h.span(),
                    "must be 0 (no decay) or a positive number of days",
                ));
            }
            Some(h) => *h.get_ref(),
            None => defaults.half_life_days,
        },
        mmr_lambda: fraction(loc, &m.mmr_lambda, defaults.mmr_lambda)?,
        snippet_chars: within(loc, &m.snippet_chars, defaults.snippet_chars, 50..=20_000)?,
    };
    if search.vector_weight + search.text_weight <= 0.0 {
        let span = m.vector_weight.as_ref().map_or_else(table, Spanned::span);
        return Err(loc.at(span, "vector_weight and text_weight cannot both be 0"));
    }
    let watch_defaults = WatchSettings::default();
    let debounce = within(loc, &m.watch_debounce_ms, 300, 10..=60_000)?;
    let reconcile = within(loc, &m.reconcile_minutes, 10, 1..=24 * 60)?;
    Ok(MemorySettings {
        enabled: m.enabled.unwrap_or(true),
        embedder,
        model_dir,
        openai,
        chunk: ChunkSize {
            tokens: chunk_tokens,
            overlap,
        },
        paths,
        sessions: m.sessions.unwrap_or(false),
        auto_recall: m.auto_recall.unwrap_or(false),
        auto_recall_results: within(loc, &m.auto_recall_results, 3, 1..=20)?,
        search,
        watch: WatchSettings {
            debounce: Duration::from_millis(debounce),
            reconcile_every: Duration::from_secs(reconcile * 60),
            release_model_after: m
                .release_model_after_s
                .map_or(watch_defaults.release_model_after, Duration::from_secs),
        },
    })
}

/// An integer setting within `range`, or its default.
pub(super) fn within<T>(
    loc: &Locator<'_>,
    value: &Option<Spanned<T>>,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError>
where
    T: Copy + PartialOrd + std::fmt::Display,
{
    match value {
        None => Ok(default),
        Some(v) if range.contains(v.get_ref()) => Ok(*v.get_ref()),
        Some(v) => Err(loc.at(
            v.span(),
            format!(
                "must be between {} and {} (got {})",
                range.start(),
                range.end(),
                v.get_ref()
            ),
        )),
    }
}

/// A setting between 0 and 1, or its default.
fn fraction(
    loc: &Locator<'_>,
    value: &Option<Spanned<f64>>,
    default: f64,
) -> Result<f64, ConfigError> {
    within(loc, value, default, 0.0..=1.0)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{ConfigError, load::Problem, load::parse};

    fn memory(section: &str) -> Result<MemorySettings, ConfigError> {
        let home = Home::at("/tmp/pincer-test-home");
        parse(
            &home,
            Path::new("/h/config.toml"),
            &format!("[memory]\n{section}"),
            &|| None,
        )
        .map(|c| c.memory)
    }

    fn problem(section: &str) -> Problem {
        match memory(section) {
            Err(ConfigError::Invalid(p)) => *p,
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_spec_defaults() {
        let m = memory("").unwrap();
        assert_eq!(m.embedder, EmbedderChoice::Auto);
        assert_eq!(
            m.model_dir,
            Path::new("/tmp/pincer-test-home/models/all-MiniLM-L6-v2")
        );
        assert_eq!((m.chunk.tokens, m.chunk.overlap), (400, 80));
        assert_eq!(m.search.max_results, 6);
        assert_eq!(m.search.min_score, 0.35);
        assert_eq!((m.search.vector_weight, m.search.text_weight), (0.7, 0.3));
        assert_eq!(m.search.candidate_multiplier, 4);
        assert_eq!(m.watch.reconcile_every, Duration::from_secs(600));
        assert!(!m.auto_recall && !m.sessions && m.enabled);
    }

    #[test]
    fn an_unknown_embedder_is_located() {
        let p = problem("embedder = \"bert\"\n");
        assert_eq!((p.line, p.key.as_deref()), (2, Some("memory.embedder")));
        assert!(p.reason.contains("unknown embedder `bert`"), "{}", p.reason);
    }

    #[test]
    fn overlap_above_half_the_chunk_is_refused() {
        let p = problem("chunk_tokens = 100\nchunk_overlap = 60\n");
        assert_eq!(
            (p.line, p.key.as_deref()),
            (3, Some("memory.chunk_overlap"))
        );
        assert!(p.reason.contains("at most half"), "{}", p.reason);
    }

    #[test]
    fn globs_must_be_valid_and_stay_in_the_workspace() {
        let p = problem("paths = [\"notes/**/*.md\", \"notes/[a.md\"]\n");
        assert_eq!(p.line, 2);
        assert!(p.reason.contains("is not a valid glob"), "{}", p.reason);
        let p = problem("paths = [\"../secrets/*.md\"]\n");
        assert!(
            p.reason.contains("inside the agent's workspace"),
            "{}",
            p.reason
        );
        let p = problem("paths = [\"/etc/*.conf\"]\n");
        assert!(
            p.reason.contains("inside the agent's workspace"),
            "{}",
            p.reason
        );
    }

    #[test]
    fn weights_cannot_both_be_zero() {
        let p = problem("vector_weight = 0.0\ntext_weight = 0.0\n");
        assert_eq!(
            (p.line, p.key.as_deref()),
            (2, Some("memory.vector_weight"))
        );
        assert!(p.reason.contains("cannot both be 0"), "{}", p.reason);
    }

    #[test]
    fn fractions_and_ranges_are_checked() {
        let p = problem("min_score = 1.5\n");
        assert_eq!(p.key.as_deref(), Some("memory.min_score"));
        assert!(p.reason.contains("between 0 and 1"), "{}", p.reason);
        let p = problem("fusion = \"max\"\n");
        assert!(
            p.reason.contains("expected weighted or rrf"),
            "{}",
            p.reason
        );
        let p = problem("[memory.openai]\nbase_url = \"ftp://x\"\n");
        assert!(p.reason.contains("not an http"), "{}", p.reason);
    }
}
