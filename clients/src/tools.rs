//! `pincer tools list|audit`: every tool of the daemon, where it comes
//! from, and whether the agent is offered it — if not, the policy layer that
//! removed it and why; if so, whether its calls ask for the owner's
//! approval, as the daemon's policy decided — and the data boundary of the chat (whose data its
//! turns act for; the memory, sessions and files they reach). The audit
//! table lives in `audit.rs`.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::cli::ToolsCommand;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::render::one_line;
use crate::rpc;

pub async fn run(ctx: &Ctx, command: ToolsCommand) -> Result<u8, CliError> {
    match command {
        ToolsCommand::List {
            agent,
            channel,
            peer,
            group,
            guild,
            roles,
        } => {
            let chat = Chat {
                channel,
                peer,
                group,
                guild,
                roles,
            };
            list(ctx, agent.agent, chat).await
        }
        ToolsCommand::Audit { session, limit } => crate::audit::run(ctx, session, limit).await,
    }
}

/// The chat `pincer tools list` answers for (`--channel`, `--peer`,
/// `--group`, `--guild`, `--role`).
struct Chat {
    channel: Option<String>,
    peer: Option<String>,
    group: Option<String>,
    guild: Option<String>,
    roles: Vec<String>,
}

async fn list(ctx: &Ctx, agent: Option<String>, chat: Chat) -> Result<u8, CliError> {
    let Chat {
        channel,
        peer,
        group,
        guild,
        roles,
    } = chat;
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let list = c
        .tools
        .list(pb::ListToolsRequest {
            agent: agent.unwrap_or_default(),
            channel: channel.unwrap_or_default(),
            peer: peer.unwrap_or_default(),
            group: group.unwrap_or_default(),
            guild: guild.unwrap_or_default(),
            roles,
        })
        .await?
        .into_inner();
    if ctx.json {
        let tools: Vec<_> = list
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "source": t.source, "groups": t.groups, "optional": t.optional,
                       "dedupe": t.dedupe, "owner_only": t.owner_only, "offered": t.offered, "asks": t.asks,
                       "removed_by": t.removed_by, "reason": t.reason, "description": t.description})
            })
            .collect();
        let servers: Vec<_> = list
            .servers
            .iter()
            .map(|s| json!({"name": s.name, "state": s.state, "tools": s.tools}))
            .collect();
        out::json(
            &json!({"agent": list.agent, "profile": list.profile, "tools": tools, "note": list.note,
                          "skipped": list.skipped, "servers": servers, "boundary": list.boundary}),
        );
        return Ok(0);
    }
    let offered = list.tools.iter().filter(|t| t.offered).count();
    let asking = match list.tools.iter().filter(|t| t.asks).count() {
        0 => String::new(),
        n => format!(", {n} of them ask for approval"),
    };
    outln!(
        "agent `{}`: {offered} of {} tools offered{asking} (profile `{}`)",
        list.agent,
        list.tools.len(),
        list.profile
    );
    if !list.note.is_empty() {
        outln!("{}", list.note);
    }
    if !list.boundary.is_empty() {
        outln!("data boundary:");
        for line in &list.boundary {
            outln!("  {line}");
        }
    }
    let width = list
        .tools
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    outln!("{:<width$}  {:<16} STATUS", "TOOL", "SOURCE");
    for t in &list.tools {
        let status = if t.asks {
            "offered, asks for approval".to_string()
        } else if t.offered {
            "offered".to_string()
        } else {
            format!("removed by {}: {}", t.removed_by, t.reason)
        };
        outln!(
            "{:<width$}  {:<16} {}",
            t.name,
            one_line(&t.source, 16),
            status
        );
    }
    for s in &list.skipped {
        outln!("skipped: {s}");
    }
    if !list.servers.is_empty() {
        outln!("\nMCP servers:");
        for s in &list.servers {
            outln!("  {:<20} {} ({} tools)", s.name, s.state, s.tools);
        }
    }
    Ok(0)
}
