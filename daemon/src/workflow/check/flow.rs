//! The flow of a workflow: a graph over the top-level steps ([`Flow`]).
//! Each step goes to the next in the file unless its `next` says
//! otherwise, a condition to its `then` or `else`; `end` ends the run. A
//! `for_each` body and `parallel` branches run inside their step, so they
//! neither jump nor halt for a person. The checker refuses a jump to no
//! step, a step no path reaches, and a backward jump without a bound.

use std::collections::{BTreeSet, VecDeque};

use toml::Spanned;

use super::{Checker, unknown};
use crate::workflow::def::{Action, Next, Workflow};
use crate::workflow::file::StepFile;

impl Checker<'_> {
    /// Jump targets exist, every step is reached, and every backward jump
    /// is bounded.
    pub(super) fn flow(&mut self, w: &Workflow, files: &[Spanned<StepFile>]) {
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
