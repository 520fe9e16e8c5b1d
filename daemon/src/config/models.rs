//! Providers and models: `[providers.*]` into [`ProviderSettings`] (base
//! URL, API key, timeouts, retries) and model references (`[models]` names
//! with their fallbacks, or `provider/model`) into [`ModelTarget`]s.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use super::file::{ModelSection, ProviderKind, ProviderSection};
use super::locate::{ConfigError, Locator, join_keys};
use super::secret::api_key;
use super::url::check_http_url;
use super::{ModelTarget, ProviderSettings, RetrySettings, ToolFormat};
use crate::home::Home;

pub(super) fn provider_settings(
    home: &Home,
    loc: &Locator<'_>,
    name: &str,
    section: &ProviderSection,
) -> Result<ProviderSettings, ConfigError> {
    let base_url = match &section.base_url {
        Some(url) => {
            let value = url.get_ref().trim_end_matches('/').to_string();
            if let Err(why) = check_http_url(&value) {
                return Err(loc.at(url.span(), why.to_string()));
            }
            value
        }
        None => match section.kind {
            ProviderKind::Openai => "https://api.openai.com/v1".into(),
            ProviderKind::Anthropic => "https://api.anthropic.com".into(),
        },
    };
    let api_key = api_key(
        home,
        &format!("provider `{name}`"),
        section.api_key_env.as_deref(),
        section.api_key_file.as_deref(),
    );
    let retry = &section.retry;
    Ok(ProviderSettings {
        name: name.to_string(),
        kind: section.kind,
        base_url,
        api_key,
        tool_format: section
            .tool_format
            .as_ref()
            .map_or(ToolFormat::Native, |f| *f.get_ref()),
        connect_timeout: Duration::from_secs(section.connect_timeout_s.unwrap_or(10)),
        idle_timeout: Duration::from_secs(section.idle_timeout_s.unwrap_or(300)),
        retry: RetrySettings {
            max_attempts: retry.max_attempts.unwrap_or(6).max(1),
            initial_backoff: Duration::from_millis(retry.initial_backoff_ms.unwrap_or(1000)),
            max_backoff: Duration::from_millis(retry.max_backoff_ms.unwrap_or(30_000)),
            max_retry_after: Duration::from_secs(retry.max_retry_after_s.unwrap_or(60)),
        },
        headers: section.headers.clone(),
    })
}

pub(super) struct ModelResolver<'a> {
    pub(super) loc: &'a Locator<'a>,
    pub(super) providers: &'a BTreeMap<String, ProviderSettings>,
    pub(super) models: &'a BTreeMap<String, ModelSection>,
    pub(super) detected: Option<&'a ModelTarget>,
}

impl ModelResolver<'_> {
    /// A model reference (`[models]` name or `provider/model`) and the
    /// fallbacks of a named model, in order.
    pub(super) fn chain(
        &self,
        reference: &str,
        span: Option<Range<usize>>,
    ) -> Result<Vec<ModelTarget>, ConfigError> {
        match self.models.get(reference) {
            Some(section) => {
                let mut chain = vec![self.named(reference, section)?];
                for fallback in &section.fallbacks {
                    let target = match self.models.get(fallback.get_ref()) {
                        Some(s) => self.named(fallback.get_ref(), s)?,
                        None => self.direct(fallback.get_ref(), fallback.span())?,
                    };
                    chain.push(target);
                }
                Ok(chain)
            }
            None if reference == "default" && self.detected.is_some() => {
                Ok(self.detected.cloned().into_iter().collect())
            }
            None => self
                .direct(reference, span.unwrap_or(0..0))
                .map(|t| vec![t]),
        }
    }

    fn named(&self, name: &str, section: &ModelSection) -> Result<ModelTarget, ConfigError> {
        let provider = section.provider.get_ref();
        if !self.providers.contains_key(provider) {
            return Err(self.loc.at(
                section.provider.span(),
                format!(
                    "model `{name}` names provider `{provider}`, which is not defined (providers: {})",
                    join_keys(self.providers)
                ),
            ));
        }
        Ok(ModelTarget {
            provider: provider.clone(),
            model: section.model.clone(),
            context_window: match &section.context_window {
                Some(w) if *w.get_ref() < MIN_CONTEXT_WINDOW => {
                    return Err(self.loc.at(
                        w.span(),
                        format!(
                            "a context window of {} tokens leaves no room for a prompt; it must be at least {MIN_CONTEXT_WINDOW}",
                            w.get_ref()
                        ),
                    ));
                }
                Some(w) => Some(*w.get_ref()),
                None => None,
            },
            max_output_tokens: section.max_output_tokens.unwrap_or(4096),
            temperature: section.temperature,
            vision: section.vision.unwrap_or(false),
            price: self.price(name, section)?,
        })
    }

    /// A model's prices: both or neither, neither below zero.
    fn price(&self, name: &str, section: &ModelSection) -> Result<Option<(f64, f64)>, ConfigError> {
        match (&section.input_usd_per_mtok, &section.output_usd_per_mtok) {
            (None, None) => Ok(None),
            (Some(i), Some(o)) => {
                for p in [i, o] {
                    if !p.get_ref().is_finite() || *p.get_ref() < 0.0 {
                        return Err(self.loc.at(
                            p.span(),
                            format!("model `{name}`: a price is 0 or more US dollars per million tokens"),
                        ));
                    }
                }
                Ok(Some((*i.get_ref(), *o.get_ref())))
            }
            (Some(p), None) | (None, Some(p)) => Err(self.loc.at(
                p.span(),
                format!(
                    "model `{name}`: give both `input_usd_per_mtok` and `output_usd_per_mtok`, or neither"
                ),
            )),
        }
    }

    fn direct(&self, reference: &str, span: Range<usize>) -> Result<ModelTarget, ConfigError> {
        if let Some((provider, model)) = reference.split_once('/')
            && self.providers.contains_key(provider)
            && !model.is_empty()
        {
            return Ok(ModelTarget {
                provider: provider.to_string(),
                model: model.to_string(),
                context_window: None,
                max_output_tokens: 4096,
                temperature: None,
                vision: false,
                price: None,
            });
        }
        Err(self.loc.at(
            span,
            format!(
                "unknown model `{reference}`: name a [models] entry ({}) or write `provider/model` with a defined provider ({})",
                join_keys(self.models),
                join_keys(self.providers)
            ),
        ))
    }
}

/// The smallest context window accepted in the config (tokens).
pub const MIN_CONTEXT_WINDOW: u64 = 1_024;
