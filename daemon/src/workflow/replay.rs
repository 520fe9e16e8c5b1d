//! `pincer workflows replay RUN`: runs a finished run's workflow again on
//! what the run recorded — each tool call's and command's result, each
//! model answer, each person's answer at a halt, by step and attempt —
//! and compares the path it takes and the outputs it gives with the
//! run's ledger. Nothing is called: no tool, no model, no person.
//!
//! A run of a deterministic workflow replays the same: the conditions,
//! loops, `for_each` and `parallel` gatherings, templates and the retries'
//! seeded jitter decide alike on the same results. With the workflow file
//! as it is now (`--current`), the replay says whether a change to the
//! file changes what the run would have done, and where.
//!
//! The replay runs the real runner against a scratch runs database and
//! transcript under `state/`, removed when it ends.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;

use super::store::{NewRun, RunRow, RunStore, StepRow, StepState, StoreError};

/// What a run recorded, by step path and attempt; each taken once, in
/// the order the run recorded them (a loop visits a step again with the
/// same path and attempt).
#[derive(Debug, Default)]
pub struct Recording {
    attempts: Mutex<BTreeMap<(String, u32), VecDeque<Recorded>>>,
}

#[derive(Debug, Clone)]
enum Recorded {
    Finished(Value),
    Failed(RecordedFailure),
}

/// A step attempt the run recorded as failed: its error, as the run
/// recorded it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct RecordedFailure(pub String);

impl Recording {
    /// The results in `rows`, a run's ledger.
    pub fn of(rows: &[StepRow]) -> Self {
        let mut attempts: BTreeMap<(String, u32), VecDeque<Recorded>> = BTreeMap::new();
        for r in rows {
            let recorded = match r.state {
                StepState::Finished => Recorded::Finished(r.output.clone().unwrap_or(Value::Null)),
                StepState::Failed => {
                    Recorded::Failed(RecordedFailure(r.error.clone().unwrap_or_default()))
                }
                _ => continue,
            };
            attempts
                .entry((r.path.clone(), r.attempt))
                .or_default()
                .push_back(recorded);
        }
        Self {
            attempts: Mutex::new(attempts),
        }
    }

    /// The recorded result of attempt `attempt` of the step at `path`:
    /// its output, or its error; `None` when the run has none (the replay
    /// took another path).
    pub fn answer(&self, path: &str, attempt: u32) -> Option<Result<Value, RecordedFailure>> {
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let r = attempts
            .get_mut(&(path.to_string(), attempt))?
            .pop_front()?;
        Some(match r {
            Recorded::Finished(v) => Ok(v),
            Recorded::Failed(e) => Err(e),
        })
    }

    /// The recorded result [`Self::answer`] would give next, left there.
    pub fn peek(&self, path: &str, attempt: u32) -> Option<Result<Value, RecordedFailure>> {
        let attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let r = attempts.get(&(path.to_string(), attempt))?.front()?.clone();
        Some(match r {
            Recorded::Finished(v) => Ok(v),
            Recorded::Failed(e) => Err(e),
        })
    }

    /// The redrafts a revise asked of the llm step at `path` (recorded as
    /// its attempts 2 and on while an approval waited), each with its
    /// attempt: what is left of them once the step itself took its own.
    pub fn redrafts(&self, path: &str) -> Vec<(u32, Value)> {
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for ((p, attempt), queue) in attempts.iter_mut() {
            if p != path || *attempt < 2 {
                continue;
            }
            while let Some(Recorded::Finished(v)) = queue.front().cloned() {
                queue.pop_front();
                out.push((*attempt, v));
            }
        }
        out
    }
}

/// How a replay compares with the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The same step attempts, in the same order, with the same ends and
    /// outputs, and the same result.
    pub same: bool,
    /// Step attempts compared.
    pub attempts: usize,
    /// Where the replay went another way (a sentence), when it did.
    pub divergence: Option<String>,
}

/// One ledger row as compared: path, attempt, end, output or error.
fn key(r: &StepRow) -> (String, u32, StepState, Value, String) {
    (
        r.path.clone(),
        r.attempt,
        r.state,
        r.output.clone().unwrap_or(Value::Null),
        r.error.clone().unwrap_or_default(),
    )
}

/// Compares the replay's ledger and run with the recorded ones.
pub fn compare(
    recorded: &RunRow,
    rows: &[StepRow],
    replayed: &RunRow,
    again: &[StepRow],
) -> Verdict {
    let ended = |rows: &[StepRow]| -> Vec<StepRow> {
        rows.iter()
            .filter(|r| {
                matches!(
                    r.state,
                    StepState::Finished | StepState::Failed | StepState::Skipped
                )
            })
            .cloned()
            .collect()
    };
    let (before, after) = (ended(rows), ended(again));
    let mut divergence = None;
    for (i, (a, b)) in before.iter().zip(after.iter()).enumerate() {
        if key(a) == key(b) {
            continue;
        }
        divergence = Some(if a.path != b.path || a.attempt != b.attempt {
            format!(
                "at step attempt {}: the run ran `{}` (attempt {}), the replay `{}` (attempt {})",
                i + 1,
                a.path,
                a.attempt,
                b.path,
                b.attempt
            )
        } else if a.state != b.state {
            format!(
                "at step `{}` (attempt {}): the run's ended {}, the replay's {}{}",
                a.path,
                a.attempt,
                a.state.as_str(),
                b.state.as_str(),
                b.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )
        } else {
            format!(
                "at step `{}` (attempt {}): the run's output was {}, the replay's {}",
                a.path,
                a.attempt,
                shown(&key(a).3, &a.error),
                shown(&key(b).3, &b.error)
            )
        });
        break;
    }
    if divergence.is_none() && before.len() != after.len() {
        divergence = Some(if before.len() > after.len() {
            format!(
                "the replay ended after {} step attempts, before the run's `{}`",
                after.len(),
                before[after.len()].path
            )
        } else {
            format!(
                "the replay went on after the run's {} step attempts, to `{}`",
                before.len(),
                after[before.len()].path
            )
        });
    }
    if divergence.is_none()
        && (recorded.status != replayed.status || recorded.output != replayed.output)
    {
        divergence = Some(format!(
            "the run ended {} with {}, the replay {} with {}",
            recorded.status.as_str(),
            recorded.output.clone().unwrap_or(Value::Null),
            replayed.status.as_str(),
            replayed.output.clone().unwrap_or(Value::Null)
        ));
    }
    Verdict {
        same: divergence.is_none(),
        attempts: before.len().max(after.len()),
        divergence,
    }
}

fn shown(output: &Value, error: &Option<String>) -> String {
    let text = match error {
        Some(e) if !e.is_empty() => format!("an error: {e}"),
        _ => output.to_string(),
    };
    crate::util::preview(&text, 200)
}

/// The scratch store a replay runs against, and the run in it (its
/// cursor at `first`).
pub async fn scratch(
    dir: &std::path::Path,
    run: &RunRow,
    first: Option<String>,
) -> Result<(RunStore, RunRow), StoreError> {
    let store = RunStore::open(&dir.join("replay.db"))?;
    let row = store
        .create(NewRun {
            id: run.id.clone(),
            workflow: run.workflow.clone(),
            agent: run.agent.clone(),
            hash: run.hash.clone(),
            source: run.source.clone(),
            subs: run.subs.clone(),
            inputs: run.inputs.clone(),
            principal: run.principal.clone(),
            chat: run.chat.clone(),
            session_key: run.session_key.clone(),
            parent: None,
            seed: run.seed,
            first,
        })
        .await?;
    Ok((store, row))
}
