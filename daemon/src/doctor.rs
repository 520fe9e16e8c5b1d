//! Diagnosis for `pincer doctor`: every finding is one sentence that says
//! what is wrong and what to do. Used offline (`pincerd doctor`) and by the
//! running daemon (`Daemon.Doctor`), which checks with its live config.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::config::{ApiKey, Config, ProviderKind, ProviderSettings};
use crate::home::Home;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub level: Level,
    pub subject: String,
    pub message: String,
}

fn finding(level: Level, subject: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding {
        level,
        subject: subject.into(),
        message: message.into(),
    }
}

/// Checks of the config and of every provider and agent it names.
pub async fn check_running(home: &Home, config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    out.push(match &config.source {
        Some(path) => finding(Level::Ok, "config", format!("{} is valid", path.display())),
        None => finding(
            Level::Ok,
            "config",
            format!(
                "no {} yet: running on zero-config defaults (`pincer init` writes a starter file)",
                home.config_file().display()
            ),
        ),
    });
    if let Some(problem) = &config.provider_problem {
        out.push(finding(Level::Error, "provider", problem.clone()));
    }
    for problem in &config.plugin_problems {
        out.push(finding(Level::Warn, "plugin", problem.clone()));
    }
    for plugin in &config.plugins {
        out.push(finding(
            Level::Ok,
            "plugin",
            format!("`{}` loaded from {}", plugin.id, plugin.dir.display()),
        ));
    }
    out.extend(check_dirs(home));
    for provider in config.providers.values() {
        out.push(check_provider(provider).await);
    }
    for agent in config.agents.values() {
        if agent.models.is_empty() && config.provider_problem.is_none() {
            out.push(finding(
                Level::Error,
                format!("agent {}", agent.id),
                "has no model; set `model` under its [agents] table",
            ));
        }
    }
    out
}

fn check_dirs(home: &Home) -> Vec<Finding> {
    let mut out = Vec::new();
    let run = home.run_dir();
    match std::fs::metadata(&run) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => out.push(finding(
            Level::Error,
            "socket",
            format!(
                "{} is readable by other users (mode {:o}); run `chmod 700 {}`",
                run.display(),
                m.permissions().mode() & 0o777,
                run.display()
            ),
        )),
        _ => {}
    }
    let sock = home.socket_path();
    if let Ok(m) = std::fs::metadata(&sock)
        && m.permissions().mode() & 0o077 != 0
    {
        out.push(finding(
            Level::Error,
            "socket",
            format!(
                "{} allows other users (mode {:o}); restart pincerd to recreate it as 0600",
                sock.display(),
                m.permissions().mode() & 0o777
            ),
        ));
    }
    out
}

/// Reachability and authentication of one provider, by listing its models.
pub async fn check_provider(p: &ProviderSettings) -> Finding {
    let subject = format!("provider {}", p.name);
    let key = match &p.api_key {
        ApiKey::Missing { problem } => {
            return finding(
                Level::Error,
                subject,
                format!("{problem}; export it before starting pincerd"),
            );
        }
        ApiKey::Found { value, .. } => Some(value.0.clone()),
        ApiKey::None => None,
    };
    crate::llm::client::install_crypto_provider();
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            return finding(
                Level::Error,
                subject,
                format!("cannot build an HTTP client: {e}"),
            );
        }
    };
    let url = match p.kind {
        ProviderKind::Openai => format!("{}/models", p.base_url),
        ProviderKind::Anthropic => {
            crate::llm::anthropic::endpoint(&p.base_url).replace("/messages", "/models")
        }
    };
    let mut req = client.get(&url);
    req = match (p.kind, key) {
        (ProviderKind::Openai, Some(k)) => req.bearer_auth(k),
        (ProviderKind::Anthropic, Some(k)) => req
            .header("x-api-key", k)
            .header("anthropic-version", crate::llm::anthropic::API_VERSION),
        (_, None) => req,
    };
    for (name, value) in &p.headers {
        req = req.header(name, value);
    }
    match req.send().await {
        Err(e) if e.is_timeout() => finding(
            Level::Error,
            subject,
            format!(
                "{} did not answer within 10 s; check base_url and the network",
                p.base_url
            ),
        ),
        Err(e) => finding(
            Level::Error,
            subject,
            format!(
                "cannot reach {} ({}); check base_url and that the server runs",
                p.base_url,
                root_cause(&e)
            ),
        ),
        Ok(r) if r.status().as_u16() == 401 || r.status().as_u16() == 403 => finding(
            Level::Error,
            subject,
            format!(
                "{} rejected the API key (HTTP {}); check the key pincerd reads",
                p.base_url,
                r.status().as_u16()
            ),
        ),
        Ok(r) if r.status().is_success() => finding(
            Level::Ok,
            subject,
            format!("{} is reachable and accepts the credentials", p.base_url),
        ),
        Ok(r) => finding(
            Level::Warn,
            subject,
            format!(
                "{} is reachable but answered HTTP {} for {url}; chat may still work",
                p.base_url,
                r.status().as_u16()
            ),
        ),
    }
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
