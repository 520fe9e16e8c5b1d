//! Schedules (SPEC §13a): the fields a schedule is written with — in
//! `[schedules.<name>]`, by `pincer schedules add`, over gRPC or by the
//! `schedule` tool — and the one check that turns them into a
//! [`ScheduleSpec`]: when it fires ([`When`]), what it runs, where the
//! answer goes and what a missed fire does. Every way in goes through
//! [`ScheduleFields::check`], so a schedule means the same wherever it was
//! made.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value};

use super::when::{When, WhenError};

/// The misfire lookback when a schedule names none: a day.
pub const DEFAULT_LOOKBACK: SignedDuration = SignedDuration::from_hours(24);

pub use super::file::ScheduleFields;

/// A checked schedule.
#[derive(Debug, Clone)]
pub struct ScheduleSpec {
    pub name: String,
    pub when: When,
    pub agent: String,
    pub target: Target,
    pub deliver: Delivery,
    pub misfire: Misfire,
    pub lookback: SignedDuration,
}

/// What a schedule runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A turn of the agent with `text`, in the session named `session`
    /// or a fresh one.
    Prompt {
        text: String,
        session: Option<String>,
    },
    Workflow {
        name: String,
        inputs: Map<String, Value>,
    },
    /// A shell command: its output is delivered as it is, an empty one
    /// not at all.
    Command { command: String },
}

impl Target {
    /// `prompt`, `workflow` or `command`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Prompt { .. } => "prompt",
            Self::Workflow { .. } => "workflow",
            Self::Command { .. } => "command",
        }
    }
}

/// Where a run's answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The run's transcript only.
    Nowhere,
    /// The owner's DM on `channel`.
    Owner { channel: String },
    /// A chat, written `channel:chat` or `channel:chat/thread`.
    Chat { channel: String, chat: String },
}

impl std::fmt::Display for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nowhere => f.write_str("none"),
            Self::Owner { channel } => write!(f, "{channel}:owner"),
            Self::Chat { channel, chat } => write!(f, "{channel}:{chat}"),
        }
    }
}

/// What a fire missed (pincerd down, the machine asleep) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfire {
    /// The most recent missed fire runs once, if within the lookback.
    Once,
    /// Missed fires are recorded and not run.
    Skip,
}

impl Misfire {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Skip => "skip",
        }
    }
}

/// A field that cannot be used, and why (a sentence).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct FieldError {
    /// The key at fault (`cron`, `deliver`, …); empty for the schedule as
    /// a whole.
    pub key: &'static str,
    pub why: String,
}

pub(super) fn fault(key: &'static str, why: impl Into<String>) -> FieldError {
    FieldError {
        key,
        why: why.into(),
    }
}

/// The chat platforms a schedule can deliver to.
pub const CHANNELS: &[&str] = &["telegram", "discord"];

impl ScheduleFields {
    /// Checks the fields of schedule `name`: `agents` are the configured
    /// agents' ids, `default_agent` the one a schedule without `agent`
    /// gets, `anchor` when an `every` schedule counts from.
    pub fn check(
        &self,
        name: &str,
        agents: &[&str],
        default_agent: &str,
        anchor: Timestamp,
    ) -> Result<ScheduleSpec, FieldError> {
        if !super::agents::valid_id(name) {
            return Err(fault(
                "",
                format!("`{name}` is not a schedule name: use letters, digits, - and _"),
            ));
        }
        let when_err = |key: &'static str| move |e: WhenError| fault(key, e.to_string());
        let tz = self.tz.as_deref();
        let when = match (&self.cron, &self.every, &self.at) {
            (Some(c), None, None) => When::cron(c, tz).map_err(when_err("cron"))?,
            (None, Some(e), None) => {
                if self.tz.is_some() {
                    return Err(fault(
                        "tz",
                        "`tz` is for `cron` and `at`; an `every` interval is the same in every zone",
                    ));
                }
                When::every(e, anchor).map_err(when_err("every"))?
            }
            (None, None, Some(a)) => When::at(a, tz).map_err(when_err("at"))?,
            (None, None, None) => {
                return Err(fault(
                    "",
                    "a schedule needs one of `cron = \"0 8 * * mon-fri\"`, `every = \"2h\"` or `at = \"2026-12-24 18:00\"`",
                ));
            }
            _ => {
                return Err(fault(
                    "",
                    "a schedule has one of `cron`, `every` and `at`, not several",
                ));
            }
        };
        let agent = agent_of(self.agent.as_deref(), agents, default_agent)?;
        let target = self.target()?;
        Ok(ScheduleSpec {
            name: name.to_string(),
            when,
            agent,
            target,
            deliver: delivery(self.deliver.as_deref())?,
            misfire: match self.misfire.as_deref() {
                None | Some("once") => Misfire::Once,
                Some("skip") => Misfire::Skip,
                Some(other) => {
                    return Err(fault(
                        "misfire",
                        format!("`{other}` is not a misfire policy: `once` or `skip`"),
                    ));
                }
            },
            lookback: match self.lookback.as_deref() {
                None => DEFAULT_LOOKBACK,
                Some(text) => text
                    .trim()
                    .parse::<SignedDuration>()
                    .ok()
                    .filter(|d| !d.is_negative())
                    .ok_or_else(|| {
                        fault(
                            "lookback",
                            format!("`{text}` is not a lookback: write e.g. \"24h\" or \"90m\""),
                        )
                    })?,
            },
        })
    }

    fn target(&self) -> Result<Target, FieldError> {
        target_of(
            &self.prompt,
            &self.session,
            &self.workflow,
            &self.inputs,
            &self.command,
        )
    }
}

/// The agent a schedule or a trigger names, or the default one; one the
/// config does not have is refused, naming those it has.
pub(super) fn agent_of(
    agent: Option<&str>,
    agents: &[&str],
    default_agent: &str,
) -> Result<String, FieldError> {
    let agent = agent.unwrap_or(default_agent);
    if agents.contains(&agent) {
        Ok(agent.to_string())
    } else {
        Err(fault(
            "agent",
            format!(
                "there is no agent `{agent}` (agents: {})",
                agents.join(", ")
            ),
        ))
    }
}

/// What a schedule or a trigger runs: exactly one of `prompt` (with its
/// `session`), `workflow` (with its `inputs`) and `command`.
pub(super) fn target_of(
    prompt: &Option<String>,
    session: &Option<String>,
    workflow: &Option<String>,
    inputs: &Map<String, Value>,
    command: &Option<String>,
) -> Result<Target, FieldError> {
    if session.is_some() && prompt.is_none() {
        return Err(fault("session", "`session` goes with `prompt`"));
    }
    if !inputs.is_empty() && workflow.is_none() {
        return Err(fault("inputs", "`inputs` go with `workflow`"));
    }
    if let Some(session) = &session
        && !super::agents::valid_id(session)
    {
        return Err(fault(
            "session",
            format!("`{session}` is not a session name: use letters, digits, - and _"),
        ));
    }
    let nonempty = |key: &'static str, text: &str| {
        if text.trim().is_empty() {
            Err(fault(key, format!("`{key}` is empty")))
        } else {
            Ok(text.to_string())
        }
    };
    match (&prompt, &workflow, &command) {
        (Some(p), None, None) => Ok(Target::Prompt {
            text: nonempty("prompt", p)?,
            session: session.clone(),
        }),
        (None, Some(w), None) => Ok(Target::Workflow {
            name: nonempty("workflow", w)?,
            inputs: inputs.clone(),
        }),
        (None, None, Some(c)) => Ok(Target::Command {
            command: nonempty("command", c)?,
        }),
        _ => Err(fault(
            "",
            "it runs one of `prompt = \"…\"`, `workflow = \"NAME\"` or `command = \"…\"`",
        )),
    }
}

pub(super) fn delivery(text: Option<&str>) -> Result<Delivery, FieldError> {
    let Some(text) = text.map(str::trim) else {
        return Ok(Delivery::Nowhere);
    };
    if text == "none" {
        return Ok(Delivery::Nowhere);
    }
    let bad = || {
        fault(
            "deliver",
            format!(
                "`{text}` is not a delivery: write `telegram:owner` (your DM), a chat such as `telegram:-1001234567890` or `discord:<channel id>`, or `none`"
            ),
        )
    };
    let (channel, chat) = text.split_once(':').ok_or_else(bad)?;
    if !CHANNELS.contains(&channel) {
        return Err(fault(
            "deliver",
            format!(
                "`{channel}` is not a channel a schedule can deliver to ({})",
                CHANNELS.join(", ")
            ),
        ));
    }
    let (id, thread) = match chat.split_once('/') {
        Some((id, thread)) => (id, Some(thread)),
        None => (chat, None),
    };
    let number = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
    };
    match (id, thread) {
        ("owner", None) => Ok(Delivery::Owner {
            channel: channel.into(),
        }),
        (id, thread) if number(id) && thread.is_none_or(number) => Ok(Delivery::Chat {
            channel: channel.into(),
            chat: chat.into(),
        }),
        _ => Err(bad()),
    }
}

/// `[schedules.<name>]` of the file, checked; a problem names the table
/// and the key.
pub(super) fn from_file(
    loc: &super::locate::Locator<'_>,
    file: &super::file::ConfigFile,
    agents: &[&str],
    default_agent: &str,
) -> Result<Vec<(String, ScheduleFields)>, super::locate::ConfigError> {
    let now = Timestamp::now();
    let mut out = Vec::new();
    for (name, section) in &file.schedules {
        let fields = section.get_ref();
        if let Err(e) = fields.check(name, agents, default_agent, now) {
            let key = if e.key.is_empty() {
                String::new()
            } else {
                format!(" {}", e.key)
            };
            return Err(loc.at(
                section.span(),
                format!("[schedules.{name}]{key}: {}", e.why),
            ));
        }
        out.push((name.clone(), fields.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml_text: &str) -> Result<ScheduleSpec, FieldError> {
        let fields: ScheduleFields = toml::from_str(toml_text).unwrap();
        fields.check("morning", &["main", "work"], "main", Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_weekday_morning_prompt_to_the_owners_telegram() {
        let s = check(
            "cron = \"0 8 * * mon-fri\"\ntz = \"Europe/Paris\"\nprompt = \"Summarise my inbox notes\"\ndeliver = \"telegram:owner\"\n",
        )
        .unwrap();
        assert_eq!(s.agent, "main");
        assert_eq!(s.when.zone_name(), "Europe/Paris");
        assert_eq!(
            s.deliver,
            Delivery::Owner {
                channel: "telegram".into()
            }
        );
        assert_eq!(s.misfire, Misfire::Once);
        assert_eq!(s.lookback, DEFAULT_LOOKBACK);
        assert!(matches!(s.target, Target::Prompt { session: None, .. }));
    }

    #[test]
    fn each_bad_field_is_named_with_a_sentence() {
        let cases = [
            ("prompt = \"x\"\n", "", "needs one of"),
            (
                "cron = \"0 8 * * *\"\nevery = \"1h\"\nprompt = \"x\"\n",
                "",
                "not several",
            ),
            (
                "cron = \"0 8 * *\"\nprompt = \"x\"\n",
                "cron",
                "has 4 fields",
            ),
            ("cron = \"0 8 * * *\"\n", "", "runs one of"),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\ncommand = \"ls\"\n",
                "",
                "runs one of",
            ),
            (
                "every = \"1h\"\ntz = \"UTC\"\ncommand = \"ls\"\n",
                "tz",
                "same in every zone",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\nagent = \"nope\"\n",
                "agent",
                "no agent `nope`",
            ),
            (
                "cron = \"0 8 * * *\"\ncommand = \"ls\"\nsession = \"s\"\n",
                "session",
                "goes with `prompt`",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\ninputs = { a = 1 }\n",
                "inputs",
                "go with `workflow`",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\ndeliver = \"slack:owner\"\n",
                "deliver",
                "not a channel",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\ndeliver = \"telegram:bob\"\n",
                "deliver",
                "not a delivery",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\nmisfire = \"twice\"\n",
                "misfire",
                "`once` or `skip`",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"x\"\nlookback = \"-1h\"\n",
                "lookback",
                "not a lookback",
            ),
            (
                "cron = \"0 8 * * *\"\nprompt = \"  \"\n",
                "prompt",
                "is empty",
            ),
        ];
        for (text, key, says) in cases {
            let e = check(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.why.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn deliveries_read_chats_topics_and_none() {
        for (text, want) in [
            ("none", "none"),
            ("telegram:-100123/7", "telegram:-100123/7"),
            ("discord:123456789012345678", "discord:123456789012345678"),
            ("discord:owner", "discord:owner"),
        ] {
            assert_eq!(delivery(Some(text)).unwrap().to_string(), want);
        }
    }

    #[test]
    fn fields_round_trip_through_json() {
        let fields: ScheduleFields = toml::from_str(
            "every = \"2h\"\nworkflow = \"digest\"\ninputs = { folder = \"inbox\" }\n",
        )
        .unwrap();
        let json = serde_json::to_string(&fields).unwrap();
        assert_eq!(
            json,
            r#"{"every":"2h","workflow":"digest","inputs":{"folder":"inbox"}}"#
        );
        assert_eq!(
            serde_json::from_str::<ScheduleFields>(&json).unwrap(),
            fields
        );
    }
}
