//! Tools (SPEC §8): a tool is defined once ([`ToolDef`]) with a JSON schema
//! (derived from its Rust argument type, or given by an MCP server); the
//! [`registry`] holds them; the [`policy`] pipeline decides which an agent,
//! chat and sender are offered; [`paths`] confines file tools to the
//! workspace and [`open`] the files in it, [`write`] writes them through
//! the workspace opener; [`fs`] and [`exec`] are core tools; [`message`]
//! sends to chats through the bridges.

pub mod access;
pub mod address;
pub mod approvals;
pub mod arguments;
#[cfg(test)]
mod boundary_tests;
pub mod exec;
pub mod fs;
#[cfg(test)]
mod fs_tests;
pub mod hooks;
pub mod jobs;
pub mod lines;
pub mod loops;
pub mod mcp;
pub mod memory;
pub mod message;
pub mod open;
pub mod origin;
pub mod patch;
pub mod paths;
pub mod pattern;
pub mod pipeline;
pub mod policy;
#[cfg(test)]
mod policy_tests;
pub mod redact;
pub mod registry;
pub mod schedule_book;
pub mod sessions;
#[cfg(test)]
mod tests;
pub mod web;
pub mod workflow_run;
pub mod write;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use registry::ToolRegistry;

use crate::config::ToolSettings;

/// What a tool returns: text for the model and whether it is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// The data boundary refused the call (SPEC §8.3): the audit records
    /// it as `denied` by `boundary`, with the reason.
    pub refused: bool,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            refused: false,
        }
    }
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            refused: false,
        }
    }
    /// The data boundary's refusal: what was asked is not the caller's.
    pub fn refused(content: impl Into<String>) -> Self {
        Self {
            refused: true,
            ..Self::error(content)
        }
    }
}

/// Everything a tool may know about the call it serves.
#[derive(Clone)]
pub struct ToolContext {
    pub agent: String,
    pub session_key: String,
    /// The agent's workspace; file tools cannot leave it.
    pub workspace: PathBuf,
    /// What this turn's file tools, `message` and `exec` may touch in it
    /// (the data boundary for anyone but the owner).
    pub files: access::FileAccess,
    /// Cancelled when the turn is aborted.
    pub cancel: CancellationToken,
    pub settings: Arc<ToolSettings>,
    /// Environment variables that hold secrets; removed from `exec`.
    pub secret_env: Arc<Vec<String>>,
    /// The daemon's background jobs (`exec` with `background`, `process`).
    pub jobs: jobs::Jobs,
    /// The session hub, for the session tools.
    pub sessions: Option<Arc<dyn sessions::SessionAccess>>,
    /// The chat bridges, for `message` (`None`: no bridge runs here).
    pub outbox: Option<Arc<dyn message::Outbox>>,
    /// The workflow engine, for `workflow_run` (`None`: none runs here).
    pub workflows: Option<Arc<dyn workflow_run::WorkflowRunner>>,
    /// The scheduler, for `schedule` (`None`: none runs here).
    pub schedules: Option<Arc<dyn schedule_book::ScheduleBook>>,
    /// Sub-agents spawned in this turn so far.
    pub turn_spawns: Arc<std::sync::atomic::AtomicU32>,
    /// Where the turn's message came from (carried into other sessions).
    pub origin: Arc<policy::ChatOrigin>,
    /// The agent's memory index as this turn may reach it (the memory
    /// tools).
    pub memory: memory::MemoryAccess,
    /// Where `exec` (and hooks that opt in) run confined.
    pub sandbox: Arc<crate::sandbox::Sandbox>,
}

pub type Handler = dyn Fn(serde_json::Value, ToolContext) -> Pin<Box<dyn Future<Output = ToolOutput> + Send>>
    + Send
    + Sync;

/// Static facts about a tool used by selection and policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolFlags {
    /// Offered only when an allowlist names it.
    pub optional: bool,
    /// Identical repeated calls are pointless (searches, fetches).
    pub dedupe: bool,
    /// Never offered to senders who are not owners.
    pub owner_only: bool,
}

/// Where a tool comes from (SPEC §8.1); policy groups follow from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    Core,
    /// A configured MCP server.
    Mcp {
        server: String,
    },
    /// A plugin's MCP server.
    Plugin {
        id: String,
        server: String,
    },
}

/// One tool: its model-facing description and its implementation.
#[derive(Clone)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// Shared with every [`crate::llm::ToolSpec`] made of it (see there).
    pub parameters: Arc<serde_json::Value>,
    /// Policy groups without the `group:` prefix (`fs`, `runtime`, …).
    pub groups: Vec<String>,
    pub flags: ToolFlags,
    pub source: ToolSource,
    /// Parameter names models habitually get wrong, and the right ones.
    pub aliases: Vec<(String, String)>,
    /// Compiled on first use: most tools are never called in a session,
    /// and compiling at start-up costs time and memory.
    validator: Arc<std::sync::OnceLock<Option<jsonschema::Validator>>>,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ToolDef {
    /// Defines a tool whose arguments deserialize into `A`; the JSON schema
    /// comes from `A`'s `JsonSchema` derive, so the two cannot drift apart.
    pub fn typed<A, F, Fut>(
        name: &str,
        description: &str,
        groups: &[&str],
        flags: ToolFlags,
        run: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolOutput> + Send + 'static,
    {
        let run = Arc::new(run);
        let tool_name = name.to_string();
        let handler = move |args: serde_json::Value, ctx: ToolContext| {
            let run = run.clone();
            let tool_name = tool_name.clone();
            Box::pin(async move {
                match serde_json::from_value::<A>(args) {
                    Ok(parsed) => run(parsed, ctx).await,
                    Err(e) => ToolOutput::error(format!(
                        "invalid arguments for `{tool_name}`: {e}. Check the parameter names and types against the tool's schema and call it again."
                    )),
                }
            }) as Pin<Box<dyn Future<Output = ToolOutput> + Send>>
        };
        Self::dynamic(
            name,
            description,
            schema_of::<A>(),
            groups.iter().map(|g| g.to_string()).collect(),
            flags,
            ToolSource::Core,
            Arc::new(handler),
        )
    }

    /// Defines a tool from a JSON schema known only at run time (MCP).
    pub fn dynamic(
        name: &str,
        description: &str,
        parameters: serde_json::Value,
        groups: Vec<String>,
        flags: ToolFlags,
        source: ToolSource,
        handler: Arc<Handler>,
    ) -> Self {
        Self {
            name: name.to_string(),
            description: description.to_string(),
            parameters: Arc::new(parameters),
            groups,
            flags,
            source,
            aliases: Vec::new(),
            validator: Arc::default(),
            handler,
        }
    }

    /// Declares parameter names that are fixed to the right ones before
    /// validation (`file_path` → `path`).
    pub fn with_aliases(mut self, aliases: &[(&str, &str)]) -> Self {
        self.aliases = aliases
            .iter()
            .map(|(wrong, right)| (wrong.to_string(), right.to_string()))
            .collect();
        self
    }

    /// Reads raw model arguments (JSON text) into an object, fixes declared
    /// aliases and validates it against the schema. The error is a tool
    /// error the model can act on.
    pub fn prepare(&self, raw_arguments: &str) -> Result<serde_json::Value, ToolOutput> {
        let trimmed = raw_arguments.trim();
        let mut value = if trimmed.is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            match serde_json::from_str::<serde_json::Value>(trimmed) {
                Ok(v @ serde_json::Value::Object(_)) => v,
                Ok(other) => {
                    return Err(ToolOutput::error(format!(
                        "arguments for `{}` must be a JSON object, got {}",
                        self.name,
                        json_kind(&other)
                    )));
                }
                Err(e) => {
                    return Err(ToolOutput::error(format!(
                        "arguments for `{}` are not valid JSON ({e}): {}. Send them again as one complete JSON object.",
                        self.name,
                        crate::util::preview(trimmed, 200)
                    )));
                }
            }
        };
        if let serde_json::Value::Object(map) = &mut value {
            for (wrong, right) in &self.aliases {
                if !map.contains_key(right)
                    && let Some(v) = map.remove(wrong)
                {
                    map.insert(right.clone(), v);
                }
            }
        }
        self.validate(&value)?;
        Ok(value)
    }

    /// Checks arguments against the schema (also after a hook replaced them).
    pub fn validate(&self, args: &serde_json::Value) -> Result<(), ToolOutput> {
        let compiled = self.validator.get_or_init(|| {
            // A schema the validator cannot compile (servers send odd ones)
            // only loses validation; the tool still works.
            match jsonschema::validator_for(&self.parameters) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(tool = %self.name, error = %e, "the tool's JSON schema cannot be compiled; its arguments are not validated");
                    None
                }
            }
        });
        let Some(validator) = compiled else {
            return Ok(());
        };
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at `{at}`: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        Err(ToolOutput::error(format!(
            "invalid arguments for `{}`: {}. The parameters are: {}. Call it again with corrected arguments.",
            self.name,
            problems.join("; "),
            parameter_summary(&self.parameters)
        )))
    }

    /// Runs the tool on prepared arguments.
    pub async fn execute(&self, args: serde_json::Value, ctx: ToolContext) -> ToolOutput {
        (self.handler)(args, ctx).await
    }

    /// Prepares and runs in one step. Invalid arguments are a tool error the
    /// model can act on, never a crash.
    pub async fn call(&self, raw_arguments: &str, ctx: ToolContext) -> ToolOutput {
        match self.prepare(raw_arguments) {
            Ok(args) => self.execute(args, ctx).await,
            Err(e) => e,
        }
    }
}

/// `path (string, required), offset (integer)` for error messages.
fn parameter_summary(schema: &serde_json::Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return "none".into();
    };
    if props.is_empty() {
        return "none".into();
    }
    props
        .iter()
        .map(|(name, p)| {
            let ty = match p.get("type") {
                Some(serde_json::Value::String(t)) => t.clone(),
                Some(serde_json::Value::Array(ts)) => ts
                    .iter()
                    .filter_map(|t| t.as_str())
                    .filter(|t| *t != "null")
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".into(),
            };
            let req = if required.contains(&name.as_str()) {
                ", required"
            } else {
                ""
            };
            format!("{name} ({ty}{req})")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The JSON schema of `A`, without the `$schema`/`title` noise models do
/// not need.
pub fn schema_of<A: JsonSchema>() -> serde_json::Value {
    let mut value = serde_json::to_value(schemars::schema_for!(A))
        .unwrap_or_else(|_| serde_json::json!({"type": "object"}));
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.entry("properties")
            .or_insert_with(|| serde_json::json!({}));
    }
    value
}
