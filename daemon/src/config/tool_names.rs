//! Which tool names the config may write wherever it names tools. The
//! names live here, not in `tools`: the groups a `group:` pattern may
//! name, what a glob is, the pattern check, and the core tools' names (a
//! plugin id may not take one either), so the config validates them
//! without depending on the tools it configures; `tools::registry` has a
//! test that keeps [`CORE_TOOL_NAMES`] equal to the registry's core tools.
//!
//! Where the config names tools: the policy layers' `allow` and `deny`
//! (`[tools]`, per provider, sandbox, sub-agents, agents, channels,
//! groups, peers and senders), agents' `ask` and the `tools` of
//! `[[tools.hooks]]`. A misspelled name there matches
//! nothing and silently disarms the entry (`ask = ["exce"]` asks for
//! nothing), so a name that is not a glob must be one the daemon can have:
//! a core tool, `group:<name>`, a plugin's id, `mcp:<server>` of a
//! configured server or plugin, `mcp__<server>__<tool>` of a configured
//! `[mcp.<server>]`, or — only when plugins are installed — a plugin's
//! tool. Anything else is a config error with the nearest valid name.
//!
//! A server's and a plugin's tools are known only once the server answers,
//! which loading never waits for: the loader keeps those names
//! ([`NameToCheck`], in `Config::tool_names_to_check`) and `pincer config
//! check` and `pincer doctor` list the servers' tools and warn about each
//! name none of them lists (`doctor::check_tool_names`).

use std::cell::RefCell;
use std::ops::Range;

use globset::Glob;

use super::locate::{ConfigError, Locator, nearest};

/// The groups a `group:` pattern may name.
pub const GROUPS: &[&str] = &[
    "fs",
    "runtime",
    "web",
    "memory",
    "sessions",
    "messaging",
    "workflows",
    "plugins",
];

/// The names of the core tools, in the registry's order.
pub const CORE_TOOL_NAMES: &[&str] = &[
    "read",
    "write",
    "edit",
    "ls",
    "glob",
    "grep",
    "apply_patch",
    "exec",
    "process",
    "web_fetch",
    "memory_search",
    "memory_get",
    "session_status",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "message",
    "workflow_run",
    "schedule",
];

/// Whether a pattern is a glob (otherwise a name, compared as is): the one
/// rule the config's checks and the tools' matcher share.
pub fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{', '\\'])
}

/// Why a tool pattern cannot match any tool, whatever the daemon has.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    #[error("an empty tool pattern matches nothing")]
    Empty,
    /// `group:<name>` with a group [`GROUPS`] lacks, as written.
    #[error("unknown tool group `{0}`: the groups are {groups}", groups = group_names())]
    UnknownGroup(String),
    #[error("`{pattern}` is not a valid glob: {source}")]
    BadGlob {
        pattern: String,
        source: globset::Error,
    },
}

/// Every group as a pattern names it: `group:fs, group:runtime, …`.
fn group_names() -> String {
    GROUPS
        .iter()
        .map(|g| format!("group:{g}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a pattern's form (a known group, a glob that compiles). Which
/// names exist is [`ToolNames::check`], on top of this one (a plugin's
/// hooks get only this: they name the plugin's own tools, unknown until
/// it runs).
pub fn check_pattern(pattern: &str) -> Result<(), PatternError> {
    let p = pattern.trim();
    if p.is_empty() {
        return Err(PatternError::Empty);
    }
    if let Some(group) = p.strip_prefix("group:") {
        if !GROUPS.contains(&group.to_ascii_lowercase().as_str()) {
            return Err(PatternError::UnknownGroup(p.to_string()));
        }
        return Ok(());
    }
    Glob::new(&p.to_lowercase())
        .map(|_| ())
        .map_err(|source| PatternError::BadGlob {
            pattern: p.to_string(),
            source,
        })
}

/// A tool name the config names that only a server's list can confirm.
#[derive(Debug, Clone, PartialEq)]
pub struct NameToCheck {
    /// As written.
    pub name: String,
    /// The `[mcp.<server>]` of an `mcp__<server>__<tool>` name; `None`
    /// for a name taken to be a plugin's tool.
    pub server: Option<String>,
    /// Where it is written: `file:line:col: key `dotted.key``.
    pub place: String,
}

/// The names a tool pattern may use, made once per load; it also collects
/// the names only a server can confirm.
pub(super) struct ToolNames {
    /// `[mcp.<name>]` tables, disabled ones too (turning a server off does
    /// not make the config naming it invalid), lower-cased.
    servers: Vec<String>,
    /// Installed plugins' ids, lower-cased.
    plugins: Vec<String>,
    /// Filled while the loaders check; a `RefCell` because the loaders
    /// hold the names shared, each next to its other references.
    to_check: RefCell<Vec<NameToCheck>>,
}

impl ToolNames {
    pub(super) fn new(
        servers: impl IntoIterator<Item = String>,
        plugins: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            servers: servers.into_iter().map(|s| s.to_lowercase()).collect(),
            plugins: plugins.into_iter().map(|p| p.to_lowercase()).collect(),
            to_check: RefCell::default(),
        }
    }

    /// Checks one name or pattern written at `span`: a config error when
    /// it cannot name any tool, with the nearest valid name.
    pub(super) fn check(
        &self,
        loc: &Locator<'_>,
        pattern: &str,
        span: Range<usize>,
    ) -> Result<(), ConfigError> {
        check_pattern(pattern).map_err(|why| loc.at(span.clone(), why.to_string()))?;
        let written = pattern.trim();
        let name = written.to_lowercase();
        if name.starts_with("group:")
            || is_glob(&name)
            || CORE_TOOL_NAMES.contains(&name.as_str())
            || self.plugins.contains(&name)
        {
            return Ok(());
        }
        let later = |server: Option<String>| {
            let p = loc.problem(span.clone(), "");
            let key = p.key.map(|k| format!(": key `{k}`")).unwrap_or_default();
            self.to_check.borrow_mut().push(NameToCheck {
                name: written.to_string(),
                server,
                place: format!("{}:{}:{}{key}", p.path.display(), p.line, p.column),
            });
        };
        if let Some(server) = name.strip_prefix("mcp:") {
            if self
                .servers
                .iter()
                .chain(&self.plugins)
                .any(|s| s == server)
            {
                return Ok(());
            }
            return Err(loc.at(
                span,
                self.unknown_server(written, server, |s| format!("mcp:{s}")),
            ));
        }
        if let Some(rest) = name.strip_prefix("mcp__") {
            let server = self.servers.iter().find(|s| {
                rest.strip_prefix(s.as_str())
                    .and_then(|r| r.strip_prefix("__"))
                    .is_some_and(|tool| !tool.is_empty())
            });
            if let Some(server) = server {
                later(Some(server.clone()));
                return Ok(());
            }
            let (first, tool) = rest.split_once("__").unwrap_or((rest, ""));
            return Err(loc.at(
                span,
                self.unknown_server(written, first, |s| format!("mcp__{s}__{tool}")),
            ));
        }
        if !self.plugins.is_empty() {
            later(None);
            return Ok(());
        }
        Err(loc.at(span, unknown_tool(written, &name)))
    }

    /// The sentence for `mcp:<server>` or `mcp__<server>__…` naming a
    /// server that is not configured; `suggest` writes the name with
    /// another server.
    fn unknown_server(
        &self,
        written: &str,
        server: &str,
        suggest: impl Fn(&str) -> String,
    ) -> String {
        let known: Vec<String> = self.servers.iter().chain(&self.plugins).cloned().collect();
        if known.is_empty() {
            return format!(
                "`{written}` names the MCP server `{server}`, but no [mcp.<server>] table or plugin is configured"
            );
        }
        let mut why = format!(
            "`{written}` names the MCP server `{server}`, which is not configured (servers and plugins: {})",
            known.join(", ")
        );
        if let Some(best) = nearest(server, &known) {
            why.push_str(&format!("; did you mean `{}`?", suggest(&best)));
        }
        why
    }

    /// The names only a server can confirm, in the order written.
    pub(super) fn into_to_check(self) -> Vec<NameToCheck> {
        self.to_check.into_inner()
    }
}

/// The sentence for a bare name that is no tool pincer has, with no plugin
/// installed that could provide it.
fn unknown_tool(written: &str, name: &str) -> String {
    let core: Vec<String> = CORE_TOOL_NAMES.iter().map(|t| t.to_string()).collect();
    match nearest(name, &core) {
        Some(best) => format!("unknown tool `{written}` (did you mean `{best}`?)"),
        None => format!(
            "unknown tool `{written}`: name a core tool ({}), `group:<name>`, a glob such as `web_*`, or `mcp:<server>` / `mcp__<server>__<tool>` of a configured [mcp.<server>] (no plugin is installed that could provide it)",
            CORE_TOOL_NAMES.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn check(names: &ToolNames, pattern: &str) -> Result<(), String> {
        let text = format!("[tools]\ndeny = [\"{pattern}\"]\n");
        let loc = Locator {
            path: Some(Path::new("/h/config.toml")),
            text: &text,
        };
        // A value's span, as toml gives it, holds its quotes.
        let start = text.find(pattern).unwrap_or(1) - 1;
        names
            .check(&loc, pattern, start..start + pattern.len() + 2)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_misspelled_core_tool_is_refused_with_the_nearest_name() {
        let names = ToolNames::new([], []);
        let err = check(&names, "exce").unwrap_err();
        assert!(
            err.starts_with(
                "/h/config.toml:2:9: key `tools.deny`: unknown tool `exce` (did you mean `exec`?)"
            ),
            "{err}"
        );
        let err = check(&names, "web_fecth").unwrap_err();
        assert!(err.contains("did you mean `web_fetch`?"), "{err}");
        let err = check(&names, "frobnicate").unwrap_err();
        assert!(
            err.contains("unknown tool `frobnicate`: name a core tool (read, write,"),
            "{err}"
        );
        for good in ["exec", "EXEC", "web_*", "group:fs", "apply_patch"] {
            assert_eq!(check(&names, good), Ok(()), "{good}");
        }
        assert!(names.into_to_check().is_empty());
    }

    #[test]
    fn servers_and_plugins_are_names_and_their_tools_are_kept_for_later() {
        let names = ToolNames::new(["Everything".to_string()], ["weather".to_string()]);
        for good in [
            "mcp:everything",
            "mcp:weather",
            "weather",
            "mcp__everything__*",
        ] {
            assert_eq!(check(&names, good), Ok(()), "{good}");
        }
        let err = check(&names, "mcp:evrything").unwrap_err();
        assert!(
            err.contains("the MCP server `evrything`, which is not configured (servers and plugins: everything, weather); did you mean `mcp:everything`?"),
            "{err}"
        );
        let err = check(&names, "mcp__evrything__echo").unwrap_err();
        assert!(
            err.contains("did you mean `mcp__everything__echo`?"),
            "{err}"
        );
        // Only a listing can say whether these exist.
        assert_eq!(check(&names, "mcp__everything__echo"), Ok(()));
        assert_eq!(check(&names, "forecast"), Ok(()));
        let later = names.into_to_check();
        assert_eq!(
            later,
            [
                NameToCheck {
                    name: "mcp__everything__echo".into(),
                    server: Some("everything".into()),
                    place: "/h/config.toml:2:9: key `tools.deny`".into(),
                },
                NameToCheck {
                    name: "forecast".into(),
                    server: None,
                    place: "/h/config.toml:2:9: key `tools.deny`".into(),
                },
            ]
        );
    }

    #[test]
    fn without_servers_an_mcp_name_says_none_is_configured() {
        let names = ToolNames::new([], []);
        let err = check(&names, "mcp__time__now").unwrap_err();
        assert!(
            err.contains("no [mcp.<server>] table or plugin is configured"),
            "{err}"
        );
        let err = check(&names, "mcp:time").unwrap_err();
        assert!(
            err.contains("`mcp:time` names the MCP server `time`"),
            "{err}"
        );
    }
}
