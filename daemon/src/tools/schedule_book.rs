//! `schedule`: the agent sets a reminder or a recurring job for its owner
//! — a prompt, a workflow or a command at a time (`at`), on a calendar
//! (`cron`) or on an interval (`every`) — and lists, pauses, resumes and
//! removes them. It is owner-only: nobody else's message can make pincerd
//! act later on their behalf. The chats' `/schedules` command reaches the
//! same verbs.
//!
//! The scheduler lives above the tools; [`ScheduleBook`] is what the tool
//! and the chat command need of it, installed into the runtime when the
//! daemon starts. What a schedule means, who may make one (a scheduled run
//! only when its agent's `scheduled_runs_may_schedule` allows) and where
//! its answer goes by default (the chat it was asked in) are decided
//! there, once.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::origin::ChatOrigin;
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::config::schedules::ScheduleFields;

/// Who asks: the agent, the session the call is made in, and the turn's
/// origin.
#[derive(Clone, Copy)]
pub struct Asker<'a> {
    pub agent: &'a str,
    pub session_key: &'a str,
    pub origin: &'a ChatOrigin,
}

/// What is asked of an existing schedule (or of them all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BookVerb {
    List,
    Remove(String),
    Pause(String),
    Resume(String),
    RunNow(String),
}

/// Why the scheduler did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum BookError {
    /// A scheduled run asked, and its agent does not let scheduled runs
    /// make schedules.
    #[error(
        "a scheduled run cannot make schedules (the owner may allow it with `scheduled_runs_may_schedule = true` under [agents.{agent}])"
    )]
    ScheduledRun { agent: String },
    /// The scheduler refused it (no such schedule, a name taken, fields
    /// that do not check, one of config.toml's) or could not do it: its
    /// sentence.
    #[error("{0}")]
    Scheduler(String),
}

/// What the tool and the chat command need of the scheduler. Answers are
/// sentences.
pub trait ScheduleBook: Send + Sync {
    /// Makes schedule `name` (a name is made up when it is `None`).
    fn add<'a>(
        &'a self,
        asker: Asker<'a>,
        name: Option<String>,
        fields: ScheduleFields,
    ) -> BoxFuture<'a, Result<String, BookError>>;

    /// Does `verb` to the asker's schedules.
    fn act<'a>(
        &'a self,
        asker: Asker<'a>,
        verb: BookVerb,
    ) -> BoxFuture<'a, Result<String, BookError>>;
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Add,
    List,
    Remove,
    Pause,
    Resume,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleArgs {
    /// add, list, remove, pause or resume.
    pub action: Action,
    /// The schedule's name (letters, digits, - and _); made up for `add`
    /// when left out.
    #[serde(default)]
    pub name: Option<String>,
    /// When (`add`, one of three): a cron expression in `tz`, e.g.
    /// `0 8 * * mon-fri` (weekdays at 8:00).
    #[serde(default)]
    pub cron: Option<String>,
    /// When (`add`): an interval such as `2h` or `30m`.
    #[serde(default)]
    pub every: Option<String>,
    /// When (`add`): one instant, `2026-12-24 18:00` in `tz` (a reminder).
    #[serde(default)]
    pub at: Option<String>,
    /// The IANA time zone of `cron` and `at`, e.g. `Europe/Berlin`
    /// (default: the machine's).
    #[serde(default)]
    pub tz: Option<String>,
    /// What (`add`, one of three): the prompt you will be given then;
    /// your answer is delivered.
    #[serde(default)]
    pub prompt: Option<String>,
    /// What (`add`): a workflow of this workspace, with `inputs`.
    #[serde(default)]
    pub workflow: Option<String>,
    #[serde(default)]
    pub inputs: Map<String, Value>,
    /// What (`add`): a shell command; its output is delivered as it is.
    #[serde(default)]
    pub command: Option<String>,
    /// Where the answer goes: `telegram:owner`, a chat, or `none`
    /// (default: this chat).
    #[serde(default)]
    pub deliver: Option<String>,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "schedule",
        "Set a reminder or a recurring job for the owner: at a time (`at`), on a calendar (`cron`) or an interval (`every`), run a prompt (you answer it then), a workflow or a command, delivered to this chat by default. Also list, pause, resume and remove schedules.",
        &["messaging"],
        ToolFlags {
            owner_only: true,
            ..ToolFlags::default()
        },
        run,
    )
    .with_aliases(&[
        ("when", "at"),
        ("time", "at"),
        ("message", "prompt"),
        ("text", "prompt"),
        ("timezone", "tz"),
        ("to", "deliver"),
    ])
}

async fn run(args: ScheduleArgs, ctx: ToolContext) -> ToolOutput {
    let Some(book) = ctx.schedules.clone() else {
        return ToolOutput::error("no scheduler runs in this pincerd");
    };
    let asker = Asker {
        agent: &ctx.agent,
        session_key: &ctx.session_key,
        origin: &ctx.origin,
    };
    let named = |verb: fn(String) -> BookVerb| match &args.name {
        Some(n) => Ok(verb(n.clone())),
        None => Err(ToolOutput::error("`name` is needed: which schedule")),
    };
    let verb = match args.action {
        Action::Add => {
            let fields = ScheduleFields {
                cron: args.cron,
                every: args.every,
                at: args.at,
                tz: args.tz,
                prompt: args.prompt,
                workflow: args.workflow,
                inputs: args.inputs,
                command: args.command,
                deliver: args.deliver,
                ..ScheduleFields::default()
            };
            return match book.add(asker, args.name, fields).await {
                Ok(s) => ToolOutput::ok(s),
                Err(e) => ToolOutput::error(e.to_string()),
            };
        }
        Action::List => Ok(BookVerb::List),
        Action::Remove => named(BookVerb::Remove),
        Action::Pause => named(BookVerb::Pause),
        Action::Resume => named(BookVerb::Resume),
    };
    let verb = match verb {
        Ok(v) => v,
        Err(out) => return out,
    };
    match book.act(asker, verb).await {
        Ok(s) => ToolOutput::ok(s),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}
