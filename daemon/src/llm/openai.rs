//! The OpenAI chat-completions wire format (also OpenRouter, Ollama,
//! llama.cpp server, vLLM, LM Studio): request body and stream decoding.
//! The stream's terminator is `data: [DONE]`.

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};
use serde_json::{Value, json};

use super::sse::SseEvent;
use super::{Delta, FinishReason, LlmError, Message, Part, Request, Role, arguments_object};
use crate::config::ModelTarget;
use crate::session::transcript::Usage;

pub fn endpoint(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

/// A chat-completions request body, written out by `serde`. The
/// conversation is built as JSON values; the system prompt and the tools'
/// schemas are borrowed from the request and written as they are: copying
/// every schema into a value tree for each call cost more than all the
/// rest of a call's own work.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    messages: Messages<'a>,
    stream: bool,
    stream_options: StreamOptions,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<FunctionTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

/// The system prompt as the first message, then the conversation's.
struct Messages<'a> {
    system: &'a str,
    rest: Vec<Value>,
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let system = !self.system.is_empty();
        let mut seq = s.serialize_seq(Some(self.rest.len() + usize::from(system)))?;
        if system {
            seq.serialize_element(&SystemMessage {
                role: "system",
                content: self.system,
            })?;
        }
        for m in &self.rest {
            seq.serialize_element(m)?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct SystemMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

pub fn body<'a>(req: &'a Request, target: &'a ModelTarget) -> Body<'a> {
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        push_message(&mut messages, m, target.vision);
    }
    Body {
        model: &target.model,
        messages: Messages {
            system: &req.system,
            rest: messages,
        },
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: target.max_output_tokens,
        tools: req
            .tools
            .iter()
            .map(|t| FunctionTool {
                kind: "function",
                function: Function {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        // As a JSON number from the f32 widened, as the value tree wrote it.
        temperature: target.temperature.map(f64::from),
    }
}

fn push_message(out: &mut Vec<Value>, m: &Message, vision: bool) {
    match m.role {
        Role::User => {
            let mut text = String::new();
            let mut images = Vec::new();
            for part in &m.parts {
                match part {
                    Part::Text(t) => {
                        if !text.is_empty() {
                            text.push_str("\n\n");
                        }
                        text.push_str(t);
                    }
                    Part::ToolResult {
                        call_id,
                        content,
                        is_error,
                        ..
                    } => {
                        let content = if *is_error {
                            format!("ERROR: {content}")
                        } else {
                            content.clone()
                        };
                        out.push(
                            json!({"role": "tool", "tool_call_id": call_id, "content": content}),
                        );
                    }
                    // A text-only model rejects the whole request over an
                    // image part; it reads the note that names the file.
                    Part::Image { media_type, data } if vision => images.push(json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{media_type};base64,{data}")},
                    })),
                    Part::Image { .. } | Part::ToolCall(_) => {}
                }
            }
            if images.is_empty() {
                // A plain string, as before images existed: servers that
                // take no content arrays (and cached prefixes) see no change.
                if !text.is_empty() {
                    out.push(json!({"role": "user", "content": text}));
                }
            } else {
                let mut content = Vec::with_capacity(images.len() + 1);
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                content.extend(images);
                out.push(json!({"role": "user", "content": content}));
            }
        }
        Role::Assistant => {
            let text: String = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            let calls: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall(c) => Some(json!({
                        "id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": arguments_object(&c.arguments).to_string()}
                    })),
                    _ => None,
                })
                .collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
    }
}

/// Stream decoder state.
#[derive(Debug, Default)]
pub struct Decoder {
    done: bool,
}

impl Decoder {
    /// True once `[DONE]` arrived.
    pub fn finished(&self) -> bool {
        self.done
    }

    pub fn event(&mut self, ev: &SseEvent) -> Result<Vec<Delta>, LlmError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::Protocol(format!(
                "stream chunk is not JSON ({e}): {}",
                crate::util::preview(data, 200)
            ))
        })?;
        if let Some(err) = v.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), str::to_string);
            return Err(LlmError::Stream {
                message,
                retryable: true,
            });
        }
        let mut out = Vec::new();
        if let Some(choice) = v.get("choices").and_then(|c| c.get(0)) {
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            if let Some(delta) = delta {
                if let Some(text) = delta.get("content").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    out.push(Delta::Text(text.to_string()));
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for (n, call) in calls.iter().enumerate() {
                        let index = call
                            .get("index")
                            .and_then(Value::as_u64)
                            .map_or(n, |i| i as usize);
                        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                        let function = call.get("function");
                        let name = function
                            .and_then(|f| f.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if !id.is_empty() || !name.is_empty() {
                            out.push(Delta::ToolCallStart {
                                index,
                                id: id.into(),
                                name: name.into(),
                            });
                        }
                        match function.and_then(|f| f.get("arguments")) {
                            Some(Value::String(s)) if !s.is_empty() => {
                                out.push(Delta::ToolCallArgs {
                                    index,
                                    fragment: s.clone(),
                                })
                            }
                            // Some servers send the arguments as an object.
                            Some(obj @ Value::Object(_)) => out.push(Delta::ToolCallArgs {
                                index,
                                fragment: obj.to_string(),
                            }),
                            _ => {}
                        }
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                out.push(Delta::Finish(match reason {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    other => FinishReason::Other(other.to_string()),
                }));
            }
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            out.push(Delta::Usage(Usage {
                input: usage
                    .get("prompt_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                output: usage
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            }));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ReplyBuilder, ToolCall, ToolSpec};

    fn data(s: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: s.to_string(),
        }
    }

    #[test]
    fn decodes_text_tool_deltas_usage_and_done() {
        let mut d = Decoder::default();
        let mut b = ReplyBuilder::default();
        for chunk in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5}}"#,
        ] {
            for delta in d.event(&data(chunk)).unwrap() {
                b.apply(delta);
            }
        }
        assert!(!d.finished());
        d.event(&data("[DONE]")).unwrap();
        assert!(d.finished());
        let r = b.finish();
        assert_eq!(r.text, "Hi");
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: "{\"path\":\"a.txt\"}".into()
            }]
        );
        assert_eq!(
            r.usage,
            Usage {
                input: 12,
                output: 5
            }
        );
        assert_eq!(r.finish, FinishReason::ToolCalls);
    }

    #[test]
    fn error_chunks_and_garbage_are_errors() {
        let mut d = Decoder::default();
        assert!(matches!(
            d.event(&data(r#"{"error":{"message":"overloaded"}}"#)),
            Err(LlmError::Stream { .. })
        ));
        assert!(matches!(
            d.event(&data("{not json")),
            Err(LlmError::Protocol(_))
        ));
    }

    #[test]
    fn body_maps_tool_history() {
        let req = Request {
            system: "sys".into(),
            messages: vec![
                Message::user("hi"),
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "c".into(),
                        name: "ls".into(),
                        arguments: "not json".into(),
                    })],
                },
                Message {
                    role: Role::User,
                    parts: vec![Part::ToolResult {
                        call_id: "c".into(),
                        name: "ls".into(),
                        content: "boom".into(),
                        is_error: true,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "ls".into(),
                description: "list".into(),
                parameters: json!({"type":"object"}).into(),
            }],
        };
        let target = ModelTarget {
            provider: "p".into(),
            model: "m".into(),
            context_window: Some(1000),
            max_output_tokens: 100,
            temperature: Some(0.5),
            vision: false,
            price: None,
        };
        let b = serde_json::to_value(body(&req, &target)).unwrap();
        assert_eq!(b["model"], "m");
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["temperature"], 0.5);
        let msgs = b["messages"].as_array().unwrap();
        assert_eq!(msgs[0]["role"], "system");
        assert_eq!(msgs[2]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(msgs[3]["role"], "tool");
        assert_eq!(msgs[3]["content"], "ERROR: boom");
        assert_eq!(b["tools"][0]["type"], "function");
        assert_eq!(b["tools"][0]["function"]["name"], "ls");
        assert_eq!(b["tools"][0]["function"]["description"], "list");
        assert_eq!(
            b["tools"][0]["function"]["parameters"],
            json!({"type":"object"})
        );
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
    }

    fn photo_message() -> Message {
        Message {
            role: Role::User,
            parts: vec![
                Part::Text("what is this?\n\n[photo saved as inbox/p.jpg (4 bytes)]".into()),
                Part::Image {
                    media_type: "image/jpeg".into(),
                    data: "/9j/4A==".into(),
                },
            ],
        }
    }

    fn target(vision: bool) -> ModelTarget {
        ModelTarget {
            provider: "p".into(),
            model: "m".into(),
            context_window: None,
            max_output_tokens: 100,
            temperature: None,
            vision,
            price: None,
        }
    }

    #[test]
    fn an_image_goes_to_a_vision_model_as_a_data_uri_content_part() {
        let req = Request {
            system: String::new(),
            messages: vec![photo_message()],
            tools: vec![],
        };
        let b = serde_json::to_value(body(&req, &target(true))).unwrap();
        let content = b["messages"][0]["content"].as_array().unwrap();
        assert_eq!(b["messages"][0]["role"], "user");
        assert_eq!(content.len(), 2);
        assert_eq!(content[0]["type"], "text");
        assert!(
            content[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("what is this?")
        );
        assert_eq!(content[1]["type"], "image_url");
        assert_eq!(
            content[1]["image_url"]["url"],
            "data:image/jpeg;base64,/9j/4A=="
        );
    }

    #[test]
    fn a_model_without_vision_gets_the_text_only_as_a_plain_string() {
        let req = Request {
            system: String::new(),
            messages: vec![photo_message()],
            tools: vec![],
        };
        let b = serde_json::to_value(body(&req, &target(false))).unwrap();
        assert!(b["messages"][0]["content"].is_string(), "{b}");
        assert!(!b.to_string().contains("image_url"), "{b}");
        assert!(!b.to_string().contains("/9j/4A=="), "{b}");
        // No system prompt, no tools, no temperature: none is sent.
        assert_eq!(b["messages"].as_array().unwrap().len(), 1, "{b}");
        assert!(
            b.get("tools").is_none() && b.get("temperature").is_none(),
            "{b}"
        );
    }
}
