//! The tool registry: every tool the daemon knows, in a stable order (core
//! tools first, then MCP and plugin tools). Which of them an agent is
//! offered is the [`super::policy`] pipeline's decision.

use super::{ToolDef, exec, fs, jobs, patch, sessions, web};
use crate::llm::ToolSpec;

#[derive(Debug, Clone)]
pub struct ToolRegistry {
    tools: Vec<ToolDef>,
}

impl ToolRegistry {
    /// The core tools.
    pub fn core() -> Self {
        let mut tools = fs::tools();
        tools.push(patch::tool());
        tools.push(exec::tool());
        tools.push(jobs::tool());
        tools.push(web::tool());
        tools.extend(sessions::tools());
        Self { tools }
    }

    /// A registry of exactly these tools (tests and benches).
    pub fn from_tools(tools: Vec<ToolDef>) -> Self {
        Self { tools }
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
}
