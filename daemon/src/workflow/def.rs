//! A workflow as the engine runs it: the file checked (`check/`) into
//! typed steps. Strings that are templates or expressions are kept as
//! text; they parsed when the file was checked and are rendered against
//! the run's values when a step starts (`template.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

/// A checked workflow.
#[derive(Debug, Clone)]
pub struct Workflow {
    pub name: String,
    pub path: PathBuf,
    /// SHA-256 of the file's bytes: what each run records it ran.
    pub hash: String,
    /// The file's text, as each run records it.
    pub source: String,
    pub description: String,
    pub inputs: Vec<Input>,
    pub steps: Vec<Step>,
    /// A template over the finished steps; `None`: the last step's output.
    pub output: Option<String>,
    pub admission: Admission,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    /// The sub-workflows its `workflow` steps start, by name, each with
    /// its own (`library::link` fills them; the circle-free tree is
    /// bounded by `library::MAX_DEPTH`).
    pub subs: BTreeMap<String, Arc<Workflow>>,
}

impl Workflow {
    /// The top-level step `id`'s index.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == id)
    }

    /// The sub-workflows this one starts, each with the line of the step
    /// that starts it.
    pub fn sub_workflows(&self) -> Vec<(&str, usize)> {
        let mut out = Vec::new();
        for step in &self.steps {
            step.visit(&mut |s| {
                if let Action::Workflow { name, .. } = &s.action {
                    out.push((name.as_str(), s.line));
                }
            });
        }
        out
    }

    /// Every sub-workflow below this one, each once, by name.
    pub fn all_subs(&self) -> BTreeMap<String, Arc<Workflow>> {
        let mut out = BTreeMap::new();
        for (name, w) in &self.subs {
            out.extend(w.all_subs());
            out.insert(name.clone(), w.clone());
        }
        out
    }

    /// The `given` inputs checked against the declared ones, the defaults
    /// filled in; text (from a command line or a chat) is read as its
    /// input's kind.
    pub fn fill_inputs(&self, given: Map<String, Value>) -> Result<Map<String, Value>, InputError> {
        let names: Vec<String> = self.inputs.iter().map(|i| i.name.clone()).collect();
        for name in given.keys() {
            if !names.contains(name) {
                let hint = match crate::config::locate::nearest(name, &names) {
                    Some(n) => format!(" (did you mean `{n}`?)"),
                    None if names.is_empty() => " (it takes none)".to_string(),
                    None => format!("; its inputs: {}", names.join(", ")),
                };
                return Err(InputError::Unknown {
                    workflow: self.name.clone(),
                    name: name.clone(),
                    hint,
                });
            }
        }
        let mut out = Map::new();
        for input in &self.inputs {
            let value = match (given.get(&input.name), &input.default) {
                (Some(v), _) => v.clone(),
                (None, Some(d)) => d.clone(),
                (None, None) => {
                    return Err(InputError::Missing {
                        workflow: self.name.clone(),
                        name: input.name.clone(),
                        kind: input.kind.described(),
                    });
                }
            };
            let value = match (&value, input.kind) {
                (Value::String(text), kind) if !kind.admits(&value) => {
                    kind.from_text(text).map_err(|source| InputError::Text {
                        name: input.name.clone(),
                        source,
                    })?
                }
                _ => value,
            };
            if !input.kind.admits(&value) {
                return Err(InputError::NotOfKind {
                    name: input.name.clone(),
                    kind: input.kind.described(),
                });
            }
            out.insert(input.name.clone(), value);
        }
        Ok(out)
    }
}

/// Why the inputs given to a run do not fit the workflow's.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// `hint` is the nearest name, or the inputs it takes.
    #[error("workflow `{workflow}` has no input `{name}`{hint}")]
    Unknown {
        workflow: String,
        name: String,
        hint: String,
    },
    #[error(
        "workflow `{workflow}` needs the input `{name}` ({kind}): give it with --input {name}=…"
    )]
    Missing {
        workflow: String,
        name: String,
        kind: &'static str,
    },
    #[error("input `{name}`: {source}")]
    Text { name: String, source: NotOfKind },
    #[error("input `{name}` is not {kind}")]
    NotOfKind { name: String, kind: &'static str },
}

/// A value given as text that does not read as its input's kind.
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not {kind}")]
pub struct NotOfKind {
    pub text: String,
    /// The kind, described.
    pub kind: &'static str,
}

/// One typed input.
#[derive(Debug, Clone)]
pub struct Input {
    pub name: String,
    pub kind: InputKind,
    /// `None`: the input is required.
    pub default: Option<Value>,
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputKind {
    #[default]
    String,
    Integer,
    Number,
    Boolean,
    List,
    Object,
}

impl InputKind {
    pub const NAMES: &[&str] = &["string", "integer", "number", "boolean", "list", "object"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "list" => Self::List,
            "object" => Self::Object,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether `v` is of this kind (an integer counts as a number).
    pub fn admits(self, v: &Value) -> bool {
        match self {
            Self::String => v.is_string(),
            Self::Integer => v.is_i64() || v.is_u64(),
            Self::Number => v.is_number(),
            Self::Boolean => v.is_boolean(),
            Self::List => v.is_array(),
            Self::Object => v.is_object(),
        }
    }

    /// A value given as text on a command line (`--input k=v`), read as
    /// this kind: text is taken as it is for `string`, JSON otherwise.
    pub fn from_text(self, text: &str) -> Result<Value, NotOfKind> {
        if self == Self::String {
            return Ok(Value::String(text.to_string()));
        }
        let not_of_kind = || NotOfKind {
            text: text.to_string(),
            kind: self.described(),
        };
        let v: Value = serde_json::from_str(text).map_err(|_| not_of_kind())?;
        if self.admits(&v) {
            Ok(v)
        } else {
            Err(not_of_kind())
        }
    }

    pub fn described(self) -> &'static str {
        match self {
            Self::String => "text",
            Self::Integer => "a whole number",
            Self::Number => "a number",
            Self::Boolean => "true or false",
            Self::List => "a JSON list",
            Self::Object => "a JSON object",
        }
    }
}

/// What a start does while a run of the same workflow is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// Runs beside it.
    Parallel,
    /// Waits, and runs when the busy run ends.
    #[default]
    Queue,
    /// Joins the one waiting start, if any, else waits.
    Coalesce,
    /// Is refused.
    Drop,
}

impl Admission {
    pub const NAMES: &[&str] = &["parallel", "queue", "coalesce", "drop"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "parallel" => Self::Parallel,
            "queue" => Self::Queue,
            "coalesce" => Self::Coalesce,
            "drop" => Self::Drop,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// One step.
#[derive(Debug, Clone)]
pub struct Step {
    pub id: String,
    /// 1-based line of the step's table in the file.
    pub line: usize,
    pub description: String,
    /// An expression: the step runs only when it is true.
    pub when: Option<String>,
    /// Where the run goes after this step (not for a condition).
    pub next: Next,
    pub retry: Retry,
    pub timeout: Option<Duration>,
    pub on_error: OnError,
    pub idempotent: bool,
    /// A parallel branch whose failure does not fail the step.
    pub optional: bool,
    /// How often a backward jump from this step may be taken.
    pub max_iterations: Option<u32>,
    pub action: Action,
}

impl Step {
    pub fn kind(&self) -> &'static str {
        self.action.kind()
    }

    /// Calls `f` on this step and every step inside it.
    pub fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Step)) {
        f(self);
        match &self.action {
            Action::ForEach { body, .. } => body.visit(f),
            Action::Parallel { branches, .. } => branches.iter().for_each(|b| b.visit(f)),
            _ => {}
        }
    }
}

/// Where a run goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The following step in the file (or the end after the last).
    Following,
    Step(String),
    End,
}

impl Next {
    /// The word a file uses for the end of a run.
    pub const END: &str = "end";
}

/// A step kind's own settings.
#[derive(Debug, Clone)]
pub enum Action {
    /// A tool call through the agent's whole tool pipeline.
    Tool { tool: String, arguments: Value },
    /// A shell command through `exec` (and so the sandbox), no model.
    Command { command: String },
    /// One model call; with a schema, the answer is JSON that must satisfy
    /// it, and a failing answer is sent back with the error `repairs` times.
    Llm {
        prompt: String,
        system: Option<String>,
        schema: Option<Value>,
        repairs: u32,
    },
    /// Chooses the next step.
    Condition {
        test: String,
        then: Next,
        otherwise: Next,
    },
    /// The body once per item, at most `concurrency` at a time; the
    /// outputs in the items' order.
    ForEach {
        items: String,
        var: String,
        concurrency: u32,
        body: Box<Step>,
    },
    /// The branches at once; their outputs by branch id.
    Parallel { branches: Vec<Step>, wait: Wait },
    /// A durable halt until the approvers decide.
    Approval {
        prompt: String,
        preview: Option<String>,
        /// `owner`, or `channel:user id`.
        approvers: Vec<String>,
        quorum: u32,
        expires: Duration,
        edit: bool,
        revise: Option<String>,
        /// Whoever started the run may not approve it (they may deny).
        not_initiator: bool,
    },
    /// A durable halt until someone answers with data of the schema.
    Input {
        prompt: String,
        schema: Option<Value>,
        expires: Duration,
    },
    /// A bounded free turn of the agent.
    Agent { prompt: String, max_calls: u32 },
    /// Another workflow of the same workspace.
    Workflow { name: String, inputs: Value },
}

impl Action {
    pub const KINDS: &[&str] = &[
        "tool",
        "command",
        "llm",
        "condition",
        "for_each",
        "parallel",
        "approval",
        "input",
        "agent",
        "workflow",
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tool { .. } => "tool",
            Self::Command { .. } => "command",
            Self::Llm { .. } => "llm",
            Self::Condition { .. } => "condition",
            Self::ForEach { .. } => "for_each",
            Self::Parallel { .. } => "parallel",
            Self::Approval { .. } => "approval",
            Self::Input { .. } => "input",
            Self::Agent { .. } => "agent",
            Self::Workflow { .. } => "workflow",
        }
    }

    /// Whether the step halts the run for a person.
    pub fn halts(&self) -> bool {
        matches!(self, Self::Approval { .. } | Self::Input { .. })
    }

    /// Whether the step may wait on people for as long as they take: a
    /// halt, or a sub-workflow (which may halt). Such a step has no
    /// timeout; its own steps answer cancels and stops.
    pub fn waits(&self) -> bool {
        self.halts() || matches!(self, Self::Workflow { .. })
    }
}

/// Whether a parallel step waits for all branches or the first to finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    All,
    Any,
}

/// What a failed step does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// The run fails.
    #[default]
    Stop,
    /// The run goes on to the next step; the step's output is its error.
    Continue,
    /// The run ends here, successfully, skipping the steps left.
    SkipRest,
}

impl OnError {
    pub const NAMES: &[&str] = &["stop", "continue", "skip_rest"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "stop" => Self::Stop,
            "continue" => Self::Continue,
            "skip_rest" => Self::SkipRest,
            _ => return None,
        })
    }
}

/// How a failed step is tried again.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    /// Tries in all (1: no retry).
    pub attempts: u32,
    pub exponential: bool,
    pub delay: Duration,
    pub max_delay: Duration,
    pub jitter: bool,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 1,
            exponential: false,
            delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            jitter: false,
        }
    }
}

impl Retry {
    /// The wait before try `attempt` (2 is the first retry); `unit` in
    /// [0, 1) comes from the run's seed, so a replay waits the same.
    pub fn delay_before(&self, attempt: u32, unit: f64) -> Duration {
        let n = attempt.saturating_sub(2);
        let base = if self.exponential {
            self.delay.saturating_mul(2u32.saturating_pow(n))
        } else {
            self.delay
        };
        let base = base.min(self.max_delay);
        if self.jitter {
            base + base.mul_f64(unit.clamp(0.0, 1.0) / 2.0)
        } else {
            base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_doubles_up_to_its_cap() {
        let r = Retry {
            attempts: 6,
            exponential: true,
            delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
            jitter: false,
        };
        let waits: Vec<u128> = (2..=6)
            .map(|a| r.delay_before(a, 0.0).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 500, 500]);
    }

    #[test]
    fn jitter_adds_up_to_half_from_the_seeded_unit() {
        let r = Retry {
            jitter: true,
            delay: Duration::from_millis(100),
            ..Retry::default()
        };
        assert_eq!(r.delay_before(2, 0.0).as_millis(), 100);
        assert_eq!(r.delay_before(2, 0.5).as_millis(), 125);
    }

    #[test]
    fn inputs_given_as_text_are_read_as_their_kind() {
        assert_eq!(InputKind::String.from_text("3").unwrap(), "3");
        assert_eq!(InputKind::Integer.from_text("3").unwrap(), 3);
        assert!(InputKind::Integer.from_text("3.5").is_err());
        assert_eq!(
            InputKind::List.from_text("[1,2]").unwrap(),
            serde_json::json!([1, 2])
        );
        assert_eq!(
            InputKind::Boolean.from_text("yes").unwrap_err().to_string(),
            "`yes` is not true or false"
        );
    }
}
