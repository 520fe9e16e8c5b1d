//! The providers: each one reached and its key accepted, by listing its
//! models.

use std::time::Duration;

use super::{Finding, Level, finding};
use crate::config::{ApiKey, ProviderKind, ProviderSettings};

/// Reachability and authentication of one provider, by listing its models.
pub async fn check_provider(p: &ProviderSettings) -> Finding {
    let subject = format!("provider {}", p.name);
    let key = match &p.api_key {
        // The sentence `Config::provider_problems` gives `pincer status`.
        ApiKey::Missing { problem } => return finding(Level::Error, subject, problem.clone()),
        ApiKey::Found { value, .. } => Some(value.0.clone()),
        ApiKey::None => None,
    };
    crate::llm::tls::install_crypto_provider();
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
