//! A workflow file checked into a [`Workflow`], or every problem found,
//! each one sentence at its file and line: keys a step kind does not
//! take, unknown kinds, steps and tools (with the nearest name), steps no
//! path reaches, backward jumps without `max_iterations`, inputs and step
//! results read before they can exist, templates and expressions that do
//! not parse, schemas that are not JSON Schemas, and tools the agent's
//! policy removes (with the layer that removes them). `pincer workflows
//! check` prints them; a run never starts from a file with one.
//!
//! This file holds the checker and what every part of it reports with:
//! the file's own keys (inputs, admission, limits), tools against the
//! policy, schemas and templates. `step.rs` checks each step and its
//! kind's keys, `flow.rs` the paths between the top-level steps, and
//! `reads.rs` what each template and expression reads.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::def::{Admission, Input, InputKind, Workflow};
use super::file::{InputFile, WorkflowFile};
use super::template::{TemplateError, Templates};
use crate::config::locate::{Problem, line_col, nearest, problem_from_toml};

mod flow;
mod reads;
mod step;

pub use flow::Flow;

/// Whether a tool may be called by the agent a workflow runs for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolStatus {
    Offered,
    /// The policy removes it, in this layer, for this reason.
    Removed {
        layer: String,
        reason: String,
    },
    /// No tool has this name; the nearest one that does.
    Unknown {
        nearest: Option<String>,
    },
}

/// What a check needs besides the file.
pub struct Context<'a> {
    /// The workflow's name (the file's stem).
    pub name: &'a str,
    pub path: &'a Path,
    /// The names of the workspace's workflows (for `workflow` steps).
    pub workflows: &'a [String],
    /// The agent's policy for a tool name.
    pub tools: &'a dyn Fn(&str) -> ToolStatus,
}

/// Default `expires_s` of an approval or an input: a day.
const DEFAULT_EXPIRY: Duration = Duration::from_secs(24 * 3600);
/// Default `max_calls` of an agent step.
const DEFAULT_AGENT_CALLS: u32 = 8;
/// Default `repairs` of an llm step with a schema.
const DEFAULT_REPAIRS: u32 = 2;
/// The most an approval may be revised (SPEC §13).
pub const MAX_REVISIONS: u32 = 3;

/// The keys each kind takes beside the common ones.
fn kind_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "tool" => &["tool", "arguments"],
        "command" => &["command"],
        "llm" => &["prompt", "system", "schema", "repairs"],
        "condition" => &["if", "then", "else"],
        "for_each" => &["items", "as", "concurrency", "do"],
        "parallel" => &["branches", "wait"],
        "approval" => &[
            "prompt",
            "preview",
            "approvers",
            "quorum",
            "expires_s",
            "edit",
            "revise",
            "not_initiator",
        ],
        "input" => &["prompt", "schema", "expires_s"],
        "agent" => &["prompt", "max_calls"],
        "workflow" => &["workflow", "inputs"],
        _ => &[],
    }
}

/// Checks `text`, the file at `cx.path`.
pub fn check(cx: &Context<'_>, text: &str) -> Result<Workflow, Vec<Problem>> {
    let file: WorkflowFile = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            return Err(vec![problem_from_toml(cx.path, text, span, e.message())]);
        }
    };
    let mut c = Checker {
        cx,
        text,
        templates: Templates::new(),
        problems: Vec::new(),
        ids: BTreeMap::new(),
    };
    let workflow = c.workflow(file, text);
    if c.problems.is_empty() {
        Ok(workflow)
    } else {
        c.problems.sort_by_key(|p| (p.line, p.column));
        Err(c.problems)
    }
}

struct Checker<'a> {
    cx: &'a Context<'a>,
    text: &'a str,
    templates: Templates,
    problems: Vec<Problem>,
    /// Every step id with its line, nested ones too.
    ids: BTreeMap<String, usize>,
}

impl Checker<'_> {
    fn at(&mut self, span: Range<usize>, key: Option<String>, reason: impl Into<String>) {
        let (line, column) = line_col(self.text, span.start);
        self.problems.push(Problem {
            path: self.cx.path.to_path_buf(),
            line,
            column,
            key,
            reason: reason.into(),
        });
    }

    fn line(&self, span: &Range<usize>) -> usize {
        line_col(self.text, span.start).0
    }

    fn workflow(&mut self, file: WorkflowFile, text: &str) -> Workflow {
        let inputs = self.inputs(&file.inputs);
        let admission = match &file.admission {
            None => Admission::default(),
            Some(a) => self.named(a, "admission".into(), Admission::NAMES, Admission::parse),
        };
        if let Some(m) = &file.max_cost_usd
            && (m.get_ref().is_nan() || *m.get_ref() <= 0.0)
        {
            self.at(m.span(), Some("max_cost_usd".into()), "must be more than 0");
        }
        let mut steps = Vec::new();
        if file.steps.is_empty() {
            self.at(
                0..0,
                None,
                "the workflow has no steps: add a [[steps]] table",
            );
        }
        for s in &file.steps {
            if let Some(step) = self.step(s, false) {
                steps.push(step);
            }
        }
        let complete = steps.len() == file.steps.len();
        let mut workflow = Workflow {
            name: self.cx.name.to_string(),
            path: self.cx.path.to_path_buf(),
            hash: hex(&Sha256::digest(text.as_bytes())),
            source: text.to_string(),
            description: file.description.map(|d| d.into_inner()).unwrap_or_default(),
            inputs,
            steps,
            output: None,
            admission,
            max_tokens: file.max_tokens.map(|m| m.into_inner()),
            max_cost_usd: file.max_cost_usd.map(|m| m.into_inner()),
            subs: BTreeMap::new(),
        };
        // The flow and the values read need every step; with one missing
        // they would report its absence again.
        if complete {
            self.flow(&workflow, &file.steps);
            self.reads(&workflow, &file.steps);
            if let Some(out) = &file.output {
                let ids: BTreeSet<String> = self.ids.keys().cloned().collect();
                self.template_reads(out, "output".into(), &workflow, &ids, None);
                workflow.output = Some(out.get_ref().clone());
            }
        }
        workflow
    }

    fn inputs(&mut self, inputs: &BTreeMap<String, Spanned<InputFile>>) -> Vec<Input> {
        let mut out = Vec::new();
        for (name, spanned) in inputs {
            let key = format!("inputs.{name}");
            if !is_identifier(name) {
                self.at(
                    spanned.span(),
                    Some(key.clone()),
                    "an input's name is letters, digits and `_`, starting with a letter",
                );
            }
            let file = spanned.get_ref();
            let kind = match &file.kind {
                None => InputKind::String,
                Some(k) => self.named(k, format!("{key}.type"), InputKind::NAMES, InputKind::parse),
            };
            let default = file.default.as_ref().and_then(|d| {
                let v = toml_to_json(d.get_ref());
                if kind.admits(&v) {
                    Some(v)
                } else {
                    self.at(
                        d.span(),
                        Some(format!("{key}.default")),
                        format!("the default is not {}", kind.described()),
                    );
                    None
                }
            });
            out.push(Input {
                name: name.clone(),
                kind,
                default,
                description: file.description.clone().unwrap_or_default(),
            });
        }
        out
    }

    /// A name from a fixed list, or a problem with the nearest one.
    fn named<T: Default>(
        &mut self,
        s: &Spanned<String>,
        key: String,
        names: &[&str],
        parse: fn(&str) -> Option<T>,
    ) -> T {
        match parse(s.get_ref()) {
            Some(v) => v,
            None => {
                let reason = unknown(s.get_ref(), "value", names);
                self.at(s.span(), Some(key), reason);
                T::default()
            }
        }
    }

    fn tool_offered(&mut self, tool: &Spanned<String>, key: Option<String>) {
        match (self.cx.tools)(tool.get_ref()) {
            ToolStatus::Offered => {}
            ToolStatus::Removed { layer, reason } => self.at(
                tool.span(),
                key,
                format!(
                    "the agent's policy removes `{}` ({layer} layer: {reason}); a workflow can do only what its agent may",
                    tool.get_ref()
                ),
            ),
            ToolStatus::Unknown { nearest } => self.at(
                tool.span(),
                key,
                match nearest {
                    Some(n) => format!("no tool is called `{}` (did you mean `{n}`?)", tool.get_ref()),
                    None => format!("no tool is called `{}`", tool.get_ref()),
                },
            ),
        }
    }

    fn schema(
        &mut self,
        schema: &Option<Spanned<toml::Value>>,
        key: Option<String>,
    ) -> Option<Value> {
        let s = schema.as_ref()?;
        let value = match s.get_ref() {
            toml::Value::String(text) => match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    self.at(s.span(), key, format!("the schema is not JSON: {e}"));
                    return None;
                }
            },
            other => toml_to_json(other),
        };
        if let Err(e) = jsonschema::validator_for(&value) {
            self.at(s.span(), key, format!("not a JSON Schema: {e}"));
            return None;
        }
        Some(value)
    }

    fn template_parses(&mut self, t: &Spanned<String>, key: Option<String>) {
        if let Err(e) = self.templates.check_template(t.get_ref()) {
            self.template_error(t.span(), key, &e);
        }
    }

    fn expression_parses(&mut self, t: &Spanned<String>, key: Option<String>) {
        if let Err(e) = self.templates.check_expression(t.get_ref()) {
            self.template_error(t.span(), key, &e);
        }
    }

    fn template_error(&mut self, span: Range<usize>, key: Option<String>, e: &TemplateError) {
        let reason = match e.line {
            Some(l) if l > 1 => format!("{} (line {l} of the template)", e.reason),
            _ => e.reason.clone(),
        };
        self.at(span, key, reason);
    }
}

/// "unknown X `y` (did you mean `z`?)" or with the list of names.
fn unknown(value: &str, what: &str, names: &[&str]) -> String {
    let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    match nearest(value, &owned) {
        Some(best) => format!("unknown {what} `{value}` (did you mean `{best}`?)"),
        None if names.is_empty() => format!("unknown {what} `{value}`"),
        None => format!("unknown {what} `{value}`; one of: {}", names.join(", ")),
    }
}

/// "a tool step", "an llm step".
fn a_step(kind: &str) -> String {
    let article = if matches!(kind, "input" | "approval" | "agent" | "llm") {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind} step")
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A TOML value as JSON (dates become their text).
pub fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}
