//! Every command but chat: status, abort, sessions, config, logs, doctor.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::render::one_line;
use crate::rpc::{self, CliError};
use crate::{Command, ConfigCommand, Ctx, SessionsCommand, SkillsCommand, chat, init};

pub async fn run(ctx: &Ctx, command: Command) -> Result<u8, CliError> {
    match command {
        Command::Init => init::run(&ctx.home),
        Command::Status => status(ctx).await,
        Command::Chat { agent, session } => chat::interactive(ctx, agent, session).await,
        Command::Send {
            agent,
            session,
            text,
        } => chat::send(ctx, agent, session, text).await,
        Command::Abort { agent, session } => {
            let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
            let r = c
                .agent
                .abort(pb::AbortRequest {
                    agent: agent.unwrap_or_default(),
                    session: session.unwrap_or_default(),
                })
                .await?
                .into_inner();
            if ctx.json {
                println!("{}", json!({"aborted": r.aborted}));
            } else if r.aborted {
                println!("aborted the running turn");
            } else {
                println!("no turn was running in that session");
            }
            Ok(0)
        }
        Command::Sessions { command } => sessions(ctx, command).await,
        Command::Config {
            command: ConfigCommand::Check,
        } => config_check(ctx),
        Command::Config {
            command: ConfigCommand::Reload,
        } => {
            let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
            let r = c.daemon.reload(pb::ReloadRequest {}).await?.into_inner();
            if ctx.json {
                println!(
                    "{}",
                    json!({"applied": r.applied, "needs_restart": r.needs_restart})
                );
            } else {
                if r.applied.is_empty() && r.needs_restart.is_empty() {
                    println!("config reloaded: nothing changed");
                }
                for a in &r.applied {
                    println!("applied: {a}");
                }
                for n in &r.needs_restart {
                    println!("needs a restart of pincerd: {n}");
                }
            }
            Ok(0)
        }
        Command::Logs { follow, lines } => {
            let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
            let mut stream = c
                .daemon
                .logs(pb::LogsRequest { lines, follow })
                .await?
                .into_inner();
            while let Some(line) = stream.message().await? {
                if ctx.json {
                    println!("{}", json!({"line": line.line}));
                } else {
                    println!("{}", line.line);
                }
            }
            Ok(0)
        }
        Command::Tools { command } => crate::tools::run(ctx, command).await,
        Command::Approvals { command } => crate::tools::approvals(ctx, command).await,
        Command::Memory { command } => crate::memory::run(ctx, command).await,
        Command::Skills {
            command: SkillsCommand::List { agent },
        } => skills(ctx, agent).await,
        Command::Doctor => doctor(ctx).await,
    }
}

async fn status(ctx: &Ctx) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let s = c.daemon.status(pb::StatusRequest {}).await?.into_inner();
    let memory = c
        .memory
        .status(pb::MemoryStatusRequest::default())
        .await?
        .into_inner();
    if ctx.json {
        let agents: Vec<_> = s
            .agents
            .iter()
            .map(|a| json!({"id": a.id, "provider": a.provider, "model": a.model, "workspace": a.workspace}))
            .collect();
        println!(
            "{}",
            json!({"version": s.version, "pid": s.pid, "uptime_ms": s.uptime_ms, "home": s.home, "config": s.config_path,
                   "agents": agents, "running_turns": s.running_turns, "max_concurrent_turns": s.max_concurrent_turns,
                   "sessions": s.sessions, "provider_problem": s.provider_problem,
                   "memory": {"enabled": memory.enabled,
                              "indexes": memory.indexes.iter().map(crate::memory::index_json).collect::<Vec<_>>()}})
        );
        return Ok(0);
    }
    println!(
        "pincerd {} (pid {}), up {}",
        s.version,
        s.pid,
        human_duration(s.uptime_ms)
    );
    println!("home:     {}", s.home);
    println!("config:   {}", s.config_path);
    println!(
        "turns:    {} running (limit {})",
        s.running_turns, s.max_concurrent_turns
    );
    println!("sessions: {}", s.sessions);
    println!("agents:");
    for a in &s.agents {
        let model = if a.model.is_empty() {
            "(no model)".to_string()
        } else {
            format!("{}/{}", a.provider, a.model)
        };
        println!("  {:<12} {:<40} {}", a.id, model, a.workspace);
    }
    if memory.enabled {
        println!("memory:");
        for index in &memory.indexes {
            println!("  {}", crate::memory::index_line(index));
        }
    } else {
        println!("memory:   off ([memory] enabled = false)");
    }
    if !s.provider_problem.is_empty() {
        println!("problem:  {}", s.provider_problem);
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

async fn sessions(ctx: &Ctx, command: SessionsCommand) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    match command {
        SessionsCommand::List { agent } => {
            let list = c
                .sessions
                .list(pb::ListSessionsRequest {
                    agent: agent.unwrap_or_default(),
                })
                .await?
                .into_inner();
            if ctx.json {
                let v: Vec<_> = list.sessions.iter().map(session_json).collect();
                println!("{}", serde_json::Value::Array(v));
                return Ok(0);
            }
            if list.sessions.is_empty() {
                println!("no sessions yet; `pincer chat` starts one");
                return Ok(0);
            }
            println!(
                "{:<40} {:<20} {:>8} {:>14}  STATE",
                "KEY", "UPDATED", "ENTRIES", "TOKENS IN/OUT"
            );
            for s in &list.sessions {
                let state = if s.running {
                    "running".to_string()
                } else if !s.last_error.is_empty() {
                    format!("error: {}", one_line(&s.last_error, 60))
                } else {
                    "idle".to_string()
                };
                println!(
                    "{:<40} {:<20} {:>8} {:>14}  {state}",
                    s.key,
                    s.updated_at.get(..19).unwrap_or(&s.updated_at),
                    s.entries,
                    format!("{}/{}", s.input_tokens, s.output_tokens)
                );
            }
            Ok(0)
        }
        SessionsCommand::Show {
            session,
            agent,
            limit,
        } => {
            let h = c
                .sessions
                .history(pb::HistoryRequest {
                    agent: agent.unwrap_or_default(),
                    session,
                    limit,
                })
                .await?
                .into_inner();
            if ctx.json {
                let entries: Vec<serde_json::Value> = h
                    .entries
                    .iter()
                    .filter_map(|e| serde_json::from_str(&e.json).ok())
                    .collect();
                println!(
                    "{}",
                    json!({"session": h.session.as_ref().map(session_json), "entries": entries, "recovered_torn_line": h.recovered_torn_line})
                );
                return Ok(0);
            }
            if let Some(s) = &h.session {
                println!(
                    "{} (id {}, agent {}, channel {})",
                    s.key, s.id, s.agent, s.channel
                );
                println!(
                    "created {}, updated {}, tokens {}/{}",
                    s.created_at, s.updated_at, s.input_tokens, s.output_tokens
                );
                if s.compactions > 0 {
                    println!("compactions: {}", s.compactions);
                }
                if !s.last_error.is_empty() {
                    println!("last error: {}", s.last_error);
                }
                if !s.failure_summary.is_empty() {
                    println!("failed turn: {}", s.failure_summary);
                }
            }
            if h.recovered_torn_line {
                println!(
                    "note: the transcript ended in a torn line (a crash mid-write); it was skipped"
                );
            }
            println!();
            for e in &h.entries {
                print_entry(&e.json);
            }
            Ok(0)
        }
        SessionsCommand::Reset { session, agent } => {
            let r = c
                .sessions
                .reset(pb::SessionRef {
                    agent: agent.unwrap_or_default(),
                    session,
                })
                .await?
                .into_inner();
            if ctx.json {
                println!("{}", json!({"old_id": r.old_id, "new_id": r.new_id}));
            } else {
                println!(
                    "reset: new session id {} (the old transcript {} is kept)",
                    r.new_id, r.old_id
                );
            }
            Ok(0)
        }
        SessionsCommand::Delete { session, agent } => {
            let r = c
                .sessions
                .delete(pb::SessionRef {
                    agent: agent.unwrap_or_default(),
                    session,
                })
                .await?
                .into_inner();
            if ctx.json {
                println!("{}", json!({"deleted": r.deleted}));
            } else {
                println!("deleted the session and its transcript");
            }
            Ok(0)
        }
        SessionsCommand::Compact { session, agent } => {
            let r = c
                .sessions
                .compact(pb::SessionRef {
                    agent: agent.unwrap_or_default(),
                    session,
                })
                .await?
                .into_inner();
            if ctx.json {
                println!(
                    "{}",
                    json!({"compacted": r.compacted, "tokens_before": r.tokens_before, "tokens_after": r.tokens_after, "summary": r.summary, "note": r.note})
                );
            } else if r.compacted {
                println!(
                    "compacted: ~{} → ~{} tokens of history\n\n{}",
                    r.tokens_before, r.tokens_after, r.summary
                );
            } else {
                println!("{}", r.note);
            }
            Ok(0)
        }
        SessionsCommand::Prompt { session, agent } => {
            let p = c
                .sessions
                .prompt(pb::SessionRef {
                    agent: agent.unwrap_or_default(),
                    session,
                })
                .await?
                .into_inner();
            if ctx.json {
                let messages: serde_json::Value =
                    serde_json::from_str(&p.messages_json).unwrap_or_default();
                println!(
                    "{}",
                    json!({"model": p.model, "tool_format": p.tool_format, "sent_at": p.sent_at,
                           "estimated_tokens": p.estimated_tokens, "system": p.system,
                           "messages": messages, "tools": p.tools})
                );
            } else {
                print!("{}", p.text);
            }
            Ok(0)
        }
    }
}

async fn skills(ctx: &Ctx, agent: Option<String>) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .skills
        .list(pb::ListSkillsRequest {
            agent: agent.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if ctx.json {
        let skills: Vec<serde_json::Value> = r
            .skills
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "path": s.path, "problem": s.problem}))
            .collect();
        println!(
            "{}",
            json!({"agent": r.agent, "workspace": r.workspace, "listed_in_prompt": r.listed_in_prompt, "note": r.note, "skills": skills})
        );
        return Ok(0);
    }
    if r.skills.is_empty() {
        println!(
            "agent {} has no skills; add one as {}/skills/<name>/SKILL.md with a front matter block:\n---\nname: <name>\ndescription: <when to use it>\n---",
            r.agent, r.workspace
        );
        return Ok(0);
    }
    for s in &r.skills {
        println!("{:<28} {}", s.name, one_line(&s.description, 90));
        println!("{:<28} {}", "", s.path);
        if !s.problem.is_empty() {
            println!("{:<28} ! {}", "", s.problem);
        }
    }
    if !r.note.is_empty() {
        println!("\n{}", r.note);
    }
    Ok(0)
}

fn session_json(s: &pb::SessionInfo) -> serde_json::Value {
    json!({"key": s.key, "id": s.id, "agent": s.agent, "channel": s.channel, "created_at": s.created_at,
           "updated_at": s.updated_at, "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
           "compactions": s.compactions, "last_error": s.last_error, "failure_summary": s.failure_summary,
           "entries": s.entries, "running": s.running})
}

fn print_entry(line: &str) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    let s = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let ts = s("ts");
    let ts = ts.get(11..19).unwrap_or("");
    match s("kind").as_str() {
        "user" => println!("{ts} you:       {}", s("text")),
        "assistant" if s("stop") == "aborted" => {
            println!("{ts} assistant: {} [aborted]", s("text"))
        }
        "assistant" if !s("text").is_empty() => println!("{ts} assistant: {}", s("text")),
        "assistant" => {}
        "tool_call" => println!("{ts}   ⚙ {} {}", s("name"), one_line(&s("arguments"), 120)),
        "tool_result" => {
            let mark = if v.get("is_error").and_then(|b| b.as_bool()).unwrap_or(false) {
                "✗"
            } else {
                "✓"
            };
            println!(
                "{ts}   {mark} {} {}",
                s("name"),
                one_line(&s("content"), 120)
            );
        }
        "meta" => println!("{ts}   · {} {}", s("event"), s("detail")),
        "compaction" => println!(
            "{ts}   · compaction ({}): older history summarised\n{}",
            s("reason"),
            s("summary")
        ),
        other => println!("{ts}   · {other}"),
    }
}

/// `pincerd` next to this binary, else on PATH.
fn pincerd() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("pincerd")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("pincerd"))
}

fn run_pincerd(home: &Path, args: &[&str]) -> Result<std::process::Output, CliError> {
    Process::new(pincerd())
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .map_err(|e| CliError::failed(format!("cannot run pincerd (needed for this check): {e}; is it installed next to pincer or on PATH?")))
}

fn config_check(ctx: &Ctx) -> Result<u8, CliError> {
    let out = run_pincerd(&ctx.home, &["check-config"])?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    Ok(out.status.code().unwrap_or(1).clamp(0, 255) as u8)
}

async fn doctor(ctx: &Ctx) -> Result<u8, CliError> {
    let mut findings: Vec<(String, String, String)> = Vec::new();
    match rpc::connect(&ctx.home, ctx.explicit_home).await {
        Ok(mut c) => {
            findings.push((
                "ok".into(),
                "socket".into(),
                "pincerd answers on its socket".into(),
            ));
            let r = c.daemon.doctor(pb::DoctorRequest {}).await?.into_inner();
            findings.extend(
                r.findings
                    .into_iter()
                    .map(|f| (f.level, f.subject, f.message)),
            );
        }
        Err(e) => {
            findings.push(("error".into(), "socket".into(), e.message));
            // Without the daemon, check the config and providers directly.
            let out = run_pincerd(&ctx.home, &["doctor"])?;
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let mut parts = line.splitn(3, '\t');
                if let (Some(level), Some(subject), Some(message)) =
                    (parts.next(), parts.next(), parts.next())
                {
                    findings.push((level.into(), subject.into(), message.into()));
                }
            }
        }
    }
    let failed = findings.iter().any(|(level, _, _)| level == "error");
    if ctx.json {
        let v: Vec<_> = findings
            .iter()
            .map(|(l, s, m)| json!({"level": l, "subject": s, "message": m}))
            .collect();
        println!("{}", serde_json::Value::Array(v));
    } else {
        for (level, subject, message) in &findings {
            let mark = match level.as_str() {
                "ok" => "✓",
                "warn" => "!",
                _ => "✗",
            };
            println!("{mark} {subject}: {message}");
        }
    }
    Ok(if failed { 1 } else { 0 })
}
