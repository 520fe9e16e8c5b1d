//! The `bundled` embedder: pocket-encoder's 4-bit paraphrase-MiniLM-L3-v2,
//! compiled into the binary. It is kept for the retrieval evaluation
//! (`tests/retrieval_eval.rs`), which measured it against the downloaded
//! all-MiniLM-L6-v2 and found it worse than full-text search alone by MRR,
//! for 10 MB more binary; pincerd does not offer it. Its weights stay loaded
//! once used (the crate keeps them in a static).

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::{EmbedError, Embedder, EmbedderId};

pub struct BundledEmbedder {
    id: EmbedderId,
}

impl Default for BundledEmbedder {
    fn default() -> Self {
        Self {
            id: EmbedderId {
                provider: "bundled".into(),
                model: "paraphrase-MiniLM-L3-v2-q4".into(),
            },
        }
    }
}

impl BundledEmbedder {
    pub fn embed_blocking(texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encoder =
            pocket_encoder::Encoder::new().map_err(|e| EmbedError::Inference(e.to_string()))?;
        // The encoder refuses empty texts; they embed as zero vectors.
        let mut out = vec![Vec::new(); texts.len()];
        let keep: Vec<usize> = (0..texts.len())
            .filter(|&i| !texts[i].trim().is_empty())
            .collect();
        let inputs: Vec<&str> = keep
            .iter()
            .map(|&i| {
                let t = texts[i].as_str();
                let mut end = t.len().min(60 * 1024);
                while !t.is_char_boundary(end) {
                    end -= 1;
                }
                &t[..end]
            })
            .collect();
        let vectors = encoder
            .embed(&inputs)
            .map_err(|e| EmbedError::Inference(e.to_string()))?;
        for (i, v) in keep.into_iter().zip(vectors) {
            out[i] = v;
        }
        for v in &mut out {
            if v.is_empty() {
                *v = vec![0.0; 384];
            }
        }
        Ok(out)
    }
}

impl Embedder for BundledEmbedder {
    fn id(&self) -> &EmbedderId {
        &self.id
    }

    fn dimensions(&self) -> BoxFuture<'_, Result<usize, EmbedError>> {
        futures_util::future::ready(Ok(384)).boxed()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let texts = texts.to_vec();
        async move {
            tokio::task::spawn_blocking(move || Self::embed_blocking(&texts))
                .await
                .map_err(|e| EmbedError::Inference(e.to_string()))?
        }
        .boxed()
    }
}
