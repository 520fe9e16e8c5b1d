//! `pincer workflows list|check|show|graph`: an agent's workflows
//! (`workflows/NAME.toml`), checked by pincerd against the tools the
//! owner's policy offers the agent.

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
    }
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
            "agent {} has no workflows; write one as {}/<name>.toml (README: \"Workflows\")",
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
