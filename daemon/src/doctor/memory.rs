//! Memory: the embedder, asked for one real embedding, and in the daemon
//! every index (size, last sync, errors, skipped files, the vector leg).

use std::time::Duration;

use super::{Finding, Level, finding};
use crate::config::Config;

/// The embedder (one real embedding) and, in the daemon, every index:
/// size, last sync, errors, and a plain warning when the vector leg is off.
pub async fn check_memory(config: &Config, memory: Option<&crate::memory::Memory>) -> Vec<Finding> {
    let settings = &config.memory;
    if !settings.enabled {
        return vec![finding(
            Level::Ok,
            "memory",
            "turned off ([memory] enabled = false)",
        )];
    }
    let mut out = Vec::new();
    let embedder = match memory {
        Some(m) => m
            .embedder()
            .ok_or_else(|| m.no_embedder().unwrap_or_default().to_string()),
        None => crate::memory::choose_embedder(settings).map_err(|e| e.to_string()),
    };
    match embedder {
        Err(reason) => out.push(finding(
            Level::Warn,
            "embedder",
            format!("the vector leg is off ({reason}): memory search is full-text only"),
        )),
        Ok(e) => {
            let started = std::time::Instant::now();
            let probe = vec!["pincer doctor checks the embedder".to_string()];
            let result = tokio::time::timeout(Duration::from_secs(60), e.embed(&probe)).await;
            out.push(match result {
                Ok(Ok(v)) if v.len() == 1 && !v[0].is_empty() => finding(
                    Level::Ok,
                    "embedder",
                    format!(
                        "{} works ({}-d, {} ms): hybrid search",
                        e.id(),
                        v[0].len(),
                        started.elapsed().as_millis()
                    ),
                ),
                Ok(Ok(_)) => finding(
                    Level::Error,
                    "embedder",
                    format!("{} returned no vector", e.id()),
                ),
                Ok(Err(err)) => finding(
                    Level::Error,
                    "embedder",
                    format!("{err}: until it works, memory search is full-text only"),
                ),
                Err(_) => finding(
                    Level::Error,
                    "embedder",
                    format!("{} did not answer within 60 s", e.id()),
                ),
            });
        }
    }
    let Some(memory) = memory else {
        return out;
    };
    for index in memory.opened() {
        let subject = format!("memory {}", index.agent());
        let status = match index.status().await {
            Ok(s) => s,
            Err(e) => {
                out.push(finding(Level::Error, subject, e.to_string()));
                continue;
            }
        };
        if let Some(error) = &status.last_error {
            out.push(finding(
                Level::Error,
                subject.clone(),
                format!("the last index update failed: {error}"),
            ));
        }
        // What `pincer memory status` lists as skipped, from the same
        // index status: a file the search never sees.
        for skipped in &status.skipped {
            out.push(finding(
                Level::Warn,
                subject.clone(),
                format!("skipped {skipped}; the search does not see it"),
            ));
        }
        if let Some(error) = &status.watcher_error {
            out.push(finding(
                Level::Warn,
                subject.clone(),
                format!("{error}; changes are picked up by the reconcile scan only"),
            ));
        }
        let last = status.last_sync.map_or_else(
            || "not indexed yet".to_string(),
            |t| {
                let ago = time::OffsetDateTime::now_utc().unix_timestamp() - t;
                format!("indexed {ago} s ago")
            },
        );
        out.push(finding(
            if status.vector_leg.is_on() {
                Level::Ok
            } else {
                Level::Warn
            },
            subject,
            format!(
                "{} files, {} chunks ({} with vectors), {last}; {}",
                status.files,
                status.chunks,
                status.embedded_chunks,
                status.vector_leg.describe()
            ),
        ));
    }
    out
}
