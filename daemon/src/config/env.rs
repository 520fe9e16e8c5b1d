//! Zero-config provider detection (SPEC §5, last paragraph): with no
//! `[providers]` in the config, the daemon looks at the environment and at
//! local OpenAI-compatible servers, in this order: `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY`, `OPENROUTER_API_KEY`, 127.0.0.1:11434, 127.0.0.1:8080.
//! `PINCER_MODEL` names the model.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::{
    ApiKey, ModelTarget, ProviderKind, ProviderSettings, RetrySettings, Secret, ToolFormat,
};

/// What a chat answers when nothing could be found.
pub const NO_PROVIDER: &str = "No model provider is configured: set OPENAI_API_KEY (optionally with OPENAI_BASE_URL), ANTHROPIC_API_KEY or OPENROUTER_API_KEY in pincerd's environment, start a local OpenAI-compatible server on 127.0.0.1:11434 or 127.0.0.1:8080, or add a [providers] section to config.toml (see `pincer init`).";

/// The providers zero-config looks for, in this order: name, kind, the
/// key's variable, the base URL's variable, the default URL and model.
const KEYED: &[(&str, ProviderKind, &str, &str, &str, &str)] = &[
    (
        "openai",
        ProviderKind::Openai,
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        "gpt-4.1-mini",
    ),
    (
        "anthropic",
        ProviderKind::Anthropic,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
        "claude-sonnet-4-5",
    ),
    (
        "openrouter",
        ProviderKind::Openai,
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
        "https://openrouter.ai/api/v1",
        "openai/gpt-4.1-mini",
    ),
];

/// Local ports probed for an OpenAI-compatible server, in this order.
const LOCAL_PORTS: [u16; 2] = [11434, 8080];

/// What `pincerd zero-config` says when [`detect`] finds nothing: what it
/// looked for, and how to configure a provider.
pub fn nothing_found() -> String {
    let ports: Vec<String> = LOCAL_PORTS
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let keys: Vec<&str> = KEYED.iter().map(|k| k.2).collect();
    format!(
        "no model provider found: none of {} is set in this environment, and no OpenAI-compatible server answers on {}. Set one of those keys (OPENAI_BASE_URL points OPENAI_API_KEY at another OpenAI-compatible server), start a local server, or add a [providers] section to config.toml (`pincer init` writes one).",
        keys.join(", "),
        ports.join(" or ")
    )
}

/// A provider found in the environment and the model to use with it.
#[derive(Debug, Clone)]
pub struct Detected {
    pub provider: ProviderSettings,
    pub target: ModelTarget,
}

/// Looks at the process environment and local ports.
pub fn detect() -> Option<Detected> {
    detect_with(
        &|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()),
        &probe_local,
    )
}

/// Detection with injectable environment and port probe, for tests.
pub fn detect_with(
    var: &dyn Fn(&str) -> Option<String>,
    probe: &dyn Fn(u16) -> Option<Vec<String>>,
) -> Option<Detected> {
    let chosen_model = var("PINCER_MODEL");
    for &(name, kind, key_var, url_var, default_url, default_model) in KEYED {
        if let Some(key) = var(key_var) {
            let base_url = var(url_var).unwrap_or_else(|| default_url.to_string());
            let model = chosen_model
                .clone()
                .unwrap_or_else(|| default_model.to_string());
            return Some(build(
                name,
                kind,
                base_url,
                ApiKey::Found {
                    origin: format!("${key_var}"),
                    value: Secret(key.trim().to_string()),
                },
                model,
            ));
        }
    }
    for port in LOCAL_PORTS {
        if let Some(models) = probe(port) {
            let model = chosen_model
                .clone()
                .or_else(|| models.into_iter().next())
                .unwrap_or_else(|| "default".to_string());
            return Some(build(
                "local",
                ProviderKind::Openai,
                format!("http://127.0.0.1:{port}/v1"),
                ApiKey::None,
                model,
            ));
        }
    }
    None
}

fn build(
    name: &str,
    kind: ProviderKind,
    base_url: String,
    api_key: ApiKey,
    model: String,
) -> Detected {
    let provider = ProviderSettings {
        name: name.to_string(),
        kind,
        base_url: base_url.trim_end_matches('/').to_string(),
        api_key,
        tool_format: ToolFormat::Native,
        connect_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(300),
        retry: RetrySettings {
            max_attempts: 6,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        },
        headers: BTreeMap::new(),
    };
    let target = ModelTarget {
        provider: name.to_string(),
        context_window: None,
        model,
        max_output_tokens: 4096,
        temperature: None,
        vision: false,
        price: None,
    };
    Detected { provider, target }
}

/// Asks a local server for `/v1/models`; `Some` (possibly empty) when
/// something answers HTTP on the port.
fn probe_local(port: u16) -> Option<Vec<String>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(150)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream
        .write_all(
            b"GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n",
        )
        .ok()?;
    let mut response = Vec::new();
    let _ = stream.take(1 << 20).read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    if !text.starts_with("HTTP/") {
        return None;
    }
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let ids = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("data").and_then(|d| d.as_array()).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
        .collect();
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_found_says_what_was_looked_for() {
        assert!(detect_with(&env(&[]), &|_| None).is_none());
        let said = nothing_found();
        for needle in [
            "OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENROUTER_API_KEY",
            "127.0.0.1:11434 or 127.0.0.1:8080",
            "[providers]",
            "pincer init",
        ] {
            assert!(said.contains(needle), "{needle}: {said}");
        }
    }

    #[test]
    fn openai_key_wins_and_base_url_is_honoured() {
        let d = detect_with(
            &env(&[
                ("OPENAI_API_KEY", "sk-x"),
                ("OPENAI_BASE_URL", "http://h:1/v1/"),
                ("ANTHROPIC_API_KEY", "a"),
            ]),
            &|_| None,
        )
        .unwrap();
        assert_eq!(d.provider.name, "openai");
        assert_eq!(d.provider.base_url, "http://h:1/v1");
        assert_eq!(d.target.model, "gpt-4.1-mini");
    }

    #[test]
    fn pincer_model_names_the_model() {
        let d = detect_with(
            &env(&[("ANTHROPIC_API_KEY", "a"), ("PINCER_MODEL", "claude-x")]),
            &|_| None,
        )
        .unwrap();
        assert_eq!(d.provider.kind, ProviderKind::Anthropic);
        assert_eq!(d.target.model, "claude-x");
    }

    #[test]
    fn local_server_is_used_with_its_first_model() {
        let d = detect_with(&env(&[]), &|port| {
            (port == 8080).then(|| vec!["qwen".to_string()])
        })
        .unwrap();
        assert_eq!(d.provider.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(d.provider.api_key, ApiKey::None);
        assert_eq!(d.target.model, "qwen");
    }

    #[test]
    fn nothing_found_is_none() {
        assert!(detect_with(&env(&[]), &|_| None).is_none());
    }
}
