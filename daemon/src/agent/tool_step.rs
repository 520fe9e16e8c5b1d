//! One tool call, run and recorded: the call is appended to the
//! transcript and reported (`ToolStarted`), runs through the whole
//! pipeline of SPEC §8.4 (`CallEnv::run`: policy, validation, loop
//! detection, hooks, approval, execution, redaction, cap, audit), and its
//! result is appended and reported (`ToolFinished`). The model turn calls
//! it for each call the model makes; a workflow's `tool` step calls it the
//! same way, without a model turn around it, recording the call and its
//! result apart when calls run side by side (`for_each`, `parallel`).

use std::time::Instant;

use super::Event;
use super::session_log::{Emit, SessionLog, TranscriptWriteError};
use crate::session::transcript::Body;
use crate::tools::arguments::shorten;
use crate::tools::pipeline::{CallEnv, CallResult};
use crate::util::preview;

/// Characters of a tool result shown to clients (the model gets more).
const RESULT_PREVIEW: usize = 2000;

/// A call to run: its id, the tool's name and the raw arguments text.
pub struct ToolCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub arguments: &'a str,
}

/// Runs `call` in `env` and records it in `log` under `turn_id`. `Err` only
/// when the transcript cannot be written (the call is then not run, or its
/// result is lost); the tool's own failures are in the result.
pub async fn run_recorded(
    env: &CallEnv<'_>,
    log: &mut SessionLog,
    turn_id: &str,
    call: ToolCall<'_>,
    deadline: Instant,
    emit: &Emit,
) -> Result<CallResult, TranscriptWriteError> {
    record_call(env, log, turn_id, &call, emit)?;
    let started = Instant::now();
    let result = env
        .run(&mut log.loops, call.id, call.name, call.arguments, deadline)
        .await;
    record_result(log, turn_id, &call, &result, started, emit)?;
    Ok(result)
}

/// Appends and reports a call about to run. A call over the argument cap
/// is refused by the pipeline; it is kept (and shown) shortened, so it
/// cannot bloat the transcript and every later prompt.
pub fn record_call(
    env: &CallEnv<'_>,
    log: &mut SessionLog,
    turn_id: &str,
    call: &ToolCall<'_>,
    emit: &Emit,
) -> Result<(), TranscriptWriteError> {
    let body = call_entry(env, call);
    log.append(turn_id, body.clone())?;
    if let Body::ToolCall { arguments, .. } = body {
        emit(Event::ToolStarted {
            call_id: call.id.to_string(),
            name: call.name.to_string(),
            arguments,
        });
    }
    Ok(())
}

/// The transcript entry of a call, its arguments shortened as the
/// settings say.
pub fn call_entry(env: &CallEnv<'_>, call: &ToolCall<'_>) -> Body {
    Body::ToolCall {
        call_id: call.id.to_string(),
        name: call.name.to_string(),
        arguments: shorten(call.arguments, env.settings.max_argument_chars).into_owned(),
    }
}

/// The transcript entry of a call's result; `started` is when it started.
pub fn result_entry(call: &ToolCall<'_>, result: &CallResult, started: Instant) -> Body {
    Body::ToolResult {
        call_id: call.id.to_string(),
        name: call.name.to_string(),
        content: result.output.content.clone(),
        is_error: result.output.is_error,
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// Appends and reports a call's result; `started` is when it started.
pub fn record_result(
    log: &mut SessionLog,
    turn_id: &str,
    call: &ToolCall<'_>,
    result: &CallResult,
    started: Instant,
    emit: &Emit,
) -> Result<(), TranscriptWriteError> {
    let body = result_entry(call, result, started);
    let duration_ms = match &body {
        Body::ToolResult { duration_ms, .. } => *duration_ms,
        _ => 0,
    };
    log.append(turn_id, body)?;
    emit(Event::ToolFinished {
        call_id: call.id.to_string(),
        name: call.name.to_string(),
        status: result.status,
        result: preview(&result.output.content, RESULT_PREVIEW),
        duration_ms,
    });
    Ok(())
}
