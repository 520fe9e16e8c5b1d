//! `pincer service install|uninstall|start|stop|restart|status|logs|unit`:
//! picks the service manager (launchd on macOS, else the systemd user
//! manager over D-Bus), runs the `pincer-service` crate's flows and prints
//! their reports. No service logic lives here.

use pincer_proto::v1 as pb;
use pincer_service::install::{self, Change, Install, InstallReport};
use pincer_service::launchd::Launchd;
use pincer_service::systemd::{self, Systemd};
use pincer_service::{Manager, ServiceError, Spec, Status, journal, render};
use serde_json::json;

use crate::Ctx;
use crate::cli::ServiceCommand;
use crate::error::{CliError, FAILED};
use crate::out::{self, errln, outln};
use crate::rpc;

pub async fn run(ctx: &Ctx, command: ServiceCommand) -> Result<u8, CliError> {
    match command {
        ServiceCommand::Unit { packaged } => unit(ctx, packaged),
        ServiceCommand::Logs { follow, lines } => logs(ctx, follow, lines).await,
        command if cfg!(target_os = "macos") => {
            let m = Launchd::new().map_err(failed)?;
            verb(ctx, &m, command).await
        }
        command => match Systemd::connect().await {
            Ok(m) => verb(ctx, &m, command).await,
            Err(e @ ServiceError::NoManager { .. }) => match command {
                ServiceCommand::Install { .. } => by_hand(ctx, &e),
                _ => Err(failed(e)),
            },
            Err(e) => Err(failed(e)),
        },
    }
}

/// The verbs that need a manager.
async fn verb<M: Manager>(ctx: &Ctx, m: &M, command: ServiceCommand) -> Result<u8, CliError> {
    let home = ctx.home.clone();
    let answers = move || rpc::socket_answers(&home);
    match command {
        ServiceCommand::Install { force } => {
            let opts = Install {
                spec: spec(ctx)?,
                force,
                running_pid: running_pid(ctx).await,
                answers: &answers,
            };
            let report = install::install(m, &opts).await.map_err(failed)?;
            print_install(ctx, &report);
            Ok(0)
        }
        ServiceCommand::Uninstall { force } => {
            let r = install::uninstall(m, &ctx.home, force)
                .await
                .map_err(failed)?;
            if ctx.json {
                json_out(&r);
            } else if r.removed {
                outln!(
                    "stopped, disabled and removed {}; {} and the home are kept",
                    r.path,
                    r.env_file
                );
            } else {
                outln!("not installed ({} does not exist); nothing to do", r.path);
            }
            Ok(0)
        }
        ServiceCommand::Start | ServiceCommand::Restart => {
            let restart = matches!(command, ServiceCommand::Restart);
            let s = install::start(m, restart, &answers).await.map_err(failed)?;
            print_state(ctx, &s);
            Ok(0)
        }
        ServiceCommand::Stop => {
            m.stop().await.map_err(failed)?;
            let s = m.status().await.map_err(failed)?;
            print_state(ctx, &s);
            Ok(0)
        }
        ServiceCommand::Status => {
            let s = install::status(m).await.map_err(failed)?;
            print_status(ctx, &s);
            Ok(0)
        }
        // Answered by `run` without a manager.
        ServiceCommand::Logs { .. } | ServiceCommand::Unit { .. } => Ok(0),
    }
}

/// What the service runs: the absolute pincerd and this CLI's home.
fn spec(ctx: &Ctx) -> Result<Spec, CliError> {
    Ok(Spec {
        pincerd: install::find_pincerd().map_err(failed)?,
        home: std::fs::canonicalize(&ctx.home).unwrap_or_else(|_| ctx.home.clone()),
    })
}

/// The pid of a pincerd answering on this home's socket.
async fn running_pid(ctx: &Ctx) -> Option<u32> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await.ok()?;
    let status = c.daemon.status(pb::StatusRequest {}).await.ok()?;
    Some(status.into_inner().pid)
}

/// No user manager: the sentence, the unit, where it goes and the commands
/// (the environment file they name is created for the user to fill).
fn by_hand(ctx: &Ctx, e: &ServiceError) -> Result<u8, CliError> {
    let path = systemd::unit_path().map_err(failed)?;
    let r = install::manual(&spec(ctx)?, &path).map_err(failed)?;
    let sentence = format!("cannot install the service: {e}");
    if ctx.json {
        out::json(&json!({"error": sentence, "exit_code": FAILED,
                          "unit": r.unit, "path": r.path,
                          "env_file": r.env_file, "env_file_created": r.env_file_created}));
    } else {
        errln!("pincer: {sentence}");
        outln!("{}", r.unit.trim_end());
        if r.env_file_created {
            errln!(
                "created {} (mode 0600) with a commented line per key",
                r.env_file
            );
        }
        errln!("{}", r.steps);
    }
    Ok(FAILED)
}

fn unit(ctx: &Ctx, packaged: bool) -> Result<u8, CliError> {
    let text = if packaged {
        render::packaged_unit()
    } else {
        render::unit(&spec(ctx)?).map_err(failed)?
    };
    if ctx.json {
        out::json(&json!({"unit": text}));
    } else {
        outln!("{}", text.trim_end());
    }
    Ok(0)
}

/// The journal when the service runs under a systemd with one; else the
/// log file pincerd writes itself.
async fn logs(ctx: &Ctx, follow: bool, lines: usize) -> Result<u8, CliError> {
    let systemd = !cfg!(target_os = "macos") && Systemd::connect().await.is_ok();
    if systemd && !ctx.json && journal::usable() {
        let args = journal::command_line(lines, follow);
        errln!("(the user journal: {})", words(&args));
        let status = std::process::Command::new(&args[0])
            .args(&args[1..])
            .status()
            .map_err(|e| CliError::failed(format!("cannot run journalctl: {e}")))?;
        return Ok(status.code().map_or(FAILED, |c| c.clamp(0, 255) as u8));
    }
    if !ctx.json {
        errln!(
            "(pincerd's own log, {}: {})",
            crate::logs::log_path(&ctx.home).display(),
            if cfg!(target_os = "macos") {
                format!(
                    "launchd keeps pincerd's stderr in {}",
                    ctx.home.join("logs").join("launchd.err.log").display()
                )
            } else {
                "no user journal here".to_string()
            }
        );
    }
    crate::logs::run(ctx, follow, lines).await
}

fn words(args: &[std::ffi::OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A report as one JSON document.
fn json_out(report: &impl serde::Serialize) {
    out::json(&serde_json::to_value(report).unwrap_or_default());
}

fn failed(e: ServiceError) -> CliError {
    CliError::failed(e.to_string())
}

fn print_install(ctx: &Ctx, r: &InstallReport) {
    if ctx.json {
        json_out(r);
        return;
    }
    match r.change {
        Change::Created => outln!("wrote {}", r.path),
        Change::Replaced => outln!("replaced {}", r.path),
        Change::Unchanged => outln!("already installed, nothing changed ({})", r.path),
    }
    if r.env_file_created {
        outln!(
            "created {} (mode 0600): put provider keys and bot tokens there as KEY=VALUE lines",
            r.env_file
        );
    }
    if !r.env_missing.is_empty() {
        outln!(
            "set in this shell but not in {}: {} (the service does not see them: add them to the file, then run `pincer service restart`)",
            r.env_file,
            r.env_missing.join(", ")
        );
    }
    match r.socket_owner_pid {
        Some(pid) => outln!(
            "enabled, not started: pincerd (pid {pid}, not the service's) owns this home's socket; stop it with `pincer stop`, then run `pincer service start`"
        ),
        None => outln!("enabled at login and {}", state_words(&r.status)),
    }
    if r.linger == Some(false) {
        outln!(
            "lingering is off: pincer starts when you log in and stops when you log out; to start it at boot, run `loginctl enable-linger $USER`"
        );
    }
}

fn state_words(s: &Status) -> String {
    let pid = s.main_pid.map(|p| format!(", pid {p}")).unwrap_or_default();
    format!("{} ({}){pid}", s.active_state, s.sub_state)
}

fn print_state(ctx: &Ctx, s: &Status) {
    if ctx.json {
        json_out(s);
    } else {
        outln!("{}: {}", render::UNIT_NAME, state_words(s));
    }
}

fn print_status(ctx: &Ctx, s: &Status) {
    if ctx.json {
        json_out(s);
        return;
    }
    if s.installed {
        outln!("installed: {}", s.path);
    } else {
        outln!("installed: no ({} does not exist)", s.path);
    }
    outln!("enabled:   {}", s.enabled);
    let since = s
        .since_unix_s
        .and_then(|t| chrono::DateTime::from_timestamp(t as i64, 0))
        .map(|t| {
            format!(
                " since {}",
                t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S")
            )
        })
        .unwrap_or_default();
    outln!("state:     {} ({}){since}", s.active_state, s.sub_state);
    if let Some(pid) = s.main_pid {
        outln!("pid:       {pid}");
    }
    if let Some(n) = s.restarts {
        outln!("restarts:  {n}");
    }
    let result = s
        .result
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    match (s.last_exit_status, s.last_exit_signal) {
        (_, Some(sig)) => outln!("last exit: killed by signal {sig}{result}"),
        (Some(code), _) => outln!("last exit: status {code}{result}"),
        (None, None) => {}
    }
    match s.linger {
        Some(true) => outln!("linger:    on (starts at boot)"),
        Some(false) => outln!(
            "linger:    off (starts at login only; `loginctl enable-linger $USER` starts it at boot)"
        ),
        None => {}
    }
}
