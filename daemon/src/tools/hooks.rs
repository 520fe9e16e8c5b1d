//! Command hooks around tool calls (SPEC §8.4). A hook is a program that
//! gets the call as JSON on stdin and answers with JSON on stdout:
//!
//! - `before_tool_call` gets `{event, tool, args, agent, session, sender}`
//!   and answers `{"decision": "allow"}`, `{"decision": "block",
//!   "reason": "…"}` or `{"decision": "allow", "args": {…}}` (replaced
//!   arguments). Empty output with exit status 0 means allow.
//! - `after_tool_call` also gets `result` and `is_error`, and may answer
//!   `{"result": "…", "is_error": false}` to replace the result.
//!
//! Hooks fail closed: a hook that exits non-zero, writes something that is
//! not such JSON, or runs past its timeout blocks the call (after the call:
//! replaces the result with an error).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{ExecSandboxSettings, HookSettings};
use crate::sandbox::{Jail, Sandbox};

/// Largest hook answer read.
const MAX_OUTPUT: u64 = 1024 * 1024;

/// Who is calling: sent to hooks.
#[derive(Debug, Clone)]
pub struct CallFacts<'a> {
    pub tool: &'a str,
    pub agent: &'a str,
    pub session: &'a str,
    pub sender: &'a str,
    /// Where a hook with `sandbox = true` runs, and may write.
    pub sandbox: &'a Sandbox,
    pub exec: &'a ExecSandboxSettings,
    pub workspace: &'a Path,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    Allow,
    Replace(Value),
    Block(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum After {
    Keep,
    Replace { result: String, is_error: bool },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BeforeAnswer {
    decision: String,
    reason: Option<String>,
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AfterAnswer {
    result: Option<String>,
    is_error: Option<bool>,
}

pub async fn before(hook: &HookSettings, facts: &CallFacts<'_>, args: &Value) -> Before {
    let input = json!({"event": "before_tool_call", "tool": facts.tool, "args": args,
                       "agent": facts.agent, "session": facts.session, "sender": facts.sender});
    match run(hook, facts, &input).await {
        Err(why) => Before::Block(format!(
            "hook `{}` failed ({why}), so the call is blocked",
            hook.name
        )),
        Ok(out) if out.trim().is_empty() => Before::Allow,
        Ok(out) => match serde_json::from_str::<BeforeAnswer>(out.trim()) {
            Ok(a) if a.decision == "block" => Before::Block(format!(
                "blocked by hook `{}`: {}",
                hook.name,
                a.reason.unwrap_or_else(|| "no reason given".into())
            )),
            Ok(a) if a.decision == "allow" => match a.args {
                Some(v @ Value::Object(_)) => Before::Replace(v),
                Some(_) => Before::Block(format!(
                    "hook `{}` replaced the arguments with something that is not an object, so the call is blocked",
                    hook.name
                )),
                None => Before::Allow,
            },
            Ok(a) => Before::Block(format!(
                "hook `{}` answered decision {:?} (allow or block expected), so the call is blocked",
                hook.name, a.decision
            )),
            Err(e) => Before::Block(format!(
                "hook `{}` wrote output that is not a decision ({e}), so the call is blocked",
                hook.name
            )),
        },
    }
}

pub async fn after(
    hook: &HookSettings,
    facts: &CallFacts<'_>,
    args: &Value,
    result: &str,
    is_error: bool,
) -> After {
    let input = json!({"event": "after_tool_call", "tool": facts.tool, "args": args,
                       "agent": facts.agent, "session": facts.session, "sender": facts.sender,
                       "result": result, "is_error": is_error});
    let failed = |why: String| After::Replace {
        result: format!(
            "the result was withheld: hook `{}` failed ({why})",
            hook.name
        ),
        is_error: true,
    };
    match run(hook, facts, &input).await {
        Err(why) => failed(why),
        Ok(out) if out.trim().is_empty() => After::Keep,
        Ok(out) => match serde_json::from_str::<AfterAnswer>(out.trim()) {
            Ok(AfterAnswer { result: None, .. }) => After::Keep,
            Ok(AfterAnswer {
                result: Some(r),
                is_error: e,
            }) => After::Replace {
                result: r,
                is_error: e.unwrap_or(is_error),
            },
            Err(e) => failed(format!("its output is not a result ({e})")),
        },
    }
}

/// Runs the hook program with `input` on stdin; its stdout, or why it
/// failed.
async fn run(hook: &HookSettings, facts: &CallFacts<'_>, input: &Value) -> Result<String, String> {
    let Some((program, args)) = hook.command.split_first() else {
        return Err("it has no command".into());
    };
    let mut cmd = if hook.sandbox {
        // A temp folder of its own: not one the model's commands can
        // plant files in.
        let tmp_name = format!("hooks/{}", hook.name);
        let jail = Jail::writing(vec![facts.workspace.to_path_buf()], &tmp_name);
        facts
            .sandbox
            .command(facts.exec, &jail, program)
            .map_err(|e| e.to_string())?
    } else {
        tokio::process::Command::new(program)
    };
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    crate::children::die_with_daemon(&mut cmd);
    let mut child = crate::children::spawn(move || cmd.spawn())
        .await
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let pid = child.id();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let body = input.to_string();
    let work = async move {
        // A hook may exit without reading its input; that is not a failure.
        let _ = stdin.write_all(body.as_bytes()).await;
        drop(stdin);
        let mut out = String::new();
        (&mut stdout)
            .take(MAX_OUTPUT)
            .read_to_string(&mut out)
            .await
            .map_err(|e| format!("cannot read its output: {e}"))?;
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if status.success() {
            Ok(out)
        } else {
            Err(format!("it exited with {status}"))
        }
    };
    match tokio::time::timeout(hook.timeout, work).await {
        Ok(r) => r,
        Err(_) => {
            // Its whole process group: a shell hook's children too.
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                // SAFETY: killpg has no memory effects; the group is the
                // one this hook was started in.
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
            Err(format!("it did not answer within {}", human(hook.timeout)))
        }
    }
}

fn human(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
