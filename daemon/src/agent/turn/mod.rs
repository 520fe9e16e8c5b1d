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
//!
//! The loop's state between calls is a [`state::TurnState`] with verbs;
//! what a call is made of (request, tools, recall, compaction) is in
//! [`inputs`], and how a turn fails or is aborted in [`ending`].

mod ending;
mod inputs;
mod state;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::error::Elapsed;
use tokio_util::sync::CancellationToken;

use self::ending::{provider_code, provider_sentence};
use self::state::{Limits, TurnState};
use super::compaction::Compacted;
use super::session_log::{Emit, SessionLog};
use super::{Event, Runtime, rollback};
use crate::config::{AgentSettings, Config, ModelTarget, PromptMode};
use crate::context::SessionPrompt;
use crate::context::guard::Guard;
use crate::context::images::ImageLoader;
use crate::context::prompt::turn_context;
use crate::context::tokens::{self, Anchor, Counter};
use crate::llm::client::Note;
use crate::llm::windows::ContextWindow;
use crate::llm::{FinishReason, LlmError, Reply, Request, ToolSpec};
use crate::session::SessionKey;
use crate::session::registry::SessionRow;
use crate::session::transcript::{Body, Usage};
use crate::tools::policy::ChatOrigin;
use crate::tools::sessions::SessionAccess;
use crate::util::preview;

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
        self.run_then(log, text, images, |_| ()).await.0
    }

    /// [`Turn::run`], calling `ended` with the outcome as soon as it is
    /// known, before the end-of-turn fsync: what `ended` starts (the hub's
    /// registry write) runs while the transcript is made durable.
    pub async fn run_then<R>(
        &self,
        log: &mut SessionLog,
        text: String,
        images: Vec<String>,
        ended: impl FnOnce(&Outcome) -> R,
    ) -> (Outcome, R) {
        let outcome = self.run_inner(log, text, images).await;
        let after = ended(&outcome);
        if let Err(e) = log.transcript.sync() {
            tracing::error!(error = %e, "cannot fsync the transcript");
        }
        self.rt
            .prompts
            .persist(&self.session.id, log.transcript.path());
        (outcome, after)
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
            return self.fail(log, "internal", e.to_string());
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
            Counter::for_model(self.agent.models.first().map_or("", |m| m.model.as_str()));
        let tool_tokens = counter.tools(&specs);
        let limits = Limits {
            max_model_calls: self.agent.max_model_calls,
            max_duration: self.agent.max_turn_duration,
            deadline: Instant::now() + self.agent.max_turn_duration,
        };
        let mut state = TurnState::default();

        loop {
            if self.cancel.is_cancelled() {
                return self.aborted(log, "", state.take_segments());
            }
            state.check_stops(&limits, Instant::now());
            let request = Arc::new(self.request(
                log,
                &guard,
                images,
                &system,
                volatile.as_deref(),
                state.extra(),
                &specs,
                state.is_last_call(),
            ));
            let raw_estimate = counter.request(&request, tool_tokens);
            let estimate = tokens::projected(log.anchor.as_ref(), raw_estimate);
            if estimate > threshold && state.may_compact() {
                match self.compact(log, "threshold", false, system_tokens).await {
                    Ok(Compacted::Done { .. }) => continue,
                    Ok(Compacted::Nothing) | Err(_) => state.compaction_spent(),
                }
            }
            if estimate > window && !state.is_last_call() {
                // The context guard: nothing more fits and nothing more can
                // be compacted, so the model answers from what it has.
                state.out_of_context();
                continue;
            }
            state.model_called();
            // Kept before the call, so a refused prompt can be inspected too.
            if let Some(primary) = self.agent.models.first() {
                self.record_prompt(&request, primary, estimate);
            }
            let (result, streamed) = self.call_model(&request, &limits, &state).await;
            let (mut reply, target) = match result {
                Ok(Ok(ok)) => ok,
                Ok(Err(LlmError::Aborted)) => {
                    return self.aborted(log, &streamed, state.take_segments());
                }
                Ok(Err(e)) if e.is_context_overflow() => {
                    match self.after_overflow(log, &mut state, e, system_tokens).await {
                        Some(outcome) => return outcome,
                        None => continue,
                    }
                }
                Ok(Err(e)) => return self.fail(log, provider_code(&e), provider_sentence(&e)),
                // The wall-time limit: on to the last call.
                Err(_) if !state.is_last_call() => continue,
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
            let has_usage = self.account(log, &reply, &target, &counter, raw_estimate);
            if state.may_roll_back(self.config.tools.max_rollbacks)
                && let Some(rb) = rollback::check(
                    &reply,
                    &tool_env.offered,
                    &|name: &str| registry.get(name).is_some(),
                    state.dedupe_done(),
                    &self.config.tools.refusal_keywords,
                )
            {
                let rollbacks = state.rolled_back(rb.note);
                tracing::info!(session = %self.key, reason = %rb.reason, rollbacks, "reply rolled back");
                let recorded = log.append(
                    &self.turn_id,
                    Body::Meta {
                        event: "rollback".into(),
                        detail: format!(
                            "{}; the reply was: {}",
                            rb.reason,
                            preview(&reply.text, 300)
                        ),
                    },
                );
                if let Err(e) = recorded {
                    return self.fail(log, "internal", e.to_string());
                }
                (self.emit)(Event::Retrying {
                    attempt: rollbacks,
                    delay_ms: 0,
                    reason: format!("rollback: {}", rb.reason),
                    model: target.label(),
                });
                continue;
            }
            let tool_calls_now = if state.is_last_call() {
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
                return self.fail(log, "internal", e.to_string());
            }
            state.answered(&reply.text);

            if tool_calls_now.is_empty() {
                if reply.finish == FinishReason::Length && state.continue_cut_reply() {
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
                if next > threshold && state.may_compact() {
                    let _ = self.compact(log, "threshold", false, system_tokens).await;
                }
                let stop_reason = state.stop_reason();
                let (model_calls, tool_calls) = (state.model_calls(), state.tool_calls());
                let (text, segments) = state.finish();
                (self.emit)(Event::Finished {
                    text,
                    segments,
                    stop_reason,
                    model_calls,
                    tool_calls,
                });
                return None;
            }
            state.start_tool_calls();
            for call in tool_calls_now {
                if self.cancel.is_cancelled() {
                    return self.aborted(log, "", state.take_segments());
                }
                let dedupe = tool_env
                    .offered
                    .iter()
                    .find(|t| t.name == call.name && t.flags.dedupe)
                    .map(|tool| rollback::dedupe_key(tool, &call.arguments));
                state.tool_called(dedupe);
                let call = super::tool_step::ToolCall {
                    id: &call.id,
                    name: &call.name,
                    arguments: &call.arguments,
                };
                let ran = super::tool_step::run_recorded(
                    &tool_env,
                    log,
                    &self.turn_id,
                    call,
                    limits.deadline,
                    &self.emit,
                )
                .await;
                match ran {
                    Ok(result) => {
                        if let Some(reason) = result.end_turn {
                            state.stop_tools(reason);
                        }
                    }
                    Err(e) => return self.fail(log, "internal", e.to_string()),
                }
            }
        }
    }

    /// One model call, its text streamed to the client as it comes. Also
    /// returns what streamed, which an aborted turn keeps. The last call
    /// gets a grace period past the deadline to answer.
    async fn call_model(
        &self,
        request: &Request,
        limits: &Limits,
        state: &TurnState,
    ) -> (
        Result<Result<(Reply, ModelTarget), LlmError>, Elapsed>,
        String,
    ) {
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
        let budget = limits
            .deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(if state.is_last_call() {
                120
            } else {
                0
            }));
        let models = self.rt.models();
        let result = tokio::time::timeout(
            budget,
            models.complete(&self.agent.models, request, &mut on_note, &self.cancel),
        )
        .await;
        (result, streamed)
    }

    /// The provider refused the prompt as too long: compact and call again
    /// (`None`), or end the turn when that cannot help.
    async fn after_overflow(
        &self,
        log: &mut SessionLog,
        state: &mut TurnState,
        e: LlmError,
        system_tokens: u64,
    ) -> Option<Outcome> {
        let retries = state.overflowed();
        tracing::info!(session = %self.key, attempt = retries, error = %e, "the provider refused the prompt as too long");
        if retries > MAX_OVERFLOW_RETRIES {
            return Some(self.fail(log, "context", format!(
                "the prompt is still larger than the model's context window after {MAX_OVERFLOW_RETRIES} compactions ({e}); `pincer sessions reset` starts the session over"
            )));
        }
        match self.compact(log, "overflow", true, system_tokens).await {
            Ok(Compacted::Done { .. }) => {
                state.compacted();
                None
            }
            Ok(Compacted::Nothing) => Some(self.fail(log, "context", format!(
                "the prompt is larger than the model's context window and there is no older history left to compact ({e}); shorten the message, or lower [tools] max_result_chars"
            ))),
            Err(why) => Some(self.fail(
                log,
                "context",
                format!("the prompt is larger than the model's context window ({e}) and {why}"),
            )),
        }
    }

    /// Anchors the token estimate to the provider's count and records the
    /// call's usage; returns whether the reply had any.
    fn account(
        &self,
        log: &mut SessionLog,
        reply: &Reply,
        target: &ModelTarget,
        counter: &Counter,
        raw_estimate: u64,
    ) -> bool {
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
            // Queued: the turn does not wait for the registry between
            // calls; its `finish_turn` comes after it.
            if let Err(e) =
                self.rt
                    .registry
                    .add_usage(&self.session.id, reply.usage.input, reply.usage.output)
            {
                tracing::warn!(error = %e, "cannot record usage");
            }
            (self.emit)(Event::Usage {
                model: target.label(),
                input: reply.usage.input,
                output: reply.usage.output,
            });
        }
        has_usage
    }
}
