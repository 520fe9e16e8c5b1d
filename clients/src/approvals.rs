//! `pincer approvals list|allow|deny`: what waits for the owner's answer —
//! calls of tools set to `ask`, workflow runs halted at an approval or
//! input step — and [`answer`], which every command that answers one
//! (also `pincer workflows approve|deny|edit|revise|input`) goes through.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::cli::ApprovalsCommand;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::render::one_line;
use crate::rpc;

pub async fn run(ctx: &Ctx, command: ApprovalsCommand) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let (id, allow, always) = match command {
        ApprovalsCommand::Allow { id, always } => (id, true, always),
        ApprovalsCommand::Deny { id } => (id, false, false),
        ApprovalsCommand::List => {
            let pending = c
                .tools
                .approvals(pb::ApprovalsRequest {})
                .await?
                .into_inner()
                .pending;
            return list(ctx, &pending);
        }
    };
    answer(
        ctx,
        pb::DecideRequest {
            id,
            allow,
            always,
            ..Default::default()
        },
    )
    .await
}

/// Sends an answer; prints what it did, in the daemon's words.
pub async fn answer(ctx: &Ctx, request: pb::DecideRequest) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let id = request.id.clone();
    let note = c.tools.decide(request).await?.into_inner().note;
    if ctx.json {
        out::json(&json!({"id": id, "note": note}));
    } else {
        outln!("{note}");
    }
    Ok(0)
}

fn list(ctx: &Ctx, pending: &[pb::PendingApproval]) -> Result<u8, CliError> {
    if ctx.json {
        let value = |t: &str| {
            serde_json::from_str::<serde_json::Value>(t).unwrap_or(serde_json::Value::Null)
        };
        let v: Vec<_> = pending
            .iter()
            .map(|p| match p.kind.as_str() {
                "approval" | "input" => json!({
                    "id": p.id, "kind": p.kind, "agent": p.agent, "session": p.session_key,
                    "run": p.run, "workflow": p.workflow, "step": p.step, "prompt": p.prompt,
                    "data": value(&p.data_json), "approvers": p.approvers, "quorum": p.quorum,
                    "initiator": (!p.initiator.is_empty()).then_some(&p.initiator),
                    "votes": p.votes, "edit": p.edit, "revisions_left": p.revisions_left,
                    "schema": value(&p.schema_json), "requester": p.requester,
                    "age_s": p.age_s, "expires_in_s": p.expires_in_s,
                }),
                _ => json!({
                    "id": p.id, "kind": "call", "session": p.session_key, "agent": p.agent,
                    "tool": p.tool, "arguments": p.arguments_json, "requester": p.requester,
                    "age_s": p.age_s, "expires_in_s": p.expires_in_s,
                }),
            })
            .collect();
        out::json(&serde_json::Value::Array(v));
        return Ok(0);
    }
    if pending.is_empty() {
        outln!("nothing is waiting for an answer");
    }
    for p in pending {
        match p.kind.as_str() {
            "approval" => {
                let mut verbs = vec!["approve", "deny"];
                if p.edit {
                    verbs.push("edit");
                }
                if p.revisions_left > 0 {
                    verbs.push("revise");
                }
                outln!(
                    "{}  workflow {} (run {}) step {}: {}",
                    p.id,
                    p.workflow,
                    p.run,
                    p.step,
                    one_line(&p.prompt, 100)
                );
                if !p.data_json.is_empty() {
                    outln!("          data: {}", one_line(&p.data_json, 100));
                }
                let not = if p.initiator.is_empty() {
                    String::new()
                } else {
                    format!(", not {}, who started the run", p.initiator)
                };
                outln!(
                    "          approvals {} of {} ({}{not}); `pincer workflows {} {}`; expires in {} s",
                    p.votes.len(),
                    p.quorum,
                    p.approvers.join(", "),
                    verbs.join("|"),
                    p.id,
                    p.expires_in_s
                );
            }
            "input" => {
                outln!(
                    "{}  workflow {} (run {}) step {} asks: {}",
                    p.id,
                    p.workflow,
                    p.run,
                    p.step,
                    one_line(&p.prompt, 100)
                );
                if !p.schema_json.is_empty() {
                    outln!("          schema: {}", one_line(&p.schema_json, 100));
                }
                outln!(
                    "          `pincer workflows input {} '<json>'`; expires in {} s",
                    p.id,
                    p.expires_in_s
                );
            }
            _ => outln!(
                "{}  {} {}  ({}, denied in {} s)",
                p.id,
                p.tool,
                one_line(&p.arguments_json, 100),
                p.session_key,
                p.expires_in_s
            ),
        }
    }
    Ok(0)
}
