//! What a start after a stop or a crash makes of a run's ledger: the
//! values of the steps finished before its cursor, the attempts of the
//! cursor step that finished (not run again), and the attempts left
//! `started` — steps whose outcome is unknown. Those run again by
//! themselves only when marked `idempotent`; otherwise the run waits for
//! the owner (`pincer workflows resolve RUN rerun|skip|fail`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::def::{Action, Step, Workflow};
use super::runner::Resume;
use super::store::{RunRow, StepRow, StepState};

/// A run's ledger read for a restart.
pub struct Reading {
    pub resume: Resume,
    /// Attempts found `started`: their seq, path, and whether their step
    /// may run again.
    pub unknown: Vec<(u64, String, bool)>,
}

impl Reading {
    /// The first unknown attempt that may not simply run again.
    pub fn blocking(&self) -> Option<&str> {
        self.unknown
            .iter()
            .find(|(_, _, idempotent)| !idempotent)
            .map(|(_, path, _)| path.as_str())
    }
}

/// Reads `rows`, the ledger of `run` of `w`.
pub fn read(w: &Workflow, run: &RunRow, rows: &[StepRow]) -> Reading {
    let mut values = BTreeMap::new();
    let mut recorded = super::runner::Recorded::new();
    let mut unknown = Vec::new();
    for row in rows {
        // A step of the run's own line (not inside a for_each, a parallel
        // step or a sub-workflow).
        let top = !row.path.contains(['[', '.', '/']);
        let done = matches!(row.state, StepState::Finished | StepState::Skipped);
        // After the cursor moved, a finished row of another top-level
        // step is a redraft an approval asked for: its new output.
        let redraft = top && done && run.cursor.as_deref() != Some(row.path.as_str());
        if row.seq <= run.cursor_seq || redraft {
            // Before the cursor moved: finished steps' values.
            if top && done {
                let status = if row.state == StepState::Skipped {
                    "skipped"
                } else {
                    "ok"
                };
                values.insert(
                    row.path.clone(),
                    json!({"output": row.output.clone().unwrap_or(Value::Null), "status": status}),
                );
            }
            continue;
        }
        match row.state {
            StepState::Finished | StepState::Skipped => {
                let output = match row.state {
                    StepState::Skipped => None,
                    _ => Some(row.output.clone().unwrap_or(Value::Null)),
                };
                recorded
                    .entry(row.path.clone())
                    .or_default()
                    .push_back(output);
            }
            // Unknown: found started by an earlier start, and still
            // unsettled.
            StepState::Started | StepState::Unknown => {
                // A halt asks again on the same request, and a
                // sub-workflow's own steps say what they did: running
                // either again is safe.
                let idempotent =
                    step_at(w, &row.path).is_some_and(|s| s.idempotent || s.action.waits());
                unknown.push((row.seq, row.path.clone(), idempotent));
            }
            StepState::Failed => {}
        }
    }
    // An attempt that ran again and finished is known.
    unknown.retain(|(_, path, _)| !recorded.contains_key(path));
    Reading {
        resume: Resume {
            values,
            recorded,
            ..Resume::default()
        },
        unknown,
    }
}

/// The step a ledger path names: `notes`, `each[2]` (the body of
/// `each`), `both.a` (branch `a` of `both`), `digest/notes` (step `notes`
/// of the sub-workflow the step `digest` starts).
pub fn step_at<'w>(w: &'w Workflow, path: &str) -> Option<&'w Step> {
    if let Some((head, rest)) = path.split_once('/') {
        let Action::Workflow { name, .. } = &step_at(w, head)?.action else {
            return None;
        };
        return step_at(w.subs.get(name)?, rest);
    }
    let end = path.find(['[', '.']).unwrap_or(path.len());
    let top = w.steps.iter().find(|s| s.id == path[..end])?;
    let rest = &path[end..];
    if rest.is_empty() {
        return Some(top);
    }
    match &top.action {
        Action::ForEach { body, .. } if rest.starts_with('[') => Some(body),
        Action::Parallel { branches, .. } => {
            let id = rest.strip_prefix('.')?;
            branches.iter().find(|b| b.id == id)
        }
        _ => None,
    }
}
