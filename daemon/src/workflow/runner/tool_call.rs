//! Tool and command steps: one call through the agent's whole tool
//! pipeline for the run's principal (`agent::call_env`), recorded in the
//! run's transcript like a turn's (`agent::tool_step`).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{DEFAULT_STEP_TIMEOUT, Failure, Runner};
use crate::agent::call_env::{self, CallScope};
use crate::agent::tool_step::{self, ToolCall};
use crate::session::SessionKey;
use crate::tools::loops::LoopDetector;

impl Runner {
    /// One call through the agent's tool pipeline, recorded in the run's
    /// transcript.
    pub(super) async fn call_tool(
        &self,
        path: &str,
        tool: &str,
        args: &Value,
        timeout: Option<Duration>,
    ) -> Result<(Value, u64), Failure> {
        let key = SessionKey::parse(&self.run.session_key).map_err(|e| Failure(e.to_string()))?;
        let session_id = self.log.lock().await.session_id.clone();
        let scope = CallScope::outside_turn(
            &self.rt,
            &self.config,
            &self.agent,
            &key,
            &session_id,
            &self.origin,
            &self.cancel,
        );
        let env = call_env::build(&scope, &self.registry);
        let arguments = args.to_string();
        let call_id = format!("{}:{path}", self.run.id);
        let call = ToolCall {
            id: &call_id,
            name: tool,
            arguments: &arguments,
        };
        let deadline = Instant::now() + timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
        self.write(path, tool_step::call_entry(&env, &call)).await?;
        let started = Instant::now();
        // A for_each item or parallel branch (`each[2]`, `both.a`) runs
        // beside others: it gets a window of its own.
        let result = if path.contains(['[', '.']) {
            let mut loops = LoopDetector::default();
            env.run(&mut loops, &call_id, tool, &arguments, deadline)
                .await
        } else {
            let mut loops = self.loops.lock().await;
            env.run(&mut loops, &call_id, tool, &arguments, deadline)
                .await
        };
        self.write(path, tool_step::result_entry(&call, &result, started))
            .await?;
        if result.output.is_error || result.status != "ok" {
            return Err(Failure(format!(
                "{tool} ({}): {}",
                result.status,
                crate::util::preview(&result.output.content, 500)
            )));
        }
        // A result that is JSON is kept as data.
        let content = result.output.content;
        let value = serde_json::from_str(&content).unwrap_or(Value::String(content));
        Ok((value, 0))
    }
}
