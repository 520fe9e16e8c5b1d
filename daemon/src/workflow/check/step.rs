//! One step of a workflow file checked into a [`Step`]: its id, its kind
//! and the keys that kind takes (each one it does not take refused, with
//! the kinds that do), the keys it needs, and what a step inside a
//! `for_each` or `parallel` step cannot do (jump, or halt for a person).

use std::collections::HashSet;
use std::ops::Range;
use std::time::Duration;

use serde_json::Value;
use toml::Spanned;

use super::{
    Checker, DEFAULT_AGENT_CALLS, DEFAULT_EXPIRY, DEFAULT_REPAIRS, a_step, is_identifier,
    kind_keys, toml_to_json, unknown,
};
use crate::workflow::def::{Action, Next, OnError, Retry, Step, Wait};
use crate::workflow::file::{RetryFile, StepFile};

impl Checker<'_> {
    /// One step; `inside`: a for_each body or a parallel branch.
    pub(super) fn step(&mut self, s: &Spanned<StepFile>, inside: bool) -> Option<Step> {
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
}
