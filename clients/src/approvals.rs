//! `pincer approvals list|allow|deny`: calls waiting for the owner's answer
//! (tools set to `ask`).

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
    c.tools
        .decide(pb::DecideRequest {
            id: id.clone(),
            allow,
            always,
        })
        .await?;
    if ctx.json {
        out::json(&json!({"id": id, "allowed": allow, "always": always}));
    } else if always {
        outln!("allowed {id}, and this tool from now on in this session");
    } else {
        outln!("{} {id}", if allow { "allowed" } else { "denied" });
    }
    Ok(0)
}

fn list(ctx: &Ctx, pending: &[pb::PendingApproval]) -> Result<u8, CliError> {
    if ctx.json {
        let v: Vec<_> = pending
            .iter()
            .map(|p| {
                json!({"id": p.id, "session": p.session_key, "agent": p.agent, "tool": p.tool,
                       "arguments": p.arguments_json, "age_s": p.age_s, "expires_in_s": p.expires_in_s})
            })
            .collect();
        out::json(&serde_json::Value::Array(v));
        return Ok(0);
    }
    if pending.is_empty() {
        outln!("no calls are waiting for approval");
    }
    for p in pending {
        outln!(
            "{}  {} {}  ({}, denied in {} s)",
            p.id,
            p.tool,
            one_line(&p.arguments_json, 100),
            p.session_key,
            p.expires_in_s
        );
    }
    Ok(0)
}
