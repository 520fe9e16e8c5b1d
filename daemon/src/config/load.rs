//! Reading and validating `config.toml`. Errors carry the file, line, column
//! and dotted key, and a reason a person can act on (with the nearest valid
//! key when a key is unknown).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::env::{self, Detected};
use super::file::{
    AgentSection, ConfigFile, LayerSection, ModelSection, ProviderKind, ProviderSection,
};
use super::mcp::{McpServerConfig, Transport};
use super::{
    AgentSettings, ApiKey, Config, DaemonSettings, HookEvent, HookSettings, LoopSettings,
    ModelTarget, PolicySettings, ProviderSettings, RetrySettings, SandboxMode, Secret,
    SubagentLimits, ToolFormat, ToolLayer, ToolSettings, WebFetchSettings,
};
use crate::home::{Home, expand_tilde};
use toml::Spanned;

/// A configuration problem, located in the file where possible.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read the config file: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Box<Problem>),
}

/// Where and why the config is invalid.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    /// Dotted key, e.g. `agents.main.model`.
    pub key: Option<String>,
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path.display(), self.line, self.column)?;
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        f.write_str(&self.reason)
    }
}

impl ConfigError {
    /// The located problem, if the file was readable.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Invalid(p) => Some(p),
            Self::Read { .. } => None,
        }
    }
}

/// Loads `home/config.toml`, or the zero-config default when it is absent.
pub fn load(home: &Home) -> Result<Config, ConfigError> {
    let path = home.config_file();
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(home, &path, &text, &env::detect),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            resolve(home, None, "", ConfigFile::default(), &env::detect)
        }
        Err(source) => Err(ConfigError::Read { path, source }),
    }
}

/// Parses and validates config text. `detect` supplies zero-config
/// providers (injected so tests do not depend on the environment).
pub fn parse(
    home: &Home,
    path: &Path,
    text: &str,
    detect: &dyn Fn() -> Option<Detected>,
) -> Result<Config, ConfigError> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        ConfigError::Invalid(Box::new(problem_from_toml(path, text, span, e.message())))
    })?;
    resolve(home, Some(path), text, file, detect)
}

fn problem_from_toml(path: &Path, text: &str, span: Range<usize>, message: &str) -> Problem {
    let (line, column) = line_col(text, span.start);
    let mut key = key_path_at(text, span.start);
    let mut reason = message.trim().to_string();
    if let Some(field) = between(message, "unknown field `", "`") {
        let expected = expected_names(message);
        key = Some(replace_last_segment(key, field));
        reason = format!("unknown key `{field}`");
        match nearest(field, &expected) {
            Some(best) => reason.push_str(&format!(" (did you mean `{best}`?)")),
            None if !expected.is_empty() => {
                reason.push_str(&format!("; valid keys here: {}", expected.join(", ")))
            }
            None => {}
        }
    } else if let Some(field) = between(message, "missing field `", "`") {
        reason = format!("missing required key `{field}` in this table");
        key = key_path_at_header(text, span.start).map(|t| format!("{t}.{field}"));
    }
    Problem {
        path: path.to_path_buf(),
        line,
        column,
        key,
        reason,
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

/// The backquoted names after "expected" in a serde message.
fn expected_names(message: &str) -> Vec<String> {
    let Some(at) = message.find("expected") else {
        return Vec::new();
    };
    message[at..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn nearest(word: &str, candidates: &[String]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.clone())
}

fn replace_last_segment(path: Option<String>, field: &str) -> String {
    match path {
        Some(p) => match p.rsplit_once('.') {
            Some((table, _)) => format!("{table}.{field}"),
            None => field.to_string(),
        },
        None => field.to_string(),
    }
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The table header (`agents.main`) that governs the line holding `offset`.
fn key_path_at_header(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let before = text.get(..offset)?;
    // The line holding the offset may itself be the header.
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let upto = text.get(..line_end).unwrap_or(before);
    upto.lines().rev().find_map(|l| {
        let l = l.trim();
        let inner = l
            .strip_prefix("[[")
            .and_then(|r| r.split("]]").next())
            .or_else(|| l.strip_prefix('[').and_then(|r| r.split(']').next()))?;
        Some(inner.trim().replace(['"', '\''], ""))
    })
}

/// The dotted key at `offset`: the governing header plus the key written on
/// that line, when the line is `key = value`.
fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().replace(['"', '\''], ""))
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let table = key_path_at_header(text, offset);
    match (table, key) {
        (Some(t), Some(k)) => Some(format!("{t}.{k}")),
        (None, Some(k)) => Some(k),
        (Some(t), None) => Some(t),
        (None, None) => None,
    }
}

pub(super) struct Locator<'a> {
    pub(super) path: Option<&'a Path>,
    pub(super) text: &'a str,
}

impl Locator<'_> {
    pub(super) fn at(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        let (line, column) = line_col(self.text, span.start);
        ConfigError::Invalid(Box::new(Problem {
            path: self
                .path
                .map_or_else(|| PathBuf::from("<default config>"), Path::to_path_buf),
            line,
            column,
            key: key_path_at(self.text, span.start),
            reason: reason.into(),
        }))
    }
}

fn resolve(
    home: &Home,
    path: Option<&Path>,
    text: &str,
    file: ConfigFile,
    detect: &dyn Fn() -> Option<Detected>,
) -> Result<Config, ConfigError> {
    let loc = Locator { path, text };
    let daemon = daemon_settings(&file);
    if let Some(n) = &file.daemon.max_concurrent_turns
        && *n.get_ref() == 0
    {
        return Err(loc.at(n.span(), "must be at least 1"));
    }

    let mut providers = BTreeMap::new();
    for (name, section) in &file.providers {
        providers.insert(name.clone(), provider_settings(home, &loc, name, section)?);
    }

    // Zero config: with no [providers], take one from the environment.
    let mut detected_target = None;
    let mut provider_problem = None;
    if file.providers.is_empty() {
        match detect() {
            Some(found) => {
                detected_target = Some(found.target.clone());
                providers.insert(found.provider.name.clone(), found.provider);
            }
            None => provider_problem = Some(env::NO_PROVIDER.to_string()),
        }
    }

    let resolver = ModelResolver {
        loc: &loc,
        providers: &providers,
        models: &file.models,
        detected: detected_target.as_ref(),
    };
    // Validate every [models] entry even if no agent uses it.
    for name in file.models.keys() {
        resolver.chain(name, None)?;
    }

    let mut agents = BTreeMap::new();
    let default_section = AgentSection::default();
    let main_id = "main".to_string();
    let agent_sections: Vec<(&String, &AgentSection)> = if file.agents.is_empty() {
        vec![(&main_id, &default_section)]
    } else {
        file.agents.iter().collect()
    };
    for (id, section) in agent_sections {
        if !valid_id(id) {
            return Err(loc.at(
                header_span(text, &format!("agents.{id}")),
                format!(
                    "agent id `{id}` may only contain letters, digits, `-` and `_` (it is part of session keys and file names)"
                ),
            ));
        }
        agents.insert(
            id.clone(),
            agent_settings(
                home,
                &loc,
                &resolver,
                (id, section),
                file.context.compaction_model.as_ref(),
                provider_problem.is_some(),
            )?,
        );
    }

    let default_agent = match &file.default_agent {
        Some(name) => {
            if !agents.contains_key(name.get_ref()) {
                return Err(loc.at(
                    name.span(),
                    format!(
                        "no agent `{}` is defined (agents: {})",
                        name.get_ref(),
                        join_keys(&agents)
                    ),
                ));
            }
            name.get_ref().clone()
        }
        None if agents.contains_key("main") => "main".to_string(),
        None => agents
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| "main".into()),
    };

    let mut tools = tool_settings(&loc, &file)?;
    let mcp_servers = mcp_servers(&loc, home, &file)?;
    let plugins = super::plugins::discover(&home.plugins_dir(), super::tools::CORE_TOOL_NAMES);
    tools
        .hooks
        .extend(plugins.plugins.iter().flat_map(|p| p.hooks.clone()));
    Ok(Config {
        source: path.map(Path::to_path_buf),
        daemon,
        providers,
        agents,
        default_agent,
        tools,
        policy: policy_settings(&loc, &file)?,
        memory: super::memory::settings(home, &loc, &file.memory)?,
        context: super::context::settings(&loc, &file.context)?,
        mcp: mcp_servers
            .into_iter()
            .chain(plugins.plugins.iter().map(|p| p.server.clone()))
            .collect(),
        plugins: plugins.plugins,
        plugin_problems: plugins.problems,
        provider_problem,
    })
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(super) fn header_span(text: &str, header: &str) -> Range<usize> {
    let needle = format!("[{header}]");
    text.find(&needle).map_or(0..0, |i| i..i + needle.len())
}

fn join_keys<V>(map: &BTreeMap<String, V>) -> String {
    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
    if keys.is_empty() {
        "none".into()
    } else {
        keys.join(", ")
    }
}

fn daemon_settings(file: &ConfigFile) -> DaemonSettings {
    DaemonSettings {
        max_concurrent_turns: file
            .daemon
            .max_concurrent_turns
            .as_ref()
            .map_or(8, |n| *n.get_ref() as usize),
        log_level: file
            .daemon
            .log_level
            .clone()
            .unwrap_or_else(|| "info".into()),
        shutdown_grace: Duration::from_secs(file.daemon.shutdown_grace_s.unwrap_or(10)),
    }
}

fn loop_settings(loc: &Locator<'_>, file: &ConfigFile) -> Result<LoopSettings, ConfigError> {
    let l = &file.tools.loop_detection;
    let s = LoopSettings {
        enabled: l.enabled.unwrap_or(true),
        window: l.window.as_ref().map_or(30, |w| *w.get_ref()),
        warning: l.warning.unwrap_or(10),
        critical: l.critical.unwrap_or(20),
        breaker: l.breaker.unwrap_or(30),
    };
    if !(1 <= s.warning
        && s.warning <= s.critical
        && s.critical <= s.breaker
        && s.breaker <= s.window)
    {
        let span = l
            .window
            .as_ref()
            .map(|w| w.span())
            .unwrap_or_else(|| header_span(loc.text, "tools.loop_detection"));
        return Err(loc.at(
            span,
            format!(
                "[tools.loop_detection] needs 1 <= warning <= critical <= breaker <= window (got {}, {}, {}, {})",
                s.warning, s.critical, s.breaker, s.window
            ),
        ));
    }
    Ok(s)
}

fn tool_settings(loc: &Locator<'_>, file: &ConfigFile) -> Result<ToolSettings, ConfigError> {
    Ok(ToolSettings {
        exec_timeout: Duration::from_secs(file.tools.exec.timeout_s.unwrap_or(120)),
        exec_max_output_chars: file.tools.exec.max_output_chars.unwrap_or(30_000),
        max_result_chars: file.tools.max_result_chars.unwrap_or(40_000),
        max_rollbacks: file.tools.rollback.max_consecutive.unwrap_or(5),
        refusal_keywords: file.tools.rollback.refusal_keywords.clone(),
        loops: loop_settings(loc, file)?,
        hooks: hook_settings(loc, file)?,
        timeouts: file
            .tools
            .timeouts
            .iter()
            .map(|(k, v)| (k.clone(), Duration::from_secs(*v)))
            .collect(),
        default_timeout: Duration::from_secs(file.tools.default_timeout_s.unwrap_or(600)),
        approval_timeout: Duration::from_secs(file.tools.approval_timeout_s.unwrap_or(600)),
        subagents: SubagentLimits {
            max_depth: file.tools.subagents.max_depth.unwrap_or(1),
            max_children: file.tools.subagents.max_children.unwrap_or(5),
        },
        web_fetch: WebFetchSettings {
            allow_private: file.tools.web_fetch.allow_private.unwrap_or(false),
            allow_hosts: file.tools.web_fetch.allow_hosts.clone(),
        },
    })
}

fn mcp_servers(
    loc: &Locator<'_>,
    home: &Home,
    file: &ConfigFile,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    let mut out = Vec::new();
    for (name, section) in &file.mcp {
        let span = section.span();
        let s = section.get_ref();
        if !valid_id(name) {
            return Err(loc.at(
                span,
                format!("[mcp.{name}]: a server name uses letters, digits, - and _"),
            ));
        }
        if s.enabled == Some(false) {
            continue;
        }
        let transport = match (&s.command, &s.url) {
            (Some(command), None) if !command.is_empty() && !command[0].trim().is_empty() => {
                let mut command = command.clone();
                command[0] = expand_tilde(&command[0]).to_string_lossy().into_owned();
                Transport::Stdio {
                    command,
                    env: s.env.clone(),
                    cwd: s.cwd.as_deref().map(|c| {
                        let p = expand_tilde(c);
                        if p.is_absolute() {
                            p
                        } else {
                            home.root().join(p)
                        }
                    }),
                }
            }
            (None, Some(url)) => {
                let value = url.get_ref().trim().to_string();
                if !(value.starts_with("http://") || value.starts_with("https://")) {
                    return Err(loc.at(
                        url.span(),
                        format!("`{value}` is not an http:// or https:// URL"),
                    ));
                }
                Transport::Http {
                    url: value,
                    headers: s.headers.clone(),
                }
            }
            (Some(_), Some(_)) => {
                return Err(loc.at(
                    span,
                    format!(
                        "[mcp.{name}] has both `command` and `url`; a server is one or the other"
                    ),
                ));
            }
            _ => {
                return Err(loc.at(
                    span,
                    format!("[mcp.{name}] needs `command = [\"program\", \"arg\"]` (stdio) or `url = \"http://…\"` (Streamable HTTP)"),
                ));
            }
        };
        out.push(McpServerConfig {
            name: name.clone(),
            transport,
            startup_timeout: Duration::from_secs(s.startup_timeout_s.unwrap_or(30)),
            plugin: None,
            optional: s.optional.clone(),
        });
    }
    Ok(out)
}

fn hook_settings(loc: &Locator<'_>, file: &ConfigFile) -> Result<Vec<HookSettings>, ConfigError> {
    let mut out = Vec::new();
    for (n, h) in file.tools.hooks.iter().enumerate() {
        let event = match h.event.get_ref().as_str() {
            "before_tool_call" => HookEvent::BeforeToolCall,
            "after_tool_call" => HookEvent::AfterToolCall,
            other => {
                return Err(loc.at(
                    h.event.span(),
                    format!(
                        "unknown hook event `{other}`: use before_tool_call or after_tool_call"
                    ),
                ));
            }
        };
        if h.command.get_ref().is_empty() || h.command.get_ref()[0].trim().is_empty() {
            return Err(loc.at(
                h.command.span(),
                "a hook needs a command: [\"program\", \"arg\", …]",
            ));
        }
        for pattern in &h.tools {
            if let Err(why) = super::tools::check_pattern(pattern) {
                return Err(loc.at(h.command.span(), format!("hook `tools`: {why}")));
            }
        }
        let program = expand_tilde(&h.command.get_ref()[0]);
        let mut command = h.command.get_ref().clone();
        command[0] = program.to_string_lossy().into_owned();
        out.push(HookSettings {
            name: h.name.clone().unwrap_or_else(|| format!("hooks[{n}]")),
            event,
            command,
            tools: h.tools.clone(),
            timeout: Duration::from_secs(h.timeout_s.unwrap_or(10)),
        });
    }
    Ok(out)
}

fn provider_settings(
    home: &Home,
    loc: &Locator<'_>,
    name: &str,
    section: &ProviderSection,
) -> Result<ProviderSettings, ConfigError> {
    let base_url = match &section.base_url {
        Some(url) => {
            let value = url.get_ref().trim_end_matches('/').to_string();
            if !(value.starts_with("http://") || value.starts_with("https://")) {
                return Err(loc.at(
                    url.span(),
                    format!("`{value}` is not an http:// or https:// URL"),
                ));
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

/// An API key named by an environment variable or a file in
/// `PINCER_HOME/secrets/`; `who` starts the sentence when it is missing.
pub(super) fn api_key(home: &Home, who: &str, env: Option<&str>, file: Option<&str>) -> ApiKey {
    match (env, file) {
        (Some(var), _) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => ApiKey::Found {
                origin: format!("${var}"),
                value: Secret(v.trim().to_string()),
            },
            _ => ApiKey::Missing {
                problem: format!(
                    "{who} reads its API key from ${var}, which is not set in pincerd's environment"
                ),
            },
        },
        (None, Some(file)) => {
            let path = home.secrets_dir().join(expand_tilde(file));
            match std::fs::read_to_string(&path) {
                Ok(v) if !v.trim().is_empty() => ApiKey::Found {
                    origin: path.display().to_string(),
                    value: Secret(v.trim().to_string()),
                },
                _ => ApiKey::Missing {
                    problem: format!(
                        "{who} reads its API key from {}, which is missing or empty",
                        path.display()
                    ),
                },
            }
        }
        (None, None) => ApiKey::None,
    }
}

struct ModelResolver<'a> {
    loc: &'a Locator<'a>,
    providers: &'a BTreeMap<String, ProviderSettings>,
    models: &'a BTreeMap<String, ModelSection>,
    detected: Option<&'a ModelTarget>,
}

impl ModelResolver<'_> {
    /// A model reference (`[models]` name or `provider/model`) and the
    /// fallbacks of a named model, in order.
    fn chain(
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
        })
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

fn agent_settings(
    home: &Home,
    loc: &Locator<'_>,
    resolver: &ModelResolver<'_>,
    (id, section): (&str, &AgentSection),
    default_compaction_model: Option<&Spanned<String>>,
    no_provider: bool,
) -> Result<AgentSettings, ConfigError> {
    let models = match &section.model {
        Some(reference) => resolver.chain(reference.get_ref(), Some(reference.span()))?,
        // Without any provider the turn reports `provider_problem` instead.
        None if no_provider => Vec::new(),
        None => match resolver.chain("default", None) {
            Ok(chain) => chain,
            Err(_) => {
                return Err(loc.at(
                    header_span(loc.text, &format!("agents.{id}")),
                    format!(
                        "agent `{id}` has no `model` and there is no [models.default]; add `model = \"...\"`"
                    ),
                ));
            }
        },
    };
    if let Some(n) = &section.max_model_calls
        && *n.get_ref() == 0
    {
        return Err(loc.at(n.span(), "must be at least 1"));
    }
    let tools = patterns_and_profile(
        loc,
        section.tools.profile.as_ref(),
        &section.tools.allow,
        &section.tools.deny,
    )?;
    for pattern in &section.tools.ask {
        if let Err(why) = super::tools::check_pattern(pattern.get_ref()) {
            return Err(loc.at(pattern.span(), why));
        }
    }
    let ask = section
        .tools
        .ask
        .iter()
        .map(|p| p.get_ref().clone())
        .collect();
    let workspace = match &section.workspace {
        Some(w) => {
            let p = expand_tilde(w);
            if p.is_absolute() {
                p
            } else {
                home.root().join(p)
            }
        }
        None if id == "main" => home.default_workspace(),
        None => home.agent_workspace(id),
    };
    Ok(AgentSettings {
        id: id.to_string(),
        models,
        workspace,
        max_model_calls: section
            .max_model_calls
            .as_ref()
            .map_or(40, |n| *n.get_ref()),
        max_turn_duration: Duration::from_secs(section.max_turn_seconds.unwrap_or(30 * 60)),
        system_prompt: section.system_prompt.clone(),
        prompt_mode: super::context::prompt_mode(loc, section.prompt_mode.as_ref())?,
        compaction_models: match section
            .compaction_model
            .as_ref()
            .or(default_compaction_model)
        {
            Some(reference) => resolver.chain(reference.get_ref(), Some(reference.span()))?,
            None => Vec::new(),
        },
        tools,
        ask,
    })
}

const PROFILES: &[&str] = &["minimal", "messaging", "coding", "full"];

/// A policy layer, its profile and patterns checked.
fn layer(loc: &Locator<'_>, section: &LayerSection) -> Result<ToolLayer, ConfigError> {
    if let Some(ask) = section.ask.first() {
        return Err(loc.at(
            ask.span(),
            "`ask` is set per agent: [agents.<id>.tools] ask = [\"exec\"]",
        ));
    }
    patterns_and_profile(loc, section.profile.as_ref(), &section.allow, &section.deny)
}

fn patterns_and_profile(
    loc: &Locator<'_>,
    profile: Option<&Spanned<String>>,
    allow: &[Spanned<String>],
    deny: &[Spanned<String>],
) -> Result<ToolLayer, ConfigError> {
    if let Some(profile) = profile
        && !PROFILES.contains(&profile.get_ref().as_str())
    {
        return Err(loc.at(
            profile.span(),
            format!(
                "unknown tool profile `{}`: use minimal, messaging, coding or full",
                profile.get_ref()
            ),
        ));
    }
    for pattern in allow.iter().chain(deny) {
        if let Err(why) = super::tools::check_pattern(pattern.get_ref()) {
            return Err(loc.at(pattern.span(), why));
        }
    }
    Ok(ToolLayer {
        profile: profile.map(|p| p.get_ref().clone()),
        allow: allow.iter().map(|p| p.get_ref().clone()).collect(),
        deny: deny.iter().map(|p| p.get_ref().clone()).collect(),
    })
}

fn policy_settings(loc: &Locator<'_>, file: &ConfigFile) -> Result<PolicySettings, ConfigError> {
    let t = &file.tools;
    let mut by_provider = BTreeMap::new();
    for (key, section) in &t.by_provider {
        let provider = key.split('/').next().unwrap_or_default();
        if !file.providers.contains_key(provider) && !file.providers.is_empty() {
            return Err(loc.at(
                header_span(loc.text, &format!("tools.by_provider.{key}")),
                format!(
                    "[tools.by_provider.\"{key}\"]: no provider `{provider}` is defined (providers: {})",
                    join_keys(&file.providers)
                ),
            ));
        }
        let layer = layer(loc, section)?;
        if let Some(p) = &section.profile {
            return Err(loc.at(
                p.span(),
                "a per-provider layer can only narrow (allow/deny); set profiles on [tools] or an agent",
            ));
        }
        by_provider.insert(key.clone(), layer);
    }
    let sandbox_mode = match t.sandbox.mode.as_ref() {
        None => SandboxMode::Off,
        Some(m) => match m.get_ref().as_str() {
            "off" => SandboxMode::Off,
            "non-main" => SandboxMode::NonMain,
            "all" => SandboxMode::All,
            other => {
                return Err(loc.at(
                    m.span(),
                    format!("unknown sandbox mode `{other}`: use off, non-main or all"),
                ));
            }
        },
    };
    Ok(PolicySettings {
        global: patterns_and_profile(loc, t.profile.as_ref(), &t.allow, &t.deny)?,
        by_provider,
        sandbox_mode,
        sandbox: patterns_and_profile(loc, None, &t.sandbox.allow, &t.sandbox.deny)?,
        subagents: patterns_and_profile(loc, None, &t.subagents.allow, &t.subagents.deny)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Config, ConfigError> {
        let home = Home::at("/tmp/pincer-test-home");
        parse(&home, Path::new("/h/config.toml"), text, &|| None)
    }

    fn problem(text: &str) -> Problem {
        match parse_text(text) {
            Err(ConfigError::Invalid(p)) => *p,
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    const PROVIDER: &str =
        "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";

    #[test]
    fn unknown_key_has_file_line_dotted_key_and_suggestion() {
        let p = problem("[daemon]\nmax_concurent_turns = 3\n");
        assert_eq!((p.line, p.column), (2, 1));
        assert_eq!(p.key.as_deref(), Some("daemon.max_concurent_turns"));
        assert!(
            p.reason.contains("did you mean `max_concurrent_turns`?"),
            "{}",
            p.reason
        );
        assert!(
            p.to_string()
                .starts_with("/h/config.toml:2:1: key `daemon.max_concurent_turns`"),
            "{p}"
        );
    }

    #[test]
    fn unknown_top_level_table_lists_valid_keys_when_nothing_is_close() {
        let p = problem("[zzz]\n");
        assert_eq!(p.line, 1);
        assert!(p.reason.contains("unknown key `zzz`"), "{}", p.reason);
        assert!(p.reason.contains("valid keys here"), "{}", p.reason);
    }

    #[test]
    fn wrong_type_and_bad_enum_are_located() {
        let p = problem("[daemon]\nmax_concurrent_turns = \"eight\"\n");
        assert_eq!(p.line, 2);
        assert_eq!(p.key.as_deref(), Some("daemon.max_concurrent_turns"));
        let p = problem("[providers.x]\nkind = \"gemini\"\n");
        assert_eq!(p.line, 2);
        assert!(p.reason.contains("gemini"), "{}", p.reason);
    }

    #[test]
    fn missing_required_key_names_it() {
        let p = problem(&format!("{PROVIDER}\n[models.default]\nprovider = \"p\"\n"));
        assert!(
            p.reason.contains("missing required key `model`"),
            "{}",
            p.reason
        );
        assert_eq!(p.key.as_deref(), Some("models.default.model"));
    }

    #[test]
    fn references_are_checked_with_locations() {
        let p = problem(&format!(
            "{PROVIDER}\n[models.default]\nprovider = \"nope\"\nmodel = \"m\"\n"
        ));
        assert_eq!(p.line, 6);
        assert!(
            p.reason.contains("provider `nope`") && p.reason.contains("providers: p"),
            "{}",
            p.reason
        );
        let p = problem(&format!("{PROVIDER}\n[agents.main]\nmodel = \"ghost\"\n"));
        assert_eq!(p.line, 6);
        assert!(p.reason.contains("unknown model `ghost`"), "{}", p.reason);
        let p = problem(&format!(
            "{PROVIDER}\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\nfallbacks = [\"q/x\"]\n"
        ));
        assert!(p.reason.contains("unknown model `q/x`"), "{}", p.reason);
        let p = problem(&format!(
            "default_agent = \"x\"\n{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n"
        ));
        assert!(p.reason.contains("no agent `x`"), "{}", p.reason);
    }

    #[test]
    fn values_are_validated() {
        assert!(
            problem("[daemon]\nmax_concurrent_turns = 0\n")
                .reason
                .contains("at least 1")
        );
        assert!(
            problem("[providers.p]\nkind = \"openai\"\nbase_url = \"ftp://x\"\n")
                .reason
                .contains("not an http")
        );
        assert!(
            problem("[providers.p]\nkind = \"openai\"\ntool_format = \"json\"\n")
                .reason
                .contains("unknown variant")
        );
        let p = problem(&format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[agents.\"bad id\"]\n"
        ));
        assert!(p.reason.contains("agent id"), "{}", p.reason);
        let p = problem(&format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[agents.main]\ntools = {{ profile = \"everything\" }}\n"
        ));
        assert!(p.reason.contains("unknown tool profile"), "{}", p.reason);
    }

    #[test]
    fn a_valid_file_resolves_models_fallbacks_and_defaults() {
        let c = parse_text(&format!(
            "{PROVIDER}[providers.a]\nkind = \"anthropic\"\n\n[models.default]\nprovider = \"p\"\nmodel = \"gpt-4.1-mini\"\nfallbacks = [\"a/claude-x\"]\n\n[agents.main]\nmodel = \"default\"\nmax_model_calls = 7\n\n[agents.helper]\nmodel = \"p/small\"\nworkspace = \"notes\"\n"
        ))
        .unwrap();
        let main = c.agent("main").unwrap();
        assert_eq!(
            main.models.iter().map(|m| m.label()).collect::<Vec<_>>(),
            ["p/gpt-4.1-mini", "a/claude-x"]
        );
        assert_eq!(main.models[0].context_window, None);
        assert_eq!(main.max_model_calls, 7);
        assert_eq!(
            main.workspace,
            PathBuf::from("/tmp/pincer-test-home/workspace")
        );
        let helper = c.agent("helper").unwrap();
        assert_eq!(
            helper.workspace,
            PathBuf::from("/tmp/pincer-test-home/notes")
        );
        assert_eq!(helper.max_turn_duration, Duration::from_secs(1800));
        assert_eq!(c.default_agent, "main");
        assert_eq!(c.providers["a"].base_url, "https://api.anthropic.com");
        assert!(c.provider_problem.is_none());
    }

    #[test]
    fn no_providers_and_nothing_detected_is_a_problem_not_an_error() {
        let c = parse_text("[agents.main]\n").unwrap();
        assert_eq!(c.provider_problem.as_deref(), Some(env::NO_PROVIDER));
        assert!(c.agent("main").unwrap().models.is_empty());
        let empty = parse_text("").unwrap();
        assert_eq!(empty.agents.keys().collect::<Vec<_>>(), ["main"]);
    }

    #[test]
    fn missing_api_key_env_is_reported_without_failing_the_load() {
        let c = parse_text("[providers.p]\nkind = \"openai\"\napi_key_env = \"PINCER_SURELY_UNSET_VAR\"\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\n").unwrap();
        match &c.providers["p"].api_key {
            ApiKey::Missing { problem } => assert!(problem.contains("$PINCER_SURELY_UNSET_VAR")),
            other => panic!("{other:?}"),
        }
        // The key's value never appears in Debug output.
        let shown = format!("{:?}", Secret("sk-very-secret".into()));
        assert!(!shown.contains("sk-very"));
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("数据\nx", 7), (2, 1));
        assert_eq!(line_col("", 10), (1, 1));
    }
}
