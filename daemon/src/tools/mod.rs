//! Tools (SPEC §8): a tool is defined once ([`ToolDef`]) with a JSON schema
//! derived from its Rust argument type; the [`registry`] holds them and
//! selects what an agent may use; [`paths`] confines file tools to the
//! workspace; [`fs`] and [`exec`] are the core tools of this version.

pub mod exec;
pub mod fs;
pub mod paths;
pub mod registry;
#[cfg(test)]
mod tests;

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
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
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
    /// Cancelled when the turn is aborted.
    pub cancel: CancellationToken,
    pub settings: Arc<ToolSettings>,
    /// Environment variables that hold secrets; removed from `exec`.
    pub secret_env: Arc<Vec<String>>,
}

type Handler = dyn Fn(serde_json::Value, ToolContext) -> Pin<Box<dyn Future<Output = ToolOutput> + Send>>
    + Send
    + Sync;

/// Static facts about a tool used by selection and (later) policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolFlags {
    /// Offered only when an allowlist names it.
    pub optional: bool,
    /// Identical repeated calls are pointless (searches, fetches).
    pub dedupe: bool,
    /// Never offered to senders who are not owners.
    pub owner_only: bool,
}

/// One tool: its model-facing description and its implementation.
#[derive(Clone)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
    pub groups: &'static [&'static str],
    pub flags: ToolFlags,
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
        groups: &'static [&'static str],
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
        Self {
            name: name.to_string(),
            description: description.to_string(),
            parameters: schema_of::<A>(),
            groups,
            flags,
            handler: Arc::new(handler),
        }
    }

    /// Runs the tool on raw model arguments (JSON text). Invalid JSON is a
    /// tool error the model can act on, never a crash.
    pub async fn call(&self, raw_arguments: &str, ctx: ToolContext) -> ToolOutput {
        let trimmed = raw_arguments.trim();
        let value = if trimmed.is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            match serde_json::from_str::<serde_json::Value>(trimmed) {
                Ok(v @ serde_json::Value::Object(_)) => v,
                Ok(other) => {
                    return ToolOutput::error(format!(
                        "arguments for `{}` must be a JSON object, got {}",
                        self.name,
                        json_kind(&other)
                    ));
                }
                Err(e) => {
                    return ToolOutput::error(format!(
                        "arguments for `{}` are not valid JSON ({e}): {}. Send them again as one complete JSON object.",
                        self.name,
                        crate::util::preview(trimmed, 200)
                    ));
                }
            }
        };
        (self.handler)(value, ctx).await
    }
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
