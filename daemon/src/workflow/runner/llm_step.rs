//! `llm` steps: one model call with the step's prompt, its answer held to
//! the step's JSON Schema when it has one — asked again with the problem,
//! up to its `repairs` — each message recorded in the run's transcript.

use serde_json::Value;

use super::{Failure, Runner};
use crate::llm::{Message, Request};
use crate::session::transcript::Body;

impl Runner {
    /// One model call (and its repairs), recorded in the transcript.
    pub(super) async fn ask_model(
        &self,
        path: &str,
        system: String,
        prompt: String,
        schema: Option<&Value>,
        repairs: u32,
    ) -> Result<(Value, u64), Failure> {
        let validator = match schema {
            Some(s) => Some(
                jsonschema::validator_for(s).map_err(|e| Failure(format!("the schema: {e}")))?,
            ),
            None => None,
        };
        let mut messages = vec![Message::user(prompt.clone())];
        self.write(
            path,
            Body::User {
                text: prompt,
                images: Vec::new(),
            },
        )
        .await?;
        let models = self.rt.models();
        let mut tokens = 0;
        let mut tries = 0;
        loop {
            let request = Request {
                system: system.clone(),
                messages: messages.clone(),
                tools: Vec::new(),
            };
            let (reply, target) = models
                .complete(&self.agent.models, &request, &mut |_| {}, &self.cancel)
                .await
                .map_err(|e| Failure(format!("the model: {e}")))?;
            tokens += reply.usage.input + reply.usage.output;
            self.count_cost(&target, reply.usage.input, reply.usage.output)?;
            self.write(
                path,
                Body::Assistant {
                    text: reply.text.clone(),
                    model: target.label(),
                    usage: Some(crate::session::transcript::Usage {
                        input: reply.usage.input,
                        output: reply.usage.output,
                    }),
                    stop: "stop".into(),
                },
            )
            .await?;
            let Some(validator) = &validator else {
                return Ok((Value::String(reply.text), tokens));
            };
            let problem = match parse_json(&reply.text) {
                Err(e) => format!("the answer is not JSON: {e}"),
                Ok(v) => match validator.validate(&v) {
                    Ok(()) => return Ok((v, tokens)),
                    Err(e) => format!("the answer does not fit the schema: {e}"),
                },
            };
            if tries >= repairs {
                return Err(Failure(format!("step `{path}`: {problem}")));
            }
            tries += 1;
            let again = format!(
                "{problem}. Answer again with JSON only that satisfies this JSON Schema:\n{}",
                schema.map(Value::to_string).unwrap_or_default()
            );
            messages.push(Message {
                role: crate::llm::Role::Assistant,
                parts: vec![crate::llm::Part::Text(reply.text)],
            });
            messages.push(Message::user(again.clone()));
            self.write(
                path,
                Body::User {
                    text: again,
                    images: Vec::new(),
                },
            )
            .await?;
        }
    }
}

/// JSON from a model's answer, with a Markdown code fence around it
/// allowed.
fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(t);
    serde_json::from_str(t.trim())
}
