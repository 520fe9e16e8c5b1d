//! Tool patterns, the one matcher for every place the config names tools:
//! the policy layers' `allow` and `deny` (and a spawn's), an agent's `ask`
//! list, and the `tools` of hooks from the config and from plugins. A
//! pattern is a name, a `*` glob, `group:<name>`, a plugin id or
//! `mcp:<server>`, compared without case.
//!
//! A core tool that does another's job answers to that tool's name too:
//! `apply_patch` writes files, so a pattern that names `write` names it
//! (SPEC §8.3, "apply_patch follows write"). Matching it in one place is
//! what keeps `ask = ["write"]` or a hook on `write` from being walked
//! around through `apply_patch`; the other way round, a pattern naming
//! `apply_patch` does not name `write`.

use std::collections::HashMap;
use std::sync::Arc;

use globset::{Glob, GlobMatcher};

use super::{ToolDef, ToolSource};

/// Core tools and the core tool whose name each also answers to.
const FOLLOWS: &[(&str, &str)] = &[("apply_patch", "write")];

/// Lower-cased facts of a tool that patterns match against.
pub struct ToolFacts {
    /// Its own name, then the names it follows.
    names: Vec<String>,
    groups: Vec<String>,
    source_ids: Vec<String>,
}

impl ToolFacts {
    pub fn of(tool: &ToolDef) -> Self {
        let source_ids = match &tool.source {
            ToolSource::Core => Vec::new(),
            ToolSource::Mcp { server } => vec![format!("mcp:{server}").to_lowercase()],
            ToolSource::Plugin { id, server } => {
                vec![id.to_lowercase(), format!("mcp:{server}").to_lowercase()]
            }
        };
        let mut groups: Vec<String> = tool.groups.iter().map(|g| g.to_lowercase()).collect();
        let mut names = vec![tool.name.to_lowercase()];
        if tool.source == ToolSource::Core {
            names.extend(
                FOLLOWS
                    .iter()
                    .filter(|(t, _)| *t == tool.name)
                    .map(|(_, followed)| followed.to_string()),
            );
        } else {
            groups.push("plugins".into());
        }
        Self {
            names,
            groups,
            source_ids,
        }
    }
}

/// A compiled pattern.
#[derive(Debug, Clone)]
enum Pattern {
    Group(String),
    /// A tool name, plugin id or `mcp:<server>`, compared as is (most
    /// patterns: no glob to compile).
    Literal(String),
    /// A tool name glob, which also matches a plugin id or `mcp:<server>`;
    /// shared with the cache (cloning a matcher clones its regex's pool,
    /// which every turn's policy resolution paid for each glob).
    Glob(Arc<GlobMatcher>),
}

impl Pattern {
    fn compile(p: &str) -> Option<Pattern> {
        let lower = p.trim().to_lowercase();
        if let Some(group) = lower.strip_prefix("group:") {
            return Some(Pattern::Group(group.to_string()));
        }
        if !crate::config::tool_names::is_glob(&lower) {
            return Some(Pattern::Literal(lower));
        }
        compiled_glob(&lower).map(Pattern::Glob)
    }

    fn matches(&self, tool: &ToolFacts) -> bool {
        let mut ids = tool.names.iter().chain(&tool.source_ids);
        match self {
            Pattern::Group(g) => tool.groups.iter().any(|t| t == g),
            Pattern::Literal(name) => ids.any(|id| id == name),
            Pattern::Glob(glob) => ids.any(|id| glob.is_match(id)),
        }
    }

    /// Whether the pattern names the tool on purpose (not only through a
    /// wildcard): what an `optional` tool needs.
    fn names(&self, tool: &ToolFacts) -> bool {
        match self {
            Pattern::Glob(_) => false,
            other => other.matches(tool),
        }
    }
}

/// Compiling a glob builds a regex (tens of microseconds); the patterns
/// come from the config, a small set, so each is compiled once.
fn compiled_glob(pattern: &str) -> Option<Arc<GlobMatcher>> {
    static CACHE: std::sync::LazyLock<std::sync::Mutex<HashMap<String, Arc<GlobMatcher>>>> =
        std::sync::LazyLock::new(Default::default);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = cache.get(pattern) {
        return Some(m.clone());
    }
    let m = Arc::new(Glob::new(pattern).ok()?.compile_matcher());
    if cache.len() > 4096 {
        cache.clear();
    }
    cache.insert(pattern.to_string(), m.clone());
    Some(m)
}

/// A list of patterns as written in the config, compiled. A pattern that
/// does not compile (the config check refuses those) matches nothing.
#[derive(Debug, Clone, Default)]
pub struct ToolPatterns {
    compiled: Vec<(String, Pattern)>,
}

impl ToolPatterns {
    pub fn new(patterns: &[String]) -> Self {
        Self {
            compiled: patterns
                .iter()
                .filter_map(|p| Pattern::compile(p).map(|c| (p.clone(), c)))
                .collect(),
        }
    }

    /// The patterns of a profile, which are written in the code.
    pub fn of_strs(patterns: &[&str]) -> Self {
        let owned: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        Self::new(&owned)
    }

    pub fn extend(&mut self, other: ToolPatterns) {
        self.compiled.extend(other.compiled);
    }

    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }

    /// Whether any pattern matches `tool`.
    pub fn matches(&self, tool: &ToolDef) -> bool {
        self.first_match(&ToolFacts::of(tool)).is_some()
    }

    /// The first pattern, as written, that matches the tool.
    pub fn first_match(&self, tool: &ToolFacts) -> Option<&str> {
        self.compiled
            .iter()
            .find(|(_, c)| c.matches(tool))
            .map(|(p, _)| p.as_str())
    }

    /// Whether a pattern names the tool without a wildcard: by name,
    /// `group:…`, plugin id or `mcp:<server>` (what lifts the data
    /// boundary's removals for a chat that is not the owner's).
    pub fn names(&self, tool: &ToolFacts) -> bool {
        self.compiled.iter().any(|(_, c)| c.names(tool))
    }

    /// Whether a pattern names the tool on purpose, as an `optional` tool
    /// needs: by name, plugin id, `mcp:<server>` or `group:plugins`, not
    /// through a wildcard or another group.
    pub fn names_on_purpose(&self, tool: &ToolFacts) -> bool {
        self.compiled
            .iter()
            .filter(|(p, _)| {
                let p = p.trim().to_lowercase();
                !p.starts_with("group:") || p == "group:plugins"
            })
            .any(|(_, c)| c.names(tool))
    }
}
