//! A workflow file checked into a [`Workflow`], or every problem found,
//! each one sentence at its file and line: keys a step kind does not
//! take, unknown kinds, steps and tools (with the nearest name), steps no
//! path reaches, backward jumps without `max_iterations`, inputs and step
//! results read before they can exist, templates and expressions that do
//! not parse, schemas that are not JSON Schemas, and tools the agent's
//! policy removes (with the layer that removes them). `pincer workflows
//! check` prints them; a run never starts from a file with one.
//!
//! The flow is a graph over the top-level steps: each goes to the next in
//! the file unless its `next` says otherwise, a condition to its `then`
//! or `else`; `end` ends the run. A `for_each` body and `parallel`
//! branches run inside their step, so they neither jump nor halt for a
//! person.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::def::{Action, Admission, Input, InputKind, Next, OnError, Retry, Step, Wait, Workflow};
use super::file::{InputFile, RetryFile, StepFile, WorkflowFile};
use super::template::{TemplateError, Templates};
use crate::config::locate::{Problem, line_col, nearest, problem_from_toml};

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

    /// One step; `inside`: a for_each body or a parallel branch.
    fn step(&mut self, s: &Spanned<StepFile>, inside: bool) -> Option<Step> {
        let span = s.span();
        let f = s.get_ref();
        let Some(id) = &f.id else {
            self.at(span, None, "a step needs an `id`");
            return None;
        };
        let key = |field: &str| Some(format!("steps.{}.{field}", id.get_ref()));
        let id_text = id.get_ref().clone();
        if !is_identifier(&id_text) || id_text == Next::END {
            self.at(
                id.span(),
                key("id"),
                "a step's id is letters, digits and `_`, starting with a letter, and not `end`",
            );
        } else if let Some(first) = self.ids.insert(id_text.clone(), self.line(&span)) {
            self.at(
                id.span(),
                key("id"),
                format!("the id `{id_text}` is taken by the step on line {first}"),
            );
        }
        let Some(kind) = &f.kind else {
            self.at(
                span,
                key("kind"),
                format!(
                    "step `{id_text}` needs a `kind`: one of {}",
                    Action::KINDS.join(", ")
                ),
            );
            return None;
        };
        let kind_name = kind.get_ref().as_str();
        if !Action::KINDS.contains(&kind_name) {
            self.at(
                kind.span(),
                key("kind"),
                unknown(kind_name, "step kind", Action::KINDS),
            );
            return None;
        }
        self.foreign_keys(f, &id_text, kind_name);
        if inside {
            for (name, present) in [
                ("next", f.next.as_ref().map(Spanned::span)),
                (
                    "max_iterations",
                    f.max_iterations.as_ref().map(Spanned::span),
                ),
            ] {
                if let Some(at) = present {
                    self.at(
                        at,
                        key(name),
                        "a step inside a for_each or parallel step runs within it and cannot jump",
                    );
                }
            }
            if matches!(kind_name, "condition" | "approval" | "input") {
                self.at(
                    kind.span(),
                    key("kind"),
                    format!(
                        "{} cannot be inside a for_each or parallel step: put it before or after that step",
                        a_step(kind_name)
                    ),
                );
            } else if kind_name == "workflow" {
                self.at(
                    kind.span(),
                    key("kind"),
                    "a workflow step cannot be inside a for_each or parallel step: a sub-workflow runs in the run's own line of steps, where it may halt for a person",
                );
            }
        } else if let Some(o) = &f.optional {
            self.at(
                o.span(),
                key("optional"),
                "only a parallel step's branches are optional",
            );
        }
        let action = self.action(f, &id_text, kind_name, span.clone())?;
        if let Some(t) = &f.timeout_s
            && action.waits()
        {
            let why = if action.halts() {
                format!(
                    "{} waits until it expires (`expires_s`), not a timeout",
                    a_step(kind_name)
                )
            } else {
                "a workflow step takes as long as its sub-workflow's steps: set `timeout_s` on those".to_string()
            };
            self.at(t.span(), key("timeout_s"), why);
        }
        let retry = f
            .retry
            .as_ref()
            .map(|r| self.retry(r, &id_text))
            .unwrap_or_default();
        let on_error = match &f.on_error {
            None => OnError::default(),
            Some(o) => self.named(
                o,
                format!("steps.{id_text}.on_error"),
                OnError::NAMES,
                OnError::parse,
            ),
        };
        if let Some(w) = &f.when {
            self.expression_parses(w, key("when"));
        }
        let next = match &f.next {
            None => Next::Following,
            Some(n) if n.get_ref() == Next::END => Next::End,
            Some(n) => Next::Step(n.get_ref().clone()),
        };
        if let (Some(n), Action::Condition { .. }) = (&f.next, &action) {
            self.at(
                n.span(),
                key("next"),
                "a condition goes to its `then` or `else`, not `next`",
            );
        }
        Some(Step {
            id: id_text,
            line: self.line(&span),
            description: f.description.clone().unwrap_or_default(),
            when: f.when.as_ref().map(|w| w.get_ref().clone()),
            next,
            retry,
            timeout: f
                .timeout_s
                .as_ref()
                .map(|t| Duration::from_secs(*t.get_ref())),
            on_error,
            idempotent: f.idempotent.unwrap_or(false),
            optional: f.optional.as_ref().is_some_and(|o| *o.get_ref()),
            max_iterations: f.max_iterations.as_ref().map(|m| *m.get_ref()),
            action,
        })
    }

    /// Keys set on a step whose kind does not take them.
    fn foreign_keys(&mut self, f: &StepFile, id: &str, kind: &str) {
        let set: [(&str, Option<Range<usize>>); 25] = [
            ("tool", f.tool.as_ref().map(Spanned::span)),
            ("arguments", f.arguments.as_ref().map(Spanned::span)),
            ("command", f.command.as_ref().map(Spanned::span)),
            ("prompt", f.prompt.as_ref().map(Spanned::span)),
            ("system", f.system.as_ref().map(Spanned::span)),
            ("schema", f.schema.as_ref().map(Spanned::span)),
            ("repairs", f.repairs.as_ref().map(Spanned::span)),
            ("if", f.test.as_ref().map(Spanned::span)),
            ("then", f.then.as_ref().map(Spanned::span)),
            ("else", f.otherwise.as_ref().map(Spanned::span)),
            ("items", f.items.as_ref().map(Spanned::span)),
            ("as", f.var.as_ref().map(Spanned::span)),
            ("concurrency", f.concurrency.as_ref().map(Spanned::span)),
            ("do", f.body.as_ref().map(Spanned::span)),
            ("branches", f.branches.as_ref().map(Spanned::span)),
            ("wait", f.wait.as_ref().map(Spanned::span)),
            ("preview", f.preview.as_ref().map(Spanned::span)),
            ("approvers", f.approvers.as_ref().map(Spanned::span)),
            ("quorum", f.quorum.as_ref().map(Spanned::span)),
            ("expires_s", f.expires_s.as_ref().map(Spanned::span)),
            ("edit", f.edit.as_ref().map(Spanned::span)),
            ("revise", f.revise.as_ref().map(Spanned::span)),
            ("not_initiator", f.not_initiator.as_ref().map(Spanned::span)),
            ("max_calls", f.max_calls.as_ref().map(Spanned::span)),
            ("workflow", f.workflow.as_ref().map(Spanned::span)),
        ];
        let takes = kind_keys(kind);
        for (name, span) in set {
            let Some(span) = span else { continue };
            if takes.contains(&name) {
                continue;
            }
            let owners: Vec<&str> = Action::KINDS
                .iter()
                .copied()
                .filter(|k| kind_keys(k).contains(&name))
                .collect();
            self.at(
                span,
                Some(format!("steps.{id}.{name}")),
                format!(
                    "{} has no `{name}` (it belongs to {} steps)",
                    a_step(kind),
                    owners.join(" and ")
                ),
            );
        }
        if let Some(i) = &f.inputs
            && kind != "workflow"
        {
            self.at(
                i.span(),
                Some(format!("steps.{id}.inputs")),
                format!(
                    "{} has no `inputs` (it belongs to workflow steps)",
                    a_step(kind)
                ),
            );
        }
    }

    /// A required key, or a problem saying it is missing.
    fn required<'f, T>(
        &mut self,
        value: &'f Option<Spanned<T>>,
        span: &Range<usize>,
        id: &str,
        kind: &str,
        name: &str,
    ) -> Option<&'f Spanned<T>> {
        if value.is_none() {
            self.at(
                span.clone(),
                Some(format!("steps.{id}.{name}")),
                format!("{} needs `{name}`", a_step(kind)),
            );
        }
        value.as_ref()
    }

    fn action(&mut self, f: &StepFile, id: &str, kind: &str, span: Range<usize>) -> Option<Action> {
        let key = |field: &str| Some(format!("steps.{id}.{field}"));
        Some(match kind {
            "tool" => {
                let tool = self.required(&f.tool, &span, id, kind, "tool")?;
                self.tool_offered(tool, key("tool"));
                let arguments = f
                    .arguments
                    .as_ref()
                    .map(|a| toml_to_json(&toml::Value::Table(a.get_ref().clone())))
                    .unwrap_or_else(|| Value::Object(Default::default()));
                if let Some(a) = &f.arguments
                    && let Err(e) = self.templates.check_value(&arguments)
                {
                    self.template_error(a.span(), key("arguments"), &e);
                }
                Action::Tool {
                    tool: tool.get_ref().clone(),
                    arguments,
                }
            }
            "command" => {
                let command = self.required(&f.command, &span, id, kind, "command")?;
                let exec = Spanned::new(command.span(), "exec".to_string());
                self.tool_offered(&exec, key("command"));
                self.template_parses(command, key("command"));
                Action::Command {
                    command: command.get_ref().clone(),
                }
            }
            "llm" => {
                let prompt = self.required(&f.prompt, &span, id, kind, "prompt")?;
                self.template_parses(prompt, key("prompt"));
                if let Some(s) = &f.system {
                    self.template_parses(s, key("system"));
                }
                let schema = self.schema(&f.schema, key("schema"));
                Action::Llm {
                    prompt: prompt.get_ref().clone(),
                    system: f.system.as_ref().map(|s| s.get_ref().clone()),
                    repairs: f.repairs.as_ref().map_or(DEFAULT_REPAIRS, |r| *r.get_ref()),
                    schema,
                }
            }
            "condition" => {
                let test = self.required(&f.test, &span, id, kind, "if")?;
                self.expression_parses(test, key("if"));
                let then = self.required(&f.then, &span, id, kind, "then")?;
                let target = |t: &Spanned<String>| match t.get_ref().as_str() {
                    Next::END => Next::End,
                    s => Next::Step(s.to_string()),
                };
                Action::Condition {
                    test: test.get_ref().clone(),
                    then: target(then),
                    otherwise: f.otherwise.as_ref().map_or(Next::Following, target),
                }
            }
            "for_each" => {
                let items = self.required(&f.items, &span, id, kind, "items")?;
                self.expression_parses(items, key("items"));
                let var = f
                    .var
                    .as_ref()
                    .map_or("item".to_string(), |v| v.get_ref().clone());
                if let Some(v) = &f.var
                    && (!is_identifier(&var)
                        || ["inputs", "steps", "run", "index"].contains(&var.as_str()))
                {
                    self.at(
                        v.span(),
                        key("as"),
                        "the item's name is letters, digits and `_`, and not inputs, steps, run or index",
                    );
                }
                let concurrency = f.concurrency.as_ref().map_or(1, |c| *c.get_ref());
                if concurrency == 0 {
                    let at = f.concurrency.as_ref().map_or(span.clone(), Spanned::span);
                    self.at(at, key("concurrency"), "must be 1 or more");
                }
                let body = self.required(&f.body, &span, id, kind, "do")?;
                let inner = Spanned::new(body.span(), (**body.get_ref()).clone());
                let body = self.step(&inner, true)?;
                Action::ForEach {
                    items: items.get_ref().clone(),
                    var,
                    concurrency: concurrency.max(1),
                    body: Box::new(body),
                }
            }
            "parallel" => {
                let branches = self.required(&f.branches, &span, id, kind, "branches")?;
                if branches.get_ref().len() < 2 {
                    self.at(
                        branches.span(),
                        key("branches"),
                        "a parallel step needs two branches or more",
                    );
                }
                let wait = match &f.wait {
                    None => Wait::All,
                    Some(w) => match w.get_ref().as_str() {
                        "all" => Wait::All,
                        "any" => Wait::Any,
                        other => {
                            self.at(
                                w.span(),
                                key("wait"),
                                unknown(other, "value", &["all", "any"]),
                            );
                            Wait::All
                        }
                    },
                };
                let mut out = Vec::new();
                for b in branches.get_ref() {
                    if let Some(step) = self.step(b, true) {
                        out.push(step);
                    }
                }
                if out.len() != branches.get_ref().len() {
                    return None;
                }
                Action::Parallel {
                    branches: out,
                    wait,
                }
            }
            "approval" => {
                let prompt = self.required(&f.prompt, &span, id, kind, "prompt")?;
                self.template_parses(prompt, key("prompt"));
                if let Some(p) = &f.preview {
                    self.template_parses(p, key("preview"));
                }
                let approvers: Vec<String> = match &f.approvers {
                    None => vec!["owner".to_string()],
                    Some(list) => {
                        for a in list.get_ref() {
                            let ok = a.get_ref() == "owner"
                                || a.get_ref()
                                    .split_once(':')
                                    .is_some_and(|(c, u)| is_identifier(c) && !u.is_empty());
                            if !ok {
                                self.at(
                                    a.span(),
                                    key("approvers"),
                                    format!(
                                        "`{}` is not an approver: write `owner` or `<channel>:<user id>`, such as `telegram:12345`",
                                        a.get_ref()
                                    ),
                                );
                            }
                        }
                        if list.get_ref().is_empty() {
                            self.at(
                                list.span(),
                                key("approvers"),
                                "name one approver or more (or leave the key out: the owner)",
                            );
                        }
                        list.get_ref().iter().map(|a| a.get_ref().clone()).collect()
                    }
                };
                let distinct: HashSet<&String> = approvers.iter().collect();
                let quorum = f.quorum.as_ref().map_or(1, |q| *q.get_ref());
                if let Some(q) = &f.quorum
                    && (quorum == 0 || quorum as usize > distinct.len())
                {
                    self.at(
                        q.span(),
                        key("quorum"),
                        format!(
                            "the quorum is from 1 to the {} approver(s) named",
                            distinct.len()
                        ),
                    );
                }
                let not_initiator = f.not_initiator.as_ref().is_some_and(|n| *n.get_ref());
                if let Some(n) = &f.not_initiator
                    && not_initiator
                    && distinct.len() <= quorum as usize
                {
                    self.at(
                        n.span(),
                        key("not_initiator"),
                        format!(
                            "with `not_initiator` name more approvers than the quorum ({quorum}): whoever starts the run does not count"
                        ),
                    );
                }
                Action::Approval {
                    prompt: prompt.get_ref().clone(),
                    preview: f.preview.as_ref().map(|p| p.get_ref().clone()),
                    approvers,
                    quorum: quorum.max(1),
                    expires: f
                        .expires_s
                        .as_ref()
                        .map_or(DEFAULT_EXPIRY, |e| Duration::from_secs(*e.get_ref())),
                    edit: f.edit.as_ref().is_some_and(|e| *e.get_ref()),
                    revise: f.revise.as_ref().map(|r| r.get_ref().clone()),
                    not_initiator,
                }
            }
            "input" => {
                let prompt = self.required(&f.prompt, &span, id, kind, "prompt")?;
                self.template_parses(prompt, key("prompt"));
                Action::Input {
                    prompt: prompt.get_ref().clone(),
                    schema: self.schema(&f.schema, key("schema")),
                    expires: f
                        .expires_s
                        .as_ref()
                        .map_or(DEFAULT_EXPIRY, |e| Duration::from_secs(*e.get_ref())),
                }
            }
            "agent" => {
                let prompt = self.required(&f.prompt, &span, id, kind, "prompt")?;
                self.template_parses(prompt, key("prompt"));
                let max_calls = f
                    .max_calls
                    .as_ref()
                    .map_or(DEFAULT_AGENT_CALLS, |m| *m.get_ref());
                if max_calls == 0 {
                    let at = f.max_calls.as_ref().map_or(span.clone(), Spanned::span);
                    self.at(at, key("max_calls"), "must be 1 or more");
                }
                Action::Agent {
                    prompt: prompt.get_ref().clone(),
                    max_calls: max_calls.max(1),
                }
            }
            "workflow" => {
                let name = self.required(&f.workflow, &span, id, kind, "workflow")?;
                if name.get_ref() == self.cx.name {
                    self.at(
                        name.span(),
                        key("workflow"),
                        "a workflow cannot start itself",
                    );
                } else if !self.cx.workflows.iter().any(|w| w == name.get_ref()) {
                    let names: Vec<&str> = self.cx.workflows.iter().map(String::as_str).collect();
                    self.at(
                        name.span(),
                        key("workflow"),
                        unknown(name.get_ref(), "workflow", &names),
                    );
                }
                let inputs = f
                    .inputs
                    .as_ref()
                    .map(|a| toml_to_json(&toml::Value::Table(a.get_ref().clone())))
                    .unwrap_or_else(|| Value::Object(Default::default()));
                if let Some(a) = &f.inputs
                    && let Err(e) = self.templates.check_value(&inputs)
                {
                    self.template_error(a.span(), key("inputs"), &e);
                }
                Action::Workflow {
                    name: name.get_ref().clone(),
                    inputs,
                }
            }
            _ => return None,
        })
    }

    fn retry(&mut self, r: &Spanned<RetryFile>, id: &str) -> Retry {
        let f = r.get_ref();
        let mut retry = Retry::default();
        if let Some(a) = &f.attempts {
            if *a.get_ref() == 0 {
                self.at(
                    a.span(),
                    Some(format!("steps.{id}.retry.attempts")),
                    "attempts counts the first try: 1 or more",
                );
            }
            retry.attempts = (*a.get_ref()).max(1);
        }
        if let Some(b) = &f.backoff {
            match b.get_ref().as_str() {
                "fixed" => retry.exponential = false,
                "exponential" => retry.exponential = true,
                other => self.at(
                    b.span(),
                    Some(format!("steps.{id}.retry.backoff")),
                    unknown(other, "value", &["fixed", "exponential"]),
                ),
            }
        }
        if let Some(d) = f.delay_ms {
            retry.delay = Duration::from_millis(d);
        }
        if let Some(d) = f.max_delay_ms {
            retry.max_delay = Duration::from_millis(d);
        }
        retry.jitter = f.jitter.unwrap_or(false);
        retry
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

    /// Jump targets exist, every step is reached, and every backward jump
    /// is bounded.
    fn flow(&mut self, w: &Workflow, files: &[Spanned<StepFile>]) {
        let ids: Vec<String> = w.steps.iter().map(|s| s.id.clone()).collect();
        let mut bad_target = false;
        for (i, (step, file)) in w.steps.iter().zip(files).enumerate() {
            let f = file.get_ref();
            let targets: Vec<(&str, Option<&Spanned<String>>)> = vec![
                ("next", f.next.as_ref()),
                ("then", f.then.as_ref()),
                ("else", f.otherwise.as_ref()),
            ];
            let mut backward = None;
            for (name, target) in targets {
                let Some(t) = target else { continue };
                if t.get_ref() == Next::END {
                    continue;
                }
                match ids.iter().position(|id| id == t.get_ref()) {
                    None => {
                        bad_target = true;
                        let mut names: Vec<&str> = ids.iter().map(String::as_str).collect();
                        names.push(Next::END);
                        self.at(
                            t.span(),
                            Some(format!("steps.{}.{name}", step.id)),
                            unknown(t.get_ref(), "step", &names),
                        );
                    }
                    Some(j) if j <= i => backward = Some((name, t.span(), j)),
                    Some(_) => {}
                }
            }
            if let Some((name, span, j)) = backward
                && step.max_iterations.is_none()
            {
                self.at(
                    span,
                    Some(format!("steps.{}.{name}", step.id)),
                    format!(
                        "this jumps back to `{}`: a loop needs a bound, `max_iterations` on step `{}`",
                        ids[j], step.id
                    ),
                );
            }
        }
        if bad_target {
            return;
        }
        let graph = Flow::of(w);
        let reached = graph.reachable_from(0);
        for (i, (step, file)) in w.steps.iter().zip(files).enumerate() {
            if !reached.contains(&i) {
                self.at(
                    file.span(),
                    Some(format!("steps.{}", step.id)),
                    format!("no path reaches step `{}`", step.id),
                );
            }
        }
    }

    /// Every template and expression reads only inputs that are declared
    /// and results of steps that ran before it.
    fn reads(&mut self, w: &Workflow, files: &[Spanned<StepFile>]) {
        let graph = Flow::of(w);
        for (i, (step, file)) in w.steps.iter().zip(files).enumerate() {
            let before: BTreeSet<String> = graph
                .ancestors(i)
                .into_iter()
                .map(|j| w.steps[j].id.clone())
                .collect();
            self.step_reads(w, step, file.get_ref(), &before, None);
        }
    }

    fn step_reads(
        &mut self,
        w: &Workflow,
        step: &Step,
        f: &StepFile,
        before: &BTreeSet<String>,
        var: Option<&str>,
    ) {
        let key = |field: &str| format!("steps.{}.{field}", step.id);
        // A key the kind does not take was refused already.
        let takes = |name: &str| kind_keys(step.kind()).contains(&name);
        for (name, t) in [
            ("prompt", f.prompt.as_ref()),
            ("system", f.system.as_ref()),
            ("command", f.command.as_ref()),
            ("preview", f.preview.as_ref()),
        ] {
            if let Some(t) = t.filter(|_| takes(name)) {
                self.template_reads(t, key(name), w, before, var);
            }
        }
        for (name, e) in [
            ("when", f.when.as_ref()),
            ("if", f.test.as_ref()),
            ("items", f.items.as_ref()),
        ] {
            if let Some(e) = e.filter(|_| name == "when" || takes(name))
                && let Ok(paths) = self.templates.check_expression(e.get_ref())
            {
                self.paths_exist(paths, e.span(), key(name), w, before, var);
            }
        }
        for (name, v) in [
            ("arguments", f.arguments.as_ref()),
            ("inputs", f.inputs.as_ref()),
        ] {
            if let Some(t) = v.filter(|_| takes(name)) {
                let value = toml_to_json(&toml::Value::Table(t.get_ref().clone()));
                if let Ok(paths) = self.templates.check_value(&value) {
                    self.paths_exist(paths, t.span(), key(name), w, before, var);
                }
            }
        }
        if let Action::Approval {
            revise: Some(r), ..
        } = &step.action
        {
            let is_llm = w
                .steps
                .iter()
                .find(|s| &s.id == r)
                .is_some_and(|s| matches!(s.action, Action::Llm { .. }));
            if !is_llm || !before.contains(r) {
                let at = f.revise.as_ref().map_or(0..0, Spanned::span);
                self.at(
                    at,
                    Some(key("revise")),
                    format!("`revise` names the llm step before this one whose answer is redrafted; `{r}` is not one"),
                );
            }
        }
        match (&step.action, &f.body, &f.branches) {
            (Action::ForEach { body, var, .. }, Some(b), _) => {
                self.step_reads(w, body, b.get_ref(), before, Some(var));
            }
            (Action::Parallel { branches, .. }, _, Some(files)) => {
                for (b, bf) in branches.iter().zip(files.get_ref()) {
                    self.step_reads(w, b, bf.get_ref(), before, var);
                }
            }
            _ => {}
        }
    }

    fn template_reads(
        &mut self,
        t: &Spanned<String>,
        key: String,
        w: &Workflow,
        before: &BTreeSet<String>,
        var: Option<&str>,
    ) {
        if let Ok(paths) = self.templates.check_template(t.get_ref()) {
            self.paths_exist(paths, t.span(), key, w, before, var);
        }
    }

    fn paths_exist(
        &mut self,
        paths: BTreeSet<String>,
        span: Range<usize>,
        key: String,
        w: &Workflow,
        before: &BTreeSet<String>,
        var: Option<&str>,
    ) {
        for path in paths {
            let mut parts = path.split('.');
            let root = parts.next().unwrap_or_default();
            let second = parts.next();
            let problem = match (root, second) {
                ("inputs", Some(name)) if !w.inputs.iter().any(|i| i.name == name) => {
                    let names: Vec<&str> = w.inputs.iter().map(|i| i.name.as_str()).collect();
                    Some(unknown(name, "input", &names))
                }
                ("steps", Some(id)) if !before.contains(id) => Some(if self.ids.contains_key(id) {
                    format!("`steps.{id}` is read before step `{id}` can have run")
                } else {
                    let names: Vec<&str> = self.ids.keys().map(String::as_str).collect();
                    unknown(id, "step", &names)
                }),
                ("inputs" | "steps" | "run", _) => None,
                ("index", _) if var.is_some() => None,
                (r, _) if Some(r) == var => None,
                (r, _) => Some(format!(
                    "`{r}` is not defined here: templates read inputs.*, steps.*, run.*{}",
                    var.map(|v| format!(", {v} and index")).unwrap_or_default()
                )),
            };
            if let Some(reason) = problem {
                self.at(span.clone(), Some(key.clone()), reason);
            }
        }
    }
}

/// The run's possible paths over the top-level steps.
pub struct Flow {
    edges: Vec<Vec<usize>>,
}

impl Flow {
    pub fn of(w: &Workflow) -> Self {
        let index = |n: &Next, i: usize| -> Option<usize> {
            match n {
                Next::Following => (i + 1 < w.steps.len()).then_some(i + 1),
                Next::Step(id) => w.index_of(id),
                Next::End => None,
            }
        };
        let edges = w
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| match &s.action {
                Action::Condition {
                    then, otherwise, ..
                } => [index(then, i), index(otherwise, i)]
                    .into_iter()
                    .flatten()
                    .collect(),
                _ => {
                    // A step with `when` may be skipped; it still goes on
                    // to its next.
                    index(&s.next, i).into_iter().collect()
                }
            })
            .collect();
        Self { edges }
    }

    /// The steps `from` leads to, itself included.
    pub fn reachable_from(&self, from: usize) -> BTreeSet<usize> {
        let mut seen = BTreeSet::from([from]);
        let mut queue = VecDeque::from([from]);
        while let Some(i) = queue.pop_front() {
            for &j in self.edges.get(i).into_iter().flatten() {
                if seen.insert(j) {
                    queue.push_back(j);
                }
            }
        }
        seen
    }

    /// The steps that can run before `to` on some path from the first
    /// step (`to` itself only when it is in a loop).
    pub fn ancestors(&self, to: usize) -> BTreeSet<usize> {
        let from_start = self.reachable_from(0);
        (0..self.edges.len())
            .filter(|&i| from_start.contains(&i))
            .filter(|&i| {
                self.edges[i]
                    .iter()
                    .any(|&j| j == to || self.reachable_from(j).contains(&to))
            })
            .collect()
    }

    /// The edges out of step `i`.
    pub fn edges(&self, i: usize) -> &[usize] {
        self.edges.get(i).map_or(&[], Vec::as_slice)
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
