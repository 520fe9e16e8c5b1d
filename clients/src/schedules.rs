//! `pincer schedules list|show|add|edit|remove|pause|resume|run-now|history`:
//! the schedules of pincerd. Every instant is shown twice: in the
//! schedule's own zone (what it is evaluated in) and in this machine's.

use pincer_proto::v1 as pb;
use serde_json::{Map, Value, json};

use crate::Ctx;
use crate::cli::{ScheduleArgs, SchedulesCommand};
use crate::error::{CliError, USAGE};
use crate::out::{self, outln};
use crate::render::one_line;
use crate::rpc;

pub async fn run(ctx: &Ctx, command: SchedulesCommand) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let s = &mut c.schedules;
    match command {
        SchedulesCommand::List => {
            let r = s.list(pb::ListSchedulesRequest {}).await?.into_inner();
            if ctx.json {
                let all: Vec<Value> = r.schedules.iter().map(info_json).collect();
                out::json(&json!({ "schedules": all }));
            } else if r.schedules.is_empty() {
                outln!(
                    "no schedules: add one to config.toml ([schedules.NAME]) or with `pincer schedules add`"
                );
            } else {
                for i in &r.schedules {
                    brief(i);
                }
            }
        }
        SchedulesCommand::Show { name } => {
            let i = s.show(pb::ScheduleRef { name }).await?.into_inner();
            full(ctx, &i);
        }
        SchedulesCommand::Add { name, fields } => {
            let fields_json = Value::Object(fields_of(&fields, false)?).to_string();
            let i = s
                .add(pb::AddScheduleRequest { name, fields_json })
                .await?
                .into_inner();
            full(ctx, &i);
        }
        SchedulesCommand::Edit {
            name,
            fields,
            unset,
        } => {
            let mut patch = fields_of(&fields, true)?;
            for key in unset {
                patch.insert(key, Value::Null);
            }
            if patch.is_empty() {
                return Err(CliError::new(
                    USAGE,
                    "nothing to change: give the options to replace (see `pincer schedules edit --help`)",
                ));
            }
            let patch_json = Value::Object(patch).to_string();
            let i = s
                .edit(pb::EditScheduleRequest { name, patch_json })
                .await?
                .into_inner();
            full(ctx, &i);
        }
        SchedulesCommand::Remove { name } => {
            s.remove(pb::ScheduleRef { name: name.clone() }).await?;
            if ctx.json {
                out::json(&json!({ "removed": name }));
            } else {
                outln!(
                    "schedule {name} removed (`pincer schedules history {name}` still shows its fires)"
                );
            }
        }
        SchedulesCommand::Pause { name } => {
            let i = s.pause(pb::ScheduleRef { name }).await?.into_inner();
            full(ctx, &i);
        }
        SchedulesCommand::Resume { name } => {
            let i = s.resume(pb::ScheduleRef { name }).await?.into_inner();
            full(ctx, &i);
        }
        SchedulesCommand::RunNow { name } => {
            let r = s
                .run_now(pb::ScheduleRef { name: name.clone() })
                .await?
                .into_inner();
            if ctx.json {
                out::json(&json!({ "schedule": name, "fire": r.fire }));
            } else {
                outln!(
                    "schedule {name} fires now (fire {}; `pincer schedules history {name}` shows how it ends)",
                    r.fire
                );
            }
        }
        SchedulesCommand::History { name, limit } => {
            let r = s
                .history(pb::ScheduleHistoryRequest { name, limit })
                .await?
                .into_inner();
            if ctx.json {
                let all: Vec<Value> = r.fires.iter().map(fire_json).collect();
                out::json(&json!({ "fires": all }));
            } else if r.fires.is_empty() {
                outln!("no fires yet");
            } else {
                for f in &r.fires {
                    outln!("{}", fire_line(f));
                }
            }
        }
    }
    Ok(0)
}

/// The options given, as schedule fields. For `edit`, giving one of the
/// kinds (or targets) removes the others, so `--every 2h` turns a cron
/// schedule into an interval.
fn fields_of(a: &ScheduleArgs, edit: bool) -> Result<Map<String, Value>, CliError> {
    let mut m = Map::new();
    let mut put = |key: &str, v: &Option<String>| {
        if let Some(v) = v {
            m.insert(key.into(), Value::String(v.clone()));
        }
    };
    put("cron", &a.cron);
    put("every", &a.every);
    put("at", &a.at);
    put("tz", &a.tz);
    put("agent", &a.agent);
    put("prompt", &a.prompt);
    put("session", &a.session);
    put("workflow", &a.workflow);
    put("command", &a.command);
    put("deliver", &a.deliver);
    put("misfire", &a.misfire);
    put("lookback", &a.lookback);
    if !a.inputs.is_empty() {
        let mut inputs = Map::new();
        for pair in &a.inputs {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(CliError::new(
                    USAGE,
                    format!("--input takes NAME=VALUE, not `{pair}`"),
                ));
            };
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.into()));
            inputs.insert(k.trim().into(), value);
        }
        m.insert("inputs".into(), Value::Object(inputs));
    }
    if edit {
        for group in [
            &["cron", "every", "at"][..],
            &["prompt", "workflow", "command"][..],
        ] {
            if group.iter().any(|k| m.contains_key(*k)) {
                for k in group {
                    m.entry(k.to_string()).or_insert(Value::Null);
                }
            }
        }
        // A prompt's session and a workflow's inputs go with their target.
        if m.get("prompt").is_some_and(Value::is_null) && !m.contains_key("session") {
            m.insert("session".into(), Value::Null);
        }
        if m.get("workflow").is_some_and(Value::is_null) && !m.contains_key("inputs") {
            m.insert("inputs".into(), Value::Null);
        }
    }
    Ok(m)
}

/// An instant (Unix ms) in this machine's zone.
fn here(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S %:z")
                .to_string()
        })
        .unwrap_or_default()
}

fn next_text(i: &pb::ScheduleInfo) -> String {
    if i.next_at_ms == 0 {
        return i.state.clone();
    }
    format!("next {} = {} here", i.next_local, here(i.next_at_ms))
}

fn when_text(i: &pb::ScheduleInfo) -> String {
    if i.kind.is_empty() {
        format!("invalid: {}", i.problem)
    } else {
        format!("{} {} ({})", i.kind, i.expr, i.zone)
    }
}

fn brief(i: &pb::ScheduleInfo) {
    let last = i
        .last
        .as_ref()
        .map(|f| format!("; last {}", f.state))
        .unwrap_or_default();
    outln!(
        "{}  {}  {}  → {}",
        i.name,
        when_text(i),
        one_line(&i.target, 60),
        if i.deliver.is_empty() {
            "none"
        } else {
            &i.deliver
        }
    );
    let why = if i.disabled.is_empty() {
        String::new()
    } else {
        format!(": {}", i.disabled)
    };
    outln!("    {}{why}{last}", next_text(i));
}

fn full(ctx: &Ctx, i: &pb::ScheduleInfo) {
    if ctx.json {
        out::json(&info_json(i));
        return;
    }
    outln!("{}", i.name);
    outln!("  when       {}", when_text(i));
    outln!("  runs       {}", i.target);
    outln!("  agent      {}", i.agent);
    outln!(
        "  delivers   {}",
        if i.deliver.is_empty() {
            "none"
        } else {
            &i.deliver
        }
    );
    if !i.misfire.is_empty() {
        outln!("  misfire    {}", i.misfire);
    }
    outln!("  made by    {} ({})", i.principal, i.source);
    outln!("  state      {}", i.state);
    if i.next_at_ms != 0 {
        outln!("  next       {}", i.next_local);
        outln!("             {} here", here(i.next_at_ms));
    }
    if i.failures > 0 {
        outln!("  failures   {} in a row", i.failures);
    }
    if !i.disabled.is_empty() {
        outln!("  disabled   {}", i.disabled);
    }
    if let Some(f) = &i.last {
        outln!("  last fire  {}", fire_line(f));
    }
}

fn fire_line(f: &pb::FireInfo) -> String {
    let mut line = format!("{:<6} {}  {:<9}", f.id, f.due_local, f.state);
    if f.attempt > 1 {
        line.push_str(&format!(" attempt {}", f.attempt));
    }
    if f.missed > 0 {
        line.push_str(&format!(" {} missed", f.missed));
    }
    if !f.detail.is_empty() {
        line.push_str(&format!(" {}", one_line(&f.detail, 100)));
    }
    line
}

fn info_json(i: &pb::ScheduleInfo) -> Value {
    json!({
        "name": i.name, "source": i.source, "principal": i.principal,
        "kind": i.kind, "expr": i.expr, "zone": i.zone, "target": i.target,
        "agent": i.agent, "deliver": i.deliver, "state": i.state,
        "misfire": i.misfire,
        "next_at_ms": (i.next_at_ms != 0).then_some(i.next_at_ms),
        "next_local": (!i.next_local.is_empty()).then_some(&i.next_local),
        "next_here": (i.next_at_ms != 0).then(|| here(i.next_at_ms)),
        "failures": i.failures,
        "disabled": (!i.disabled.is_empty()).then_some(&i.disabled),
        "problem": (!i.problem.is_empty()).then_some(&i.problem),
        "last": i.last.as_ref().map(fire_json),
        "fields": serde_json::from_str::<Value>(&i.fields_json).unwrap_or(Value::Null),
    })
}

fn fire_json(f: &pb::FireInfo) -> Value {
    json!({
        "id": f.id, "due_at_ms": f.due_at_ms, "due_local": f.due_local,
        "attempt": f.attempt, "state": f.state,
        "ended_at_ms": (f.ended_at_ms != 0).then_some(f.ended_at_ms),
        "missed": (f.missed != 0).then_some(f.missed),
        "detail": (!f.detail.is_empty()).then_some(&f.detail),
        "output": (!f.output.is_empty()).then_some(&f.output),
    })
}
