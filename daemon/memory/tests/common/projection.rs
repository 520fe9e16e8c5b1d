//! A stand-in for a sentence-embedding model where the model itself is not
//! what is measured or tested: a random projection of the bag of words
//! into unit vectors (texts sharing words are close), computed in
//! microseconds, that counts the texts it embeds and can be told to fail.
//! The real model is tested in `local_embedder.rs` and `retrieval_eval.rs`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use pincer_memory::embed::{EmbedError, Embedder, EmbedderId};

pub struct ProjectionEmbedder {
    id: EmbedderId,
    dims: usize,
    /// Texts embedded so far.
    pub embedded: AtomicUsize,
    /// When set, every call fails like an endpoint that is down.
    pub failing: AtomicBool,
    /// The `idle` of each `release_if_idle` asked so far.
    pub releases: Mutex<Vec<Duration>>,
}

impl ProjectionEmbedder {
    pub fn new(model: &str, dims: usize) -> Self {
        Self {
            id: EmbedderId {
                provider: "projection".into(),
                model: model.into(),
            },
            dims,
            embedded: AtomicUsize::new(0),
            failing: AtomicBool::new(false),
            releases: Mutex::new(Vec::new()),
        }
    }

    pub fn project(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        for word in text.split_whitespace() {
            let word = word
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase();
            let mut x = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            }) | 1;
            for slot in v.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *slot += if x & 1 == 0 { 1.0 } else { -1.0 };
            }
        }
        pincer_memory::embed::normalise(v)
    }
}

impl Embedder for ProjectionEmbedder {
    fn id(&self) -> &EmbedderId {
        &self.id
    }

    fn dimensions(&self) -> BoxFuture<'_, Result<usize, EmbedError>> {
        Box::pin(async move {
            if self.failing.load(Ordering::SeqCst) {
                return Err(EmbedError::Endpoint {
                    url: "http://127.0.0.1:9/v1/embeddings".into(),
                    reason: "connection refused".into(),
                });
            }
            Ok(self.dims)
        })
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if self.failing.load(Ordering::SeqCst) {
                return Err(EmbedError::Endpoint {
                    url: "http://127.0.0.1:9/v1/embeddings".into(),
                    reason: "connection refused".into(),
                });
            }
            self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| self.project(t)).collect())
        })
    }

    fn batch_size(&self) -> usize {
        256
    }

    fn release_if_idle(&self, idle: Duration) -> bool {
        self.releases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(idle);
        false
    }
}
