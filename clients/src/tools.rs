//! `pincer tools list`: every tool of the daemon, where it comes from, and
//! whether the agent is offered it — if not, the policy layer that removed
//! it and why.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::render::one_line;
use crate::rpc::{self, CliError};
use crate::{ApprovalsCommand, Ctx, ToolsCommand};

pub async fn run(ctx: &Ctx, command: ToolsCommand) -> Result<u8, CliError> {
    match command {
        ToolsCommand::List {
            agent,
            channel,
            peer,
        } => list(ctx, agent, channel, peer).await,
        ToolsCommand::Audit { session, limit } => audit(ctx, session, limit).await,
    }
}

/// `pincer approvals list|allow|deny`.
pub async fn approvals(ctx: &Ctx, command: ApprovalsCommand) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let (id, allow) = match command {
        ApprovalsCommand::Allow { id } => (id, true),
        ApprovalsCommand::Deny { id } => (id, false),
        ApprovalsCommand::List => {
            let pending = c
                .tools
                .approvals(pb::ApprovalsRequest {})
                .await?
                .into_inner()
                .pending;
            if ctx.json {
                for p in &pending {
                    println!(
                        "{}",
                        json!({"id": p.id, "session": p.session_key, "agent": p.agent, "tool": p.tool,
                               "arguments": p.arguments_json, "age_s": p.age_s, "expires_in_s": p.expires_in_s})
                    );
                }
                return Ok(0);
            }
            if pending.is_empty() {
                println!("no calls are waiting for approval");
            }
            for p in &pending {
                println!(
                    "{}  {} {}  ({}, denied in {} s)",
                    p.id,
                    p.tool,
                    one_line(&p.arguments_json, 100),
                    p.session_key,
                    p.expires_in_s
                );
            }
            return Ok(0);
        }
    };
    c.tools
        .decide(pb::DecideRequest {
            id: id.clone(),
            allow,
        })
        .await?;
    if !ctx.json {
        println!("{} {id}", if allow { "allowed" } else { "denied" });
    }
    Ok(0)
}

async fn audit(ctx: &Ctx, session: Option<String>, limit: u32) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let rows = c
        .tools
        .audit(pb::AuditRequest {
            session: session.unwrap_or_default(),
            limit,
        })
        .await?
        .into_inner()
        .rows;
    if ctx.json {
        for r in &rows {
            println!(
                "{}",
                json!({"session": r.session_key, "agent": r.agent, "sender": r.sender, "tool": r.tool,
                       "call_id": r.call_id, "args_hash": r.args_hash, "outcome": r.outcome,
                       "duration_ms": r.duration_ms, "decided_by": r.decided_by, "detail": r.detail})
            );
        }
        return Ok(0);
    }
    if rows.is_empty() {
        println!("no tool calls recorded yet");
        return Ok(0);
    }
    println!(
        "{:<16} {:<8} {:>7}  {:<24} DETAIL",
        "TOOL", "OUTCOME", "MS", "DECIDED BY"
    );
    for r in &rows {
        println!(
            "{:<16} {:<8} {:>7}  {:<24} {}",
            one_line(&r.tool, 16),
            r.outcome,
            r.duration_ms,
            one_line(&r.decided_by, 24),
            one_line(&r.detail, 80)
        );
    }
    Ok(0)
}

async fn list(
    ctx: &Ctx,
    agent: Option<String>,
    channel: Option<String>,
    peer: Option<String>,
) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let list = c
        .tools
        .list(pb::ListToolsRequest {
            agent: agent.unwrap_or_default(),
            channel: channel.unwrap_or_default(),
            peer: peer.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if ctx.json {
        let tools: Vec<_> = list
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "source": t.source, "groups": t.groups, "optional": t.optional,
                       "dedupe": t.dedupe, "owner_only": t.owner_only, "offered": t.offered,
                       "removed_by": t.removed_by, "reason": t.reason, "description": t.description})
            })
            .collect();
        let servers: Vec<_> = list
            .servers
            .iter()
            .map(|s| json!({"name": s.name, "state": s.state, "tools": s.tools}))
            .collect();
        println!(
            "{}",
            json!({"agent": list.agent, "profile": list.profile, "tools": tools, "note": list.note,
                   "skipped": list.skipped, "servers": servers})
        );
        return Ok(0);
    }
    let offered = list.tools.iter().filter(|t| t.offered).count();
    println!(
        "agent `{}`: {offered} of {} tools offered (profile `{}`)",
        list.agent,
        list.tools.len(),
        list.profile
    );
    if !list.note.is_empty() {
        println!("{}", list.note);
    }
    let width = list
        .tools
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!("{:<width$}  {:<16} STATUS", "TOOL", "SOURCE");
    for t in &list.tools {
        let status = if t.offered {
            "offered".to_string()
        } else {
            format!("removed by {}: {}", t.removed_by, t.reason)
        };
        println!(
            "{:<width$}  {:<16} {}",
            t.name,
            one_line(&t.source, 16),
            status
        );
    }
    for s in &list.skipped {
        println!("skipped: {s}");
    }
    if !list.servers.is_empty() {
        println!("\nMCP servers:");
        for s in &list.servers {
            println!("  {:<20} {} ({} tools)", s.name, s.state, s.tools);
        }
    }
    Ok(0)
}
