//! What each template and expression of a workflow reads: only inputs
//! that are declared, results of steps that ran before it on every path
//! (the [`Flow`]'s ancestors), `run`, and inside a `for_each` its item and
//! `index`. A `revise` must name an llm step before its approval.

use std::collections::BTreeSet;
use std::ops::Range;

use toml::Spanned;

use super::{Checker, Flow, kind_keys, toml_to_json, unknown};
use crate::workflow::def::{Action, Step, Workflow};
use crate::workflow::file::StepFile;

impl Checker<'_> {
    /// Every template and expression reads only inputs that are declared
    /// and results of steps that ran before it.
    pub(super) fn reads(&mut self, w: &Workflow, files: &[Spanned<StepFile>]) {
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

    pub(super) fn template_reads(
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
