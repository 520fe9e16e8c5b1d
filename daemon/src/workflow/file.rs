//! The shape of a workflow file (`workflows/NAME.toml` in an agent's
//! workspace) as serde types, with the span of every value a problem may
//! be reported at. Every table denies unknown keys, so a typo is an error
//! with the nearest key, never a silent default. Which keys a step kind
//! takes is checked after parsing (`check/`): one flat step table keeps
//! serde's "unknown key" sentence for a key no kind has.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowFile {
    pub description: Option<Spanned<String>>,
    /// Typed inputs, by name (`[inputs.folder]`).
    #[serde(default)]
    pub inputs: BTreeMap<String, Spanned<InputFile>>,
    #[serde(default)]
    pub steps: Vec<Spanned<StepFile>>,
    /// A template over the finished steps: the run's result. Without it,
    /// the last finished step's output.
    pub output: Option<Spanned<String>>,
    /// What a start does while a run of this workflow is busy:
    /// parallel | queue | coalesce | drop.
    pub admission: Option<Spanned<String>>,
    /// Model tokens (prompt and answer) a run may spend in all.
    pub max_tokens: Option<Spanned<u64>>,
    /// US dollars a run may spend, where `[models.*]` give prices.
    pub max_cost_usd: Option<Spanned<f64>>,
}

/// `[inputs.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    /// string | integer | number | boolean | list | object
    #[serde(rename = "type")]
    pub kind: Option<Spanned<String>>,
    pub default: Option<Spanned<toml::Value>>,
    pub description: Option<String>,
}

/// `[[steps]]` (and a `for_each`'s `do`, a `parallel`'s `branches`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepFile {
    pub id: Option<Spanned<String>>,
    pub kind: Option<Spanned<String>>,
    pub description: Option<String>,
    /// An expression: the step runs only when it is true.
    pub when: Option<Spanned<String>>,
    /// The step after this one (default: the next in the file; `end`).
    pub next: Option<Spanned<String>>,
    pub retry: Option<Spanned<RetryFile>>,
    pub timeout_s: Option<Spanned<u64>>,
    /// stop | continue | skip_rest
    pub on_error: Option<Spanned<String>>,
    /// Safe to run again when a crash left its outcome unknown.
    pub idempotent: Option<bool>,
    /// A parallel branch whose failure does not fail the step.
    pub optional: Option<Spanned<bool>>,
    /// How often a backward jump from this step may be taken.
    pub max_iterations: Option<Spanned<u32>>,

    // tool
    pub tool: Option<Spanned<String>>,
    pub arguments: Option<Spanned<toml::Table>>,
    // command
    pub command: Option<Spanned<String>>,
    // llm, agent, approval, input
    pub prompt: Option<Spanned<String>>,
    pub system: Option<Spanned<String>>,
    /// A JSON Schema, as a TOML table or as JSON text.
    pub schema: Option<Spanned<toml::Value>>,
    /// How often an answer that fails the schema is sent back.
    pub repairs: Option<Spanned<u32>>,
    // condition
    #[serde(rename = "if")]
    pub test: Option<Spanned<String>>,
    pub then: Option<Spanned<String>>,
    #[serde(rename = "else")]
    pub otherwise: Option<Spanned<String>>,
    // for_each
    pub items: Option<Spanned<String>>,
    #[serde(rename = "as")]
    pub var: Option<Spanned<String>>,
    pub concurrency: Option<Spanned<u32>>,
    #[serde(rename = "do")]
    pub body: Option<Spanned<Box<StepFile>>>,
    // parallel
    pub branches: Option<Spanned<Vec<Spanned<StepFile>>>>,
    /// all | any
    pub wait: Option<Spanned<String>>,
    // approval
    pub preview: Option<Spanned<String>>,
    pub approvers: Option<Spanned<Vec<Spanned<String>>>>,
    pub quorum: Option<Spanned<u32>>,
    pub expires_s: Option<Spanned<u64>>,
    /// The approver may replace the previewed data.
    pub edit: Option<Spanned<bool>>,
    /// The `llm` step the approver may have redrafted with guidance.
    pub revise: Option<Spanned<String>>,
    /// Whoever started the run may not approve it.
    pub not_initiator: Option<Spanned<bool>>,
    // agent
    pub max_calls: Option<Spanned<u32>>,
    // workflow
    pub workflow: Option<Spanned<String>>,
    pub inputs: Option<Spanned<toml::Table>>,
}

/// `retry = { attempts = 3, backoff = "exponential", delay_ms = 500 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryFile {
    pub attempts: Option<Spanned<u32>>,
    /// fixed | exponential
    pub backoff: Option<Spanned<String>>,
    pub delay_ms: Option<u64>,
    pub max_delay_ms: Option<u64>,
    /// Up to half the delay again, from the run's seed.
    pub jitter: Option<bool>,
}
