//! The last prompt of each session, so that `pincer sessions prompt S`
//! shows exactly what the model received: the system prompt and the
//! messages after the history guard and compaction, rewritten into text
//! for providers that take tool calls as text.
//!
//! Each model call leaves its request in the [`PromptStore`] (a clone, no
//! I/O: creating or replacing a file costs up to a millisecond on some
//! filesystems, more than the rest of a call). When the turn ends it is
//! written beside the transcript as `<session-id>.prompt.json` (off the
//! turn's path) so it outlives a restart. It
//! holds what the transcript holds, so it gets the transcript's 0600 mode.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::ToolFormat;
use crate::llm::{Message, Part, Request, Role};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastPrompt {
    /// RFC 3339 time of the call.
    pub ts: String,
    /// `provider/model` that answered.
    pub model: String,
    /// `native`, `hermes` or `xml`.
    pub tool_format: String,
    /// Our estimate of the prompt's tokens.
    pub estimated_tokens: u64,
    pub system: String,
    pub messages: Vec<Value>,
    /// Tools offered natively (text formats describe them in `system`).
    pub tools: Vec<String>,
}

/// Where a session's last prompt lives.
pub fn path(transcript: &Path) -> PathBuf {
    transcript.with_extension("prompt.json")
}

/// A request as it left for the model, kept as is until someone asks.
#[derive(Debug, Clone)]
pub struct Sent {
    pub ts: String,
    pub model: String,
    pub format: ToolFormat,
    pub estimated_tokens: u64,
    /// Shared with the call that sent it.
    pub request: Arc<Request>,
}

impl Sent {
    /// The prompt as the provider received it: text formats carry tools
    /// and calls as text.
    pub fn to_prompt(&self) -> LastPrompt {
        let text_request;
        let sent = if self.format == ToolFormat::Native {
            &self.request
        } else {
            text_request =
                crate::llm::toolcall::render::to_text_request(&self.request, self.format);
            &text_request
        };
        LastPrompt {
            ts: self.ts.clone(),
            model: self.model.clone(),
            tool_format: self.format.as_str().into(),
            estimated_tokens: self.estimated_tokens,
            system: sent.system.clone(),
            messages: sent.messages.iter().map(message_json).collect(),
            tools: sent.tools.iter().map(|t| t.name.clone()).collect(),
        }
    }
}

/// The last request of each session with a turn running, by session id;
/// when the turn ends it is written beside the transcript and let go, so
/// memory does not grow with every session ever served.
#[derive(Clone, Default)]
pub struct PromptStore {
    sent: Arc<Mutex<HashMap<String, Arc<Sent>>>>,
}

impl PromptStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Sent>>> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record(&self, session_id: &str, sent: Sent) {
        self.lock().insert(session_id.to_string(), Arc::new(sent));
    }

    /// The session's last prompt: from memory, else from its file.
    pub fn get(&self, session_id: &str, transcript: &Path) -> std::io::Result<Option<LastPrompt>> {
        let sent = self.lock().get(session_id).cloned();
        match sent {
            Some(sent) => Ok(Some(sent.to_prompt())),
            None => LastPrompt::read(&path(transcript)),
        }
    }

    /// Writes the session's last prompt beside its transcript, in the
    /// background, then forgets it unless a newer call replaced it
    /// meanwhile (until then [`PromptStore::get`] answers from memory, so
    /// no reader sees the file half-written); a failure is logged.
    pub fn persist(&self, session_id: &str, transcript: &Path) {
        let Some(sent) = self.lock().get(session_id).cloned() else {
            return;
        };
        let file = path(transcript);
        let store = self.clone();
        let id = session_id.to_string();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = sent.to_prompt().write(&file) {
                tracing::warn!(path = %file.display(), error = %e, "cannot keep the last prompt");
                return;
            }
            let mut map = store.lock();
            if map.get(&id).is_some_and(|now| Arc::ptr_eq(now, &sent)) {
                map.remove(&id);
            }
        });
    }

    pub fn forget(&self, session_id: &str) {
        self.lock().remove(session_id);
    }
}

impl LastPrompt {
    /// Overwrites the file in place and trims it to the new length: a
    /// new inode per turn (temporary file and rename, or `O_TRUNC`) costs
    /// 0.2–0.9 ms on ext4, in place about 10 µs. A crash mid-write leaves
    /// a file that does not parse, which [`LastPrompt::read`] reports.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        f.write_all(&bytes)?;
        f.set_len(bytes.len() as u64)
    }

    pub fn read(path: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                std::io::Error::other(format!(
                    "{} does not parse ({e}); it was cut short, and the next turn replaces it",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The prompt as a person reads it.
    pub fn render(&self) -> String {
        let mut s = format!(
            "model: {}  tool format: {}  sent: {}  ~{} tokens\n\n=== system ===\n{}\n",
            self.model, self.tool_format, self.ts, self.estimated_tokens, self.system
        );
        if !self.tools.is_empty() {
            s.push_str(&format!("\n=== tools ===\n{}\n", self.tools.join(", ")));
        }
        for m in &self.messages {
            let role = m["role"].as_str().unwrap_or("?");
            s.push_str(&format!("\n=== {role} ===\n"));
            for p in m["parts"].as_array().into_iter().flatten() {
                match p["type"].as_str() {
                    Some("text") => {
                        s.push_str(p["text"].as_str().unwrap_or(""));
                        s.push('\n');
                    }
                    Some("tool_call") => s.push_str(&format!(
                        "[tool call {} {}] {}\n",
                        p["name"].as_str().unwrap_or(""),
                        p["id"].as_str().unwrap_or(""),
                        p["arguments"].as_str().unwrap_or("")
                    )),
                    Some("image") => s.push_str(&format!(
                        "[image {}, {} bytes]\n",
                        p["media_type"].as_str().unwrap_or(""),
                        p["bytes"].as_u64().unwrap_or(0)
                    )),
                    Some("tool_result") => s.push_str(&format!(
                        "[tool result {} {}{}]\n{}\n",
                        p["name"].as_str().unwrap_or(""),
                        p["call_id"].as_str().unwrap_or(""),
                        if p["is_error"].as_bool() == Some(true) {
                            ", error"
                        } else {
                            ""
                        },
                        p["content"].as_str().unwrap_or("")
                    )),
                    _ => {}
                }
            }
        }
        s
    }
}

fn message_json(m: &Message) -> Value {
    let parts: Vec<Value> = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => json!({"type": "text", "text": t}),
            Part::ToolCall(c) => {
                json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments})
            }
            Part::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => {
                json!({"type": "tool_result", "call_id": call_id, "name": name, "content": content, "is_error": is_error})
            }
            // Its type and size, not the megabytes of base64: the prompt is
            // for reading, and a client decodes at most 4 MiB.
            Part::Image { media_type, data } => {
                let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
                let bytes = (data.len() / 4 * 3).saturating_sub(padding);
                json!({"type": "image", "media_type": media_type, "bytes": bytes})
            }
        })
        .collect();
    json!({
        "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
        "parts": parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolCall};

    fn raw(text: &str, format: ToolFormat) -> Sent {
        Sent {
            ts: "2026-11-23T10:00:00Z".into(),
            model: "p/m".into(),
            format,
            estimated_tokens: 1,
            request: Arc::new(request(text)),
        }
    }

    fn sent(text: &str, format: ToolFormat) -> LastPrompt {
        raw(text, format).to_prompt()
    }

    fn request(text: &str) -> Request {
        Request {
            system: "sys".into(),
            messages: vec![
                Message::user(text),
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "read".into(),
                        arguments: "{\"path\":\"a\"}".into(),
                    })],
                },
            ],
            tools: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_persisted_prompt_leaves_memory_and_is_read_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("s.jsonl");
        let store = PromptStore::default();
        store.record("s", raw("first turn", ToolFormat::Native));
        store.persist("s", &transcript);
        for _ in 0..500 {
            if store.lock().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        assert!(store.lock().is_empty(), "the prompt stayed in memory");
        let read = store.get("s", &transcript).unwrap().unwrap();
        assert_eq!(read, sent("first turn", ToolFormat::Native));
    }

    #[test]
    fn a_shorter_prompt_replaces_a_longer_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(&dir.path().join("s.jsonl"));
        assert_eq!(file, dir.path().join("s.prompt.json"));
        let long = sent(&"x".repeat(5000), ToolFormat::Native);
        long.write(&file).unwrap();
        let short = sent("hi", ToolFormat::Native);
        short.write(&file).unwrap();
        assert_eq!(LastPrompt::read(&file).unwrap(), Some(short.clone()));
        let text = short.render();
        assert!(text.contains("=== system ===\nsys"), "{text}");
        assert!(
            text.contains("[tool call read c1] {\"path\":\"a\"}"),
            "{text}"
        );
        // A torn file is reported, not taken for a prompt.
        std::fs::write(&file, "{\"ts\": \"20").unwrap();
        let err = LastPrompt::read(&file).unwrap_err().to_string();
        assert!(err.contains("does not parse"), "{err}");
        assert_eq!(
            LastPrompt::read(&dir.path().join("none.json")).unwrap(),
            None
        );
    }

    #[test]
    fn an_image_is_shown_by_its_type_and_size_not_its_bytes() {
        let mut r = raw("look", ToolFormat::Native);
        Arc::make_mut(&mut r.request).messages[0]
            .parts
            .push(Part::Image {
                media_type: "image/png".into(),
                data: "iVBORw0K".into(),
            });
        let p = r.to_prompt();
        assert_eq!(
            p.messages[0]["parts"][1],
            json!({"type": "image", "media_type": "image/png", "bytes": 6})
        );
        assert!(
            p.render().contains("look\n[image image/png, 6 bytes]\n"),
            "{}",
            p.render()
        );
        Arc::make_mut(&mut r.request).messages[0].parts[1] = Part::Image {
            media_type: "image/jpeg".into(),
            data: "/9j/4A==".into(),
        };
        assert_eq!(r.to_prompt().messages[0]["parts"][1]["bytes"], 4);
    }

    #[test]
    fn text_formats_are_shown_as_sent() {
        let p = sent("hi", ToolFormat::Hermes);
        assert_eq!(p.tool_format, "hermes");
        // The call went out as text, not as a native tool call.
        assert!(
            p.messages[1].to_string().contains("<tool_call>"),
            "{:?}",
            p.messages
        );
    }
}
