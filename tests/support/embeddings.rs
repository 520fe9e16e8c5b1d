//! A minimal OpenAI-compatible `/v1/embeddings` endpoint for benches that
//! need a memory index with vectors and no model: the idle-RSS bench
//! (`daemon/benches/idle_rss.sh`) indexes 10,000 chunks through it in
//! seconds. Each text's vector is derived from the text alone (a seeded
//! generator from its hash), so the same text gets the same vector; the
//! vectors mean nothing, which an index's size and memory do not mind.
//!
//! What it speaks: `POST {base}/v1/embeddings` with `{"model", "input"}`
//! (a string or an array of strings), answered as OpenAI does:
//! `{"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
//! "model", "usage"}`; `dimensions` in the request is honoured. Anything
//! else is a 404.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A running endpoint on 127.0.0.1; it serves until the runtime ends.
#[derive(Clone)]
pub struct Embeddings {
    addr: SocketAddr,
    dimensions: usize,
    texts: Arc<AtomicU64>,
}

struct Shared {
    dimensions: usize,
    texts: Arc<AtomicU64>,
}

impl Embeddings {
    /// Starts the endpoint on a free port; vectors have `dimensions`
    /// unless a request asks for others.
    pub async fn start(dimensions: usize) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let texts = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(Shared {
            dimensions,
            texts: texts.clone(),
        });
        let app = Router::new().fallback(handle).with_state(shared);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            dimensions,
            texts,
        })
    }

    /// The `base_url` to configure (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// How many texts it has embedded.
    pub fn texts(&self) -> u64 {
        self.texts.load(Ordering::Relaxed)
    }
}

/// The vector of `text`: components uniform in -1..1 from a generator
/// seeded by the text's FNV-1a hash.
pub fn vector(text: &str, dimensions: usize) -> Vec<f32> {
    let mut seed = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    (0..dimensions)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    if method != Method::POST || uri.path().trim_end_matches('/') != "/v1/embeddings" {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": {"message": format!("no route {method} {}", uri.path())}})),
        )
            .into_response();
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": "the body is not JSON"}})),
        )
            .into_response();
    };
    let inputs: Vec<String> = match &request["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => Vec::new(),
    };
    let dimensions = request["dimensions"]
        .as_u64()
        .map_or(shared.dimensions, |d| d as usize);
    shared
        .texts
        .fetch_add(inputs.len() as u64, Ordering::Relaxed);
    let tokens: usize = inputs.iter().map(|t| t.len() / 4).sum();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            json!({"object": "embedding", "index": index, "embedding": vector(text, dimensions)})
        })
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "model": request["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}
