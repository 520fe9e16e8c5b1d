//! `pincer workflows list|check|show|graph`: an agent's workflows
//! (`workflows/NAME.toml`), checked by pincerd against the tools the
//! owner's policy offers the agent.

use std::collections::HashMap;

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::cli::WorkflowsCommand;
use crate::error::CliError;
use crate::out::{self, errln, outln};
use crate::render::one_line;
use crate::rpc;

/// Exit code of a check that found problems: a workflow file is
/// configuration, and `pincer config check` says 78 for bad config too.
const INVALID: u8 = 78;

pub async fn run(ctx: &Ctx, command: WorkflowsCommand) -> Result<u8, CliError> {
    match command {
        WorkflowsCommand::List { agent } => list(ctx, agent.agent, None).await,
        WorkflowsCommand::Check { agent, name } => list(ctx, agent.agent, Some(name)).await,
        WorkflowsCommand::Show { agent, name } => show(ctx, agent.agent, &name, false).await,
        WorkflowsCommand::Graph { agent, name } => show(ctx, agent.agent, &name, true).await,
        WorkflowsCommand::Run {
            agent,
            name,
            inputs,
            dry_run: true,
        } => plan(ctx, agent.agent, name, inputs).await,
        WorkflowsCommand::Run {
            agent,
            name,
            inputs,
            dry_run: false,
        } => start(ctx, agent.agent, name, inputs).await,
        WorkflowsCommand::Runs { agent, limit } => runs(ctx, agent.agent, limit).await,
        WorkflowsCommand::Status { run } => status(ctx, run).await,
        WorkflowsCommand::Cancel { run } => cancel(ctx, run).await,
        WorkflowsCommand::Resolve { run, action } => resolve(ctx, run, action).await,
        WorkflowsCommand::Replay { run, current } => replay(ctx, run, current).await,
        WorkflowsCommand::Approve { id } => answer(ctx, id, Answer::Allow).await,
        WorkflowsCommand::Deny { id } => answer(ctx, id, Answer::Deny).await,
        WorkflowsCommand::Edit { id, data } => answer(ctx, id, Answer::Edit(data)).await,
        WorkflowsCommand::Revise { id, guidance } => {
            answer(ctx, id, Answer::Revise(guidance.join(" "))).await
        }
        WorkflowsCommand::Input { id, data } => answer(ctx, id, Answer::Input(data)).await,
    }
}

async fn replay(ctx: &Ctx, run: String, current: bool) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .replay(pb::ReplayRunRequest {
            run: run.clone(),
            current_file: current,
        })
        .await?
        .into_inner();
    if ctx.json {
        out::json(&json!({
            "run": run, "same": r.same, "attempts": r.attempts,
            "divergence": (!r.divergence.is_empty()).then_some(&r.divergence),
        }));
    } else if r.same {
        outln!(
            "same path: the replay of run {run} took the same {} step attempts with the same outputs and result",
            r.attempts
        );
    } else {
        outln!("the replay of run {run} diverges {}", r.divergence);
    }
    Ok(if r.same { 0 } else { 1 })
}

/// An answer to a run halted for a person.
enum Answer {
    Allow,
    Deny,
    Edit(String),
    Revise(String),
    Input(String),
}

async fn answer(ctx: &Ctx, id: String, answer: Answer) -> Result<u8, CliError> {
    let mut request = pb::DecideRequest {
        id,
        ..Default::default()
    };
    match answer {
        Answer::Allow => request.allow = true,
        Answer::Deny => {}
        Answer::Edit(json) => request.edit_json = json,
        Answer::Revise(text) => request.revise = text,
        Answer::Input(json) => request.input_json = json,
    }
    crate::approvals::answer(ctx, request).await
}

async fn resolve(ctx: &Ctx, run: String, action: String) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .resolve(pb::ResolveRunRequest {
            run: run.clone(),
            action: action.clone(),
        })
        .await?
        .into_inner();
    if ctx.json {
        out::json(&json!({"run": run, "action": action, "status": r.status}));
    } else {
        outln!("run {run}: {action}; it is {} now", r.status);
    }
    Ok(0)
}

/// `--input NAME=VALUE` pairs as the request's map.
fn inputs_map(inputs: Vec<String>) -> Result<HashMap<String, String>, CliError> {
    let mut map = HashMap::new();
    for pair in inputs {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(CliError::new(
                crate::error::USAGE,
                format!("--input takes NAME=VALUE, not `{pair}`"),
            ));
        };
        map.insert(k.trim().to_string(), v.to_string());
    }
    Ok(map)
}

/// `run --dry-run`: the plan, nothing run.
async fn plan(
    ctx: &Ctx,
    agent: Option<String>,
    name: String,
    inputs: Vec<String>,
) -> Result<u8, CliError> {
    let inputs_json = inputs_map(inputs)?;
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .plan(pb::RunWorkflowRequest {
            agent: agent.unwrap_or_default(),
            name,
            inputs_json,
        })
        .await?
        .into_inner();
    if ctx.json {
        let steps: Vec<serde_json::Value> = r
            .steps
            .iter()
            .map(|s| {
                json!({"path": s.path, "kind": s.kind, "line": s.line, "what": s.what,
                       "tool": s.tool, "verdict": s.verdict, "next": s.next})
            })
            .collect();
        out::json(&json!({"steps": steps}));
        return Ok(0);
    }
    for s in &r.steps {
        outln!("{:<20} {:<10} {}", s.path, s.kind, one_line(&s.what, 100));
        if !s.tool.is_empty() {
            outln!("{:<20} {:<10} tool {}: {}", "", "", s.tool, s.verdict);
        }
        outln!("{:<20} {:<10} then {}", "", "", s.next);
    }
    outln!("(dry run: nothing ran)");
    Ok(0)
}

/// `run`: starts a run and prints its steps as they end.
async fn start(
    ctx: &Ctx,
    agent: Option<String>,
    name: String,
    inputs: Vec<String>,
) -> Result<u8, CliError> {
    let inputs_json = inputs_map(inputs)?;
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let mut stream = c
        .workflows
        .run(pb::RunWorkflowRequest {
            agent: agent.unwrap_or_default(),
            name,
            inputs_json,
        })
        .await?
        .into_inner();
    use pb::run_event::Event;
    let mut code = 0;
    while let Some(event) = stream.message().await? {
        let Some(event) = event.event else { continue };
        if ctx.json {
            out::json(&event_json(&event));
        }
        match event {
            Event::Started(s) if !ctx.json => outln!("run {} of {}", s.run, s.workflow),
            Event::StepStarted(s) if !ctx.json && s.attempt > 1 => {
                outln!("  {} again (attempt {})", s.path, s.attempt)
            }
            Event::StepFinished(s) if !ctx.json => match s.state.as_str() {
                "failed" => outln!("  {:<20} failed: {}", s.path, one_line(&s.error, 100)),
                state => outln!("  {:<20} {state}", s.path),
            },
            Event::Halted(h) if !ctx.json => {
                let how = if h.kind == "input" {
                    format!("`pincer workflows input {} '<json>'`", h.id)
                } else {
                    format!(
                        "`pincer workflows approve {}` (or deny, edit, revise)",
                        h.id
                    )
                };
                outln!(
                    "  {:<20} waits for {} {}: {}; answer with {how}, or from your chat",
                    h.path,
                    h.kind,
                    h.id,
                    one_line(&h.prompt, 100)
                )
            }
            Event::Finished(f) => {
                if f.status != "succeeded" {
                    code = 1;
                }
                if !ctx.json {
                    match f.status.as_str() {
                        "succeeded" => outln!("{}", output_text(&f.output_json)),
                        status => errln!("the run {status}: {}", f.error),
                    }
                }
            }
            _ => {}
        }
    }
    Ok(code)
}

/// A run's output for people: text as it is, other JSON as JSON.
fn output_text(json_text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(json_text) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => json_text.to_string(),
    }
}

fn event_json(e: &pb::run_event::Event) -> serde_json::Value {
    use pb::run_event::Event;
    let value =
        |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap_or(serde_json::Value::Null);
    match e {
        Event::Started(s) => json!({"event": "started", "run": s.run, "workflow": s.workflow}),
        Event::StepStarted(s) => {
            json!({"event": "step_started", "path": s.path, "kind": s.kind, "attempt": s.attempt})
        }
        Event::StepFinished(s) => json!({
            "event": "step_finished", "path": s.path, "state": s.state,
            "output": value(&s.output_json), "error": s.error,
        }),
        Event::Halted(h) => json!({
            "event": "halted", "path": h.path, "kind": h.kind, "id": h.id, "prompt": h.prompt,
        }),
        Event::Finished(f) => json!({
            "event": "finished", "status": f.status,
            "output": value(&f.output_json), "error": f.error,
        }),
    }
}

async fn runs(ctx: &Ctx, agent: Option<String>, limit: u32) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .runs(pb::ListRunsRequest {
            agent: agent.unwrap_or_default(),
            limit,
        })
        .await?
        .into_inner();
    if ctx.json {
        out::json(&json!({"runs": r.runs.iter().map(run_json).collect::<Vec<_>>()}));
        return Ok(0);
    }
    if r.runs.is_empty() {
        outln!("no workflow runs yet (pincer workflows run NAME starts one)");
    }
    for run in &r.runs {
        outln!(
            "{}  {:<20} {:<10} {}",
            run.id,
            run.workflow,
            run.status,
            run.created_at
        );
    }
    Ok(0)
}

async fn status(ctx: &Ctx, run: String) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .status(pb::RunStatusRequest { run })
        .await?
        .into_inner();
    let info = r.run.unwrap_or_default();
    if ctx.json {
        let steps: Vec<serde_json::Value> = r
            .steps
            .iter()
            .map(|s| {
                json!({
                    "seq": s.seq, "path": s.path, "attempt": s.attempt, "state": s.state,
                    "output": serde_json::from_str::<serde_json::Value>(&s.output_json).ok(),
                    "error": s.error, "started_at": s.started_at, "finished_at": s.finished_at,
                })
            })
            .collect();
        out::json(&json!({"run": run_json(&info), "steps": steps}));
        return Ok(0);
    }
    outln!(
        "run {} of {} ({}): {}",
        info.id,
        info.workflow,
        info.agent,
        info.status
    );
    outln!("inputs:   {}", info.inputs_json);
    outln!("file:     sha256 {}", info.hash);
    outln!("session:  {}", info.session_key);
    if !info.error.is_empty() {
        outln!("error:    {}", info.error);
    }
    if !info.output_json.is_empty() {
        outln!(
            "output:   {}",
            one_line(&output_text(&info.output_json), 200)
        );
    }
    for s in &r.steps {
        let what = if s.state == "failed" {
            format!("failed: {}", one_line(&s.error, 100))
        } else {
            s.state.clone()
        };
        outln!("  {:>3} {:<20} #{} {}", s.seq, s.path, s.attempt, what);
    }
    Ok(0)
}

async fn cancel(ctx: &Ctx, run: String) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .cancel(pb::CancelRunRequest { run: run.clone() })
        .await?
        .into_inner();
    if ctx.json {
        out::json(&json!({"run": run, "cancelled": r.cancelled}));
    } else if r.cancelled {
        outln!("cancelling run {run}");
    } else {
        outln!("run {run} is not going on");
    }
    Ok(if r.cancelled { 0 } else { 1 })
}

fn run_json(r: &pb::RunInfo) -> serde_json::Value {
    let value = |t: &str| serde_json::from_str::<serde_json::Value>(t).ok();
    json!({
        "id": r.id, "workflow": r.workflow, "agent": r.agent, "status": r.status,
        "cursor": r.cursor, "output": value(&r.output_json), "error": r.error,
        "tokens": r.tokens, "created_at": r.created_at, "updated_at": r.updated_at,
        "hash": r.hash, "inputs": value(&r.inputs_json), "principal": r.principal,
        "session_key": r.session_key,
    })
}

/// `list`, and `check` (`Some(name)`: one, `Some(None)`: all), which
/// prints the problems and fails when there are any.
async fn list(
    ctx: &Ctx,
    agent: Option<String>,
    check: Option<Option<String>>,
) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .list(pb::ListWorkflowsRequest {
            agent: agent.unwrap_or_default(),
            name: check.clone().flatten().unwrap_or_default(),
        })
        .await?
        .into_inner();
    let bad = r
        .workflows
        .iter()
        .filter(|w| !w.problems.is_empty())
        .count();
    let code = if check.is_some() && bad > 0 {
        INVALID
    } else {
        0
    };
    if ctx.json {
        let workflows: Vec<serde_json::Value> = r.workflows.iter().map(summary_json).collect();
        out::json(&json!({"agent": r.agent, "dir": r.dir, "workflows": workflows}));
        return Ok(code);
    }
    if r.workflows.is_empty() {
        outln!(
            "agent {} has no workflows; write one as {}/<name>.toml (the guide: docs/src/workflows.md)",
            r.agent,
            r.dir
        );
        return Ok(0);
    }
    if check.is_some() {
        for w in &r.workflows {
            if w.problems.is_empty() {
                outln!("{}: ok ({} steps)", w.name, w.steps);
            }
            for p in &w.problems {
                errln!("{}", problem_line(p));
            }
        }
        if bad > 0 {
            errln!(
                "{bad} of {} workflow(s) cannot run until this is fixed",
                r.workflows.len()
            );
        }
        return Ok(code);
    }
    for w in &r.workflows {
        if w.problems.is_empty() {
            outln!("{:<24} {}", w.name, one_line(&w.description, 90));
            let inputs: Vec<String> = w
                .inputs
                .iter()
                .map(|i| {
                    if i.default_json.is_empty() {
                        format!("{} ({}, required)", i.name, i.r#type)
                    } else {
                        format!("{} ({} = {})", i.name, i.r#type, i.default_json)
                    }
                })
                .collect();
            if !inputs.is_empty() {
                outln!("{:<24} inputs: {}", "", inputs.join(", "));
            }
        } else {
            outln!(
                "{:<24} ! {} problem(s): pincer workflows check {}",
                w.name,
                w.problems.len(),
                w.name
            );
        }
    }
    Ok(0)
}

async fn show(
    ctx: &Ctx,
    agent: Option<String>,
    name: &str,
    graph_only: bool,
) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .workflows
        .show(pb::ShowWorkflowRequest {
            agent: agent.unwrap_or_default(),
            name: name.to_string(),
        })
        .await?
        .into_inner();
    if graph_only {
        if ctx.json {
            out::json(&json!({"mermaid": r.mermaid}));
        } else {
            outln!("{}", r.mermaid.trim_end());
        }
        return Ok(0);
    }
    let w = r.workflow.unwrap_or_default();
    if ctx.json {
        out::json(&json!({
            "workflow": summary_json(&w),
            "hash": r.hash,
            "admission": r.admission,
            "steps": r.steps.iter().map(step_json).collect::<Vec<_>>(),
            "mermaid": r.mermaid,
        }));
        return Ok(0);
    }
    outln!("{} — {}", w.name, w.description);
    outln!("file:      {}", w.path);
    outln!("sha256:    {}", r.hash);
    outln!("admission: {}", r.admission);
    for i in &w.inputs {
        let default = if i.default_json.is_empty() {
            "required".to_string()
        } else {
            format!("default {}", i.default_json)
        };
        outln!(
            "input:     {} ({}, {default}) {}",
            i.name,
            i.r#type,
            i.description
        );
    }
    for s in &r.steps {
        print_step(s, 0);
    }
    Ok(0)
}

fn print_step(s: &pb::WorkflowStep, depth: usize) {
    let indent = "  ".repeat(depth + 1);
    outln!(
        "{indent}{:<16} {:<10} {}",
        s.id,
        s.kind,
        one_line(&s.summary, 80)
    );
    for inner in &s.inner {
        print_step(inner, depth + 1);
    }
}

fn problem_line(p: &pb::WorkflowProblem) -> String {
    if p.path.is_empty() {
        return p.reason.clone();
    }
    let key = if p.key.is_empty() {
        String::new()
    } else {
        format!("key `{}`: ", p.key)
    };
    format!("{}:{}:{}: {key}{}", p.path, p.line, p.column, p.reason)
}

fn summary_json(w: &pb::WorkflowSummary) -> serde_json::Value {
    json!({
        "name": w.name,
        "description": w.description,
        "path": w.path,
        "steps": w.steps,
        "inputs": w.inputs.iter().map(|i| json!({
            "name": i.name,
            "type": i.r#type,
            "default": serde_json::from_str::<serde_json::Value>(&i.default_json).ok(),
            "description": i.description,
        })).collect::<Vec<_>>(),
        "problems": w.problems.iter().map(|p| json!({
            "path": p.path, "line": p.line, "column": p.column, "key": p.key, "reason": p.reason,
        })).collect::<Vec<_>>(),
    })
}

fn step_json(s: &pb::WorkflowStep) -> serde_json::Value {
    json!({
        "id": s.id,
        "kind": s.kind,
        "line": s.line,
        "summary": s.summary,
        "inner": s.inner.iter().map(step_json).collect::<Vec<_>>(),
    })
}
