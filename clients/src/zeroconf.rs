//! The provider pincerd's zero-config would pick from this environment, for
//! `pincer init` when no daemon answers. It mirrors
//! `daemon/src/config/env.rs` rule for rule (the CLI does not depend on the
//! daemon crate): `OPENAI_API_KEY` (+ `OPENAI_BASE_URL`),
//! `ANTHROPIC_API_KEY` (+ `ANTHROPIC_BASE_URL`), `OPENROUTER_API_KEY`
//! (+ `OPENROUTER_BASE_URL`), then a server answering HTTP on
//! 127.0.0.1:11434 or :8080; `PINCER_MODEL` names the model. Change both
//! files together.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A provider and model, as `init` writes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub id: String,
    pub kind: String,
    pub base_url: String,
    /// Empty: no key (a local server).
    pub api_key_env: String,
    pub tool_format: String,
    pub model: String,
    /// 0: let pincerd pick by model family.
    pub context_window: u64,
}

/// Looks at the process environment and the local ports.
pub fn detect() -> Option<Found> {
    detect_with(
        &|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()),
        &probe_local,
    )
}

pub fn detect_with(
    var: &dyn Fn(&str) -> Option<String>,
    probe: &dyn Fn(u16) -> Option<Vec<String>>,
) -> Option<Found> {
    let chosen_model = var("PINCER_MODEL");
    let keyed = [
        (
            "openai",
            "openai",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "https://api.openai.com/v1",
            "gpt-4.1-mini",
        ),
        (
            "anthropic",
            "anthropic",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "https://api.anthropic.com",
            "claude-sonnet-4-5",
        ),
        (
            "openrouter",
            "openai",
            "OPENROUTER_API_KEY",
            "OPENROUTER_BASE_URL",
            "https://openrouter.ai/api/v1",
            "openai/gpt-4.1-mini",
        ),
    ];
    for (id, kind, key_var, url_var, default_url, default_model) in keyed {
        if var(key_var).is_some() {
            let base_url = var(url_var).unwrap_or_else(|| default_url.to_string());
            let model = chosen_model
                .clone()
                .unwrap_or_else(|| default_model.to_string());
            return Some(found(id, kind, &base_url, key_var, model));
        }
    }
    for port in [11434u16, 8080] {
        if let Some(models) = probe(port) {
            let model = chosen_model
                .clone()
                .or_else(|| models.into_iter().next())
                .unwrap_or_else(|| "default".to_string());
            let url = format!("http://127.0.0.1:{port}/v1");
            return Some(found("local", "openai", &url, "", model));
        }
    }
    None
}

fn found(id: &str, kind: &str, base_url: &str, key_var: &str, model: String) -> Found {
    Found {
        id: id.to_string(),
        kind: kind.to_string(),
        base_url: base_url.trim_end_matches('/').to_string(),
        api_key_env: key_var.to_string(),
        tool_format: "native".to_string(),
        model,
        context_window: 0,
    }
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
    fn the_order_and_overrides_match_the_daemon() {
        let f = detect_with(
            &env(&[
                ("OPENAI_API_KEY", "sk"),
                ("OPENAI_BASE_URL", "http://h:1/v1/"),
                ("ANTHROPIC_API_KEY", "a"),
                ("PINCER_MODEL", "m"),
            ]),
            &|_| None,
        );
        let f = f.as_ref();
        assert_eq!(f.map(|f| f.base_url.as_str()), Some("http://h:1/v1"));
        assert_eq!(f.map(|f| f.model.as_str()), Some("m"));
        let a = detect_with(&env(&[("ANTHROPIC_API_KEY", "a")]), &|_| None);
        assert_eq!(a.as_ref().map(|f| f.kind.as_str()), Some("anthropic"));
        assert_eq!(
            a.as_ref().map(|f| f.model.as_str()),
            Some("claude-sonnet-4-5")
        );
        let r = detect_with(&env(&[("OPENROUTER_API_KEY", "r")]), &|_| None);
        assert_eq!(
            r.map(|f| f.base_url),
            Some("https://openrouter.ai/api/v1".to_string())
        );
        let local = detect_with(&env(&[]), &|p| (p == 8080).then(|| vec!["qwen".into()]));
        assert_eq!(
            local.map(|f| (f.base_url, f.model, f.api_key_env)),
            Some((
                "http://127.0.0.1:8080/v1".to_string(),
                "qwen".to_string(),
                String::new()
            ))
        );
        assert_eq!(detect_with(&env(&[]), &|_| None), None);
    }
}
