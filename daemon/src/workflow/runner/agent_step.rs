//! `agent` steps: a bounded free turn of the agent inside a run. The turn
//! is the agent's own — its prompt, its tools under the run's origin and
//! policy, hooks, approvals, loop guard — in the run's session, so it sees
//! what the steps before it did; `max_calls` bounds its model calls. Its
//! output is the turn's final answer. Inside a `for_each` or `parallel`
//! the turns run one at a time in the items' order, so the transcript
//! stays canonical (`super::order`).

use std::sync::Arc;

use serde_json::Value;

use super::{Failure, Runner};
use crate::agent::Event;
use crate::agent::turn::Turn;
use crate::session::SessionKey;
use crate::session::transcript::Body;

impl Runner {
    /// Runs `prompt` as a turn of at most `max_calls` model calls; the
    /// answer and the tokens spent.
    pub(super) async fn agent_turn(
        &self,
        path: &str,
        prompt: String,
        max_calls: u32,
    ) -> Result<(Value, u64), Failure> {
        let key = SessionKey::parse(&self.run.session_key).map_err(|e| Failure(e.to_string()))?;
        let row = self
            .rt
            .registry()
            .find(&self.run.session_key)
            .await
            .map_err(|e| Failure(e.to_string()))?
            .ok_or_else(|| Failure("the run's session is gone".into()))?;
        let mut agent = self.agent.clone();
        agent.max_model_calls = max_calls;
        let turn = Turn {
            rt: &self.rt,
            config: self.config.clone(),
            agent: &agent,
            session: &row,
            key: &key,
            turn_id: format!("{}:{path}", self.run.id),
            cancel: self.cancel.clone(),
            emit: Arc::new(|_: Event| {}),
            sessions: self.sessions.clone(),
            origin: self.origin.clone(),
        };
        // The turn writes straight to the transcript and reads what the
        // steps before it wrote: an item of a for_each or parallel waits
        // until the items before it have finished.
        self.wait_turn(path).await;
        let mut log = self.log.lock().await;
        let from = log.mark();
        if let Some((error, _)) = turn.run(&mut log, prompt, Vec::new()).await {
            return Err(Failure(error));
        }
        let mut answer = None;
        let mut tokens = 0;
        for entry in log.since(from) {
            if let Body::Assistant { text, usage, .. } = &entry.body {
                if let Some(u) = usage {
                    tokens += u.input + u.output;
                }
                answer = Some(text.clone());
            }
        }
        Ok((Value::String(answer.unwrap_or_default()), tokens))
    }
}
