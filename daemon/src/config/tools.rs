//! The tool names the config checks against: the groups a `group:`
//! pattern may name, the pattern check itself, and the core tools' names
//! (a plugin id may not take one). They live here, not in `tools`, so the
//! config can validate `[tools]`, agents' layers, hooks and plugins without
//! depending on the tools it configures; `tools::registry` has a test that
//! keeps [`CORE_TOOL_NAMES`] equal to the registry's core tools.

use globset::Glob;

/// The groups a `group:` pattern may name.
pub const GROUPS: &[&str] = &[
    "fs",
    "runtime",
    "web",
    "memory",
    "sessions",
    "messaging",
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
];

/// Checks a pattern from the config; the error is a sentence for the user.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let p = pattern.trim();
    if p.is_empty() {
        return Err("an empty tool pattern matches nothing".into());
    }
    if let Some(group) = p.strip_prefix("group:") {
        if !GROUPS.contains(&group.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "unknown tool group `{p}`: the groups are {}",
                GROUPS
                    .iter()
                    .map(|g| format!("group:{g}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        return Ok(());
    }
    Glob::new(&p.to_lowercase())
        .map(|_| ())
        .map_err(|e| format!("`{p}` is not a valid glob: {e}"))
}
