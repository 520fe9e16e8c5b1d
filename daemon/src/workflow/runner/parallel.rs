//! A `parallel` step: its branches side by side, joined as its `wait`
//! says — all of them (an optional branch's failure kept as its output),
//! or the first to finish. A wait-any step replayed lets the run's winner
//! win again.

use futures_util::FutureExt;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{Failure, Frame, Runner, Stop};
use crate::workflow::def::{Step, Wait};
use crate::workflow::replay::Recording;

impl Runner {
    pub(super) async fn parallel(
        &self,
        frame: &Frame,
        path: &str,
        branches: &[Step],
        wait: Wait,
        ctx: &Value,
        attempt: u32,
    ) -> Result<(Value, u64), Failure> {
        if let (Some(recording), Wait::Any) = (&self.replay, wait) {
            return self
                .replay_any(frame, path, branches, ctx, attempt, recording)
                .await;
        }
        let mut runs: Vec<Branch<'_>> = Vec::new();
        self.open_group(path, branches.iter().map(|b| b.id.clone()).collect());
        for (i, b) in branches.iter().enumerate() {
            let branch = format!("{path}.{}", b.id);
            runs.push(
                async move {
                    let r = self.attempts(frame, b, &branch, ctx).await;
                    let r = match self.item_done(path, i).await {
                        Ok(()) => r,
                        Err(Failure(e)) => Err(Stop::Fail(e)),
                    };
                    (b, r)
                }
                .boxed(),
            );
        }
        let joined = self.join(runs, wait).await;
        self.close_group(path).await?;
        joined
    }

    /// A wait-any step replayed: the branches that ended in the run end
    /// again on their recorded results (those it cancelled do not start),
    /// and the run's winner wins again, whichever ends first here.
    async fn replay_any(
        &self,
        frame: &Frame,
        path: &str,
        branches: &[Step],
        ctx: &Value,
        attempt: u32,
        recording: &Recording,
    ) -> Result<(Value, u64), Failure> {
        let winner = match recording.peek(path, attempt) {
            Some(Ok(v)) => v["winner"].as_str().map(str::to_string),
            _ => None,
        };
        let mut output = None;
        for b in branches {
            let branch = format!("{path}.{}", b.id);
            if recording.peek(&branch, 1).is_none() {
                continue;
            }
            let r = self.attempts(frame, b, &branch, ctx).await;
            if winner.as_deref() == Some(b.id.as_str()) {
                output = Some(r);
            }
        }
        match (winner, output) {
            (Some(id), Some(Ok(v))) => {
                Ok((json!({"winner": id, "output": v.unwrap_or(Value::Null)}), 0))
            }
            (_, Some(Err(Stop::Fail(e)))) => Err(Failure(e)),
            _ => Err(Failure("the run recorded no winner for this step".into())),
        }
    }

    /// The branches of a parallel step joined as `wait` says.
    async fn join<'b>(
        &'b self,
        runs: Vec<Branch<'b>>,
        wait: Wait,
    ) -> Result<(Value, u64), Failure> {
        match wait {
            Wait::All => {
                let results = futures_util::future::join_all(runs).await;
                let mut out = serde_json::Map::new();
                for (b, r) in results {
                    match r {
                        Ok(v) => {
                            out.insert(b.id.clone(), v.unwrap_or(Value::Null));
                        }
                        Err(Stop::Fail(e)) if b.optional => {
                            out.insert(b.id.clone(), json!({"failed": true, "error": e}));
                        }
                        Err(Stop::Fail(e)) => {
                            return Err(Failure(format!("branch `{}`: {e}", b.id)));
                        }
                        Err(_) => out.insert(b.id.clone(), Value::Null).map_or((), |_| ()),
                    }
                }
                Ok((Value::Object(out), 0))
            }
            Wait::Any => {
                let mut pending: futures_util::stream::FuturesUnordered<_> =
                    runs.into_iter().collect();
                let mut errors = Vec::new();
                while let Some((b, r)) = pending.next().await {
                    match r {
                        Ok(v) => {
                            return Ok((
                                json!({"winner": b.id, "output": v.unwrap_or(Value::Null)}),
                                0,
                            ));
                        }
                        Err(Stop::Fail(e)) => errors.push(format!("branch `{}`: {e}", b.id)),
                        Err(_) => {}
                    }
                }
                Err(Failure(format!(
                    "no branch finished: {}",
                    errors.join("; ")
                )))
            }
        }
    }
}

/// A parallel step's branch as it runs: the branch and how it ended.
type Branch<'b> = BoxFuture<'b, (&'b Step, Result<Option<Value>, Stop>)>;
