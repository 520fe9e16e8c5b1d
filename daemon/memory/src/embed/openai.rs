//! The `openai` embedder: any OpenAI-compatible `POST {base}/embeddings`
//! endpoint (OpenAI, Ollama, llama.cpp, vLLM…).

use std::sync::OnceLock;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::{EmbedError, Embedder, EmbedderId, normalise};

/// An endpoint, a model and an optional key.
pub struct OpenAiEmbedder {
    id: EmbedderId,
    url: String,
    api_key: Option<String>,
    http: reqwest::Client,
    /// Configured, or learnt from the first answer.
    dimensions: OnceLock<usize>,
}

/// Tries per request. A server that is busy (429) or still loading its
/// model (llama.cpp answers 503 meanwhile) gets two more chances; one that
/// cannot be reached fails at once, so a search with the endpoint down is
/// not held up (the next sync embeds what was missed).
const ATTEMPTS: u32 = 3;
/// The first wait between tries, doubled each time, unless the server
/// names one with `Retry-After` (honoured up to [`MAX_RETRY_AFTER`]).
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// `base_url` is the API root (`http://127.0.0.1:11434/v1`).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        dimensions: Option<usize>,
    ) -> Self {
        let dims = OnceLock::new();
        if let Some(d) = dimensions {
            let _ = dims.set(d);
        }
        Self {
            id: EmbedderId {
                provider: "openai".into(),
                model: model.into(),
            },
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            api_key,
            http,
            dimensions: dims,
        }
    }

    async fn call(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let fail = |reason: String| EmbedError::Endpoint {
            url: self.url.clone(),
            reason,
        };
        let mut attempt = 1;
        let response = loop {
            let mut request = self.http.post(&self.url).json(&serde_json::json!({
                "model": self.id.model,
                "input": texts,
            }));
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.map_err(|e| fail(e.to_string()))?;
            let status = response.status();
            if status.is_success() {
                break response;
            }
            let retry_after = retry_after(&response);
            let body = response.text().await.unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            let transient = status.as_u16() == 429 || status.is_server_error();
            let wait = retry_after.unwrap_or(FIRST_BACKOFF * 2u32.pow(attempt - 1));
            if !transient || attempt == ATTEMPTS || wait > MAX_RETRY_AFTER {
                return Err(fail(format!("HTTP {status}: {body}")));
            }
            tracing::debug!(url = %self.url, %status, ?wait, attempt, "embedding endpoint busy; trying again");
            tokio::time::sleep(wait).await;
            attempt += 1;
        };
        let mut parsed: Response = response
            .json()
            .await
            .map_err(|e| fail(format!("unexpected answer: {e}")))?;
        if parsed.data.len() != texts.len() {
            return Err(fail(format!(
                "{} vectors for {} texts",
                parsed.data.len(),
                texts.len()
            )));
        }
        parsed
            .data
            .sort_by_key(|item| item.index.unwrap_or(usize::MAX));
        let vectors: Vec<Vec<f32>> = parsed
            .data
            .into_iter()
            .map(|item| normalise(item.embedding))
            .collect();
        let dims = vectors.first().map(Vec::len).unwrap_or(0);
        if dims == 0 || vectors.iter().any(|v| v.len() != dims) {
            return Err(fail("vectors of different or zero length".into()));
        }
        let expected = *self.dimensions.get_or_init(|| dims);
        if expected != dims {
            return Err(fail(format!(
                "vectors of {dims} dimensions, expected {expected}"
            )));
        }
        Ok(vectors)
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not used by these APIs).
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?;
    let seconds: f64 = value.to_str().ok()?.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &EmbedderId {
        &self.id
    }

    fn dimensions(&self) -> BoxFuture<'_, Result<usize, EmbedError>> {
        async move {
            if let Some(d) = self.dimensions.get() {
                return Ok(*d);
            }
            self.call(&["dimension probe".to_string()]).await?;
            self.dimensions
                .get()
                .copied()
                .ok_or_else(|| EmbedError::Endpoint {
                    url: self.url.clone(),
                    reason: "no vector in the answer".into(),
                })
        }
        .boxed()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            self.call(texts).await
        }
        .boxed()
    }

    fn batch_size(&self) -> usize {
        64
    }
}
