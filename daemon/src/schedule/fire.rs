//! Running a claimed fire: its target as the schedule's principal — a
//! `command` through the `exec` tool's pipeline (policy, sandbox, audit),
//! a `prompt` as a turn of the agent, a `workflow` through the engine —
//! then its answer queued for delivery and sent. A run's failure and a
//! delivery's are kept apart: a delivery that fails is retried from its
//! row (a minute, then five, then fifteen) without running the fire again.

use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use tokio::sync::mpsc;

use crate::agent::Event;
use crate::agent::call_env::{self, CallScope};
use crate::agent::hub::Hub;
use crate::agent::session_log::SessionLog;
use crate::agent::tool_step::{self, ToolCall};
use crate::config::schedules::{Delivery, Target};
use crate::session::SessionKey;
use crate::tools::origin::{ChatAddress, ChatOrigin, Inbound};
use crate::tools::workflow_run::RunReport;

use super::plan::{self, DISABLE_AFTER};
use super::store::{DeliveryRow, FireState, ScheduleStore};
use super::tick::Claimed;

/// How long a command or a turn of a schedule may run.
const RUN_LIMIT: Duration = Duration::from_secs(600);

/// How long a scheduled workflow is waited on before the fire counts as
/// started (a run halted for a person goes on without it).
const WORKFLOW_WAIT: Duration = Duration::from_secs(600);

/// When a failed delivery is tried again, after its first, second and
/// third failure; then it is given up (and kept in the ledger).
const DELIVERY_LADDER: [SignedDuration; 3] = [
    SignedDuration::from_mins(1),
    SignedDuration::from_mins(5),
    SignedDuration::from_mins(15),
];

/// Why a run failed, and whether it reached the model.
#[derive(Debug, Default)]
pub struct Failed {
    pub why: String,
    /// It failed before the model (or the command) was reached: tried
    /// again on the 5/15/30-minute ladder.
    pub before_model: bool,
    /// It did not start at all: the workflow's admission turned it away
    /// while a run of it is busy. Recorded as skipped, not a failure.
    pub not_started: bool,
}

impl Failed {
    fn before_model(why: impl Into<String>) -> Self {
        Self {
            why: why.into(),
            before_model: true,
            not_started: false,
        }
    }

    fn after_model(why: impl Into<String>) -> Self {
        Self {
            why: why.into(),
            ..Self::default()
        }
    }
}

/// Runs fire `c` as its schedule's principal and records how it ended;
/// its answer is queued for delivery. Messages for the owner (a schedule
/// disabled) come back.
pub async fn run(
    hub: &Hub,
    store: &ScheduleStore,
    c: Claimed,
    now: impl Fn() -> Timestamp,
) -> Vec<String> {
    let mut notes = Vec::new();
    let name = c.schedule.name.clone();
    if let Err(e) = store.running(c.fire, None).await {
        tracing::error!(schedule = %name, error = %e, "cannot record a fire as running");
    }
    let config = hub.config();
    if let Some(why) = validate(&config, &c.spec.agent, &c.spec.target, &c.spec.deliver) {
        // A job the config cannot serve would fail the same way every
        // time: the owner hears once and nothing retries.
        let r = store
            .ended(c.fire, FireState::Failed, why.clone(), now())
            .await
            .and(
                store
                    .disable(
                        &name,
                        format!(
                            "it cannot run: {why}; fix that, then `pincer schedules resume {name}`"
                        ),
                    )
                    .await,
            );
        if let Err(e) = r {
            tracing::error!(schedule = %name, error = %e, "cannot record a fire that could not run");
        }
        notes.push(format!(
            "Schedule {name} is disabled without running: {why}. Fix that, then `pincer schedules resume {name}`."
        ));
        return notes;
    }
    let outcome = perform(hub, &Job::of_schedule(&c)).await;
    let result = match outcome {
        Err(Failed {
            why,
            not_started: true,
            ..
        }) => store.ended(c.fire, FireState::Skipped, why, now()).await,
        Ok(answer) => {
            let delivered = answer.trim().to_string();
            let r = store
                .succeeded(&name, c.fire, Some(delivered.clone()), now())
                .await;
            hand_over(hub, store, &name, c.fire, &c.spec.deliver, delivered, &now).await;
            r
        }
        Err(failed) => {
            tracing::warn!(schedule = %name, error = %failed.why, "a scheduled run failed");
            let at = now();
            let retry = if failed.before_model {
                plan::retry_at(at, c.schedule.retries + 1)
            } else {
                None
            };
            let when = c.spec.when.clone();
            let disabled_name = name.clone();
            let r = store
                .failed(
                    &name,
                    c.fire,
                    failed.why.clone(),
                    retry,
                    move |failures| {
                        let disabled = (failures >= DISABLE_AFTER).then(|| {
                            format!("its last {failures} runs failed in a row; `pincer schedules resume {disabled_name}` starts it again")
                        });
                        let next = if disabled.is_some() {
                            None
                        } else {
                            plan::after_failure(&when, at, failures)
                        };
                        (next, disabled)
                    },
                    at,
                )
                .await;
            if let Ok(failures) = &r
                && *failures == DISABLE_AFTER
                && retry.is_none()
            {
                notes.push(format!(
                    "Schedule {name} is disabled: its last {failures} runs failed in a row, the last with: {}. `pincer schedules resume {name}` starts it again.",
                    failed.why
                ));
            }
            r.map(|_| ())
        }
    };
    if let Err(e) = result {
        tracing::error!(schedule = %name, error = %e, "cannot record how a fire ended");
    }
    notes
}

/// Checks, before anything runs, what a job needs that only the config
/// gives — its agent, a model key for a prompt, its workflow's file, the
/// channel it delivers to — so a job that cannot work fails at once with
/// one sentence instead of calling the model, or retrying. `None`: fine.
pub fn validate(
    config: &crate::config::Config,
    agent: &str,
    target: &Target,
    deliver: &Delivery,
) -> Option<String> {
    let Some(a) = config.agent(agent) else {
        return Some(format!("there is no agent `{agent}`"));
    };
    match target {
        Target::Prompt { .. } => {
            if a.models.is_empty() {
                return Some(format!(
                    "agent `{agent}` has no model: no provider is configured"
                ));
            }
            // Every model of the chain lacks its key: none can answer.
            let mut missing = a.models.iter().map(|m| {
                match config.providers.get(&m.provider).map(|p| &p.api_key) {
                    Some(crate::config::ApiKey::Missing { problem }) => Some(problem.clone()),
                    _ => None,
                }
            });
            if let Some(Some(problem)) = missing.next()
                && missing.all(|m| m.is_some())
            {
                return Some(problem);
            }
        }
        Target::Workflow { name, .. } => {
            let file = a
                .workspace
                .join(crate::workflow::library::DIR)
                .join(format!("{name}.toml"));
            if !file.is_file() {
                return Some(format!(
                    "there is no workflow `{name}` ({} is missing)",
                    file.display()
                ));
            }
        }
        Target::Command { .. } => {}
    }
    match deliver {
        Delivery::Nowhere => None,
        Delivery::Owner { channel } => match config.channels.get(channel) {
            None => Some(format!(
                "it delivers to {channel}, which config.toml does not set up ([channels.{channel}])"
            )),
            Some(c) if c.owner.is_none() => Some(format!(
                "it delivers to the owner's {channel} DM, but [channels.{channel}] names no `owner`"
            )),
            Some(_) => None,
        },
        Delivery::Chat { channel, .. } => (!config.channels.contains_key(channel)).then(|| {
            format!(
                "it delivers to {channel}, which config.toml does not set up ([channels.{channel}])"
            )
        }),
    }
}

/// A fire no schedule's deadline governs — a trigger's event, a heartbeat.
pub struct Unscheduled<'a> {
    /// Its name in the ledger.
    pub ledger: &'a str,
    /// What the ledger says it is (`files: inbox/a.pdf`, `heartbeat`).
    pub detail: &'a str,
    /// `trigger` or `heartbeat`: the kind of its sessions' keys.
    pub kind: &'static str,
    /// The trigger's name, or the agent's for a heartbeat.
    pub name: &'a str,
    pub agent: &'a str,
    pub target: &'a Target,
    pub deliver: &'a Delivery,
    /// `owner`, or the principal of the chat it runs as ([`Job::chat`]).
    pub principal: &'a str,
    pub chat: Option<&'a Inbound>,
}

/// Runs `u` as its principal: claimed in the ledger, checked, run, its answer
/// delivered unless `quiet` says it is nothing to report. Failures are
/// the ledger's and the log's; nothing is retried.
pub async fn run_unscheduled(
    hub: &Hub,
    store: &ScheduleStore,
    u: Unscheduled<'_>,
    quiet: impl Fn(&str) -> bool,
    now: &impl Fn() -> Timestamp,
) {
    let name = u.ledger;
    let id = match store.claim_now(name, now(), u.detail).await {
        Ok(id) => id,
        Err(e) => {
            tracing::error!(fire = %name, error = %e, "cannot record a fire");
            return;
        }
    };
    if let Err(e) = store.running(id, None).await {
        tracing::error!(fire = %name, error = %e, "cannot record a fire as running");
    }
    let r = if let Some(why) = validate(&hub.config(), u.agent, u.target, u.deliver) {
        tracing::warn!(fire = %name, "it cannot run: {why}");
        store
            .ended(
                id,
                FireState::Failed,
                format!("it cannot run: {why}"),
                now(),
            )
            .await
    } else {
        let job = Job {
            kind: u.kind,
            name: u.name,
            fire: id,
            agent: u.agent,
            target: u.target,
            principal: u.principal,
            chat: u.chat,
        };
        match perform(hub, &job).await {
            Ok(answer) => {
                let answer = answer.trim().to_string();
                let r = store.succeeded(name, id, Some(answer.clone()), now()).await;
                if !quiet(&answer) {
                    hand_over(hub, store, name, id, u.deliver, answer, now).await;
                }
                r
            }
            Err(Failed {
                why,
                not_started: true,
                ..
            }) => store.ended(id, FireState::Skipped, why, now()).await,
            Err(failed) => {
                tracing::warn!(fire = %name, error = %failed.why, "a run failed");
                store.ended(id, FireState::Failed, failed.why, now()).await
            }
        }
    };
    if let Err(e) = r {
        tracing::error!(fire = %name, error = %e, "cannot record how a fire ended");
    }
}

/// Queues `answer` of fire `fire` of `name` for `deliver` and sends it
/// (nothing when it is empty or goes nowhere); a failure is retried by
/// the scheduler's loop from the queued row.
pub async fn hand_over(
    hub: &Hub,
    store: &ScheduleStore,
    name: &str,
    fire: i64,
    deliver_to: &Delivery,
    answer: String,
    now: &impl Fn() -> Timestamp,
) {
    if answer.is_empty() {
        return;
    }
    let Some(to) = address(hub, deliver_to) else {
        return;
    };
    // The loop's retries leave it alone while this sends it.
    let retry_from = now()
        .checked_add(DELIVERY_LADDER[0])
        .unwrap_or_else(|_| now());
    match store
        .queue_delivery(fire, name, &to.to_string(), &answer, retry_from)
        .await
    {
        Ok(id) => {
            let row = DeliveryRow {
                id,
                fire,
                schedule: name.to_string(),
                to: to.to_string(),
                text: answer,
                tries: 0,
                next_try_at: None,
            };
            deliver(hub, store, &row, now).await
        }
        Err(e) => tracing::error!(schedule = %name, error = %e, "cannot queue a delivery"),
    }
}

/// What one fire runs and as whom: a schedule's or a trigger's.
pub struct Job<'a> {
    /// `schedule` or `trigger`: the kind of its sessions' keys.
    pub kind: &'static str,
    pub name: &'a str,
    pub fire: i64,
    pub agent: &'a str,
    pub target: &'a Target,
    /// `owner`, or the principal of the chat that made it.
    pub principal: &'a str,
    pub chat: Option<&'a Inbound>,
}

impl<'a> Job<'a> {
    fn of_schedule(c: &'a Claimed) -> Self {
        Self {
            kind: "schedule",
            name: &c.schedule.name,
            fire: c.fire,
            agent: &c.spec.agent,
            target: &c.spec.target,
            principal: &c.schedule.principal,
            chat: c.schedule.chat.as_ref(),
        }
    }
}

/// Runs a job's target as its principal; its answer (the text to
/// deliver).
pub async fn perform(hub: &Hub, c: &Job<'_>) -> Result<String, Failed> {
    let rt = hub.runtime();
    let config = rt.config();
    let Some(agent) = config.agent(c.agent).cloned() else {
        return Err(Failed::after_model(format!(
            "there is no agent `{}`",
            c.agent
        )));
    };
    let origin = origin_of(&config, c)?;
    match c.target {
        Target::Command { command } => {
            let key = session_key(c.kind, &agent.id, c.name, None)?;
            let mut log = SessionLog::open_session(rt, &agent.id, &key, origin.principal.clone())
                .await
                .map_err(|e| Failed::before_model(e.to_string()))?;
            let session_id = log.session_id.clone();
            let cancel = tokio_util::sync::CancellationToken::new();
            let scope =
                CallScope::outside_turn(rt, &config, &agent, &key, &session_id, &origin, &cancel);
            let registry = rt.tool_registry().await;
            let env = call_env::build(&scope, &registry);
            let arguments = serde_json::json!({ "command": command }).to_string();
            let call_id = format!("{}:{}:{}", c.kind, c.name, c.fire);
            let result = tool_step::run_recorded(
                &env,
                &mut log,
                &call_id,
                ToolCall {
                    id: &call_id,
                    name: "exec",
                    arguments: &arguments,
                },
                Instant::now() + RUN_LIMIT,
                scope.emit,
            )
            .await
            .map_err(|e| Failed::before_model(e.to_string()))?;
            if result.output.is_error || result.status != "ok" {
                return Err(Failed::after_model(format!(
                    "exec ({}): {}",
                    result.status,
                    crate::util::preview(&result.output.content, 500)
                )));
            }
            Ok(command_output(&result.output.content))
        }
        Target::Prompt { text, session } => {
            // A named session is kept across fires; else each has its own.
            let fresh = format!("fire-{}", c.fire);
            let key = session_key(
                c.kind,
                &agent.id,
                c.name,
                Some(session.as_deref().unwrap_or(&fresh)),
            )?;
            let (tx, mut rx) = mpsc::unbounded_channel();
            hub.chat(key, text.clone(), origin, tx)
                .await
                .map_err(|e| Failed::before_model(e.to_string()))?;
            let mut reached = false;
            while let Some(event) = rx.recv().await {
                match event {
                    Event::TurnStarted { .. } => reached = true,
                    Event::Finished { text, .. } => return Ok(text),
                    Event::Error { code, message } => {
                        return Err(Failed {
                            why: message,
                            // A provider that could not be reached at all
                            // (the network is not up yet after a wake).
                            before_model: !reached || code == "unreachable",
                            not_started: false,
                        });
                    }
                    _ => {}
                }
            }
            Err(Failed {
                why: "the turn ended without an answer".into(),
                before_model: !reached,
                not_started: false,
            })
        }
        Target::Workflow { name, inputs } => {
            let Some(engine) = rt.workflows() else {
                return Err(Failed::before_model("workflows are not running"));
            };
            let report = engine
                .run(&agent.id, &origin, name, inputs.clone(), WORKFLOW_WAIT)
                .await
                .map_err(|e| Failed::after_model(e.to_string()))?;
            match &report {
                RunReport::NotAdmitted { why } => Err(Failed {
                    why: why.clone(),
                    not_started: true,
                    ..Failed::default()
                }),
                RunReport::Finished { status, error, .. } if status != "succeeded" => Err(
                    Failed::after_model(error.clone().unwrap_or_else(|| report.sentence(name))),
                ),
                _ => Ok(report.sentence(name)),
            }
        }
    }
}

/// Who a fire runs as: the owner for a schedule or trigger the owner made, else the
/// chat that made it, routed again under the config in force (its
/// principal and policy as if it wrote now).
fn origin_of(config: &crate::config::Config, c: &Job<'_>) -> Result<ChatOrigin, Failed> {
    match (c.principal, c.chat) {
        ("owner", _) => Ok(ChatOrigin::owner(false)),
        (_, Some(chat)) => crate::routing::route(config, chat)
            .map(|r| r.origin)
            .map_err(|e| {
                Failed::after_model(format!("the chat that made it no longer routes: {e}"))
            }),
        (principal, None) => Err(Failed::after_model(format!(
            "it was made for {principal} by no chat pincer can route"
        ))),
    }
}

/// A fire's session: `agent:<agent>:<kind>:<name>[:<session>]`, the kind
/// being `schedule` or `trigger`.
fn session_key(
    kind: &str,
    agent: &str,
    name: &str,
    session: Option<&str>,
) -> Result<SessionKey, Failed> {
    let text = match session {
        Some(s) => format!("agent:{agent}:{kind}:{name}:{s}"),
        None => format!("agent:{agent}:{kind}:{name}"),
    };
    SessionKey::parse(&text).map_err(|e| Failed::before_model(e.to_string()))
}

/// The output of `exec` as a command's answer: without its status line
/// (`exit code 0 (12 ms)`), so an empty output delivers nothing.
fn command_output(content: &str) -> String {
    match content.split_once('\n') {
        Some((first, rest)) if first.starts_with("exit code") => rest.to_string(),
        _ if content.starts_with("exit code") => String::new(),
        _ => content.to_string(),
    }
}

/// Where `deliver` sends, under the config in force.
fn address(hub: &Hub, deliver: &Delivery) -> Option<ChatAddress> {
    match deliver {
        Delivery::Nowhere => None,
        Delivery::Owner { channel } => {
            let config = hub.config();
            let owner = config.channels.get(channel)?.owner.clone()?;
            Some(ChatAddress::person(channel, &owner))
        }
        Delivery::Chat { channel, chat } => ChatAddress::parse(&format!("{channel}:{chat}")).ok(),
    }
}

/// Sends delivery `d`, recording how it went; a failure is tried again
/// on the ladder.
pub async fn deliver(
    hub: &Hub,
    store: &ScheduleStore,
    d: &DeliveryRow,
    now: &impl Fn() -> Timestamp,
) {
    let sent = match (hub.outbox(), ChatAddress::parse(&d.to)) {
        (Some(outbox), Ok(to)) => {
            // The owner's DM is addressed to the person (the platform
            // opens the DM).
            let to = if is_owner_dm(hub, &to) {
                ChatAddress::person(&to.channel, &to.chat_id)
            } else {
                to
            };
            outbox
                .send_text(&to, &d.text)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        (None, _) => Err("no channel is running".to_string()),
        (_, Err(e)) => Err(e.to_string()),
    };
    let r = match sent {
        Ok(()) => store.delivered(d.id).await,
        Err(why) => {
            tracing::warn!(schedule = %d.schedule, to = %d.to, error = %why, "a scheduled delivery failed");
            let next = DELIVERY_LADDER
                .get(d.tries as usize)
                .and_then(|step| now().checked_add(*step).ok());
            store.delivery_failed(d.id, why, next).await
        }
    };
    if let Err(e) = r {
        tracing::error!(schedule = %d.schedule, error = %e, "cannot record a delivery");
    }
}

/// The owner's DM where messages about schedules go: on the first
/// channel (by name) that names its owner; `None` when none does.
pub fn owner_dm(hub: &Hub) -> Option<ChatAddress> {
    let config = hub.config();
    config
        .channels
        .iter()
        .find_map(|(name, c)| c.owner.as_ref().map(|o| ChatAddress::person(name, o)))
}

fn is_owner_dm(hub: &Hub, to: &ChatAddress) -> bool {
    let config = hub.config();
    config
        .channels
        .get(&to.channel)
        .is_some_and(|c| c.is_owner(&to.chat_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::session::Principal;
    use crate::tools::origin::{Chat, Sender};

    fn config(extra: &str) -> Config {
        let home = crate::home::Home::at("/tmp/pincer-fire-test");
        crate::config::load::parse(
            &home,
            std::path::Path::new("/h/config.toml"),
            &format!(
                "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"PINCER_FIRE_TEST_NO_SUCH_KEY\"\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[agents.main]\n{extra}"
            ),
            &|| None,
        )
        .unwrap()
    }

    fn prompt() -> Target {
        Target::Prompt {
            text: "hi".into(),
            session: None,
        }
    }

    #[test]
    fn what_the_config_cannot_serve_is_refused_before_anything_runs() {
        let c = config("");
        let missing_key = validate(&c, "main", &prompt(), &Delivery::Nowhere).unwrap();
        assert!(
            missing_key.contains("PINCER_FIRE_TEST_NO_SUCH_KEY"),
            "{missing_key}"
        );
        // A command needs no model.
        let command = Target::Command {
            command: "true".into(),
        };
        assert_eq!(validate(&c, "main", &command, &Delivery::Nowhere), None);
        assert!(
            validate(&c, "gone", &command, &Delivery::Nowhere)
                .unwrap()
                .contains("no agent `gone`")
        );
        let wf = Target::Workflow {
            name: "nightly".into(),
            inputs: Default::default(),
        };
        assert!(
            validate(&c, "main", &wf, &Delivery::Nowhere)
                .unwrap()
                .contains("no workflow `nightly`")
        );
        let owner = Delivery::Owner {
            channel: "telegram".into(),
        };
        assert!(
            validate(&c, "main", &command, &owner)
                .unwrap()
                .contains("does not set up ([channels.telegram])")
        );
        let c = config("[channels.telegram]\n");
        assert!(
            validate(&c, "main", &command, &owner)
                .unwrap()
                .contains("names no `owner`")
        );
        let c = config("[channels.telegram]\nowner = \"1\"\n");
        assert_eq!(validate(&c, "main", &command, &owner), None);
    }

    #[test]
    fn a_fire_runs_as_the_principal_that_made_it() {
        let c = config("[channels.telegram]\nowner = \"1\"\n[channels.telegram.groups.\"-100\"]\n");
        let target = prompt();
        let job = |principal: &'static str, chat: Option<&'static Inbound>| Job {
            kind: "schedule",
            name: "s",
            fire: 1,
            agent: "main",
            target: &target,
            principal,
            chat,
        };
        let owner = origin_of(&c, &job("owner", None)).unwrap();
        assert_eq!(owner.principal, Principal::Owner);
        let group: &'static Inbound = Box::leak(Box::new(Inbound {
            channel: "telegram".into(),
            account: None,
            chat: Chat::Group("-100".into()),
            thread: None,
            guild: None,
            roles: Vec::new(),
            sender: Sender {
                id: "7".into(),
                name: "Ann".into(),
            },
        }));
        let made_in_group = origin_of(&c, &job("telegram:group:-100", Some(group))).unwrap();
        assert_eq!(
            made_in_group.principal,
            Principal::Group {
                channel: "telegram".into(),
                chat: "-100".into()
            }
        );
        assert!(!made_in_group.is_owner());
        // A chat's principal with no chat to route is refused, not run as
        // the owner.
        assert!(origin_of(&c, &job("telegram:group:-100", None)).is_err());
    }

    #[test]
    fn a_commands_answer_is_its_output_without_the_status_line() {
        assert_eq!(command_output("exit code 0 (3 ms)\nhello\n"), "hello\n");
        assert_eq!(command_output("exit code 0 (3 ms)"), "");
        assert_eq!(command_output("exit code 0 (3 ms)\n"), "");
    }
}
