//! `pincer`: the command-line client of pincerd (SPEC §4). It is thin:
//! everything goes through the gRPC API except `logs`, which reads the log
//! file, `config check`, which asks `pincerd check-config`, and `service`,
//! which talks to the service manager (the `pincer-service` crate); it never
//! opens the daemon's databases. Exit codes: 0 ok, 1 error, 2 usage,
//! 3 pincerd not running (or still stopping). This file parses the
//! command line and dispatches; each command lives in its own module.

mod abort;
mod approvals;
mod audit;
mod channels;
mod chat;
mod cli;
mod completions;
mod config;
mod doctor;
mod error;
mod init;
mod log_line;
mod logs;
mod markdown;
mod memory;
mod models;
mod out;
mod pincerd;
mod render;
mod rpc;
mod sanitize;
mod schedules;
mod service;
mod sessions;
mod skills;
mod starter;
mod status;
mod stop;
mod tools;
mod transcript;
mod workflows;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde_json::json;

use cli::{Cli, Command, ConfigCommand, ModelsCommand, SkillsCommand};
use error::CliError;
use out::errln;

/// Where the home is, whether the user named it, and the output form.
pub struct Ctx {
    pub home: PathBuf,
    pub explicit_home: bool,
    pub json: bool,
}

fn main() -> ExitCode {
    let json = std::env::args_os().any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !json || !e.use_stderr() => e.exit(),
        Err(e) => {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            let message = first.strip_prefix("error: ").unwrap_or(first);
            return report(true, CliError::new(error::USAGE, message));
        }
    };
    // Generated from the clap definitions alone: no home, no runtime (the
    // package build runs these on a machine that has never run pincerd).
    match &cli.command {
        Command::Completions { shell } => {
            return exit(cli.json, completions::completions(*shell));
        }
        Command::Man { dir } => return exit(cli.json, completions::man(dir.as_deref())),
        _ => {}
    }
    let explicit_home =
        cli.home.is_some() || std::env::var_os("PINCER_HOME").is_some_and(|h| !h.is_empty());
    let home = match resolve_home(cli.home) {
        Ok(h) => h,
        Err(e) => return report(cli.json, e),
    };
    let ctx = Ctx {
        home,
        explicit_home,
        json: cli.json,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return report(ctx.json, CliError::failed(format!("cannot start: {e}"))),
    };
    match runtime.block_on(run(&ctx, cli.command)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => report(
            ctx.json,
            rpc::explain(e, &ctx.home, ctx.explicit_home, rpc::During::Command),
        ),
    }
}

/// The exit code of a command that needs neither home nor daemon.
fn exit(json: bool, result: Result<u8, CliError>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => report(json, e),
    }
}

/// Prints an error: one JSON object on stdout under `--json`, else a line
/// on stderr; returns its exit code.
fn report(json: bool, e: CliError) -> ExitCode {
    if json {
        out::json(&json!({"error": e.message, "exit_code": e.code}));
    } else {
        errln!("pincer: {}", e.message);
    }
    ExitCode::from(e.code)
}

async fn run(ctx: &Ctx, command: Command) -> Result<u8, CliError> {
    match command {
        Command::Init => init::run(ctx).await,
        Command::Status => status::run(ctx).await,
        Command::Stop => stop::run(ctx).await,
        Command::Chat { target } => chat::interactive(ctx, target).await,
        Command::Send { target, text } => chat::send(ctx, target, text).await,
        Command::Abort { target } => abort::run(ctx, target).await,
        Command::Sessions { command } => sessions::run(ctx, command).await,
        Command::Config {
            command: ConfigCommand::Check,
        } => config::check(ctx),
        Command::Config {
            command: ConfigCommand::Reload,
        } => config::reload(ctx).await,
        Command::Logs { follow, lines } => logs::run(ctx, follow, lines).await,
        Command::Tools { command } => tools::run(ctx, command).await,
        Command::Approvals { command } => approvals::run(ctx, command).await,
        Command::Channels { command } => channels::run(ctx, command).await,
        Command::Pairing { command } => channels::pairing(ctx, command).await,
        Command::Memory { command } => memory::run(ctx, command).await,
        Command::Models {
            command: ModelsCommand::Fetch { dir, from },
        } => models::fetch(ctx, dir, from),
        Command::Skills {
            command: SkillsCommand::List { agent },
        } => skills::list(ctx, agent.agent).await,
        Command::Workflows { command } => workflows::run(ctx, command).await,
        Command::Schedules { command } => schedules::run(ctx, command).await,
        Command::Doctor { fix } => doctor::run(ctx, fix).await,
        Command::Completions { shell } => completions::completions(shell),
        Command::Man { dir } => completions::man(dir.as_deref()),
        Command::Service { command } => service::run(ctx, command).await,
    }
}

fn resolve_home(explicit: Option<PathBuf>) -> Result<PathBuf, CliError> {
    let home = match explicit {
        Some(p) => p,
        None => match std::env::var_os("PINCER_HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".pincer"))
                .ok_or_else(|| {
                    CliError::failed("cannot find the home directory: set HOME or PINCER_HOME")
                })?,
        },
    };
    if home.is_absolute() {
        Ok(home)
    } else {
        std::env::current_dir()
            .map(|d| d.join(home))
            .map_err(|e| CliError::failed(format!("cannot resolve the home path: {e}")))
    }
}
