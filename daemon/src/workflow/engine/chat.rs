//! The engine as a chat sees it: the `workflow_run` tool and `/run` start
//! a run as the chat's origin (refused unless its policy offers
//! `workflow_run`) and wait a while for it to end or halt; a run that goes
//! on after that tells the chat how it ended.

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{StartError, Workflows};
use crate::tools::origin::ChatOrigin;
use crate::tools::workflow_run::{RunError, RunReport, WorkflowRunner};
use crate::workflow::catalog;
use crate::workflow::check::ToolStatus;
use crate::workflow::runner::RunEvent;

impl WorkflowRunner for Workflows {
    fn run<'a>(
        &'a self,
        agent: &'a str,
        origin: &'a ChatOrigin,
        name: &'a str,
        inputs: Map<String, Value>,
        wait: std::time::Duration,
    ) -> BoxFuture<'a, Result<RunReport, RunError>> {
        Box::pin(async move {
            let rt = &self.inner.rt;
            let config = rt.config();
            let Some(agent) = config.agent(agent).cloned() else {
                return Err(RunError::NoAgent(agent.to_string()));
            };
            // Who may start runs is the origin's policy's to say: the
            // tool's own verdict, also for `/run`.
            let status = catalog::with_policy(rt, &agent, origin, |p| {
                catalog::tool_status(p, "workflow_run")
            })
            .await;
            if let ToolStatus::Removed { layer, reason } = status {
                return Err(RunError::NotOffered { layer, reason });
            }
            let (run, mut events) = match self.start(&agent, origin, name, inputs).await {
                Ok(started) => started,
                Err(e @ (StartError::Busy { .. } | StartError::Joined { .. })) => {
                    return Ok(RunReport::NotAdmitted { why: e.to_string() });
                }
                Err(e) => return Err(RunError::NotStarted(e.to_string())),
            };
            let deadline = tokio::time::sleep(wait);
            tokio::pin!(deadline);
            loop {
                let event = tokio::select! {
                    e = events.recv() => e,
                    () = &mut deadline => None,
                };
                match event {
                    Some(RunEvent::Halted { path, kind, id, .. }) => {
                        self.tell_when_over(origin, name, &run, events);
                        return Ok(RunReport::Halted {
                            run,
                            step: path,
                            kind: kind.to_string(),
                            id,
                        });
                    }
                    Some(RunEvent::Finished {
                        status,
                        output,
                        error,
                    }) => {
                        return Ok(RunReport::Finished {
                            run,
                            status: status.as_str().to_string(),
                            output,
                            error,
                        });
                    }
                    Some(_) => {}
                    None => {
                        self.tell_when_over(origin, name, &run, events);
                        return Ok(RunReport::Going { run });
                    }
                }
            }
        })
    }
}

impl Workflows {
    /// A run a chat started goes on after its start was answered (it
    /// halted for a person, or took longer): the chat is told how it
    /// ended, as `/run` would have said it.
    pub(super) fn tell_when_over(
        &self,
        origin: &ChatOrigin,
        name: &str,
        run: &str,
        mut events: mpsc::UnboundedReceiver<RunEvent>,
    ) {
        let (Some(to), Some(outbox)) = (origin.chat.address(), self.inner.rt.outbox()) else {
            return;
        };
        let (name, run) = (name.to_string(), run.to_string());
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let RunEvent::Finished {
                    status,
                    output,
                    error,
                } = event
                else {
                    continue;
                };
                let report = RunReport::Finished {
                    run: run.clone(),
                    status: status.as_str().to_string(),
                    output,
                    error,
                };
                if let Err(e) = outbox.send_text(&to, &report.sentence(&name)).await {
                    tracing::warn!(run = %run, error = %e, "cannot tell the chat how the run ended");
                }
                return;
            }
        });
    }
}
