//! Around every tool call (SPEC §8.4), in order: policy (is the tool
//! offered here?), argument size and validation, loop detection, `before_tool_call`
//! hooks, the owner's approval for `ask` tools, execution with the abort
//! signal and a time limit,
//! `after_tool_call` hooks, secret redaction, the result cap, and one row
//! in the audit table whatever happened (with the arguments, secrets
//! masked and capped).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::approvals::{Answer, Approvals, Ask, PendingApproval, Requester};
use super::hooks::{self, After, Before, CallFacts};
use super::loops::{LoopDetector, LoopVerdict, stable_hash};
use super::pattern::ToolPatterns;
use super::policy::Resolution;
use super::redact::Redactor;
use super::{ToolContext, ToolDef, ToolOutput};
use crate::config::{HookEvent, ToolSettings};
use crate::session::registry::{AuditRecord, Registry};
use crate::util::{cap_head_tail, preview};

/// How long a tool stopped by a time limit gets to clean up.
const TOOL_CLEANUP: Duration = Duration::from_secs(5);

/// What every call of a turn shares; built once per turn.
pub struct CallEnv<'r> {
    pub resolution: Resolution<'r>,
    pub offered: Vec<&'r ToolDef>,
    pub settings: Arc<ToolSettings>,
    pub redactor: Redactor,
    /// Characters a result may keep (head and tail).
    pub result_cap: usize,
    /// Set when the workspace cannot be created: every call says so.
    pub workspace_error: Option<String>,
    pub base: ToolContext,
    pub sender: String,
    pub audit: Registry,
    pub approvals: Approvals,
    /// The session's id: an "always" answer holds for it alone.
    pub session_id: String,
    /// Who asked, named in the owner's approval request (`None`: the
    /// owner in their own chat).
    pub requester: Option<Requester>,
    /// Tells the chat's client that a call waits for approval.
    pub announce: Arc<dyn Fn(&PendingApproval) + Send + Sync>,
}

/// What the audit row records of a call's arguments: their hash (of the
/// validated arguments once they parse) and, once it runs, what it ran
/// with.
struct Seen {
    args_hash: u64,
    ran_with: Option<String>,
}

/// A call's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub output: ToolOutput,
    /// ok | error | blocked | denied | aborted | timeout
    pub status: &'static str,
    /// Set by the loop breaker: the turn ends.
    pub end_turn: Option<String>,
}

impl CallEnv<'_> {
    /// Runs one call through the whole pipeline.
    pub async fn run(
        &self,
        loops: &mut LoopDetector,
        call_id: &str,
        name: &str,
        raw_arguments: &str,
        deadline: Instant,
    ) -> CallResult {
        let started = Instant::now();
        let mut seen = Seen {
            args_hash: stable_hash(raw_arguments.trim()),
            ran_with: None,
        };
        let (result, decided_by) = self
            .decide_and_run(loops, name, raw_arguments, deadline, &mut seen)
            .await;
        let CallResult { output, status, .. } = &result;
        let record = AuditRecord {
            session_key: self.base.session_key.clone(),
            agent: self.base.agent.clone(),
            sender: self.sender.clone(),
            tool: preview(name, 200),
            call_id: call_id.to_string(),
            args_hash: format!("{:016x}", seen.args_hash),
            outcome: status.to_string(),
            duration_ms: started.elapsed().as_millis() as u64,
            decided_by,
            detail: if *status == "ok" {
                String::new()
            } else {
                preview(&output.content, 300)
            },
            // What ran (a hook may have replaced what the model sent), or
            // what the model sent when nothing ran.
            arguments: super::arguments::for_audit(
                seen.ran_with.as_deref().unwrap_or(raw_arguments),
                &self.redactor,
            ),
        };
        // Queued: the row is written in order on the registry's thread,
        // and the turn does not wait for it.
        if let Err(e) = self.audit.audit(record) {
            tracing::warn!(error = %e, "cannot write the tool audit row");
        }
        result
    }

    async fn decide_and_run(
        &self,
        loops: &mut LoopDetector,
        name: &str,
        raw_arguments: &str,
        deadline: Instant,
        seen: &mut Seen,
    ) -> (CallResult, String) {
        let done = |output: ToolOutput, status: &'static str| CallResult {
            output,
            status,
            end_turn: None,
        };
        // 1. Policy: the tool must be offered to this agent, chat and sender.
        let Some(tool) = self.offered.iter().find(|t| t.name == name).copied() else {
            let removed = self
                .resolution
                .verdicts
                .iter()
                .find(|v| v.tool.name == name)
                .and_then(|v| v.removed.as_ref());
            let message = match removed {
                Some(r) => format!(
                    "`{name}` is not available here: removed by the {} layer ({}). Do not call it again; use the tools you have.",
                    r.layer, r.reason
                ),
                None => format!(
                    "unknown tool `{}`; the tools available are: {}",
                    preview(name, 100),
                    self.offered_names()
                ),
            };
            return (done(ToolOutput::error(message), "denied"), "policy".into());
        };
        if let Some(e) = &self.workspace_error {
            return (
                done(ToolOutput::error(e.clone()), "error"),
                "workspace".into(),
            );
        }
        // 2. Arguments: not too large, parsed, aliases fixed, validated.
        if let Some(why) =
            super::arguments::refusal(name, raw_arguments, self.settings.max_argument_chars)
        {
            return (done(ToolOutput::error(why), "error"), "validation".into());
        }
        let mut args = match tool.prepare(raw_arguments) {
            Ok(a) => a,
            Err(e) => return (done(e, "error"), "validation".into()),
        };
        seen.args_hash = stable_hash(&args.to_string());
        // 3. Loop detection, the first in-process before-hook.
        let s = &self.settings.loops;
        let mut note = None;
        let args_hash = seen.args_hash;
        match loops.check(s, name, args_hash) {
            LoopVerdict::Ok => {}
            LoopVerdict::Warn { note: n, .. } => note = Some(n),
            LoopVerdict::Block { detector, message } => {
                loops.record_blocked(s, name, args_hash);
                return (
                    done(ToolOutput::error(message), "blocked"),
                    format!("loop:{detector}"),
                );
            }
            LoopVerdict::Break { detector, message } => {
                loops.record_blocked(s, name, args_hash);
                return (
                    CallResult {
                        output: ToolOutput::error(message.clone()),
                        status: "blocked",
                        end_turn: Some(message),
                    },
                    format!("loop:{detector}"),
                );
            }
        }
        // 4. Command hooks before the call.
        let facts = CallFacts {
            tool: name,
            agent: &self.base.agent,
            session: &self.base.session_key,
            sender: &self.sender,
            sandbox: &self.base.sandbox,
            exec: &self.base.settings.exec_sandbox,
            workspace: &self.base.workspace,
        };
        let mut decided_by = "tool".to_string();
        for hook in self.hooks(HookEvent::BeforeToolCall, tool) {
            match hooks::before(hook, &facts, &args).await {
                Before::Allow => {}
                Before::Replace(new) => {
                    if let Err(e) = tool.validate(&new) {
                        return (
                            done(
                                ToolOutput::error(format!(
                                    "hook `{}` replaced the arguments with invalid ones: {}",
                                    hook.name, e.content
                                )),
                                "blocked",
                            ),
                            format!("hook:{}", hook.name),
                        );
                    }
                    args = new;
                    decided_by = format!("hook:{}", hook.name);
                }
                Before::Block(reason) => {
                    return (
                        done(ToolOutput::error(reason), "blocked"),
                        format!("hook:{}", hook.name),
                    );
                }
            }
        }
        // 5. The owner's approval, for tools set to `ask` (decided with
        // the rest of the policy, as `pincer tools list` shows it).
        if self.resolution.asks(name) {
            let answer = self
                .approvals
                .request(
                    Ask {
                        session_key: &self.base.session_key,
                        session_id: &self.session_id,
                        agent: &self.base.agent,
                        tool: name,
                        arguments: &args.to_string(),
                        requester: self.requester.as_ref(),
                    },
                    self.settings.approval_timeout,
                    &self.base.cancel,
                    |p| (self.announce)(p),
                )
                .await;
            let refused = match answer {
                Answer::Allowed => None,
                Answer::Denied => Some(("denied", "the owner denied this call".to_string())),
                Answer::Expired => Some((
                    "denied",
                    format!(
                        "nobody approved this call within {} s, so it was denied",
                        self.settings.approval_timeout.as_secs()
                    ),
                )),
                Answer::Aborted => Some((
                    "aborted",
                    "the turn was aborted while the call waited for approval".to_string(),
                )),
            };
            if let Some((status, why)) = refused {
                return (done(ToolOutput::error(why), status), "approval".into());
            }
            decided_by = "approval".into();
        }
        // 6. Execution, bounded by the tool's limit and the turn's.
        let limit = self
            .settings
            .timeouts
            .get(name)
            .copied()
            .unwrap_or(self.settings.default_timeout);
        seen.ran_with = Some(args.to_string());
        let (mut output, mut status) = self.execute(tool, args.clone(), limit, deadline).await;
        if output.refused {
            // The data boundary refused inside the tool: what was asked
            // is not this chat's. Recorded as such.
            status = "denied";
            decided_by = "boundary".into();
        }
        // 7. Hooks after the call may rewrite the result.
        for hook in self.hooks(HookEvent::AfterToolCall, tool) {
            if let After::Replace { result, is_error } =
                hooks::after(hook, &facts, &args, &output.content, output.is_error).await
            {
                output = ToolOutput {
                    content: result,
                    is_error,
                    refused: output.refused,
                };
                if status == "ok" && is_error {
                    status = "error";
                }
                decided_by = format!("hook:{}", hook.name);
            }
        }
        // 8. Secrets out, size capped; the loop window sees the outcome.
        output.content = cap_head_tail(&self.redactor.redact(&output.content), self.result_cap);
        loops.record(s, name, args_hash, &output.content);
        if let Some(note) = note {
            output.content.push_str("\n\n");
            output.content.push_str(&note);
        }
        (
            CallResult {
                output,
                status,
                end_turn: None,
            },
            decided_by,
        )
    }

    async fn execute(
        &self,
        tool: &ToolDef,
        args: serde_json::Value,
        limit: Duration,
        deadline: Instant,
    ) -> (ToolOutput, &'static str) {
        let ctx = ToolContext {
            cancel: self.base.cancel.child_token(),
            ..self.base.clone()
        };
        let cancel = ctx.cancel.clone();
        let remaining = deadline.saturating_duration_since(Instant::now());
        let budget = remaining.min(limit);
        let call = tool.execute(args, ctx);
        tokio::pin!(call);
        match tokio::time::timeout(budget, &mut call).await {
            Ok(out) if self.base.cancel.is_cancelled() => (out, "aborted"),
            Ok(out) => {
                let status = if out.is_error { "error" } else { "ok" };
                (out, status)
            }
            Err(_) => {
                // Cancel rather than drop, so the tool cleans up after itself
                // (exec kills its process group); bounded, in case it cannot.
                cancel.cancel();
                let _ = tokio::time::timeout(TOOL_CLEANUP, &mut call).await;
                let why = if budget < remaining {
                    format!(
                        "`{}` ran past its time limit of {} s and was stopped",
                        tool.name,
                        limit.as_secs()
                    )
                } else {
                    "the turn's time limit was reached while the tool ran; it was stopped"
                        .to_string()
                };
                (ToolOutput::error(why), "timeout")
            }
        }
    }

    fn hooks<'a>(
        &'a self,
        event: HookEvent,
        tool: &'a ToolDef,
    ) -> impl Iterator<Item = &'a crate::config::HookSettings> {
        // Hooks name tools with the policy's matcher (names, globs,
        // group:…, plugin ids, mcp:<server>; apply_patch follows write).
        self.settings.hooks.iter().filter(move |h| {
            h.event == event && (h.tools.is_empty() || ToolPatterns::new(&h.tools).matches(tool))
        })
    }

    fn offered_names(&self) -> String {
        if self.offered.is_empty() {
            "none".into()
        } else {
            self.offered
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}
