//! One agent turn: the user's message, then model calls and tool calls until
//! the model answers without tools, the turn is aborted, or a limit is hit
//! (then one last call without tools produces the answer).
//!
//! Every step is appended to the transcript as it happens, so an abort or a
//! crash loses nothing that was said; the transcript is fsynced when the
//! turn ends.
//!
//! Before each model call the history passes the guard and the prompt's
//! size is checked against the window: past the threshold the session is
//! compacted; a provider's overflow error compacts and retries (at most
//! [`MAX_OVERFLOW_RETRIES`] times); when nothing more can be compacted the
//! loop ends with one last call without tools.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::compaction::{Compacted, Compactor};
use super::last_prompt::Sent;
use super::session_log::{Emit, SessionLog};
use super::{Event, Runtime, rollback};
use crate::config::{AgentSettings, Config, PromptMode};
use crate::context::SessionPrompt;
use crate::context::guard::{self, Guard};
use crate::context::history;
use crate::context::images::ImageLoader;
use crate::context::prompt::{recall_section, turn_context};
use crate::context::tokens::{self, Anchor};
use crate::llm::client::Note;
use crate::llm::windows::ContextWindow;
use crate::llm::{FinishReason, LlmError, Message, Request, ToolSpec};
use crate::session::SessionKey;
use crate::session::registry::SessionRow;
use crate::session::transcript::{Body, Usage};
use crate::tools::ToolRegistry;
use crate::tools::pipeline::CallEnv;
use crate::tools::policy::ChatOrigin;
use crate::tools::sessions::SessionAccess;
use crate::util::preview;

/// How many times a reply cut by `finish_reason = length` is continued.
const MAX_CONTINUATIONS: u32 = 2;
/// Compactions after provider overflow errors in one turn (SPEC §9).
const MAX_OVERFLOW_RETRIES: u32 = 3;

/// Everything one turn needs.
pub struct Turn<'a> {
    pub rt: &'a Runtime,
    pub config: Arc<Config>,
    pub agent: &'a AgentSettings,
    pub session: &'a SessionRow,
    pub key: &'a SessionKey,
    pub turn_id: String,
    pub cancel: CancellationToken,
    pub emit: Emit,
    /// The hub, for the session tools.
    pub sessions: Arc<dyn SessionAccess>,
    /// Who the turn answers.
    pub origin: ChatOrigin,
}

/// The error and failure summary recorded on the session, if the turn
/// failed.
pub type Outcome = Option<(String, String)>;

impl Turn<'_> {
    /// Runs the turn for the user message `text` with `images` (paths
    /// relative to the workspace; see `context::images`).
    pub async fn run(&self, log: &mut SessionLog, text: String, images: Vec<String>) -> Outcome {
        let outcome = self.run_inner(log, text, images).await;
        if let Err(e) = log.transcript.sync() {
            tracing::error!(error = %e, "cannot fsync the transcript");
        }
        self.rt
            .prompts
            .persist(&self.session.id, log.transcript.path());
        outcome
    }

    async fn run_inner(&self, log: &mut SessionLog, text: String, images: Vec<String>) -> Outcome {
        let model_label = self
            .agent
            .models
            .first()
            .map(|m| m.label())
            .unwrap_or_default();
        (self.emit)(Event::TurnStarted {
            session_key: self.key.to_string(),
            session_id: self.session.id.clone(),
            turn_id: self.turn_id.clone(),
            agent: self.agent.id.clone(),
            model: model_label,
        });
        let message = text.clone();
        if let Err(e) = log.append(&self.turn_id, Body::User { text, images }) {
            return self.fail(log, "internal", e);
        }
        if self.agent.models.is_empty() {
            let problem =
                self.config.provider_problem.clone().unwrap_or_else(|| {
                    format!("agent `{}` has no model configured", self.agent.id)
                });
            return self.fail(log, "config", problem);
        }

        let registry = self.rt.tool_registry().await;
        let tool_env = self.tool_env(&registry);
        let specs: Vec<ToolSpec> = tool_env.offered.iter().map(|t| t.spec()).collect();
        let chat = crate::context::chat_kind(self.key, &self.origin);
        let SessionPrompt { system, mode } = crate::context::session_prompt(
            &self.config.context,
            self.agent,
            &chat,
            &specs,
            self.origin.prompt.as_deref(),
        );
        let window = self.agent.context_window();
        // Volatile, so it rides in front of this turn's message instead of
        // changing the system prompt (SPEC §9: a stable prefix).
        let volatile = match mode {
            PromptMode::None => None,
            PromptMode::Minimal => Some(turn_context(&crate::context::now_text(), None)),
            PromptMode::Full | PromptMode::Auto => {
                let recalled = self.recall(&tool_env, &message).await;
                Some(turn_context(
                    &crate::context::now_text(),
                    recalled.as_deref(),
                ))
            }
        };
        let allowed: HashSet<String> = specs.iter().map(|t| t.name.clone()).collect();
        let guard = Guard {
            keep_tool_results: self.config.context.keep_tool_results,
            max_result_chars: usize::try_from(window)
                .unwrap_or(usize::MAX)
                .saturating_mul(2),
            max_turns: self.config.context.max_history_turns,
            allowed: Some(&allowed),
        };
        let threshold = window.saturating_sub(self.config.context.reserve_for(window));
        // Once per turn: it reads each image file once for all the calls.
        let images = ImageLoader::for_agent(self.agent, self.config.tools.fs);
        let images = images.as_ref();
        let system_tokens = tokens::estimate_text(&system);
        let counter =
            tokens::Counter::for_model(self.agent.models.first().map_or("", |m| m.model.as_str()));
        let tool_tokens = counter.tools(&specs);
        let started = Instant::now();
        let deadline = started + self.agent.max_turn_duration;
        let mut model_calls = 0u32;
        let mut tool_calls = 0u32;
        let mut continuations = 0u32;
        let mut answer = String::new();
        // The text of each earlier call of this turn (`answer` is the
        // current one's).
        let mut segments: Vec<String> = Vec::new();
        let mut last_call = false;
        let mut extra: Vec<Message> = Vec::new();
        let mut rollbacks = 0u32;
        let mut loop_stop: Option<String> = None;
        let mut stopped_by_loop = false;
        let mut stopped_by_context = false;
        let mut dedupe_done: HashSet<String> = HashSet::new();
        let mut overflow_retries = 0u32;
        // Set when compaction cannot shrink the history any further.
        let mut compaction_spent = false;

        loop {
            if self.cancel.is_cancelled() {
                return self.aborted(log, "", segments);
            }
            if let Some(reason) = loop_stop.take()
                && !last_call
            {
                last_call = true;
                stopped_by_loop = true;
                extra.push(Message::user(format!(
                    "[pincer] Loop detection stopped the tool calls: {reason}. Do not call tools; summarise what you found and what is still open."
                )));
            }
            let over_limit =
                model_calls >= self.agent.max_model_calls || Instant::now() >= deadline;
            if over_limit && !last_call {
                last_call = true;
                extra.push(Message::user(format!(
                    "[pincer] The turn has reached its limit ({} model calls or {} minutes). Do not call tools; answer now with what you have found so far.",
                    self.agent.max_model_calls,
                    self.agent.max_turn_duration.as_secs() / 60
                )));
            }
            let request = self.request(
                log,
                &guard,
                images,
                &system,
                volatile.as_deref(),
                &extra,
                &specs,
                last_call,
            );
            let raw_estimate = counter.request(&request, tool_tokens);
            let estimate = tokens::projected(log.anchor.as_ref(), raw_estimate);
            if estimate > threshold && !compaction_spent {
                match self.compact(log, "threshold", false, system_tokens).await {
                    Ok(Compacted::Done { .. }) => continue,
                    Ok(Compacted::Nothing) | Err(_) => compaction_spent = true,
                }
            }
            if estimate > window && !last_call {
                // The context guard: nothing more fits and nothing more can
                // be compacted, so the model answers from what it has.
                last_call = true;
                stopped_by_context = true;
                extra.push(Message::user(
                    "[pincer] The conversation has reached the model's context limit. Do not call tools; answer now with what you have found so far.",
                ));
                continue;
            }
            model_calls += 1;
            // Kept before the call, so a refused prompt can be inspected too.
            if let Some(primary) = self.agent.models.first() {
                self.record_prompt(&request, primary, estimate);
            }

            let mut streamed = String::new();
            let emit = self.emit.clone();
            let mut on_note = |note: Note| match note {
                Note::Text(t) => {
                    streamed.push_str(&t);
                    emit(Event::Text(t));
                }
                Note::Retrying {
                    attempt,
                    delay,
                    reason,
                    model,
                } => {
                    // A retry restarts the reply; what streamed so far is void.
                    streamed.clear();
                    emit(Event::Retrying {
                        attempt,
                        delay_ms: delay.as_millis() as u64,
                        reason,
                        model,
                    });
                }
            };
            // The last call gets a grace period past the deadline to answer.
            let budget = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(if last_call { 120 } else { 0 }));
            let models = self.rt.models();
            let result = tokio::time::timeout(
                budget,
                models.complete(&self.agent.models, &request, &mut on_note, &self.cancel),
            )
            .await;
            let (mut reply, target) = match result {
                Ok(Ok(ok)) => ok,
                Ok(Err(LlmError::Aborted)) => return self.aborted(log, &streamed, segments),
                Ok(Err(e)) if e.is_context_overflow() => {
                    overflow_retries += 1;
                    tracing::info!(session = %self.key, attempt = overflow_retries, error = %e, "the provider refused the prompt as too long");
                    if overflow_retries > MAX_OVERFLOW_RETRIES {
                        return self.fail(log, "context", format!(
                            "the prompt is still larger than the model's context window after {MAX_OVERFLOW_RETRIES} compactions ({e}); `pincer sessions reset` starts the session over"
                        ));
                    }
                    match self.compact(log, "overflow", true, system_tokens).await {
                        Ok(Compacted::Done { .. }) => {
                            compaction_spent = false;
                            continue;
                        }
                        Ok(Compacted::Nothing) => {
                            return self.fail(log, "context", format!(
                                "the prompt is larger than the model's context window and there is no older history left to compact ({e}); shorten the message, or lower [tools] max_result_chars"
                            ));
                        }
                        Err(why) => return self.fail(log, "context", format!(
                            "the prompt is larger than the model's context window ({e}) and {why}"
                        )),
                    }
                }
                Ok(Err(e)) => {
                    // No connection could be made at all: the model was
                    // never reached (a schedule retries such a run).
                    let code = if matches!(e, LlmError::Unreachable { .. }) {
                        "unreachable"
                    } else {
                        "provider"
                    };
                    return self.fail(log, code, provider_sentence(&e));
                }
                Err(_) if !last_call => continue, // the wall-time limit: go to the last call
                Err(_) => {
                    return self.fail(
                        log,
                        "provider",
                        "the final answer did not arrive in time".into(),
                    );
                }
            };

            if self.agent.models.first() != Some(&target) {
                // A fallback answered: it is the one that received it last.
                self.record_prompt(&request, &target, estimate);
            }
            let reply_tokens = counter.text(&reply.text)
                + reply
                    .tool_calls
                    .iter()
                    .map(|c| counter.text(&c.arguments) + 4)
                    .sum::<u64>();
            log.anchor = Anchor::new(
                reply.usage.input + reply.usage.output,
                raw_estimate + reply_tokens,
            );
            let has_usage = reply.usage != Usage::default();
            if has_usage {
                if let Err(e) = self
                    .rt
                    .registry
                    .add_usage(&self.session.id, reply.usage.input, reply.usage.output)
                    .await
                {
                    tracing::warn!(error = %e, "cannot record usage");
                }
                (self.emit)(Event::Usage {
                    model: target.label(),
                    input: reply.usage.input,
                    output: reply.usage.output,
                });
            }
            if !last_call
                && rollbacks < self.config.tools.max_rollbacks
                && let Some(rb) = rollback::check(
                    &reply,
                    &tool_env.offered,
                    &|name: &str| registry.get(name).is_some(),
                    &dedupe_done,
                    &self.config.tools.refusal_keywords,
                )
            {
                rollbacks += 1;
                tracing::info!(session = %self.key, reason = %rb.reason, rollbacks, "reply rolled back");
                if let Err(e) = log.append(
                    &self.turn_id,
                    Body::Meta {
                        event: "rollback".into(),
                        detail: format!(
                            "{}; the reply was: {}",
                            rb.reason,
                            preview(&reply.text, 300)
                        ),
                    },
                ) {
                    return self.fail(log, "internal", e);
                }
                (self.emit)(Event::Retrying {
                    attempt: rollbacks,
                    delay_ms: 0,
                    reason: format!("rollback: {}", rb.reason),
                    model: target.label(),
                });
                extra = vec![Message::user(rb.note)];
                continue;
            }
            let tool_calls_now = if last_call {
                Vec::new()
            } else {
                std::mem::take(&mut reply.tool_calls)
            };
            if let Err(e) = log.append(
                &self.turn_id,
                Body::Assistant {
                    text: reply.text.clone(),
                    model: target.label(),
                    usage: has_usage.then_some(reply.usage),
                    stop: reply.finish.as_str().to_string(),
                },
            ) {
                return self.fail(log, "internal", e);
            }
            answer.push_str(&reply.text);

            if tool_calls_now.is_empty() {
                if reply.finish == FinishReason::Length
                    && continuations < MAX_CONTINUATIONS
                    && !last_call
                {
                    continuations += 1;
                    extra = vec![Message::user(
                        "[pincer] Your reply was cut off by the output limit. Continue exactly where it stopped, without repeating anything.",
                    )];
                    continue;
                }
                // Compact now, while nobody waits for the next answer.
                let next = tokens::projected(
                    log.anchor.as_ref(),
                    counter.request(
                        &self.request(log, &guard, images, &system, None, &[], &specs, false),
                        tool_tokens,
                    ),
                );
                if next > threshold && !compaction_spent {
                    let _ = self.compact(log, "threshold", false, system_tokens).await;
                }
                if !answer.is_empty() {
                    segments.push(answer.clone());
                }
                (self.emit)(Event::Finished {
                    text: answer,
                    segments,
                    stop_reason: if stopped_by_loop {
                        "loop"
                    } else if stopped_by_context {
                        "context"
                    } else if last_call {
                        "limit"
                    } else {
                        "done"
                    },
                    model_calls,
                    tool_calls,
                });
                return None;
            }
            extra.clear();
            if !answer.is_empty() {
                segments.push(std::mem::take(&mut answer));
            }
            continuations = 0;
            rollbacks = 0;

            for call in tool_calls_now {
                if self.cancel.is_cancelled() {
                    return self.aborted(log, "", segments);
                }
                tool_calls += 1;
                if let Some(tool) = tool_env.offered.iter().find(|t| t.name == call.name)
                    && tool.flags.dedupe
                {
                    dedupe_done.insert(rollback::dedupe_key(tool, &call.arguments));
                }
                let call = super::tool_step::ToolCall {
                    id: &call.id,
                    name: &call.name,
                    arguments: &call.arguments,
                };
                match super::tool_step::run_recorded(
                    &tool_env,
                    log,
                    &self.turn_id,
                    call,
                    deadline,
                    &self.emit,
                )
                .await
                {
                    Ok(result) => {
                        if let Some(reason) = result.end_turn {
                            loop_stop = Some(reason);
                        }
                    }
                    Err(e) => return self.fail(log, "internal", e),
                }
            }
        }
    }

    /// One model call's request: the guarded history with this turn's
    /// volatile context in front of its message, then the turn's notes.
    #[allow(clippy::too_many_arguments)]
    fn request(
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
        let mut messages = guard::apply(history::messages(&log.entries, images), guard);
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

    async fn compact(
        &self,
        log: &mut SessionLog,
        reason: &'static str,
        force: bool,
        system_tokens: u64,
    ) -> Result<Compacted, String> {
        if !self.config.context.compaction {
            let message = "compaction is off ([context] compaction = false)".to_string();
            (self.emit)(Event::Compaction {
                tokens_before: 0,
                tokens_after: 0,
                reason,
                error: message.clone(),
            });
            return Err(message);
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
    fn record_prompt(&self, request: &Request, target: &crate::config::ModelTarget, estimate: u64) {
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
                // without vision.
                request: if target.vision {
                    request.clone()
                } else {
                    request.without_images()
                },
            },
        );
    }

    /// What every tool call of this turn shares, built once per turn.
    fn tool_env<'r>(&self, registry: &'r ToolRegistry) -> CallEnv<'r> {
        super::call_env::build(
            &super::call_env::CallScope {
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
    async fn recall(&self, env: &CallEnv<'_>, message: &str) -> Option<String> {
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

    fn fail(&self, log: &mut SessionLog, code: &'static str, message: String) -> Outcome {
        tracing::warn!(session = %self.key, code, error = %message, "turn failed");
        let summary = super::failure::summary(&log.entries, &self.turn_id, &message);
        let _ = log.append(
            &self.turn_id,
            Body::Meta {
                event: "turn_error".into(),
                detail: message.clone(),
            },
        );
        (self.emit)(Event::Error {
            code,
            message: message.clone(),
        });
        Some((message, summary))
    }

    /// The turn was aborted: what streamed of the call under way is kept,
    /// after the text of the calls before it (`segments`).
    fn aborted(&self, log: &mut SessionLog, partial: &str, mut segments: Vec<String>) -> Outcome {
        if !partial.is_empty() {
            let _ = log.append(
                &self.turn_id,
                Body::Assistant {
                    text: partial.to_string(),
                    model: String::new(),
                    usage: None,
                    stop: "aborted".into(),
                },
            );
        }
        let _ = log.append(
            &self.turn_id,
            Body::Meta {
                event: "turn_aborted".into(),
                detail: String::new(),
            },
        );
        if !partial.is_empty() {
            segments.push(partial.to_string());
        }
        (self.emit)(Event::Finished {
            text: partial.to_string(),
            segments,
            stop_reason: "aborted",
            model_calls: 0,
            tool_calls: 0,
        });
        None
    }
}

/// A provider failure as a sentence for the user.
fn provider_sentence(e: &LlmError) -> String {
    match e {
        LlmError::NotConfigured(s) => s.clone(),
        // Already one sentence naming the provider, its address and what
        // to check; it was not retried.
        LlmError::Unreachable { .. } => e.to_string(),
        LlmError::Http {
            status: 401 | 403,
            message,
            ..
        } => {
            format!(
                "the provider rejected the API key (HTTP 401/403: {message}); check the key pincerd uses (`pincer doctor`)"
            )
        }
        LlmError::Http {
            status: 404,
            message,
            ..
        } => {
            format!(
                "the provider does not know this model or endpoint (HTTP 404: {message}); check `model` and `base_url`"
            )
        }
        other => format!("the model call failed after retries and fallbacks: {other}"),
    }
}
