//! The scheduler as the `schedule` tool and the chats' `/schedules` see
//! it ([`ScheduleBook`]): who asks becomes who made the schedule (the
//! turn's principal and chat), its agent is the asking agent and its
//! answer goes to the chat it was asked in, unless the call says
//! otherwise. A scheduled run may make schedules only when its agent's
//! `scheduled_runs_may_schedule` allows, so a schedule cannot multiply
//! itself by default.

use futures_util::future::BoxFuture;

use crate::config::schedules::ScheduleFields;
use crate::tools::origin::ChatPlace;
use crate::tools::schedule_book::{Asker, BookError, BookVerb, ScheduleBook};

use super::manage::{Maker, ManageError};
use super::scheduler::Scheduler;

/// Whether `key` is the session of a scheduled or triggered run
/// (`agent:<agent>:schedule:<name>…`, `agent:<agent>:trigger:<name>…`).
fn scheduled_run(key: &str) -> bool {
    matches!(
        key.split(':').nth(2),
        Some("schedule" | "trigger" | "heartbeat")
    )
}

/// Where an answer goes when the call names nowhere: the chat asked in
/// (the owner's DM as `<channel>:owner`), nowhere from the CLI.
fn this_chat(asker: &Asker<'_>) -> Option<String> {
    match &asker.origin.chat {
        ChatPlace::Cli => None,
        ChatPlace::Direct { channel, .. } if asker.origin.is_owner() => {
            Some(format!("{channel}:owner"))
        }
        ChatPlace::Direct { channel, chat_id } => Some(format!("{channel}:{chat_id}")),
        ChatPlace::Group {
            channel,
            chat_id,
            thread_id,
        } => Some(match thread_id {
            Some(t) => format!("{channel}:{chat_id}/{t}"),
            None => format!("{channel}:{chat_id}"),
        }),
    }
}

impl Scheduler {
    async fn free_name(&self, fields: &ScheduleFields) -> Result<String, BookError> {
        let base = if fields.at.is_some() {
            "reminder"
        } else {
            "job"
        };
        let taken: Vec<String> = self
            .store()
            .list()
            .await
            .map_err(|e| BookError::Scheduler(e.to_string()))?
            .into_iter()
            .map(|r| r.name)
            .collect();
        Ok((1..)
            .map(|n| format!("{base}-{n}"))
            .find(|n| !taken.contains(n))
            .unwrap_or_else(|| base.to_string()))
    }
}

/// The scheduler's refusal, as the tool and the chat say it.
fn scheduler_said(e: ManageError) -> BookError {
    BookError::Scheduler(e.to_string())
}

impl ScheduleBook for Scheduler {
    fn add<'a>(
        &'a self,
        asker: Asker<'a>,
        name: Option<String>,
        mut fields: ScheduleFields,
    ) -> BoxFuture<'a, Result<String, BookError>> {
        Box::pin(async move {
            if scheduled_run(asker.session_key) {
                let config = self.runtime_config();
                let allowed = config
                    .agent(asker.agent)
                    .is_some_and(|a| a.scheduled_runs_may_schedule);
                if !allowed {
                    return Err(BookError::ScheduledRun {
                        agent: asker.agent.to_string(),
                    });
                }
            }
            fields.agent.get_or_insert_with(|| asker.agent.to_string());
            if fields.deliver.is_none() {
                fields.deliver = this_chat(&asker);
            }
            let name = match name {
                Some(n) => n,
                None => self.free_name(&fields).await?,
            };
            let maker = Maker {
                principal: asker.origin.principal.clone(),
                chat: asker.origin.source.clone(),
            };
            let view = self
                .add(&name, fields, maker)
                .await
                .map_err(scheduler_said)?;
            Ok(format!("Scheduled {}", view.line()))
        })
    }

    fn act<'a>(
        &'a self,
        asker: Asker<'a>,
        verb: BookVerb,
    ) -> BoxFuture<'a, Result<String, BookError>> {
        Box::pin(async move {
            let who = &asker.origin.principal;
            let r = match verb {
                BookVerb::List => self.list(who).await.map(|views| {
                    if views.is_empty() {
                        "No schedules.".to_string()
                    } else {
                        views
                            .iter()
                            .map(|v| v.line())
                            .collect::<Vec<_>>()
                            .join("\n")
                    }
                }),
                BookVerb::Remove(name) => self
                    .remove(&name, who)
                    .await
                    .map(|()| format!("Schedule {name} removed.")),
                BookVerb::Pause(name) => self
                    .pause(&name, who)
                    .await
                    .map(|v| format!("Paused: {}", v.line())),
                BookVerb::Resume(name) => self
                    .resume(&name, who)
                    .await
                    .map(|v| format!("Resumed: {}", v.line())),
                BookVerb::RunNow(name) => self
                    .run_now(&name, who)
                    .await
                    .map(|fire| format!("Schedule {name} fires now (fire {fire}).")),
            };
            r.map_err(scheduler_said)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduled_runs_session_is_known_by_its_key() {
        assert!(scheduled_run("agent:main:schedule:morning:fire-3"));
        assert!(scheduled_run("agent:main:schedule:tidy"));
        assert!(scheduled_run("agent:main:trigger:inbox:fire-9"));
        assert!(!scheduled_run("agent:main:main"));
        assert!(!scheduled_run("agent:main:telegram:dm:42"));
    }
}
