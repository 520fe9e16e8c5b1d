//! The hub as the session tools see it ([`SessionAccess`]): status, list
//! and history of an agent's own sessions, messages to another session, and
//! sub-agents — child sessions `agent:<agent>:sub:<uuid>` whose tools are
//! narrowed by `[tools.subagents]` and by the spawn, and whose final answer
//! is the tool's result.

use std::fmt::Write as _;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Event;
use super::hub::Hub;
use crate::session::SessionKey;
use crate::session::transcript::Body;
use crate::tools::policy::ChatOrigin;
use crate::tools::sessions::{BoxFuture, SendRequest, SessionAccess, SpawnRequest};
use crate::util::{now_rfc3339, preview};

/// What the daemon remembers about a sub-agent session.
#[derive(Debug, Clone)]
pub struct SubAgent {
    pub depth: u32,
    pub layer: crate::config::ToolLayer,
}

impl Hub {
    /// Runs one message through a session and collects the turn's answer.
    async fn run_and_collect(
        &self,
        key: SessionKey,
        (text, origin): (String, ChatOrigin),
        wait: Duration,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let key_text = key.to_string();
        self.chat_nested(key, text, origin, tx)
            .await
            .map_err(|e| e.to_string())?;
        let collect = async {
            while let Some(event) = rx.recv().await {
                match event {
                    Event::Finished {
                        text, stop_reason, ..
                    } => {
                        return if stop_reason == "aborted" {
                            Err(format!("the turn in {key_text} was aborted"))
                        } else {
                            Ok(text)
                        };
                    }
                    Event::Error { message, .. } => {
                        return Err(format!("the turn in {key_text} failed: {message}"));
                    }
                    _ => {}
                }
            }
            Err(format!("the turn in {key_text} ended without an answer"))
        };
        tokio::select! {
            r = tokio::time::timeout(wait, collect) => match r {
                Ok(r) => r,
                Err(_) => {
                    self.abort(&key_text);
                    Err(format!("{key_text} did not answer within {} s; its turn was stopped", wait.as_secs()))
                }
            },
            _ = cancel.cancelled() => {
                self.abort(&key_text);
                Err("aborted".into())
            }
        }
    }

    fn own_key(&self, agent: &str, session: &str) -> Result<SessionKey, String> {
        let key = SessionKey::from_client(agent, session).map_err(|e| e.to_string())?;
        if key.agent() != agent {
            return Err(format!(
                "`{session}` belongs to agent `{}`; an agent can only reach its own sessions",
                key.agent()
            ));
        }
        Ok(key)
    }
}

impl SessionAccess for Hub {
    fn status(&self, session_key: &str) -> BoxFuture<'_, Result<String, String>> {
        let key = session_key.to_string();
        Box::pin(async move {
            let row = self.find("", &key).await.map_err(|e| e.to_string())?;
            let config = self.runtime().config();
            let model = config
                .agent(&row.agent)
                .and_then(|a| a.models.first())
                .map(|m| m.label())
                .unwrap_or_else(|| "none".into());
            let mut out = String::new();
            let _ = writeln!(out, "session: {} (id {})", row.key, row.id);
            let _ = writeln!(out, "agent: {}; model: {model}", row.agent);
            let _ = writeln!(
                out,
                "created: {}; last active: {}",
                row.created_at, row.updated_at
            );
            let _ = writeln!(
                out,
                "tokens: {} in, {} out; compactions: {}",
                row.input_tokens, row.output_tokens, row.compactions
            );
            if self.depth(&key) > 0 {
                let _ = writeln!(out, "this is a sub-agent session");
            }
            let _ = write!(out, "now: {}", now_rfc3339());
            Ok(out)
        })
    }

    fn list(&self, agent: &str, limit: usize) -> BoxFuture<'_, Result<String, String>> {
        let agent = agent.to_string();
        Box::pin(async move {
            // The registry rows only: `Hub::list` also counts every
            // transcript's lines, which this answer does not show.
            let rows = self
                .runtime()
                .registry()
                .list(Some(agent))
                .await
                .map_err(|e| e.to_string())?;
            if rows.is_empty() {
                return Ok("no sessions".into());
            }
            Ok(rows
                .iter()
                .take(limit)
                .map(|r| {
                    format!(
                        "{} — last active {}, {} tokens in / {} out{}",
                        r.key,
                        r.updated_at,
                        r.input_tokens,
                        r.output_tokens,
                        if self.is_running(&r.key) {
                            ", running"
                        } else {
                            ""
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        })
    }

    fn history(
        &self,
        agent: &str,
        session: &str,
        limit: usize,
    ) -> BoxFuture<'_, Result<String, String>> {
        let key = self.own_key(agent, session);
        Box::pin(async move {
            let key = key?;
            let row = match self.find(key.agent(), &key.to_string()).await {
                Ok(row) => row,
                Err(super::hub::HubError::UnknownSession { .. }) => {
                    return Err(format!("no session {key}; `sessions_list` shows them"));
                }
                Err(e) => return Err(e.to_string()),
            };
            let entries = self
                .history(row, 0, 0)
                .await
                .map_err(|e| e.to_string())?
                .entries;
            let lines: Vec<String> = entries
                .iter()
                .filter_map(|e| match &e.body {
                    Body::User { text, .. } => Some(format!("user: {}", preview(text, 2000))),
                    Body::Assistant { text, .. } if !text.is_empty() => {
                        Some(format!("assistant: {}", preview(text, 2000)))
                    }
                    _ => None,
                })
                .collect();
            if lines.is_empty() {
                return Ok(format!("{key} has no messages yet"));
            }
            let skip = lines.len().saturating_sub(limit);
            Ok(lines[skip..].join("\n\n"))
        })
    }

    fn send(&self, request: SendRequest) -> BoxFuture<'_, Result<String, String>> {
        let key = self.own_key(&request.agent, &request.to);
        Box::pin(async move {
            let key = key?;
            let from = &request.from_key;
            if key.to_string() == *from {
                return Err("a session cannot send to itself".into());
            }
            let text = format!("[message from session {from}]\n{}", request.message);
            match request.wait {
                Some(wait) => {
                    self.run_and_collect(
                        key,
                        (text, request.origin),
                        wait,
                        &CancellationToken::new(),
                    )
                    .await
                }
                None => {
                    let (tx, _rx) = mpsc::unbounded_channel();
                    let key_text = key.to_string();
                    self.chat_nested(key, text, request.origin, tx)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(format!("sent to {key_text}; not waiting for the answer"))
                }
            }
        })
    }

    fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            let key =
                SessionKey::sub(&request.agent, uuid::Uuid::new_v4()).map_err(|e| e.to_string())?;
            let depth = self.depth(&request.parent_key) + 1;
            self.runtime().subagents_insert(
                key.to_string(),
                SubAgent {
                    depth,
                    layer: request.layer,
                },
            );
            tracing::info!(parent = %request.parent_key, child = %key, "sub-agent started");
            let key_text = key.to_string();
            let answer = self
                .run_and_collect(
                    key,
                    (request.task, request.origin),
                    request.timeout,
                    &cancel,
                )
                .await?;
            Ok(format!("[sub-agent {key_text}]\n{answer}"))
        })
    }

    fn depth(&self, session_key: &str) -> u32 {
        match self.runtime().subagent(session_key) {
            Some(s) => s.depth,
            // A sub-agent session the daemon forgot (a restart) still counts.
            None if session_key.contains(":sub:") => 1,
            None => 0,
        }
    }
}
