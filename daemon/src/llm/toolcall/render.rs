//! Writing tools, calls and results as text for providers configured with
//! a text tool format: the tool section of the system prompt, past calls in
//! the assistant's messages, and results as one user message of
//! `<tool_result>` blocks. Rendering is deterministic, so the prompt prefix
//! stays byte-identical across the calls of a session.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::config::ToolFormat;
use crate::llm::{Message, Part, Request, Role, ToolSpec, arguments_object};

/// The system-prompt section that describes `tools` in `format`.
pub fn tool_prompt(format: ToolFormat, tools: &[ToolSpec]) -> String {
    let mut out = String::from("# Tools\n\n");
    match format {
        ToolFormat::Hermes | ToolFormat::Native => {
            out.push_str(
                "You may call one or more functions to assist with the user query.\n\n\
                 You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n",
            );
            for t in tools {
                let sig = serde_json::json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": &*t.parameters},
                });
                let _ = writeln!(out, "{sig}");
            }
            out.push_str(
                "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n\
                 <tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>\n",
            );
        }
        ToolFormat::Xml => {
            out.push_str(
                "To use a tool, write an XML element named after the tool, with one child element per parameter:\n\
                 <tool_name>\n<parameter_name>value</parameter_name>\n</tool_name>\n\
                 Write text values as they are; write numbers, booleans, arrays and objects as JSON.\n\n\
                 Available tools:\n",
            );
            for t in tools {
                let _ = write!(
                    out,
                    "\n## {}\n{}\nParameters (JSON schema): {}\n",
                    t.name, t.description, t.parameters
                );
            }
        }
    }
    out.push_str(
        "\nYou may call several tools in one reply. Results come back in the next user message as <tool_result> blocks. \
         When you need no tool, answer in plain text.",
    );
    out
}

/// A parameter value as XML text, so that the parser reads it back the
/// same: text as it is, everything else as JSON — and text that would read
/// as JSON (`10`, `true`) JSON-quoted when the schema does not say the
/// parameter is a string.
pub fn value_text(spec: Option<&ToolSpec>, param: &str, value: &Value) -> String {
    match value {
        Value::String(s) => {
            let typed_string = spec.and_then(|t| super::param_type(t, param)) == Some("string");
            if !typed_string && serde_json::from_str::<Value>(s.trim()).is_ok() {
                value.to_string()
            } else {
                s.clone()
            }
        }
        other => other.to_string(),
    }
}

/// One call written in `format`; `spec` (the tool, when known) decides how
/// ambiguous values are written.
pub fn render_call(
    format: ToolFormat,
    spec: Option<&ToolSpec>,
    name: &str,
    arguments: &Map<String, Value>,
) -> String {
    match format {
        ToolFormat::Hermes | ToolFormat::Native => {
            let call = serde_json::json!({"name": name, "arguments": arguments});
            format!("<tool_call>\n{call}\n</tool_call>")
        }
        ToolFormat::Xml => {
            let mut out = format!("<{name}>\n");
            for (param, value) in arguments {
                let text = value_text(spec, param, value);
                let _ = writeln!(out, "<{param}>{text}</{param}>");
            }
            let _ = write!(out, "</{name}>");
            out
        }
    }
}

/// MiroThinker's form of one call.
pub fn render_mcp_call(server: &str, tool: &str, arguments: &Map<String, Value>) -> String {
    format!(
        "<use_mcp_tool>\n<server_name>{server}</server_name>\n<tool_name>{tool}</tool_name>\n<arguments>\n{}\n</arguments>\n</use_mcp_tool>",
        Value::Object(arguments.clone())
    )
}

/// One result block.
pub fn render_result(name: &str, call_id: &str, content: &str, is_error: bool) -> String {
    let status = if is_error { " status=\"error\"" } else { "" };
    format!(
        "<tool_result name=\"{}\" call_id=\"{}\"{status}>\n{content}\n</tool_result>",
        super::scan::escape_attr(name),
        super::scan::escape_attr(call_id)
    )
}

/// `req` rewritten for a provider that takes tool calls as text: the tools
/// move into the system prompt, past calls become text in the assistant's
/// messages and results become user messages of result blocks. Images
/// stay parts of their message, after its text: the tool format is about
/// calls, not about what the model can see (the wire format still leaves
/// them out for a model without vision).
pub fn to_text_request(req: &Request, format: ToolFormat) -> Request {
    let mut system = req.system.clone();
    if !req.tools.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&tool_prompt(format, &req.tools));
    }
    let messages = req
        .messages
        .iter()
        .map(|m| {
            let mut parts = vec![Part::Text(message_text(m, format, &req.tools))];
            parts.extend(
                m.parts
                    .iter()
                    .filter(|p| matches!(p, Part::Image { .. }))
                    .cloned(),
            );
            Message {
                role: m.role,
                parts,
            }
        })
        .collect();
    Request {
        system,
        messages,
        tools: Vec::new(),
    }
}

fn message_text(m: &Message, format: ToolFormat, tools: &[ToolSpec]) -> String {
    let mut pieces: Vec<String> = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text(t) if !t.is_empty() => pieces.push(t.clone()),
            Part::Text(_) => {}
            Part::ToolCall(call) => {
                let args = match arguments_object(&call.arguments) {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                let spec = super::find_tool(tools, &call.name);
                pieces.push(render_call(format, spec, &call.name, &args));
            }
            Part::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => pieces.push(render_result(name, call_id, content, *is_error)),
            // Kept as parts by `to_text_request`.
            Part::Image { .. } => {}
        }
    }
    let sep = if m.role == Role::User { "\n" } else { "\n\n" };
    pieces.join(sep)
}
