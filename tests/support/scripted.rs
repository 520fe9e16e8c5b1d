//! A zero-latency scripted LLM server speaking the OpenAI chat-completions
//! and Anthropic messages streaming formats. No real peer can be scripted
//! this precisely or answer this fast, so it serves the fast end-to-end
//! cases and the benches; fakellm and llmock cover the rest.
//!
//! A script is a list of [`Step`]s per conversation; a request belongs to
//! the conversation whose marker occurs in its first user message. Every
//! request body is kept in a journal for assertions.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// One scripted reply.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// Answer with this HTTP status and an error body instead.
    pub status: Option<u16>,
    /// `Retry-After` seconds sent with `status`.
    pub retry_after: Option<u64>,
    pub text: String,
    /// (name, raw arguments text — sent as-is, so it may be invalid JSON).
    pub tool_calls: Vec<(String, String)>,
    /// Stop before the stream's terminator (a truncated stream).
    pub truncate: bool,
    /// After the text, keep the stream open without finishing.
    pub hang: bool,
    /// `finish_reason` to report (default: stop or tool_calls).
    pub finish: Option<String>,
    /// The error message sent with `status` (default: "scripted HTTP N").
    pub error: Option<String>,
    /// Wait this long before answering (a model that thinks).
    pub delay: Option<Duration>,
}

impl Step {
    pub fn text(t: &str) -> Self {
        Self {
            text: t.into(),
            ..Default::default()
        }
    }
    pub fn tool(name: &str, args: Value) -> Self {
        Self {
            tool_calls: vec![(name.into(), args.to_string())],
            ..Default::default()
        }
    }
    pub fn tools(calls: &[(&str, Value)]) -> Self {
        Self {
            tool_calls: calls
                .iter()
                .map(|(n, a)| (n.to_string(), a.to_string()))
                .collect(),
            ..Default::default()
        }
    }
    pub fn raw_tool(name: &str, raw_args: &str) -> Self {
        Self {
            tool_calls: vec![(name.into(), raw_args.into())],
            ..Default::default()
        }
    }
    pub fn status(code: u16) -> Self {
        Self {
            status: Some(code),
            ..Default::default()
        }
    }
    /// This step, answered after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    /// An HTTP error with the provider's own words (e.g. a context overflow).
    pub fn error(code: u16, message: &str) -> Self {
        Self {
            status: Some(code),
            error: Some(message.into()),
            ..Default::default()
        }
    }
}

#[derive(Default)]
struct Inner {
    /// (marker, steps, repeat forever)
    scripts: Vec<(String, VecDeque<Step>, bool)>,
    journal: Vec<Value>,
    journal_off: bool,
    /// Report prompt tokens as a quarter of the request's bytes instead of
    /// the fixed 11 (for tests of context budgets).
    body_usage: bool,
}

/// A running scripted server; dropped with the test's runtime.
#[derive(Clone)]
pub struct ScriptedLlm {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl ScriptedLlm {
    /// Starts on an ephemeral loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let inner: Arc<Mutex<Inner>> = Arc::default();
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .route(
                "/v1/models",
                get(|| async { axum::Json(json!({"data": [{"id": "scripted"}]})) }),
            )
            .with_state(inner.clone())
            // A provider takes prompts of many megabytes (axum's default
            // limit is 2 MB): tests send such prompts on purpose.
            .layer(axum::extract::DefaultBodyLimit::max(64 << 20));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, inner })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds a conversation: requests whose first user message contains
    /// `marker` get `steps` in order.
    pub fn script(&self, marker: &str, steps: Vec<Step>) {
        self.lock()
            .scripts
            .push((marker.to_string(), steps.into(), false));
    }

    /// Like [`script`](Self::script), but the steps repeat forever (benches).
    pub fn script_cycle(&self, marker: &str, steps: Vec<Step>) {
        self.lock()
            .scripts
            .push((marker.to_string(), steps.into(), true));
    }

    /// Reports prompt tokens in proportion to each request's size, as a
    /// real provider would, instead of a constant.
    pub fn set_usage_from_body(&self, on: bool) {
        self.lock().body_usage = on;
    }

    /// Stops recording request bodies (long benches).
    pub fn set_journal(&self, on: bool) {
        self.lock().journal_off = !on;
    }

    /// Every request body received so far.
    pub fn journal(&self) -> Vec<Value> {
        self.lock().journal.clone()
    }

    /// Steps not yet consumed for `marker`.
    pub fn remaining(&self, marker: &str) -> usize {
        self.lock()
            .scripts
            .iter()
            .find(|(m, _, _)| m == marker)
            .map_or(0, |(_, s, _)| s.len())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A request body as the fake reads it. While the journal keeps bodies
/// (or usage is counted from a body's size) it is parsed whole, for the
/// tests' assertions; a bench turns the journal off, and then only the
/// messages and `stream` are read: a zero-latency model should not spend
/// a turn's time building the tools' schemas, most of a request's bytes,
/// into a value tree (that took more than the agent's own work per call).
struct Received {
    first_user: String,
    /// `"stream"` as sent.
    stream: Option<bool>,
    /// The whole body, when the journal or the usage needs it.
    whole: Option<Value>,
}

/// What a body is read into when only its messages matter; every other
/// field is skipped.
#[derive(serde::Deserialize)]
struct Lean {
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    messages: Vec<LeanMessage>,
}

#[derive(serde::Deserialize)]
struct LeanMessage {
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: Value,
}

impl Received {
    fn read(inner: &Arc<Mutex<Inner>>, bytes: &[u8]) -> Result<Self, Box<Response>> {
        let whole = {
            let inner = inner.lock().unwrap_or_else(|e| e.into_inner());
            !inner.journal_off || inner.body_usage
        };
        let refused = |e: serde_json::Error| {
            Box::new(
                (
                    StatusCode::BAD_REQUEST,
                    format!("scripted LLM: the body is not JSON: {e}"),
                )
                    .into_response(),
            )
        };
        if whole {
            let body: Value = serde_json::from_slice(bytes).map_err(refused)?;
            let messages = body.get("messages").and_then(Value::as_array);
            return Ok(Self {
                first_user: first_user_text(messages.into_iter().flatten().map(|m| {
                    (
                        m.get("role").and_then(Value::as_str).unwrap_or_default(),
                        m.get("content"),
                    )
                })),
                stream: body.get("stream").and_then(Value::as_bool),
                whole: Some(body),
            });
        }
        let lean: Lean = serde_json::from_slice(bytes).map_err(refused)?;
        Ok(Self {
            first_user: first_user_text(
                lean.messages
                    .iter()
                    .map(|m| (m.role.as_str(), Some(&m.content))),
            ),
            stream: lean.stream,
            whole: None,
        })
    }
}

/// The text of the first user message, from (role, content) pairs.
fn first_user_text<'a>(messages: impl Iterator<Item = (&'a str, Option<&'a Value>)>) -> String {
    for (role, content) in messages {
        if role != "user" {
            continue;
        }
        match content {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    if let Some(t) = b.get("text").and_then(Value::as_str) {
                        return t.to_string();
                    }
                }
            }
            _ => {}
        }
    }
    String::new()
}

fn next_step(inner: &Arc<Mutex<Inner>>, body: Received) -> Option<(Step, u64)> {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    let first = body.first_user;
    let prompt_tokens = match &body.whole {
        Some(whole) if inner.body_usage => (whole.to_string().len() / 4) as u64,
        _ => 11,
    };
    if !inner.journal_off
        && let Some(whole) = body.whole
    {
        inner.journal.push(whole);
    }
    let (_, steps, cycle) = inner
        .scripts
        .iter_mut()
        .find(|(marker, _, _)| first.contains(marker.as_str()))?;
    let step = steps.pop_front()?;
    if *cycle {
        steps.push_back(step.clone());
    }
    Some((step, prompt_tokens))
}

fn error_response(step: &Step, code: u16) -> Response {
    let mut resp = (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(
            json!({"error": {"message": step.error.clone().unwrap_or_else(|| format!("scripted HTTP {code}")), "type": "scripted"}}),
        ),
    )
        .into_response();
    if let Some(secs) = step.retry_after
        && let Ok(v) = secs.to_string().parse()
    {
        resp.headers_mut().insert("retry-after", v);
    }
    resp
}

fn sse(events: Vec<String>, hang: bool) -> Response {
    let stream =
        futures_util::stream::unfold((events.into_iter(), hang), |(mut it, hang)| async move {
            match it.next() {
                Some(e) => Some((Ok::<_, std::io::Error>(e), (it, hang))),
                None if hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    None
                }
                None => None,
            }
        });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn exhausted() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(
            json!({"error": {"message": "scripted LLM: no step left for this conversation"}}),
        ),
    )
        .into_response()
}

/// Splits `s` into up to three pieces on char boundaries (streamed deltas).
fn pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 3 {
        return vec![s.to_string()];
    }
    let third = chars.len() / 3;
    vec![
        chars[..third].iter().collect(),
        chars[third..2 * third].iter().collect(),
        chars[2 * third..].iter().collect(),
    ]
}

/// The next step for a request, or the response that replaces the stream:
/// an exhausted script, or a scripted HTTP error.
fn take_step(inner: &Arc<Mutex<Inner>>, body: Received) -> Result<(Step, u64), Box<Response>> {
    let (step, prompt_tokens) = next_step(inner, body).ok_or_else(|| Box::new(exhausted()))?;
    match step.status {
        Some(code) => Err(Box::new(error_response(&step, code))),
        None => Ok((step, prompt_tokens)),
    }
}

async fn openai(State(inner): State<Arc<Mutex<Inner>>>, bytes: axum::body::Bytes) -> Response {
    let body = match Received::read(&inner, &bytes) {
        Ok(body) => body,
        Err(response) => return *response,
    };
    // Peers that ask for a whole reply (`"stream": false`, e.g. ZeroClaw in
    // the bench's --peers lane) get one; an absent field keeps the stream
    // every existing caller gets.
    let whole = body.stream == Some(false);
    let (step, prompt_tokens) = match take_step(&inner, body) {
        Ok(step) => step,
        Err(response) => return *response,
    };
    if let Some(delay) = step.delay {
        tokio::time::sleep(delay).await;
    }
    if whole {
        return openai_whole(&step, prompt_tokens);
    }
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut events = vec![
        ": scripted\n\n".to_string(),
        chunk(json!({"role": "assistant"}), Value::Null),
    ];
    for piece in pieces(&step.text) {
        if !piece.is_empty() {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (i, (name, args)) in step.tool_calls.iter().enumerate() {
        events.push(chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}_{}", name), "type": "function", "function": {"name": name, "arguments": ""}}]}), Value::Null));
        for piece in pieces(args) {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    finish_stream(&step, events, ("stop", "tool_calls"), |stop| {
        vec![
            chunk(json!({}), json!(stop)),
            format!(
                "data: {}\n\n",
                json!({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7}})
            ),
            "data: [DONE]\n\n".into(),
        ]
    })
}

/// A non-streamed chat completion: the step's text and tool calls in one
/// body (a truncated or hanging step is sent whole: those test streams).
fn openai_whole(step: &Step, prompt_tokens: u64) -> Response {
    let calls: Vec<Value> = step
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("call_{i}_{name}"), "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": step.text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let finish = step.finish.clone().unwrap_or_else(|| {
        if step.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .to_string()
    });
    axum::Json(json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7},
    }))
    .into_response()
}

async fn anthropic(State(inner): State<Arc<Mutex<Inner>>>, bytes: axum::body::Bytes) -> Response {
    let body = match Received::read(&inner, &bytes) {
        Ok(body) => body,
        Err(response) => return *response,
    };
    let (step, prompt_tokens) = match take_step(&inner, body) {
        Ok(step) => step,
        Err(response) => return *response,
    };
    if let Some(delay) = step.delay {
        tokio::time::sleep(delay).await;
    }
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut events = vec![ev(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": prompt_tokens, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !step.text.is_empty() {
        events.push(ev("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        for piece in pieces(&step.text) {
            events.push(ev("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})));
        }
        events.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for (name, args) in &step.tool_calls {
        events.push(ev("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{index}"), "name": name, "input": {}}})));
        for piece in pieces(args) {
            events.push(ev("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})));
        }
        events.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    finish_stream(&step, events, ("end_turn", "tool_use"), |stop| {
        vec![
            ev(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}}),
            ),
            ev("message_stop", json!({"type": "message_stop"})),
        ]
    })
}

/// Ends a scripted stream as the step says: cut before the terminator,
/// left hanging, or finished with `finish(stop reason)`; the default stop
/// reason is `natural.0` for text and `natural.1` for tool calls.
fn finish_stream(
    step: &Step,
    mut events: Vec<String>,
    natural: (&str, &str),
    finish: impl FnOnce(&str) -> Vec<String>,
) -> Response {
    if step.truncate || step.hang {
        return sse(events, step.hang && !step.truncate);
    }
    let stop = step.finish.clone().unwrap_or_else(|| {
        if step.tool_calls.is_empty() {
            natural.0
        } else {
            natural.1
        }
        .to_string()
    });
    events.extend(finish(&stop));
    sse(events, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Posts `body` to /v1/chat/completions over plain HTTP/1.1 and
    /// answers the raw response.
    async fn post(llm: &ScriptedLlm, body: &Value) -> String {
        let mut tcp = tokio::net::TcpStream::connect(llm.addr).await.unwrap();
        let body = body.to_string();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        tcp.write_all((head + &body).as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn stream_false_gets_one_chat_completion_and_the_default_a_stream() {
        let llm = ScriptedLlm::start().await.unwrap();
        llm.script_cycle("", vec![Step::text("pong")]);
        let ask = |stream: Option<bool>| {
            let mut b = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
            if let Some(s) = stream {
                b["stream"] = json!(s);
            }
            b
        };
        let whole = post(&llm, &ask(Some(false))).await;
        assert!(whole.contains("content-type: application/json"), "{whole}");
        let json: Value = serde_json::from_str(whole.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(json["choices"][0]["message"]["content"], "pong");
        assert_eq!(json["choices"][0]["finish_reason"], "stop");
        for stream in [None, Some(true)] {
            let streamed = post(&llm, &ask(stream)).await;
            assert!(streamed.contains("text/event-stream"), "{streamed}");
            assert!(streamed.contains("data: [DONE]"), "{streamed}");
        }
    }
}
