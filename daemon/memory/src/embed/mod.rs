//! Embedders (SPEC §10) behind one trait: [`local`] runs a sentence-embedding
//! BERT model in-process with candle, [`openai`] any OpenAI-compatible
//! `/v1/embeddings` endpoint, and `bundled` (feature `bundled-embedder`) a
//! small model compiled into the binary, for comparison in the retrieval
//! evaluation only. "No embedder" is `None` where an embedder is expected,
//! never a fake one: the index then says plainly that the vector leg is off.

#[cfg(feature = "bundled-embedder")]
pub mod bundled;
#[cfg(feature = "local-embedder")]
pub mod local;
pub mod openai;

use std::time::Duration;

use futures_util::future::BoxFuture;

/// Which model produced a vector: the embedding cache and the index's
/// `meta` are keyed by it, so a change of model never mixes vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderId {
    /// `local`, `bundled` or `openai`.
    pub provider: String,
    pub model: String,
}

impl std::fmt::Display for EmbedderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot load the embedding model from {path}: {reason}")]
    Load { path: String, reason: String },
    #[error("the embedding model failed: {0}")]
    Inference(String),
    #[error("the embeddings endpoint {url} failed: {reason}")]
    Endpoint { url: String, reason: String },
}

/// Turns texts into unit-length vectors.
pub trait Embedder: Send + Sync {
    fn id(&self) -> &EmbedderId;

    /// The length of every vector (may ask the endpoint once).
    fn dimensions(&self) -> BoxFuture<'_, Result<usize, EmbedError>>;

    /// One vector per text, in order.
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;

    /// Texts per call that keep memory and latency reasonable.
    fn batch_size(&self) -> usize {
        16
    }

    /// Frees what a model holds in memory when unused for `idle`; it is
    /// loaded again on the next call. Returns true when it freed something.
    fn release_if_idle(&self, _idle: Duration) -> bool {
        false
    }
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}
