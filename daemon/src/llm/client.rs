//! [`ModelClient`]: one model call, streamed, with retries, fallbacks and
//! abort. It owns an HTTP client per provider and knows nothing about
//! sessions or tools.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::retry::{self, Decision};
use super::sse::SseDecoder;
use super::toolcall;
use super::{LlmError, Reply, ReplyBuilder, Request, anthropic, openai};
use crate::config::{ApiKey, ModelTarget, ProviderKind, ProviderSettings, ToolFormat};

/// Progress reported while a call runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// Streamed answer text.
    Text(String),
    /// The call failed and will be retried after `delay`.
    Retrying {
        attempt: u32,
        delay: Duration,
        reason: String,
        model: String,
    },
}

/// Largest error body kept for messages.
const MAX_ERROR_BODY: usize = 4096;

/// Calls models; cheap to share behind an `Arc`.
pub struct ModelClient {
    providers: BTreeMap<String, ProviderSettings>,
    http: HashMap<String, reqwest::Client>,
}

impl ModelClient {
    pub fn new(providers: &BTreeMap<String, ProviderSettings>) -> Result<Self, LlmError> {
        // One TLS setup for all providers: the roots load once, when a
        // first HTTPS provider is called, not here at start (`tls.rs`).
        let tls = super::tls::client_config().map_err(|e| {
            LlmError::NotConfigured(format!("cannot set up TLS for the providers: {e}"))
        })?;
        let mut http = HashMap::new();
        for (name, p) in providers {
            let client = reqwest::Client::builder()
                .use_preconfigured_tls(tls.clone())
                .connect_timeout(p.connect_timeout)
                .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| {
                    LlmError::NotConfigured(format!(
                        "provider `{name}`: cannot build its HTTP client: {e}"
                    ))
                })?;
            http.insert(name.clone(), client);
        }
        Ok(Self {
            providers: providers.clone(),
            http,
        })
    }

    /// Runs `request` against `targets` in order (primary, then fallbacks),
    /// retrying each per its provider's policy. Returns the reply and the
    /// target that produced it.
    pub async fn complete(
        &self,
        targets: &[ModelTarget],
        request: &Request,
        on: &mut (dyn FnMut(Note) + Send),
        cancel: &CancellationToken,
    ) -> Result<(Reply, ModelTarget), LlmError> {
        let mut last_error =
            LlmError::NotConfigured("no model is configured for this agent".into());
        for target in targets {
            let Some(provider) = self.providers.get(&target.provider) else {
                last_error = LlmError::NotConfigured(format!(
                    "provider `{}` is not configured",
                    target.provider
                ));
                continue;
            };
            match self
                .with_retries(provider, target, request, on, cancel)
                .await
            {
                Ok(reply) => return Ok((reply, target.clone())),
                Err(LlmError::Aborted) => return Err(LlmError::Aborted),
                Err(e) => {
                    tracing::warn!(model = %target.label(), error = %e, "model failed; trying the next fallback if any");
                    last_error = e;
                }
            }
        }
        Err(last_error)
    }

    async fn with_retries(
        &self,
        provider: &ProviderSettings,
        target: &ModelTarget,
        req: &Request,
        on: &mut (dyn FnMut(Note) + Send),
        cancel: &CancellationToken,
    ) -> Result<Reply, LlmError> {
        let mut attempts = 0;
        let mut retried_repetition = false;
        loop {
            attempts += 1;
            let result = self.attempt(provider, target, req, on, cancel).await;
            let error = match result {
                Ok(mut reply) => match runaway_repetition(&reply.text) {
                    Some(_) if !retried_repetition => {
                        retried_repetition = true;
                        LlmError::Stream {
                            message: "the reply kept repeating itself".into(),
                            retryable: true,
                        }
                    }
                    Some(cut) => {
                        reply.text.truncate(cut);
                        reply
                            .text
                            .push_str("\n[reply cut: it kept repeating itself]");
                        return Ok(reply);
                    }
                    None => return Ok(reply),
                },
                Err(e) => e,
            };
            match retry::decide(&error, attempts, &provider.retry) {
                Decision::GiveUp => return Err(error),
                Decision::RetryAfter(delay) => {
                    tracing::info!(model = %target.label(), attempt = attempts, ?delay, error = %error, "retrying model call");
                    on(Note::Retrying {
                        attempt: attempts,
                        delay,
                        reason: error.to_string(),
                        model: target.label(),
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = cancel.cancelled() => return Err(LlmError::Aborted),
                    }
                }
            }
        }
    }

    /// One HTTP request and its stream.
    async fn attempt(
        &self,
        provider: &ProviderSettings,
        target: &ModelTarget,
        req: &Request,
        on: &mut (dyn FnMut(Note) + Send),
        cancel: &CancellationToken,
    ) -> Result<Reply, LlmError> {
        let offered = &req.tools;
        let http = self.http.get(&provider.name).ok_or_else(|| {
            LlmError::NotConfigured(format!("provider `{}` has no HTTP client", provider.name))
        })?;
        let key = match &provider.api_key {
            ApiKey::Missing { problem } => return Err(LlmError::NotConfigured(problem.clone())),
            ApiKey::Found { value, .. } => Some(value.0.as_str()),
            ApiKey::None => None,
        };
        // Text formats: tools go into the prompt, calls come back as text.
        // Native replies' text is never parsed for calls (see `toolcall`).
        let text_request;
        let text_format = provider.tool_format != ToolFormat::Native;
        let req = if text_format {
            text_request = toolcall::render::to_text_request(req, provider.tool_format);
            &text_request
        } else {
            req
        };
        let mut display = text_format.then(|| toolcall::stream::DisplayFilter::new(offered));
        let (url, body) = match provider.kind {
            ProviderKind::Openai => (
                openai::endpoint(&provider.base_url),
                serde_json::to_vec(&openai::body(req, target)),
            ),
            ProviderKind::Anthropic => (
                anthropic::endpoint(&provider.base_url),
                serde_json::to_vec(&anthropic::body(req, target)),
            ),
        };
        let body =
            body.map_err(|e| LlmError::Protocol(format!("cannot write the request: {e}")))?;
        let mut builder = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .header("accept", "text/event-stream");
        builder = match (provider.kind, key) {
            (ProviderKind::Openai, Some(k)) => builder.bearer_auth(k),
            (ProviderKind::Anthropic, Some(k)) => builder.header("x-api-key", k),
            (_, None) => builder,
        };
        if provider.kind == ProviderKind::Anthropic {
            builder = builder.header("anthropic-version", anthropic::API_VERSION);
        }
        for (name, value) in &provider.headers {
            builder = builder.header(name, value);
        }

        let response = tokio::select! {
            r = tokio::time::timeout(provider.idle_timeout, builder.send()) => match r {
                Err(_) => return Err(LlmError::Timeout),
                Ok(Err(e)) => return Err(classify(e, provider)),
                Ok(Ok(r)) => r,
            },
            _ = cancel.cancelled() => return Err(LlmError::Aborted),
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(retry::parse_retry_after);
            let body = response.text().await.unwrap_or_default();
            return Err(LlmError::Http {
                status: status.as_u16(),
                message: error_message(&body),
                retry_after,
            });
        }

        let mut sse = SseDecoder::new();
        let mut decoder = Decoder::new(provider.kind);
        let mut reply = ReplyBuilder::default();
        let mut stream = response.bytes_stream();
        loop {
            let chunk = tokio::select! {
                c = tokio::time::timeout(provider.idle_timeout, stream.next()) => match c {
                    Err(_) => return Err(LlmError::Timeout),
                    Ok(c) => c,
                },
                _ = cancel.cancelled() => return Err(LlmError::Aborted),
            };
            let ended = chunk.is_none();
            let events = match chunk {
                Some(Ok(bytes)) => sse.push(&bytes),
                Some(Err(e)) => {
                    return Err(LlmError::Truncated(format!(
                        "connection broke mid-stream: {e}"
                    )));
                }
                None => sse.finish(),
            };
            for event in &events {
                for delta in decoder.event(event)? {
                    if let super::Delta::Text(t) = &delta {
                        let shown = match display.as_mut() {
                            Some(filter) => filter.push(t),
                            None => t.clone(),
                        };
                        if !shown.is_empty() {
                            on(Note::Text(shown));
                        }
                    }
                    reply.apply(delta);
                }
            }
            if decoder.finished() {
                let mut reply = reply.finish();
                if let Some(mut filter) = display {
                    let rest = filter.finish();
                    if !rest.is_empty() {
                        on(Note::Text(rest));
                    }
                    read_text_calls(&mut reply, offered);
                }
                return Ok(reply);
            }
            if ended {
                return Err(LlmError::Truncated(match provider.kind {
                    ProviderKind::Openai => "no `data: [DONE]`".into(),
                    ProviderKind::Anthropic => "no `message_stop` event".into(),
                }));
            }
        }
    }
}

/// Moves the calls written in a text-format reply into `tool_calls`,
/// leaving the prose as its text; unreadable markup becomes
/// `markup_problems`.
fn read_text_calls(reply: &mut Reply, offered: &[super::ToolSpec]) {
    let parsed = toolcall::parse(&reply.text, offered);
    let first = reply.tool_calls.len();
    reply.tool_calls.extend(
        parsed
            .calls
            .into_iter()
            .enumerate()
            .map(|(n, c)| super::ToolCall {
                id: format!("call_{}", first + n),
                name: c.name,
                arguments: serde_json::Value::Object(c.arguments).to_string(),
            }),
    );
    reply.text = parsed.prose;
    reply.markup_problems = parsed.problems;
    if !reply.tool_calls.is_empty() && reply.finish == super::FinishReason::Stop {
        reply.finish = super::FinishReason::ToolCalls;
    }
}

enum Decoder {
    OpenAi(openai::Decoder),
    Anthropic(anthropic::Decoder),
}

impl Decoder {
    fn new(kind: ProviderKind) -> Self {
        match kind {
            ProviderKind::Openai => Self::OpenAi(Default::default()),
            ProviderKind::Anthropic => Self::Anthropic(Default::default()),
        }
    }
    fn event(&mut self, ev: &super::sse::SseEvent) -> Result<Vec<super::Delta>, LlmError> {
        match self {
            Self::OpenAi(d) => d.event(ev),
            Self::Anthropic(d) => d.event(ev),
        }
    }
    fn finished(&self) -> bool {
        match self {
            Self::OpenAi(d) => d.finished(),
            Self::Anthropic(d) => d.finished(),
        }
    }
}

/// A request that got no response. A connection that could not be made
/// (name not resolved, refused, connect timeout) names the provider and
/// what to check; other timeouts are their own case; every other transport
/// failure (reset, TLS) is a connection error, retried.
fn classify(e: reqwest::Error, provider: &ProviderSettings) -> LlmError {
    let unreachable = |cause| LlmError::Unreachable {
        provider: provider.name.clone(),
        base_url: provider.base_url.clone(),
        cause,
    };
    if let Some(cause) = connect_failure(&e) {
        unreachable(cause)
    } else if e.is_timeout() {
        LlmError::Timeout
    } else {
        LlmError::Connect(source_chain(&e))
    }
}

/// Why a connection could not be made, if that is what `e` says. The
/// resolver's failure is known only by hyper-util's message ("dns error"):
/// the resolver's own error type differs per platform.
fn connect_failure(e: &reqwest::Error) -> Option<super::Unreachable> {
    if !e.is_connect() {
        return None;
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.to_string() == "dns error" {
            return Some(super::Unreachable::Dns);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return Some(super::Unreachable::Refused);
        }
        cur = err.source();
    }
    e.is_timeout().then_some(super::Unreachable::TimedOut)
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        cur = inner.source();
    }
    s
}

/// The `error.message` of a JSON error body, else the body itself (capped).
fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error").filter(|e| e.is_string()))
                .and_then(|m| m.as_str().map(str::to_string))
        })
        .unwrap_or_else(|| crate::util::preview(body.trim(), MAX_ERROR_BODY))
}

/// If the text ends by repeating its last 50 characters more than 5 times,
/// returns where the repetition starts (SPEC §7: cut and retried once).
pub fn runaway_repetition(text: &str) -> Option<usize> {
    const UNIT: usize = 50;
    const MAX_REPEATS: usize = 5;
    if text.len() < UNIT * (MAX_REPEATS + 1) {
        return None;
    }
    let mut start = text.len() - UNIT;
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let unit = &text[start..];
    let mut count = 1;
    let mut pos = start;
    while pos >= unit.len() && text.get(pos - unit.len()..pos) == Some(unit) {
        count += 1;
        pos -= unit.len();
    }
    (count > MAX_REPEATS).then_some(pos + unit.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetition_is_detected_only_past_five_repeats() {
        let unit = "the same fifty characters again and again, always!";
        assert_eq!(unit.len(), 50);
        let five = format!("Intro. {}", unit.repeat(5));
        assert_eq!(runaway_repetition(&five), None);
        let text = format!("Intro. {}", unit.repeat(8));
        let cut = runaway_repetition(&text).unwrap();
        assert_eq!(&text[..cut], format!("Intro. {unit}"));
        assert_eq!(runaway_repetition("short"), None);
    }

    fn provider(name: &str, base_url: &str) -> ProviderSettings {
        ProviderSettings {
            name: name.into(),
            kind: ProviderKind::Openai,
            base_url: base_url.into(),
            api_key: ApiKey::None,
            tool_format: ToolFormat::Native,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            retry: crate::config::RetrySettings {
                max_attempts: 6,
                initial_backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(30),
                max_retry_after: Duration::from_secs(60),
            },
            headers: BTreeMap::new(),
        }
    }

    fn target(provider: &str) -> ModelTarget {
        ModelTarget {
            provider: provider.into(),
            model: "m".into(),
            context_window: Some(8192),
            max_output_tokens: 100,
            temperature: None,
            vision: false,
            price: None,
        }
    }

    /// A port on this machine that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    async fn call(
        providers: Vec<ProviderSettings>,
    ) -> (Result<(Reply, ModelTarget), LlmError>, Vec<Note>, Duration) {
        let targets: Vec<ModelTarget> = providers.iter().map(|p| target(&p.name)).collect();
        let map = providers.into_iter().map(|p| (p.name.clone(), p)).collect();
        let client = ModelClient::new(&map).unwrap();
        let request = Request {
            system: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
        };
        let mut notes = Vec::new();
        let started = std::time::Instant::now();
        let result = client
            .complete(
                &targets,
                &request,
                &mut |n| notes.push(n),
                &CancellationToken::new(),
            )
            .await;
        (result, notes, started.elapsed())
    }

    #[tokio::test]
    async fn a_refused_connection_fails_at_once_without_retries() {
        let url = format!("http://127.0.0.1:{}/v1", closed_port());
        let (result, notes, took) = call(vec![provider("local", &url)]).await;
        assert_eq!(
            result.unwrap_err(),
            LlmError::Unreachable {
                provider: "local".into(),
                base_url: url,
                cause: super::super::Unreachable::Refused,
            }
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert!(took < Duration::from_millis(900), "{took:?}");
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_fails_at_once_and_fallbacks_still_run() {
        // `.invalid` never resolves (RFC 6761), with or without a network.
        let dead = provider("primary", "http://pincer-test.invalid/v1");
        let url = format!("http://127.0.0.1:{}/v1", closed_port());
        let (result, notes, took) = call(vec![dead, provider("fallback", &url)]).await;
        // The fallback was tried: its error is the one reported.
        assert!(
            matches!(result, Err(LlmError::Unreachable { ref provider, .. }) if provider == "fallback"),
            "{result:?}"
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert!(took < Duration::from_millis(900), "{took:?}");
        let (result, _, _) = call(vec![provider("p", "http://pincer-test.invalid/v1")]).await;
        assert!(
            matches!(
                result,
                Err(LlmError::Unreachable {
                    cause: super::super::Unreachable::Dns,
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn error_bodies_become_messages() {
        assert_eq!(
            error_message(r#"{"error":{"message":"Rate limited","type":"x"}}"#),
            "Rate limited"
        );
        assert_eq!(error_message("plain failure"), "plain failure");
    }
}
