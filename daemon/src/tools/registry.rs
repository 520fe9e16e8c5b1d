//! The tool registry: every tool the daemon knows, and the selection of
//! the ones an agent is offered. This version selects by the agent's
//! profile, allowlist and denylist; the layered policy pipeline of SPEC §8.3
//! plugs in here.

use super::{ToolDef, exec, fs};
use crate::config::ToolFilter;
use crate::llm::ToolSpec;

#[derive(Debug, Clone)]
pub struct ToolRegistry {
    tools: Vec<ToolDef>,
}

impl ToolRegistry {
    /// The core tools of this version.
    pub fn core() -> Self {
        let mut tools = fs::tools();
        tools.push(exec::tool());
        Self { tools }
    }

    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn all(&self) -> &[ToolDef] {
        &self.tools
    }

    /// The tools `filter` leaves, in registry order.
    pub fn selected(&self, filter: &ToolFilter) -> Vec<&ToolDef> {
        self.tools.iter().filter(|t| allowed(t, filter)).collect()
    }

    /// What the model is offered.
    pub fn specs(&self, filter: &ToolFilter) -> Vec<ToolSpec> {
        self.selected(filter)
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
            })
            .collect()
    }
}

/// Groups each profile includes (SPEC §8.3).
fn profile_groups(profile: &str) -> Option<&'static [&'static str]> {
    match profile {
        "minimal" => Some(&["session"]),
        "messaging" => Some(&["messaging", "sessions", "memory"]),
        "coding" => Some(&["fs", "runtime", "web", "memory", "sessions"]),
        _ => None, // full
    }
}

fn matches(pattern: &str, tool: &ToolDef) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    if let Some(group) = pattern.strip_prefix("group:") {
        return tool.groups.iter().any(|g| g == group);
    }
    globset::Glob::new(&pattern)
        .map(|g| g.compile_matcher().is_match(tool.name.to_ascii_lowercase()))
        .unwrap_or(false)
}

fn allowed(tool: &ToolDef, filter: &ToolFilter) -> bool {
    if filter.deny.iter().any(|p| matches(p, tool)) {
        return false;
    }
    if let Some(groups) = filter.profile.as_deref().and_then(profile_groups)
        && !groups.iter().any(|g| tool.groups.iter().any(|t| t == g))
        && !filter.allow.iter().any(|p| matches(p, tool))
    {
        return false;
    }
    if tool.flags.optional && !filter.allow.iter().any(|p| matches(p, tool)) {
        return false;
    }
    filter.allow.is_empty() || filter.allow.iter().any(|p| matches(p, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(filter: ToolFilter) -> Vec<String> {
        ToolRegistry::core()
            .selected(&filter)
            .into_iter()
            .map(|t| t.name.clone())
            .collect()
    }

    #[test]
    fn default_offers_every_core_tool() {
        assert_eq!(
            names(ToolFilter::default()),
            ["read", "write", "edit", "ls", "glob", "grep", "exec"]
        );
    }

    #[test]
    fn deny_wins_and_globs_and_groups_work() {
        let f = ToolFilter {
            profile: None,
            allow: vec!["group:fs".into(), "exec".into()],
            deny: vec!["EX*".into(), "write".into()],
        };
        assert_eq!(names(f), ["read", "edit", "ls", "glob", "grep"]);
    }

    #[test]
    fn profiles_narrow() {
        let messaging = ToolFilter {
            profile: Some("messaging".into()),
            ..Default::default()
        };
        assert!(names(messaging).is_empty());
        let coding = ToolFilter {
            profile: Some("coding".into()),
            ..Default::default()
        };
        assert_eq!(names(coding).len(), 7);
    }

    #[test]
    fn schemas_are_objects_with_properties() {
        for t in ToolRegistry::core().all() {
            assert_eq!(t.parameters["type"], "object", "{}", t.name);
            assert!(t.parameters["properties"].is_object(), "{}", t.name);
        }
        let read = ToolRegistry::core();
        let read = read.get("read").unwrap();
        assert_eq!(read.parameters["required"], serde_json::json!(["path"]));
    }
}
