//! Halts: `approval` and `input` steps, where a run waits for a person.
//!
//! The step asks through the daemon's approvals store (the same store,
//! id space and chat messages as a tool call's approval) and waits for
//! its end, its expiry or the run's cancel. The request is on disk before
//! anyone is asked, so a stop or a crash leaves it waiting: the run
//! resumes on the same request (one belongs to the step's current visit
//! while no attempt of the step ended after the attempt that asked), and
//! an answer given while pincerd was down is not lost.
//!
//! An approval ends approved once its quorum of approvers approved; an
//! edit approves the changed data (with a quorum above one, the others are
//! asked again about it); a revise redrafts the `revise` step's answer
//! with the approver's guidance, at most `MAX_REVISIONS` times, and asks
//! again. A denial, an expiry or a cancel fails the step (its `on_error`
//! decides what follows).

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::{Failure, Frame, RunEvent, Runner};
use crate::tools::approvals::{
    DecidedBy, Ending, Halt, HaltAsk, PendingApproval, Requester, Subject,
};
use crate::workflow::check::MAX_REVISIONS;
use crate::workflow::def::{Action, Step};
use crate::workflow::store::{RunStatus, StepState};

impl Runner {
    /// An `approval` step: its output is `{approved, data, approvers}`.
    pub(super) async fn approval(
        &self,
        frame: &Frame,
        step: &Step,
        path: &str,
        ctx: &Value,
        seq: u64,
    ) -> Result<(Value, u64), Failure> {
        let Action::Approval {
            prompt,
            preview,
            approvers,
            quorum,
            expires,
            edit,
            revise,
            not_initiator,
        } = &step.action
        else {
            return Err(Failure("not an approval step".into()));
        };
        let bad = |e: crate::workflow::template::TemplateError| Failure(e.to_string());
        let prompt = self.templates.render(prompt, ctx).map_err(bad)?;
        let mut tokens = 0;
        // As approvers are named: `owner`, or `<channel>:<user id>`.
        let initiator = not_initiator.then(|| match self.origin.is_owner() {
            true => "owner".to_string(),
            false => self
                .origin
                .sender
                .split(',')
                .next()
                .unwrap_or_default()
                .to_string(),
        });
        let mut asked = match self.current_request(path).await? {
            Some(found) => found,
            None => {
                let data = match preview {
                    Some(p) => Some(self.render_preview(p, ctx)?),
                    None => None,
                };
                let ask = HaltAsk::Approval {
                    data,
                    approvers: approvers.clone(),
                    quorum: *quorum,
                    votes: Vec::new(),
                    edit: *edit,
                    revisions_left: if revise.is_some() { MAX_REVISIONS } else { 0 },
                    initiator: initiator.clone(),
                };
                (self.ask(path, &prompt, ask, *expires, seq).await?, None)
            }
        };
        loop {
            let (request, ended) = asked;
            let ending = match ended {
                Some(e) => e,
                None => self.wait_for(&request).await?,
            };
            // The votes counted while it waited are in the store, not in
            // the request as it was asked.
            let request = match self.rt.approvals().latest_halt(&self.run.id, path).await {
                Ok(Some((now, _))) if now.id == request.id => now,
                _ => request,
            };
            let Some(Halt {
                ask:
                    HaltAsk::Approval {
                        data,
                        votes,
                        revisions_left,
                        ..
                    },
                ..
            }) = request.halt().cloned()
            else {
                return Err(Failure("the request is not an approval".into()));
            };
            let (data, votes, revisions_left) = match ending {
                Ending::Allowed { by, .. } => {
                    // The last vote ended the request: it is in the
                    // request's end, not its subject.
                    let mut votes = votes;
                    let name = approver_name(&by, approvers);
                    if !votes.contains(&name) {
                        votes.push(name);
                    }
                    return Ok((
                        json!({"approved": true, "data": data, "approvers": votes}),
                        tokens,
                    ));
                }
                Ending::Edited { data, by } => {
                    let name = approver_name(&by, approvers);
                    if *quorum <= 1 {
                        return Ok((
                            json!({"approved": true, "data": data, "approvers": [name], "edited": true}),
                            tokens,
                        ));
                    }
                    // The others approve what is now proposed.
                    (Some(data), vec![name], revisions_left)
                }
                Ending::Revised { guidance, by } => {
                    let Some(draft) = revise else {
                        return Err(Failure("the step names no `revise` step".into()));
                    };
                    let round = MAX_REVISIONS.saturating_sub(revisions_left) + 2;
                    tokens += self
                        .redraft(frame, draft, &guidance, &who(&by), round)
                        .await?;
                    let data = match preview {
                        Some(p) => Some(self.render_preview(p, &self.context(frame, None))?),
                        None => None,
                    };
                    (data, Vec::new(), revisions_left.saturating_sub(1))
                }
                Ending::Denied { by } => {
                    let by = by.map(|b| format!(" by {}", who(&b))).unwrap_or_default();
                    return Err(Failure(format!("denied{by}")));
                }
                other => return Err(Failure(ended_early(&other))),
            };
            let ask = HaltAsk::Approval {
                data,
                approvers: approvers.clone(),
                quorum: *quorum,
                votes,
                edit: *edit,
                revisions_left,
                initiator: initiator.clone(),
            };
            asked = (self.ask(path, &prompt, ask, *expires, seq).await?, None);
        }
    }

    /// An `input` step: its output is the data given.
    pub(super) async fn input(
        &self,
        path: &str,
        prompt: String,
        schema: Option<Value>,
        expires: Duration,
        seq: u64,
    ) -> Result<(Value, u64), Failure> {
        let (request, ended) = match self.current_request(path).await? {
            Some(found) => found,
            None => {
                let ask = HaltAsk::Input { schema };
                (self.ask(path, &prompt, ask, expires, seq).await?, None)
            }
        };
        let ending = match ended {
            Some(e) => e,
            None => self.wait_for(&request).await?,
        };
        match ending {
            Ending::Answered { data, .. } => Ok((data, 0)),
            Ending::Denied { by } => {
                let by = by.map(|b| format!(" by {}", who(&b))).unwrap_or_default();
                Err(Failure(format!("the input was refused{by}")))
            }
            other => Err(Failure(ended_early(&other))),
        }
    }

    /// The request of this visit of the step at `path`, if one was made
    /// (before a restart), and how it ended if it did.
    async fn current_request(
        &self,
        path: &str,
    ) -> Result<Option<(PendingApproval, Option<Ending>)>, Failure> {
        let store_err = |e: crate::sqlite::DbError| Failure(format!("the approvals store: {e}"));
        let Some((request, ending)) = self
            .rt
            .approvals()
            .latest_halt(&self.run.id, path)
            .await
            .map_err(store_err)?
        else {
            return Ok(None);
        };
        let rows = self
            .store
            .steps(&self.run.id)
            .await
            .map_err(|e| Failure(e.to_string()))?;
        let last_end = rows
            .iter()
            .filter(|r| {
                r.path == path
                    && matches!(
                        r.state,
                        StepState::Finished | StepState::Failed | StepState::Skipped
                    )
            })
            .map(|r| r.seq)
            .max()
            .unwrap_or(0);
        let current = request.halt().is_some_and(|h| h.seq > last_end);
        Ok(current.then_some((request, ending)))
    }

    /// Registers a request for the step at `path`.
    async fn ask(
        &self,
        path: &str,
        prompt: &str,
        ask: HaltAsk,
        expires: Duration,
        seq: u64,
    ) -> Result<PendingApproval, Failure> {
        let halt = Halt {
            run: self.run.id.clone(),
            workflow: self.run.workflow.clone(),
            step: path.to_string(),
            seq,
            prompt: prompt.to_string(),
            ask,
        };
        self.rt
            .approvals()
            .ask_halt(
                &self.run.agent,
                &self.run.session_key,
                halt,
                SystemTime::now() + expires,
                Requester::of(&self.origin),
            )
            .await
            .map_err(|e| Failure(format!("the approvals store: {e}")))
    }

    /// Waits for `request` to end: an answer, its expiry, or the run's
    /// cancel. The run is `waiting` meanwhile.
    async fn wait_for(&self, request: &PendingApproval) -> Result<Ending, Failure> {
        let Subject::Step(halt) = &request.subject else {
            return Err(Failure("not a workflow's request".into()));
        };
        let id = &request.id;
        let kind = halt.ask.kind();
        let why = format!(
            "step `{}` waits for {} {id}: `pincer approvals list` shows it",
            halt.step,
            if kind == "input" { "input" } else { "approval" },
        );
        self.set_status(RunStatus::Waiting, Some(why)).await;
        let _ = self.events.send(RunEvent::Halted {
            path: halt.step.clone(),
            kind,
            id: id.clone(),
            prompt: halt.prompt.clone(),
        });
        let approvals = self.rt.approvals();
        let left = request
            .expires_at
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let after = request
            .expires_at
            .duration_since(request.requested_at)
            .unwrap_or_default();
        let ended = tokio::select! {
            r = approvals.wait(id) => r.map(|e| e.unwrap_or(Ending::Aborted)),
            () = tokio::time::sleep(left) => approvals.end(id, Ending::Expired { after }).await,
            () = self.cancel.cancelled() => approvals.end(id, Ending::Aborted).await,
        };
        let ending = ended.map_err(|e| Failure(format!("the approvals store: {e}")))?;
        self.set_status(RunStatus::Running, None).await;
        Ok(ending)
    }

    async fn set_status(&self, status: RunStatus, why: Option<String>) {
        if let Err(e) = self.store.set_status(&self.run.id, status, None, why).await {
            tracing::error!(run = %self.run.id, "cannot record the run's status: {e}");
        }
    }

    /// The preview rendered: a sole `{{ expr }}` keeps its value's type.
    fn render_preview(&self, preview: &str, ctx: &Value) -> Result<Value, Failure> {
        self.templates
            .render_value(&Value::String(preview.to_string()), ctx)
            .map_err(|e| Failure(format!("`preview`: {e}")))
    }

    /// Asks the model for a new answer of the llm step `draft`, with the
    /// reviewer's guidance; the new answer replaces the step's output
    /// (in the ledger too, as its attempt `attempt`, so a restart reads
    /// it). The tokens spent and not counted yet (none).
    async fn redraft(
        &self,
        frame: &Frame,
        draft: &str,
        guidance: &str,
        who: &str,
        attempt: u32,
    ) -> Result<u64, Failure> {
        let Some(Step {
            action:
                Action::Llm {
                    prompt,
                    system,
                    schema,
                    repairs,
                },
            ..
        }) = frame.workflow.steps.iter().find(|s| s.id == draft)
        else {
            return Err(Failure(format!(
                "`revise` names `{draft}`, not an llm step"
            )));
        };
        let ctx = self.context(frame, None);
        let bad = |e: crate::workflow::template::TemplateError| Failure(e.to_string());
        let prompt = self.templates.render(prompt, &ctx).map_err(bad)?;
        let system = match system {
            Some(s) => self.templates.render(s, &ctx).map_err(bad)?,
            None => String::new(),
        };
        let previous = &ctx["steps"][draft]["output"];
        let previous = match previous {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let prompt = format!(
            "{prompt}\n\nYour previous answer was:\n{previous}\n\n{who} asked for a new draft: {guidance}"
        );
        let path = frame.path(draft);
        let (output, tokens) = self
            .ask_model(&path, system, prompt, schema.as_ref(), *repairs)
            .await?;
        frame.set_value(draft, json!({"output": output, "status": "ok"}));
        // Recorded here: `record` counts the tokens.
        self.record(
            &path,
            attempt,
            StepState::Finished,
            Some(output),
            None,
            tokens,
        )
        .await
        .map_err(|_| Failure("cannot record the new draft".into()))?;
        Ok(0)
    }
}

/// The approver name `by` answers to among `approvers`.
fn approver_name(by: &DecidedBy, approvers: &[String]) -> String {
    match by {
        DecidedBy::Cli => "owner".to_string(),
        DecidedBy::Chat {
            channel, user_id, ..
        } => {
            let named = format!("{channel}:{user_id}");
            if approvers.contains(&named) {
                named
            } else {
                "owner".to_string()
            }
        }
    }
}

/// Who answered, for a sentence.
fn who(by: &DecidedBy) -> String {
    match by {
        DecidedBy::Cli => "the owner".to_string(),
        DecidedBy::Chat {
            channel,
            user_id,
            name,
        } => format!("{name} ({channel}:{user_id})"),
    }
}

/// Why a halt ended without an answer.
fn ended_early(ending: &Ending) -> String {
    match ending {
        Ending::Expired { after } => format!("nobody answered within {} s", after.as_secs()),
        Ending::Aborted => "the run was cancelled while it waited".to_string(),
        other => format!("the request ended unexpectedly: {other:?}"),
    }
}
