//! `pincer status`: version, uptime, state (running or stopping), turns,
//! sessions, agents with their models, memory indexes, provider problems.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::rpc;

pub async fn run(ctx: &Ctx) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let s = c.daemon.status(pb::StatusRequest {}).await?.into_inner();
    // A memory that cannot answer (an index that cannot be opened) is
    // shown as such; the rest of the status still is.
    let memory = c
        .memory
        .status(pb::MemoryStatusRequest::default())
        .await
        .map(tonic::Response::into_inner)
        .map_err(|e| e.message().to_string());
    let state = if s.state.is_empty() {
        "running"
    } else {
        s.state.as_str()
    };
    if ctx.json {
        let agents: Vec<_> = s
            .agents
            .iter()
            .map(|a| json!({"id": a.id, "provider": a.provider, "model": a.model, "workspace": a.workspace,
                            "context_window": a.context_window}))
            .collect();
        let providers: Vec<_> = s
            .providers
            .iter()
            .map(|p| json!({"id": p.id, "kind": p.kind, "base_url": p.base_url, "api_key_env": p.api_key_env,
                            "tool_format": p.tool_format}))
            .collect();
        out::json(
            &json!({"version": s.version, "pid": s.pid, "uptime_ms": s.uptime_ms, "state": state,
            "home": s.home, "config": s.config_path, "agents": agents, "providers": providers,
            "running_turns": s.running_turns, "max_concurrent_turns": s.max_concurrent_turns,
            "sessions": s.sessions, "provider_problem": s.provider_problem,
            "sandbox": {"active": s.sandboxed, "state": s.sandbox},
            "failed_parts": s.failed_parts.iter().map(|f| json!({"part": f.part, "reason": f.reason}))
                .collect::<Vec<_>>(),
            "channels": s.channels.iter().map(|c| json!({"channel": c.channel, "enabled": c.enabled,
                "connected": c.connected, "mode": c.mode, "bot": c.bot, "last_error": c.last_error}))
                .collect::<Vec<_>>(),
            "memory": match &memory {
                Ok(memory) => json!({"enabled": memory.enabled,
                    "indexes": memory.indexes.iter().map(crate::memory::index_json).collect::<Vec<_>>()}),
                Err(why) => json!({"error": why}),
            }}),
        );
        return Ok(0);
    }
    let stopping = if state == "stopping" {
        ", stopping (no new turns; running ones get the shutdown grace)"
    } else {
        ""
    };
    outln!(
        "pincerd {} (pid {}), up {}{stopping}",
        s.version,
        s.pid,
        human_duration(s.uptime_ms)
    );
    outln!("state:    {state}");
    outln!("home:     {}", s.home);
    outln!("config:   {}", s.config_path);
    outln!(
        "turns:    {} running (limit {})",
        s.running_turns,
        s.max_concurrent_turns
    );
    outln!("sessions: {}", s.sessions);
    outln!("sandbox:  {}", s.sandbox);
    for f in &s.failed_parts {
        outln!("FAILED:   {} did not start: {}", f.part, f.reason);
    }
    if !s.channels.is_empty() {
        outln!("channels:");
        for c in &s.channels {
            let state = if !c.enabled {
                "disabled".to_string()
            } else if c.connected {
                format!("connected as @{} ({})", c.bot, c.mode)
            } else if c.last_error.is_empty() {
                "connecting".to_string()
            } else {
                format!("NOT connected: {}", c.last_error)
            };
            outln!("  {:<12} {state}", c.channel);
        }
    }
    outln!("agents:");
    for a in &s.agents {
        let model = if a.model.is_empty() {
            "(no model)".to_string()
        } else {
            format!("{}/{}", a.provider, a.model)
        };
        outln!("  {:<12} {:<40} {}", a.id, model, a.workspace);
    }
    match &memory {
        Ok(memory) if memory.enabled => {
            outln!("memory:");
            for index in &memory.indexes {
                outln!("  {}", crate::memory::index_line(index));
            }
        }
        Ok(_) => outln!("memory:   off ([memory] enabled = false)"),
        Err(why) => outln!("memory:   {why}"),
    }
    if !s.provider_problem.is_empty() {
        outln!("problem:  {}", s.provider_problem);
    }
    Ok(0)
}

fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}
