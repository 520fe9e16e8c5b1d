//! Reading the OpenAI-shaped requests our scripted model and fakellm
//! receive (the scripted model's journal): the tool results, the tools
//! offered, the first user message.

use serde_json::Value;

/// The content of every `tool` message of a request, in order.
pub fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the tools a request offered.
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The text of the first user message, without the `<turn-context>`
/// block pincerd puts in front of it (the time, recalled memory).
pub fn first_user(request: &Value) -> String {
    let text = request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    without_turn_context(text).to_string()
}

/// A user message's own text: what follows the `<turn-context>` block.
pub fn without_turn_context(text: &str) -> &str {
    match text.split_once("</turn-context>\n\n") {
        Some((head, rest)) if head.starts_with("<turn-context>") => rest,
        _ => text,
    }
}
