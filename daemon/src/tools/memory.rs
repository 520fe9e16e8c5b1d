//! The memory tools (SPEC §8.2, §10): `memory_search` runs the agent's
//! hybrid search and `memory_get` reads lines of a memory file. Both say
//! plainly when the vector leg is off, so neither the model nor the user
//! mistakes keyword-only results for the real thing, and both refuse a
//! turn that is not the owner's when the memory is the owner's (the data
//! boundary; the policy does not offer them there either).

use std::sync::Arc;

use pincer_memory::{Hit, MemoryIndex, Query, SearchOutcome};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};

const MEMORY: &[&str] = &["memory"];

/// The agent's memory as one turn may reach it (the data boundary for
/// memory, decided here for the tools and for auto-recall).
#[derive(Clone)]
pub enum MemoryAccess {
    /// The owner's turn: everything indexed.
    Index(MemoryIndex),
    /// A turn that is not the owner's, of an agent whose memory is
    /// `shared`: the memory files, never the indexed session transcripts
    /// (they hold other people's conversations).
    Shared(MemoryIndex),
    /// There is no index, and why (memory off, the embedder failed).
    Unavailable(Arc<str>),
    /// The memory is the owner's and the turn is not (`memory = "owner"`).
    OwnersOnly,
}

/// The index path of indexed session transcripts (`sessions/<file>`).
const TRANSCRIPTS: &str = "sessions/";

impl MemoryAccess {
    /// The index, or the tool's answer when there is none to use.
    fn index(&self) -> Result<&MemoryIndex, ToolOutput> {
        match self {
            Self::Index(index) | Self::Shared(index) => Ok(index),
            Self::Unavailable(why) => Err(ToolOutput::error(why.to_string())),
            Self::OwnersOnly => Err(ToolOutput::refused(
                "this agent's memory is the owner's (memory = \"owner\"); it is not searched or read for this chat",
            )),
        }
    }

    /// Runs `query` over what this turn may reach; `Err` is the tool's
    /// answer (no index, or the boundary's refusal).
    pub async fn search(&self, query: Query) -> Result<SearchOutcome, ToolOutput> {
        let index = self.index()?;
        let mut outcome = index
            .search(query)
            .await
            .map_err(|e| ToolOutput::error(format!("memory search failed: {e}")))?;
        if matches!(self, Self::Shared(_)) {
            outcome
                .hits
                .retain(|h| h.source != "sessions" && !h.path.starts_with(TRANSCRIPTS));
        }
        Ok(outcome)
    }

    /// Whether `path` may be read by this turn (a transcript only by the
    /// owner's).
    fn may_get(&self, path: &str) -> Result<(), ToolOutput> {
        match self {
            Self::Shared(_) if path.trim_start_matches("./").starts_with(TRANSCRIPTS) => {
                Err(ToolOutput::refused(
                    "session transcripts in this agent's memory are the owner's; they are not read for this chat",
                ))
            }
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for, in plain words (any language).
    pub query: String,
    /// How many results (default 6).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// A path from a memory_search result, e.g. MEMORY.md or memory/2026-11-22.md.
    pub path: String,
    /// First line to read, 1-based (default 1).
    #[serde(default)]
    pub from: Option<usize>,
    /// How many lines (default 200).
    #[serde(default)]
    pub lines: Option<usize>,
}

pub fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef::typed(
            "memory_search",
            "Search this agent's long-term memory (MEMORY.md, memory/*.md, notes): returns snippets with path and line range.",
            MEMORY,
            ToolFlags {
                dedupe: true,
                ..ToolFlags::default()
            },
            search,
        )
        .with_aliases(&[("q", "query"), ("text", "query"), ("max_results", "limit")]),
        ToolDef::typed(
            "memory_get",
            "Read lines of a memory file (a path from memory_search), to see more than its snippet.",
            MEMORY,
            ToolFlags::default(),
            get,
        )
        .with_aliases(&[("file", "path"), ("start_line", "from"), ("line", "from")]),
    ]
}

async fn search(args: SearchArgs, ctx: ToolContext) -> ToolOutput {
    if args.query.trim().is_empty() {
        return ToolOutput::error("`query` is empty: say what to look for");
    }
    let query = Query {
        text: args.query.clone(),
        limit: args.limit,
        ..Query::default()
    };
    match ctx.memory.search(query).await {
        Ok(outcome) => ToolOutput::ok(render(&args.query, &outcome)),
        Err(answer) => answer,
    }
}

/// Results as the model reads them: the kind of search first, then each
/// hit with where it is.
pub fn render(query: &str, outcome: &SearchOutcome) -> String {
    let mut out = format!("[{}]\n", outcome.vector_leg.describe());
    if outcome.hits.is_empty() {
        out.push_str(&format!("No memory matches {query:?}."));
        return out;
    }
    for (i, hit) in outcome.hits.iter().enumerate() {
        out.push_str(&format!(
            "\n{}. {} (score {:.2})\n{}\n",
            i + 1,
            location(hit),
            hit.score,
            hit.snippet.trim_end()
        ));
    }
    out
}

/// `path:start-end`.
pub fn location(hit: &Hit) -> String {
    if hit.start_line == hit.end_line {
        format!("{}:{}", hit.path, hit.start_line)
    } else {
        format!("{}:{}-{}", hit.path, hit.start_line, hit.end_line)
    }
}

async fn get(args: GetArgs, ctx: ToolContext) -> ToolOutput {
    let index = match ctx.memory.index() {
        Ok(index) => index.clone(),
        Err(refused) => return refused,
    };
    if let Err(refused) = ctx.memory.may_get(&args.path) {
        return refused;
    }
    let path = args.path.clone();
    let read =
        tokio::task::spawn_blocking(move || index.get(&args.path, args.from, args.lines)).await;
    match read {
        Ok(Ok((text, _, _))) if text.is_empty() => {
            ToolOutput::ok(format!("{path}: no lines there (the file is shorter)"))
        }
        Ok(Ok((text, start, end))) => ToolOutput::ok(format!("{path}:{start}-{end}\n{text}")),
        Ok(Err(e)) => ToolOutput::error(e.to_string()),
        Err(e) => ToolOutput::error(format!("memory_get failed: {e}")),
    }
}
