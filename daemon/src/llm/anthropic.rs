//! The Anthropic messages wire format: request body (with the strict
//! user/assistant alternation the API demands) and stream decoding. The
//! stream's terminator is the `message_stop` event.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::sse::SseEvent;
use super::{Delta, FinishReason, LlmError, Message, Part, Request, Role, arguments_object};
use crate::config::ModelTarget;
use crate::session::transcript::Usage;

pub const API_VERSION: &str = "2023-06-01";

pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

pub fn body<'a>(req: &'a Request, target: &'a ModelTarget) -> Body<'a> {
    let mut messages: Vec<(Role, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let blocks = blocks(m, target.vision);
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            // Merge same-role neighbours: the API requires alternation.
            Some((role, existing)) if *role == m.role => existing.extend(blocks),
            _ => messages.push((m.role, blocks)),
        }
    }
    // The first message must come from the user.
    if messages.first().is_some_and(|(r, _)| *r == Role::Assistant) {
        messages.insert(
            0,
            (
                Role::User,
                vec![json!({"type": "text", "text": "(conversation continues)"})],
            ),
        );
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, mut content)| {
            // tool_result blocks must lead a user message.
            content.sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            json!({"role": if role == Role::User { "user" } else { "assistant" }, "content": content})
        })
        .collect();
    Body {
        model: &target.model,
        max_tokens: target.max_output_tokens,
        messages,
        stream: true,
        system: &req.system,
        tools: req
            .tools
            .iter()
            .map(|t| Tool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
            })
            .collect(),
        // As a JSON number from the f32 widened, as the value tree wrote it.
        temperature: target.temperature.map(f64::from),
    }
}

/// A messages request body, written out by `serde`: the conversation
/// built as JSON values, the system prompt and the tools' schemas
/// borrowed from the request (see `openai::Body`).
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Value>,
    stream: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

fn blocks(m: &Message, vision: bool) -> Vec<Value> {
    m.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) if t.trim().is_empty() => None,
            Part::Text(t) => Some(json!({"type": "text", "text": t})),
            Part::ToolCall(c) if m.role == Role::Assistant => Some(json!({
                "type": "tool_use", "id": c.id, "name": c.name, "input": arguments_object(&c.arguments)
            })),
            Part::ToolCall(_) => None,
            Part::ToolResult { call_id, content, is_error, .. } => Some(json!({
                "type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error
            })),
            // A text-only model rejects the whole request over an image
            // block; it reads the note that names the file.
            Part::Image { media_type, data } if vision && m.role == Role::User => Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": &**data},
            })),
            Part::Image { .. } => None,
        })
        .collect()
}

/// Stream decoder state.
#[derive(Debug, Default)]
pub struct Decoder {
    done: bool,
    /// Anthropic content-block index → our tool-call index.
    tool_blocks: HashMap<u64, usize>,
}

impl Decoder {
    /// True once `message_stop` arrived.
    pub fn finished(&self) -> bool {
        self.done
    }

    pub fn event(&mut self, ev: &SseEvent) -> Result<Vec<Delta>, LlmError> {
        if ev.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(&ev.data).map_err(|e| {
            LlmError::Protocol(format!(
                "stream event is not JSON ({e}): {}",
                crate::util::preview(&ev.data, 200)
            ))
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or_default();
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    out.push(Delta::Usage(usage(u)));
                }
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = v.get("content_block").cloned().unwrap_or(Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let ours = self.tool_blocks.len();
                        self.tool_blocks.insert(index, ours);
                        out.push(Delta::ToolCallStart {
                            index: ours,
                            id: block
                                .get("id")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .into(),
                            name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .into(),
                        });
                        // Non-streaming servers may put the whole input here.
                        if let Some(input) = block
                            .get("input")
                            .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                        {
                            out.push(Delta::ToolCallArgs {
                                index: ours,
                                fragment: input.to_string(),
                            });
                        }
                    }
                    Some("text") => {
                        if let Some(t) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(Delta::Text(t.to_string()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(t) = delta.get("text").and_then(Value::as_str) {
                            out.push(Delta::Text(t.to_string()));
                        }
                    }
                    Some("input_json_delta") => {
                        let fragment = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        match self.tool_blocks.get(&index) {
                            Some(&ours) => out.push(Delta::ToolCallArgs {
                                index: ours,
                                fragment: fragment.into(),
                            }),
                            None => {
                                return Err(LlmError::Protocol(format!(
                                    "input_json_delta for content block {index}, which is not a tool_use block"
                                )));
                            }
                        }
                    }
                    _ => {} // thinking and signature deltas are not used yet
                }
            }
            "message_delta" => {
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.push(Delta::Finish(match reason {
                        "end_turn" | "stop_sequence" => FinishReason::Stop,
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" => FinishReason::Length,
                        other => FinishReason::Other(other.to_string()),
                    }));
                }
                if let Some(u) = v.get("usage") {
                    out.push(Delta::Usage(usage(u)));
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let kind = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                return Err(LlmError::Stream {
                    message: format!("{kind}: {message}"),
                    retryable: matches!(
                        kind,
                        "overloaded_error" | "api_error" | "rate_limit_error"
                    ),
                });
            }
            _ => {} // ping, content_block_stop
        }
        Ok(out)
    }
}

fn usage(u: &Value) -> Usage {
    let input = u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0)
        + u.get("cache_read_input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0)
        + u.get("cache_creation_input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
    Usage {
        input,
        output: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ReplyBuilder, ToolCall};

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: Some(event.into()),
            data: data.into(),
        }
    }

    #[test]
    fn decodes_text_and_streamed_tool_input() {
        let mut d = Decoder::default();
        let mut b = ReplyBuilder::default();
        for (e, data) in [
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":20,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"exec","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ec"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ho hi\"}"}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            ),
        ] {
            for delta in d.event(&ev(e, data)).unwrap() {
                b.apply(delta);
            }
        }
        assert!(!d.finished());
        d.event(&ev("message_stop", r#"{"type":"message_stop"}"#))
            .unwrap();
        assert!(d.finished());
        let r = b.finish();
        assert_eq!(r.text, "Let me look.");
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "toolu_1".into(),
                name: "exec".into(),
                arguments: "{\"command\": \"echo hi\"}".into()
            }]
        );
        assert_eq!(
            r.usage,
            Usage {
                input: 20,
                output: 9
            }
        );
        assert_eq!(r.finish, FinishReason::ToolCalls);
    }

    #[test]
    fn overloaded_error_is_retryable() {
        let mut d = Decoder::default();
        let err = d
            .event(&ev(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ))
            .unwrap_err();
        assert!(err.is_retryable());
    }

    #[test]
    fn body_alternates_roles_and_leads_with_tool_results() {
        let req = Request {
            system: "s".into(),
            messages: vec![
                Message::user("a"),
                Message::user("b"),
                Message {
                    role: Role::Assistant,
                    parts: vec![
                        Part::Text(String::new()),
                        Part::ToolCall(ToolCall {
                            id: "t".into(),
                            name: "ls".into(),
                            arguments: "{\"path\":\".\"}".into(),
                        }),
                    ],
                },
                Message::user("queued follow-up"),
                Message {
                    role: Role::User,
                    parts: vec![Part::ToolResult {
                        call_id: "t".into(),
                        name: "ls".into(),
                        content: "x".into(),
                        is_error: false,
                    }],
                },
            ],
            tools: vec![crate::llm::ToolSpec {
                name: "ls".into(),
                description: "list".into(),
                parameters: json!({"type": "object"}).into(),
            }],
        };
        let target = ModelTarget {
            provider: "p".into(),
            model: "claude".into(),
            context_window: Some(1000),
            max_output_tokens: 10,
            temperature: Some(0.5),
            vision: false,
            price: None,
        };
        let b = serde_json::to_value(body(&req, &target)).unwrap();
        assert_eq!(b["model"], "claude");
        assert_eq!(b["max_tokens"], 10);
        assert_eq!(b["temperature"], 0.5);
        let msgs = b["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0]["content"].as_array().unwrap().len(), 2);
        assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
        assert_eq!(msgs[1]["content"][0]["input"]["path"], ".");
        assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
        assert_eq!(b["system"], "s");
        assert_eq!(
            b["tools"],
            json!([{"name": "ls", "description": "list", "input_schema": {"type": "object"}}])
        );
        assert_eq!(b["stream"], true);
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/messages");
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
    }

    fn photo_request() -> Request {
        Request {
            system: String::new(),
            messages: vec![Message {
                role: Role::User,
                parts: vec![
                    Part::Text("what is this?\n\n[photo saved as inbox/p.png (4 bytes)]".into()),
                    Part::Image {
                        media_type: "image/png".into(),
                        data: "iVBORw==".into(),
                    },
                ],
            }],
            tools: vec![],
        }
    }

    fn target(vision: bool) -> ModelTarget {
        ModelTarget {
            provider: "p".into(),
            model: "claude".into(),
            context_window: None,
            max_output_tokens: 10,
            temperature: None,
            vision,
            price: None,
        }
    }

    #[test]
    fn an_image_goes_to_a_vision_model_as_a_base64_image_block() {
        let b = serde_json::to_value(body(&photo_request(), &target(true))).unwrap();
        let content = b["messages"][0]["content"].as_array().unwrap();
        assert_eq!(content.len(), 2);
        assert_eq!(content[0]["type"], "text");
        assert_eq!(
            content[1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}})
        );
    }

    #[test]
    fn a_model_without_vision_gets_no_image_block() {
        let b = serde_json::to_value(body(&photo_request(), &target(false))).unwrap();
        let content = b["messages"][0]["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "{b}");
        assert_eq!(content[0]["type"], "text");
        assert!(!b.to_string().contains("iVBORw=="), "{b}");
        // No system prompt, no tools, no temperature: none is sent.
        assert!(
            ["system", "tools", "temperature"]
                .iter()
                .all(|k| b.get(k).is_none()),
            "{b}"
        );
    }
}
