//! The `local` embedder: a sentence-embedding BERT model (e.g.
//! all-MiniLM-L6-v2) run in-process on the CPU with candle, from a folder in
//! the Hugging Face layout: `config.json`, `tokenizer.json`,
//! `model.safetensors` and, when present, `1_Pooling/config.json`.
//!
//! The model is loaded on first use and dropped again after it has been idle
//! for a while (`release_if_idle`; the watcher releases it right after it
//! indexed), with the freed pages handed back to the system: its ~90 MB of
//! weights would otherwise sit in the daemon's memory all day for a few
//! searches.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use super::{EmbedError, Embedder, EmbedderId, normalise};

/// Tokens per text; the shipped tokenizers of MiniLM models truncate at
/// 128, which would cut our ~400-token chunks short.
const MAX_TOKENS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Mean,
    Cls,
}

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
}

/// A model folder, loaded lazily.
pub struct LocalEmbedder {
    id: EmbedderId,
    dimensions: usize,
    slot: Arc<Slot>,
}

/// The folder and, while in use, the loaded model with its last use.
struct Slot {
    id: EmbedderId,
    dir: PathBuf,
    loaded: Mutex<Option<(Arc<Loaded>, Instant)>>,
}

impl LocalEmbedder {
    /// Checks that `dir` holds a usable model (reading only `config.json`);
    /// the weights load on the first call.
    pub fn open(dir: &Path) -> Result<Self, EmbedError> {
        let load_err = |reason: String| EmbedError::Load {
            path: dir.display().to_string(),
            reason,
        };
        for file in ["config.json", "tokenizer.json", "model.safetensors"] {
            if !dir.join(file).is_file() {
                return Err(load_err(format!("`{file}` is missing")));
            }
        }
        let config = read_config(dir).map_err(load_err)?;
        let model = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        let id = EmbedderId {
            provider: "local".into(),
            model,
        };
        Ok(Self {
            id: id.clone(),
            dimensions: config.hidden_size,
            slot: Arc::new(Slot {
                id,
                dir: dir.to_path_buf(),
                loaded: Mutex::new(None),
            }),
        })
    }

    /// Embeds on the calling thread (blocking; the trait's `embed` runs it
    /// on tokio's blocking pool).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.slot.embed(texts)
    }
}

impl Slot {
    fn model(&self) -> Result<Arc<Loaded>, EmbedError> {
        let mut slot = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((loaded, used)) = slot.as_mut() {
            *used = Instant::now();
            return Ok(loaded.clone());
        }
        let started = Instant::now();
        let loaded = Arc::new(load(&self.dir).map_err(|reason| EmbedError::Load {
            path: self.dir.display().to_string(),
            reason,
        })?);
        tracing::info!(model = %self.id, ms = started.elapsed().as_millis() as u64, "embedding model loaded");
        *slot = Some((loaded.clone(), Instant::now()));
        Ok(loaded)
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let loaded = self.model()?;
        embed_batch(&loaded, texts).map_err(EmbedError::Inference)
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> &EmbedderId {
        &self.id
    }

    fn dimensions(&self) -> BoxFuture<'_, Result<usize, EmbedError>> {
        futures_util::future::ready(Ok(self.dimensions)).boxed()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let slot = self.slot.clone();
        let texts = texts.to_vec();
        // One batch takes tens of milliseconds of CPU: off the async threads.
        async move {
            tokio::task::spawn_blocking(move || slot.embed(&texts))
                .await
                .map_err(|e| EmbedError::Inference(e.to_string()))?
        }
        .boxed()
    }

    fn release_if_idle(&self, idle: Duration) -> bool {
        {
            let mut slot = self.slot.loaded.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_none_or(|(_, used)| used.elapsed() < idle) {
                return false;
            }
            *slot = None;
        }
        tracing::info!(model = %self.id, "embedding model unloaded");
        // The weights, the inference buffers and the code inference ran
        // through (measured: 22.6 MB of code pages a minute later).
        pincer_pages::give_back();
        true
    }
}

fn read_config(dir: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(dir.join("config.json"))
        .map_err(|e| format!("cannot read config.json: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("config.json is not a BERT config: {e}"))
}

fn load(dir: &Path) -> Result<Loaded, String> {
    let config = read_config(dir)?;
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
        .map_err(|e| format!("tokenizer.json: {e}"))?;
    // Batches are padded below, to the longest text of each batch only.
    tokenizer.with_padding(None::<PaddingParams>);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS.min(config.max_position_embeddings),
            ..Default::default()
        }))
        .map_err(|e| format!("tokenizer truncation: {e}"))?;
    let weights = std::fs::read(dir.join("model.safetensors"))
        .map_err(|e| format!("cannot read model.safetensors: {e}"))?;
    let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
        .map_err(|e| format!("model.safetensors: {e}"))?;
    let model = BertModel::load(vb, &config).map_err(|e| format!("model.safetensors: {e}"))?;
    Ok(Loaded {
        model,
        tokenizer,
        pooling: read_pooling(dir),
    })
}

/// Mean pooling unless the folder's pooling config asks for CLS.
fn read_pooling(dir: &Path) -> Pooling {
    let cls = std::fs::read_to_string(dir.join("1_Pooling").join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v["pooling_mode_cls_token"].as_bool() == Some(true));
    if cls { Pooling::Cls } else { Pooling::Mean }
}

fn embed_batch(loaded: &Loaded, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
    let encodings = loaded
        .tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(|e| format!("tokenizer: {e}"))?;
    let width = encodings
        .iter()
        .map(|e| e.get_ids().len())
        .max()
        .unwrap_or(0)
        .max(1);
    let rows = encodings.len();
    let mut ids = vec![0u32; rows * width];
    let mut mask = vec![0u32; rows * width];
    for (row, encoding) in encodings.iter().enumerate() {
        for (col, (&id, &m)) in encoding
            .get_ids()
            .iter()
            .zip(encoding.get_attention_mask())
            .enumerate()
        {
            ids[row * width + col] = id;
            mask[row * width + col] = m;
        }
    }
    let run = || -> candle_core::Result<Vec<Vec<f32>>> {
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (rows, width), &device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &device)?;
        let types = ids.zeros_like()?;
        let hidden = loaded.model.forward(&ids, &types, Some(&mask))?;
        let pooled = match loaded.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&m)?.sum(1)?;
                let counts = m.sum(1)?.clamp(1.0, f64::MAX)?;
                summed.broadcast_div(&counts)?
            }
        };
        pooled.to_vec2::<f32>()
    };
    let vectors = run().map_err(|e| e.to_string())?;
    Ok(vectors.into_iter().map(normalise).collect())
}
