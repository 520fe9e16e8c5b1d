//! The tool registry: every tool the daemon knows, in a stable order (core
//! tools first, then MCP and plugin tools). Which of them an agent is
//! offered is the [`super::policy`] pipeline's decision.

use super::{
    ToolDef, exec, fs, jobs, memory, message, patch, schedule_book, sessions, web, workflow_run,
};
use crate::llm::ToolSpec;

#[derive(Debug, Clone)]
pub struct ToolRegistry {
    tools: Vec<ToolDef>,
    /// Tools left out because their name was taken, with why.
    pub skipped: Vec<(String, String)>,
}

impl ToolRegistry {
    /// The core tools.
    pub fn core() -> Self {
        let mut tools = fs::tools();
        tools.push(patch::tool());
        tools.push(exec::tool());
        tools.push(jobs::tool());
        tools.push(web::tool());
        tools.extend(memory::tools());
        tools.extend(sessions::tools());
        tools.push(message::tool());
        tools.push(workflow_run::tool());
        tools.push(schedule_book::tool());
        Self {
            tools,
            skipped: Vec::new(),
        }
    }

    /// A registry of exactly these tools (tests and benches).
    pub fn from_tools(tools: Vec<ToolDef>) -> Self {
        Self {
            tools,
            skipped: Vec::new(),
        }
    }

    /// This registry plus tools from MCP servers and plugins, in order; a
    /// tool whose name is taken by a core or earlier tool is skipped
    /// (SPEC §8.1) and listed in `skipped`.
    pub fn with(&self, extra: Vec<ToolDef>) -> Self {
        let mut out = self.clone();
        for tool in extra {
            if let Some(existing) = out.get(&tool.name) {
                let why = format!(
                    "its name is taken by the {} tool `{}`",
                    match existing.source {
                        super::ToolSource::Core => "core",
                        _ => "earlier",
                    },
                    existing.name
                );
                out.skipped.push((tool.name.clone(), why));
                continue;
            }
            out.tools.push(tool);
        }
        out
    }

    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn all(&self) -> &[ToolDef] {
        &self.tools
    }
}

impl ToolDef {
    /// How the model is offered this tool.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The config refuses plugin ids that are core tool names from its own
    /// list; it must be this registry's.
    #[test]
    fn the_configs_core_tool_names_are_the_registrys() {
        let names: Vec<String> = ToolRegistry::core()
            .all()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(names, crate::config::tool_names::CORE_TOOL_NAMES);
    }
}
