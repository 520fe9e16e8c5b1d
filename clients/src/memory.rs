//! `pincer memory search|get|status|reindex`: the agents' long-term memory
//! through the `Memory` service. Every search prints whether the vector leg
//! took part first, so keyword-only results are never mistaken for hybrid
//! ones; reindex shows a progress bar on a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use pincer_proto::v1 as pb;
use serde_json::json;
use tokio_stream::StreamExt;

use crate::Ctx;
use crate::cli::MemoryCommand;
use crate::error::CliError;
use crate::out::{self, errln, outln};
use crate::rpc;
use crate::sanitize::sanitize;

pub async fn run(ctx: &Ctx, command: MemoryCommand) -> Result<u8, CliError> {
    match command {
        MemoryCommand::Search {
            query,
            agent,
            limit,
            legs,
            min_score,
        } => {
            let limit = limit.unwrap_or(0);
            search(ctx, query.join(" "), agent.agent, limit, legs, min_score).await
        }
        MemoryCommand::Get {
            path,
            agent,
            from,
            lines,
        } => get(ctx, path, agent.agent, from, lines.unwrap_or(0)).await,
        MemoryCommand::Status { agent } => status(ctx, agent.agent).await,
        MemoryCommand::Reindex { agent, full } => reindex(ctx, agent.agent, full).await,
    }
}

fn leg_json(leg: &Option<pb::VectorLeg>) -> serde_json::Value {
    match leg {
        Some(l) => json!({"on": l.on, "detail": l.detail, "description": l.description}),
        None => serde_json::Value::Null,
    }
}

/// The line shown above results: plain about a missing vector leg.
fn leg_line(leg: &Option<pb::VectorLeg>) -> String {
    match leg {
        Some(l) if l.on => l.description.clone(),
        Some(l) => format!("note: {}", l.description),
        None => "note: the daemon did not say which search legs ran".into(),
    }
}

/// One index's status as JSON (`pincer memory status --json` and `pincer status --json`).
pub fn index_json(s: &pb::MemoryIndexStatus) -> serde_json::Value {
    json!({"agent": s.agent, "workspace": s.workspace, "db_path": s.db_path, "files": s.files,
           "chunks": s.chunks, "embedded_chunks": s.embedded_chunks,
           "vector_leg": leg_json(&s.vector_leg), "dimensions": s.dimensions,
           "last_sync": (s.last_sync > 0).then_some(s.last_sync),
           "last_error": (!s.last_error.is_empty()).then_some(&s.last_error),
           "skipped": s.skipped, "watching": s.watching,
           "watcher_error": (!s.watcher_error.is_empty()).then_some(&s.watcher_error)})
}

/// One index on one line, for `pincer status`.
pub fn index_line(s: &pb::MemoryIndexStatus) -> String {
    let vectors = match &s.vector_leg {
        Some(l) if l.on => format!("vectors by {}", l.detail),
        _ => "full-text only (no embedder)".into(),
    };
    let mut line = format!(
        "{:<12} {} files, {} chunks, {vectors}; indexed {}; {}",
        s.agent,
        s.files,
        s.chunks,
        last_sync(s, unix_now()),
        watching(s)
    );
    if !s.last_error.is_empty() {
        line.push_str(&format!("; error: {}", s.last_error));
    }
    line
}

/// Unix seconds now (0 before 1970).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn last_sync(s: &pb::MemoryIndexStatus, now: i64) -> String {
    if s.last_sync > 0 {
        format!("{} s ago", (now - s.last_sync).max(0))
    } else {
        "not yet".into()
    }
}

fn watching(s: &pb::MemoryIndexStatus) -> String {
    if s.watching {
        "watching for changes".to_string()
    } else if s.watcher_error.is_empty() {
        "not watching yet".to_string()
    } else {
        format!("not watching: {}", s.watcher_error)
    }
}

async fn search(
    ctx: &Ctx,
    query: String,
    agent: Option<String>,
    limit: u32,
    legs: String,
    min_score: Option<f64>,
) -> Result<u8, CliError> {
    if query.trim().is_empty() {
        return Err(CliError::new(
            2,
            "say what to search for: pincer memory search QUERY",
        ));
    }
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .memory
        .search(pb::MemorySearchRequest {
            query: query.clone(),
            agent: agent.unwrap_or_default(),
            limit,
            legs,
            min_score,
        })
        .await?
        .into_inner();
    if ctx.json {
        let hits: Vec<_> = r
            .hits
            .iter()
            .map(|h| {
                json!({"path": h.path, "source": h.source, "start_line": h.start_line, "end_line": h.end_line,
                       "score": h.score, "vector_score": h.vector_score, "text_score": h.text_score,
                       "snippet": h.snippet})
            })
            .collect();
        out::json(
            &json!({"agent": r.agent, "query": query, "vector_leg": leg_json(&r.vector_leg),
                   "hits": hits, "elapsed_us": r.elapsed_us}),
        );
        return Ok(0);
    }
    outln!("{}", leg_line(&r.vector_leg));
    if r.hits.is_empty() {
        outln!("no memory matches {query:?} (agent {})", r.agent);
        return Ok(0);
    }
    for (i, h) in r.hits.iter().enumerate() {
        let lines = if h.start_line == h.end_line {
            h.start_line.to_string()
        } else {
            format!("{}-{}", h.start_line, h.end_line)
        };
        outln!("\n{}. {}:{}  (score {:.2})", i + 1, h.path, lines, h.score);
        for line in h.snippet.trim_end().lines() {
            outln!("   {line}");
        }
    }
    Ok(0)
}

async fn get(
    ctx: &Ctx,
    path: String,
    agent: Option<String>,
    from: u32,
    lines: u32,
) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .memory
        .get(pb::MemoryGetRequest {
            path: path.clone(),
            agent: agent.unwrap_or_default(),
            from,
            lines,
        })
        .await?
        .into_inner();
    if ctx.json {
        out::json(
            &json!({"path": path, "start_line": r.start_line, "end_line": r.end_line, "text": r.text}),
        );
    } else {
        outln!("{}", r.text);
    }
    Ok(0)
}

async fn status(ctx: &Ctx, agent: Option<String>) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .memory
        .status(pb::MemoryStatusRequest {
            agent: agent.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if ctx.json {
        let indexes: Vec<_> = r.indexes.iter().map(index_json).collect();
        out::json(&json!({"enabled": r.enabled, "indexes": indexes}));
        return Ok(0);
    }
    if !r.enabled {
        outln!("memory is turned off ([memory] enabled = false in config.toml)");
        return Ok(0);
    }
    let now = unix_now();
    for s in &r.indexes {
        outln!("agent {}  ({})", s.agent, s.workspace);
        outln!("  index:    {}", s.db_path);
        let dims = if s.dimensions > 0 {
            format!(", {}-d", s.dimensions)
        } else {
            String::new()
        };
        outln!(
            "  content:  {} files, {} chunks, {} with vectors{dims}",
            s.files,
            s.chunks,
            s.embedded_chunks
        );
        outln!("  search:   {}", leg_line(&s.vector_leg));
        outln!("  indexed:  {}; {}", last_sync(s, now), watching(s));
        if !s.last_error.is_empty() {
            outln!("  error:    {}", s.last_error);
        }
        for skip in &s.skipped {
            outln!("  skipped:  {skip}");
        }
    }
    Ok(0)
}

async fn reindex(ctx: &Ctx, agent: Option<String>, full: bool) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let mut stream = c
        .memory
        .reindex(pb::ReindexRequest {
            agent: agent.unwrap_or_default(),
            full,
        })
        .await?
        .into_inner();
    // Hidden by indicatif when stderr is not a terminal.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>12} {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut code = 0;
    while let Some(item) = stream.next().await {
        let p = match item {
            Ok(p) => p,
            Err(status) => {
                bar.abandon();
                return Err(status.into());
            }
        };
        if ctx.json {
            let summary = p.summary.as_ref().map(|s| {
                json!({"files_seen": s.files_seen, "files_changed": s.files_changed,
                       "files_removed": s.files_removed, "chunks_added": s.chunks_added,
                       "chunks_embedded": s.chunks_embedded, "cache_hits": s.cache_hits,
                       "vectors_rebuilt": s.vectors_rebuilt,
                       "embed_error": (!s.embed_error.is_empty()).then_some(&s.embed_error),
                       "elapsed_ms": s.elapsed_ms})
            });
            out::json(
                &json!({"agent": p.agent, "phase": p.phase, "done": p.done, "total": p.total, "summary": summary}),
            );
            continue;
        }
        match (&p.phase[..], &p.summary) {
            ("done", Some(s)) => {
                bar.finish_and_clear();
                outln!(
                    "{}: {} files ({} changed, {} removed), {} new chunks, {} embedded ({} from cache) in {} ms{}",
                    p.agent,
                    s.files_seen,
                    s.files_changed,
                    s.files_removed,
                    s.chunks_added,
                    s.chunks_embedded,
                    s.cache_hits,
                    s.elapsed_ms,
                    if s.vectors_rebuilt {
                        "; the embedder changed, so every vector was rebuilt"
                    } else {
                        ""
                    }
                );
                if !s.embed_error.is_empty() {
                    errln!(
                        "pincer: {}: embedding failed, search is full-text only until it works: {}",
                        p.agent,
                        s.embed_error
                    );
                    code = 1;
                }
                bar.reset();
            }
            (phase, _) => {
                // indicatif draws on the terminal itself, past `out`.
                bar.set_prefix(sanitize(&format!("{} {phase}", p.agent)).into_owned());
                bar.set_length(p.total);
                bar.set_position(p.done);
            }
        }
    }
    Ok(code)
}
