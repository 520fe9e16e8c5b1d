//! Triggers (SPEC §13a): `[triggers.<name>]` — what a trigger watches
//! ([`Source`]), what it runs (the same [`Target`] and [`Delivery`] as a
//! schedule, checked by the same functions) and how often it may fire
//! ([`Limits`]). [`TriggerFields::check`] is the one check.

use std::sync::Arc;
use std::time::Duration;

use jiff::SignedDuration;

use super::schedules::{Delivery, FieldError, Target, agent_of, delivery, fault, target_of};

pub use super::file::TriggerFields;

/// The least `min_interval` (a floor for floods) and the default one.
pub const MIN_INTERVAL_FLOOR: Duration = Duration::from_secs(1);
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(10);
/// Fires in any hour, by default.
pub const DEFAULT_PER_HOUR: u32 = 60;
/// The least interval of a `condition` script.
pub const MIN_CONDITION_EVERY: Duration = Duration::from_secs(1);

/// What a trigger watches.
#[derive(Debug, Clone)]
pub enum Source {
    /// A workspace glob; a file created or changed under it fires.
    Files { glob: String },
    /// A supervised command: each exit fires, then it runs again.
    Exits { command: String },
    /// A supervised long-running command: its matching lines fire.
    Lines {
        command: String,
        pattern: regex::Regex,
    },
    /// A script run every `every`: exit 0 fires.
    Condition { script: String, every: Duration },
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        // A regex compares by its text.
        format!("{self:?}") == format!("{other:?}")
    }
}

impl Source {
    /// `files`, `exits`, `lines` or `condition`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Files { .. } => "files",
            Self::Exits { .. } => "exits",
            Self::Lines { .. } => "lines",
            Self::Condition { .. } => "condition",
        }
    }
}

/// How often a trigger may fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub min_interval: Duration,
    pub per_hour: u32,
}

/// A checked trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerSpec {
    pub name: String,
    pub source: Source,
    pub agent: String,
    pub target: Target,
    pub deliver: Delivery,
    pub limits: Limits,
}

fn duration(key: &'static str, text: &str) -> Result<Duration, FieldError> {
    text.trim()
        .parse::<SignedDuration>()
        .ok()
        .filter(|d| d.is_positive())
        .and_then(|d| Duration::try_from(d).ok())
        .ok_or_else(|| {
            fault(
                key,
                format!("`{text}` is not a duration: write e.g. \"30s\" or \"5m\""),
            )
        })
}

fn nonempty(key: &'static str, text: &str) -> Result<String, FieldError> {
    if text.trim().is_empty() {
        Err(fault(key, format!("`{key}` is empty")))
    } else {
        Ok(text.to_string())
    }
}

impl TriggerFields {
    /// Checks trigger `name`: `agents` are the configured agents' ids,
    /// `default_agent` the one a trigger without `agent` gets.
    pub fn check(
        &self,
        name: &str,
        agents: &[&str],
        default_agent: &str,
    ) -> Result<TriggerSpec, FieldError> {
        if !super::agents::valid_id(name) {
            return Err(fault(
                "",
                format!("`{name}` is not a trigger name: use letters, digits, - and _"),
            ));
        }
        if self.pattern.is_some() && self.lines.is_none() {
            return Err(fault("pattern", "`pattern` goes with `lines`"));
        }
        if self.every.is_some() && self.condition.is_none() {
            return Err(fault("every", "`every` goes with `condition`"));
        }
        let source = match (&self.files, &self.exits, &self.lines, &self.condition) {
            (Some(glob), None, None, None) => Source::Files {
                glob: files_glob(glob)?,
            },
            (None, Some(c), None, None) => Source::Exits {
                command: nonempty("exits", c)?,
            },
            (None, None, Some(c), None) => {
                let Some(p) = &self.pattern else {
                    return Err(fault(
                        "pattern",
                        "`lines` needs a `pattern`: the regular expression a line must match",
                    ));
                };
                Source::Lines {
                    command: nonempty("lines", c)?,
                    pattern: regex::Regex::new(p).map_err(|e| {
                        fault("pattern", format!("`{p}` is not a regular expression: {e}"))
                    })?,
                }
            }
            (None, None, None, Some(s)) => {
                let Some(every) = &self.every else {
                    return Err(fault(
                        "every",
                        "`condition` needs `every`: how often the script runs, e.g. \"5m\"",
                    ));
                };
                let every = duration("every", every)?;
                if every < MIN_CONDITION_EVERY {
                    return Err(fault("every", "`every` is at least 1s"));
                }
                Source::Condition {
                    script: nonempty("condition", s)?,
                    every,
                }
            }
            (None, None, None, None) => {
                return Err(fault(
                    "",
                    "a trigger watches one of `files = \"inbox/**\"`, `exits = \"…\"`, `lines = \"…\"` (with `pattern`) or `condition = \"…\"` (with `every`)",
                ));
            }
            _ => {
                return Err(fault(
                    "",
                    "a trigger watches one of `files`, `exits`, `lines` and `condition`, not several",
                ));
            }
        };
        let agent = agent_of(self.agent.as_deref(), agents, default_agent)?;
        let min_interval = match &self.min_interval {
            None => DEFAULT_MIN_INTERVAL,
            Some(t) => duration("min_interval", t)?,
        };
        if min_interval < MIN_INTERVAL_FLOOR {
            return Err(fault("min_interval", "`min_interval` is at least 1s"));
        }
        let per_hour = self.max_per_hour.unwrap_or(DEFAULT_PER_HOUR);
        if per_hour == 0 {
            return Err(fault(
                "max_per_hour",
                "`max_per_hour` is at least 1 (remove the trigger to stop it)",
            ));
        }
        Ok(TriggerSpec {
            name: name.to_string(),
            source,
            agent,
            target: target_of(
                &self.prompt,
                &self.session,
                &self.workflow,
                &self.inputs,
                &self.command,
            )?,
            deliver: delivery(self.deliver.as_deref())?,
            limits: Limits {
                min_interval,
                per_hour,
            },
        })
    }
}

/// A `files` glob: relative to the workspace, inside it.
fn files_glob(glob: &str) -> Result<String, FieldError> {
    let g = glob.trim().trim_start_matches("./");
    if g.is_empty() {
        return Err(fault("files", "`files` is empty"));
    }
    if g.starts_with('/') || g.split('/').any(|part| part == "..") {
        return Err(fault(
            "files",
            format!(
                "`{glob}` is not inside the workspace: write a glob relative to it, e.g. \"inbox/**\""
            ),
        ));
    }
    globset::Glob::new(g).map_err(|e| fault("files", format!("`{glob}` is not a glob: {e}")))?;
    Ok(g.to_string())
}

/// Checks every `[triggers.*]` of the file, located at its table; a name
/// a schedule has too is refused (they share the ledger).
pub(super) fn from_file(
    loc: &super::locate::Locator<'_>,
    file: &super::file::ConfigFile,
    agents: &[&str],
    default_agent: &str,
) -> Result<Vec<Arc<TriggerSpec>>, super::locate::ConfigError> {
    let mut out = Vec::with_capacity(file.triggers.len());
    for (name, section) in &file.triggers {
        let at = |e: FieldError| {
            let key = if e.key.is_empty() {
                String::new()
            } else {
                format!(" {}", e.key)
            };
            loc.at(section.span(), format!("[triggers.{name}]{key}: {}", e.why))
        };
        if file.schedules.contains_key(name) {
            return Err(at(fault(
                "",
                format!(
                    "[schedules.{name}] has that name too: a trigger and a schedule share the ledger, so their names differ"
                ),
            )));
        }
        out.push(Arc::new(
            section
                .get_ref()
                .check(name, agents, default_agent)
                .map_err(at)?,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<TriggerSpec, FieldError> {
        let fields: TriggerFields = toml::from_str(text).unwrap();
        fields.check("inbox", &["main"], "main")
    }

    #[test]
    fn each_source_reads_with_its_defaults() {
        let t = check("files = \"inbox/**\"\nprompt = \"File them\"\n").unwrap();
        assert_eq!(
            t.source,
            Source::Files {
                glob: "inbox/**".into()
            }
        );
        assert_eq!(t.limits.min_interval, DEFAULT_MIN_INTERVAL);
        assert_eq!(t.limits.per_hour, DEFAULT_PER_HOUR);
        let t = check("lines = \"tail -F log\"\npattern = \"ERROR\"\ncommand = \"true\"\nmin_interval = \"1m\"\nmax_per_hour = 5\n").unwrap();
        assert_eq!(t.source.kind(), "lines");
        assert_eq!(t.limits.min_interval, Duration::from_secs(60));
        assert_eq!(t.limits.per_hour, 5);
        let t = check("condition = \"test -e flag\"\nevery = \"5m\"\nprompt = \"x\"\n").unwrap();
        assert_eq!(
            t.source,
            Source::Condition {
                script: "test -e flag".into(),
                every: Duration::from_secs(300)
            }
        );
        assert_eq!(
            check("exits = \"make\"\nprompt = \"x\"\n")
                .unwrap()
                .source
                .kind(),
            "exits"
        );
    }

    #[test]
    fn each_bad_field_is_named_with_a_sentence() {
        for (text, key, says) in [
            ("prompt = \"x\"\n", "", "watches one of"),
            (
                "files = \"a\"\nexits = \"b\"\nprompt = \"x\"\n",
                "",
                "not several",
            ),
            (
                "files = \"../x/**\"\nprompt = \"x\"\n",
                "files",
                "not inside the workspace",
            ),
            (
                "files = \"/etc/**\"\nprompt = \"x\"\n",
                "files",
                "not inside the workspace",
            ),
            ("files = \"a/[\"\nprompt = \"x\"\n", "files", "not a glob"),
            (
                "lines = \"tail\"\nprompt = \"x\"\n",
                "pattern",
                "needs a `pattern`",
            ),
            (
                "lines = \"tail\"\npattern = \"(\"\nprompt = \"x\"\n",
                "pattern",
                "not a regular expression",
            ),
            (
                "files = \"a\"\npattern = \"x\"\nprompt = \"x\"\n",
                "pattern",
                "goes with `lines`",
            ),
            (
                "condition = \"true\"\nprompt = \"x\"\n",
                "every",
                "needs `every`",
            ),
            (
                "condition = \"true\"\nevery = \"soon\"\nprompt = \"x\"\n",
                "every",
                "not a duration",
            ),
            (
                "files = \"a\"\nprompt = \"x\"\nmin_interval = \"100ms\"\n",
                "min_interval",
                "at least 1s",
            ),
            (
                "files = \"a\"\nprompt = \"x\"\nmax_per_hour = 0\n",
                "max_per_hour",
                "at least 1",
            ),
            (
                "files = \"a\"\nprompt = \"x\"\nagent = \"nope\"\n",
                "agent",
                "no agent",
            ),
            ("files = \"a\"\n", "", "runs one of"),
            (
                "files = \"a\"\nprompt = \"x\"\ndeliver = \"slack:x\"\n",
                "deliver",
                "not a channel",
            ),
        ] {
            let e = check(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.why.contains(says), "{text}: {e}");
        }
    }
}
