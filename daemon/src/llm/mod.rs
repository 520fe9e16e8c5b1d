//! Model providers (SPEC §7): the provider-neutral conversation types, the
//! two wire formats ([`openai`] chat completions, [`anthropic`] messages),
//! SSE decoding ([`sse`]), retry decisions ([`retry`]), tool calls written
//! as text ([`toolcall`]: the hermes and xml formats) and the
//! [`client::ModelClient`] that streams one model call with retries,
//! fallbacks and abort; [`windows`] knows how large each model's context
//! window is.

pub mod anthropic;
pub mod client;
pub mod openai;
pub mod retry;
pub mod sse;
pub mod tls;
pub mod toolcall;
pub mod windows;

use std::sync::Arc;
use std::time::Duration;

use crate::session::transcript::Usage;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// A tool call as the model produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Raw JSON text; may be invalid (then the tool returns an error).
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    ToolCall(ToolCall),
    ToolResult {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
    /// An image in a user message, for a model with `vision` (the wire
    /// formats leave it out for any other, so the text note about the
    /// file is all such a model sees). `media_type` is one of
    /// [`IMAGE_TYPES`]; `data` is the file's bytes in standard base64,
    /// shared because the request is rebuilt for every model call.
    Image {
        media_type: String,
        data: Arc<str>,
    },
}

/// The image types both wire formats accept (Anthropic takes exactly
/// these four; OpenAI also these).
pub const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            parts: vec![Part::Text(text.into())],
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object, shared with the tool's
    /// definition: a turn offers the same schemas on every call, and
    /// copying each schema's tree per request cost more than the rest of
    /// the request.
    pub parameters: std::sync::Arc<serde_json::Value>,
}

/// One model call, independent of the model that answers it: the model
/// id, output limit and temperature come from the `ModelTarget` each
/// attempt uses, so fallbacks never copy the conversation.
#[derive(Debug, Clone)]
pub struct Request {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

impl Request {
    /// Whether any message carries an image.
    pub fn has_images(&self) -> bool {
        self.messages
            .iter()
            .any(|m| m.parts.iter().any(|p| matches!(p, Part::Image { .. })))
    }

    /// The request for a model without vision: every image part left out
    /// (the text that names the file stays).
    pub fn without_images(&self) -> Request {
        Request {
            system: self.system.clone(),
            messages: self
                .messages
                .iter()
                .map(|m| Message {
                    role: m.role,
                    parts: m
                        .parts
                        .iter()
                        .filter(|p| !matches!(p, Part::Image { .. }))
                        .cloned()
                        .collect(),
                })
                .collect(),
            tools: self.tools.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    Other(String),
}

impl FinishReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::Other(s) => s,
        }
    }
}

/// A streamed piece of a reply, in provider-neutral form.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Text(String),
    /// A tool call begins at `index` (ids and names may come in pieces too).
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArgs {
        index: usize,
        fragment: String,
    },
    Usage(Usage),
    Finish(FinishReason),
}

/// A complete reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish: FinishReason,
    /// Tool-call markup in a text-format reply that could not be read, as
    /// sentences for the model (the agent loop rolls such replies back).
    pub markup_problems: Vec<String>,
}

/// Builds a [`Reply`] from deltas.
#[derive(Debug, Default)]
pub struct ReplyBuilder {
    text: String,
    calls: Vec<(usize, ToolCall)>,
    usage: Usage,
    finish: Option<FinishReason>,
}

impl ReplyBuilder {
    pub fn apply(&mut self, delta: Delta) {
        match delta {
            Delta::Text(t) => self.text.push_str(&t),
            Delta::ToolCallStart { index, id, name } => {
                let call = self.call_at(index);
                if !id.is_empty() {
                    call.id = id;
                }
                call.name.push_str(&name);
            }
            Delta::ToolCallArgs { index, fragment } => {
                self.call_at(index).arguments.push_str(&fragment)
            }
            Delta::Usage(u) => {
                // Providers report input and output at different moments;
                // keep the largest seen of each.
                self.usage.input = self.usage.input.max(u.input);
                self.usage.output = self.usage.output.max(u.output);
            }
            Delta::Finish(f) => self.finish = Some(f),
        }
    }

    fn call_at(&mut self, index: usize) -> &mut ToolCall {
        let pos = match self.calls.iter().position(|(i, _)| *i == index) {
            Some(pos) => pos,
            None => {
                self.calls.push((
                    index,
                    ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    },
                ));
                self.calls.len() - 1
            }
        };
        &mut self.calls[pos].1
    }

    pub fn finish(mut self) -> Reply {
        self.calls.sort_by_key(|(i, _)| *i);
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(n, (_, mut c))| {
                if c.id.is_empty() {
                    c.id = format!("call_{n}");
                }
                c
            })
            .collect();
        let finish = self.finish.unwrap_or(if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        Reply {
            text: self.text,
            tool_calls,
            usage: self.usage,
            finish,
            markup_problems: Vec::new(),
        }
    }
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("cannot connect: {0}")]
    Connect(String),
    /// No connection could be made at all: the whole sentence the user
    /// sees, naming the provider, its address and what to check.
    #[error("cannot connect to provider `{provider}` at {base_url}: {cause}")]
    Unreachable {
        provider: String,
        base_url: String,
        cause: Unreachable,
    },
    #[error("the provider stopped sending data (idle timeout)")]
    Timeout,
    #[error(
        "the response stream ended before its terminator ({0}); this is not taken as an answer"
    )]
    Truncated(String),
    #[error("the provider reported an error in the stream: {message}")]
    Stream { message: String, retryable: bool },
    #[error("unexpected response: {0}")]
    Protocol(String),
    #[error("{0}")]
    NotConfigured(String),
    #[error("aborted")]
    Aborted,
}

/// Why no connection to a provider could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    /// The host name does not resolve.
    Dns,
    /// Nothing listens at the address.
    Refused,
    /// The connection attempt timed out.
    TimedOut,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Dns => "the host name does not resolve; check base_url (`pincer doctor`)",
            Self::Refused => {
                "the connection was refused; check that the server is running and base_url (`pincer doctor`)"
            }
            Self::TimedOut => {
                "the connection timed out; check the network and base_url (`pincer doctor`)"
            }
        })
    }
}

impl LlmError {
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
            Self::Connect(_) | Self::Timeout | Self::Truncated(_) => true,
            // A name that does not resolve or a port nobody listens on does
            // not heal in the seconds a backoff waits; a connect timeout
            // may be a lost packet (see `retry::decide`).
            Self::Unreachable { cause, .. } => *cause == Unreachable::TimedOut,
            Self::Stream { retryable, .. } => *retryable,
            Self::Protocol(_) | Self::NotConfigured(_) | Self::Aborted => false,
        }
    }

    /// The provider refused the prompt as longer than the model's context
    /// window (SPEC §9: compact and retry). Providers say so in words, not
    /// codes, so this reads the message: OpenAI's `context_length_exceeded`,
    /// Anthropic's "prompt is too long", llama.cpp's "exceeds the available
    /// context size", vLLM's "maximum context length", and kin.
    pub fn is_context_overflow(&self) -> bool {
        let message = match self {
            Self::Http {
                status: 400 | 413 | 422,
                message,
                ..
            } => message,
            Self::Stream { message, .. } => message,
            _ => return false,
        };
        let m = message.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "context length",
            "context window",
            "context size",
            "prompt is too long",
            "too many tokens",
            "maximum context",
            "reduce the length",
            "exceeds the model",
            "input is too long",
        ]
        .iter()
        .any(|needle| m.contains(needle))
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Turns a reply's arguments into a JSON object for providers that need
/// one; invalid or non-object arguments become `{}` (the tool result tells
/// the model what was wrong).
pub fn arguments_object(raw: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => serde_json::json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_overflow_is_read_from_the_providers_words() {
        let http = |status: u16, message: &str| LlmError::Http {
            status,
            message: message.into(),
            retry_after: None,
        };
        for message in [
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "the request exceeds the available context size, try increasing it",
            "Error code: context_length_exceeded",
        ] {
            assert!(http(400, message).is_context_overflow(), "{message}");
        }
        assert!(!http(400, "invalid tool schema").is_context_overflow());
        assert!(!http(500, "maximum context length").is_context_overflow());
        assert!(!LlmError::Timeout.is_context_overflow());
    }

    #[test]
    fn builder_joins_split_tool_calls_in_index_order() {
        let mut b = ReplyBuilder::default();
        b.apply(Delta::ToolCallStart {
            index: 1,
            id: "b".into(),
            name: "exec".into(),
        });
        b.apply(Delta::ToolCallStart {
            index: 0,
            id: "a".into(),
            name: "re".into(),
        });
        b.apply(Delta::ToolCallStart {
            index: 0,
            id: String::new(),
            name: "ad".into(),
        });
        b.apply(Delta::ToolCallArgs {
            index: 0,
            fragment: "{\"pa".into(),
        });
        b.apply(Delta::ToolCallArgs {
            index: 1,
            fragment: "{}".into(),
        });
        b.apply(Delta::ToolCallArgs {
            index: 0,
            fragment: "th\":\"x\"}".into(),
        });
        b.apply(Delta::Usage(Usage {
            input: 10,
            output: 0,
        }));
        b.apply(Delta::Usage(Usage {
            input: 0,
            output: 4,
        }));
        let r = b.finish();
        assert_eq!(
            r.tool_calls[0],
            ToolCall {
                id: "a".into(),
                name: "read".into(),
                arguments: "{\"path\":\"x\"}".into()
            }
        );
        assert_eq!(r.tool_calls[1].name, "exec");
        assert_eq!(
            r.usage,
            Usage {
                input: 10,
                output: 4
            }
        );
        assert_eq!(r.finish, FinishReason::ToolCalls);
    }
}
