//! What a turn's model calls are made of: the request (the guarded
//! history, this turn's volatile context, the notes), the tools' shared
//! environment, auto-recall, compaction when the window fills, and the
//! prompt kept for `pincer sessions prompt`.

use std::sync::Arc;

use super::Turn;
use crate::agent::Event;
use crate::agent::compaction::{Compacted, CompactionError, Compactor};
use crate::agent::last_prompt::Sent;
use crate::agent::session_log::SessionLog;
use crate::context::guard::{self, Guard};
use crate::context::history;
use crate::context::images::ImageLoader;
use crate::context::prompt::recall_section;
use crate::llm::{Message, Request, ToolSpec};
use crate::tools::ToolRegistry;
use crate::tools::pipeline::CallEnv;

impl Turn<'_> {
    /// One model call's request: the guarded history with this turn's
    /// volatile context in front of its message, then the turn's notes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn request(
        &self,
        log: &SessionLog,
        guard: &Guard<'_>,
        images: Option<&ImageLoader>,
        system: &str,
        volatile: Option<&str>,
        extra: &[Message],
        specs: &[ToolSpec],
        last_call: bool,
    ) -> Request {
        let mut messages = guard::apply(history::messages(log.entries(), images), guard);
        if let Some(context) = volatile
            && let Some(current) = messages.iter_mut().rev().find(|m| {
                m.role == crate::llm::Role::User
                    && m.parts
                        .iter()
                        .any(|p| matches!(p, crate::llm::Part::Text(_)))
            })
            && let Some(pos) = current
                .parts
                .iter()
                .position(|p| matches!(p, crate::llm::Part::Text(_)))
            && let crate::llm::Part::Text(text) = &mut current.parts[pos]
        {
            *text = format!("{context}{text}");
        }
        messages.extend(extra.iter().cloned());
        Request {
            system: system.to_string(),
            messages,
            tools: if last_call {
                Vec::new()
            } else {
                specs.to_vec()
            },
        }
    }

    pub(super) async fn compact(
        &self,
        log: &mut SessionLog,
        reason: &'static str,
        force: bool,
        system_tokens: u64,
    ) -> Result<Compacted, CompactionError> {
        if !self.config.context.compaction {
            (self.emit)(Event::Compaction {
                tokens_before: 0,
                tokens_after: 0,
                reason,
                error: CompactionError::Off.to_string(),
            });
            return Err(CompactionError::Off);
        }
        Compactor {
            rt: self.rt,
            config: &self.config,
            agent: self.agent,
            key: self.key,
            session_id: &self.session.id,
            owner: self.origin.is_owner(),
            emit: &self.emit,
            cancel: &self.cancel,
        }
        .run(log, &self.turn_id, reason, force, system_tokens)
        .await
    }

    /// Keeps the request as the model received it for `pincer sessions
    /// prompt` (in memory; [`Turn::run`] writes it to disk at the end).
    pub(super) fn record_prompt(
        &self,
        request: &Arc<Request>,
        target: &crate::config::ModelTarget,
        estimate: u64,
    ) {
        let format = self
            .config
            .providers
            .get(&target.provider)
            .map(|p| p.tool_format)
            .unwrap_or_default();
        self.rt.prompts.record(
            &self.session.id,
            Sent {
                ts: crate::util::now_rfc3339(),
                model: target.label(),
                format,
                estimated_tokens: estimate,
                // As the wire format sends it: no images to a model
                // without vision. Shared, not copied, when that is the
                // request itself (the whole history, on every call).
                request: if target.vision || !request.has_images() {
                    request.clone()
                } else {
                    Arc::new(request.without_images())
                },
            },
        );
    }

    /// What every tool call of this turn shares, built once per turn.
    pub(super) fn tool_env<'r>(&self, registry: &'r ToolRegistry) -> CallEnv<'r> {
        crate::agent::call_env::build(
            &crate::agent::call_env::CallScope {
                rt: self.rt,
                config: &self.config,
                agent: self.agent,
                key: self.key,
                session_id: &self.session.id,
                origin: &self.origin,
                spawn_layer: self.session.spawn_layer.as_ref(),
                cancel: &self.cancel,
                emit: &self.emit,
                sessions: Some(self.sessions.clone()),
            },
            registry,
        )
    }

    /// Auto-recall (SPEC §9): the top memory hits for the new message,
    /// only where policy offers `memory_search`, through the same memory
    /// access as the tool's (the data boundary: never the owner's memory
    /// for a chat that is not the owner's), so a group never sees the
    /// owner's notes this way.
    pub(super) async fn recall(&self, env: &CallEnv<'_>, message: &str) -> Option<String> {
        let settings = &self.config.memory;
        if !settings.enabled
            || !settings.auto_recall
            || !env.offered.iter().any(|t| t.name == "memory_search")
        {
            return None;
        }
        let query = pincer_memory::Query {
            text: message.to_string(),
            limit: Some(settings.auto_recall_results),
            ..Default::default()
        };
        match env.base.memory.search(query).await {
            Ok(outcome) if !outcome.hits.is_empty() => Some(recall_section(&outcome)),
            Ok(_) => None,
            Err(why) => {
                tracing::warn!(agent = %self.agent.id, "auto-recall failed: {}", why.content);
                None
            }
        }
    }
}
