//! `pincer init`: a commented starter `config.toml` and the bootstrap files
//! of the default workspace. Existing files are never overwritten. The
//! config names the provider and model pincerd uses now: the running
//! daemon's (from `Daemon.Status`), else what its zero-config would pick
//! from this environment (`pincerd zero-config`), so `init` + `config reload` never
//! turns a working setup into a different one.

use std::path::{Path, PathBuf};

use pincer_proto::v1 as pb;

use crate::Ctx;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::rpc;
use crate::starter::{
    AGENTS_MD, CONFIG, IDENTITY_MD, MEMORY_MD, SKILL_MD, SOUL_MD, TOOLS_MD, USER_MD,
};
/// A provider and model, as `init` writes them.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Found {
    id: String,
    kind: String,
    base_url: String,
    /// Empty: no key (a local server).
    api_key_env: String,
    tool_format: String,
    model: String,
    /// 0: let pincerd pick by model family.
    context_window: u64,
}

/// What pincerd's zero-config would pick in this environment (`pincerd
/// zero-config`: the daemon's own rules, not a copy of them).
fn zero_config(home: &std::path::Path) -> Option<Found> {
    let out = crate::pincerd::run(home, &["zero-config"]).ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The provider lines: what pincerd uses, or OpenAI's defaults with a note.
fn provider_section(found: Option<&Found>) -> String {
    let Some(f) = found else {
        return "# No provider was found in this environment: set OPENAI_API_KEY, or edit this.\n\
                # An OpenAI-compatible provider: OpenAI, OpenRouter, Ollama, llama.cpp, vLLM, LM Studio.\n\
                [providers.openai]\nkind = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\n\
                api_key_env = \"OPENAI_API_KEY\"\n"
            .to_string();
    };
    let mut s = format!(
        "# The provider pincerd was using when `pincer init` ran.\n[providers.{}]\nkind = {}\nbase_url = {}\n",
        f.id,
        toml_string(&f.kind),
        toml_string(&f.base_url)
    );
    if f.api_key_env.is_empty() {
        s.push_str("# no api_key_env: a local server without a key\n");
    } else {
        s.push_str(&format!("api_key_env = {}\n", toml_string(&f.api_key_env)));
    }
    if !f.tool_format.is_empty() && f.tool_format != "native" {
        s.push_str(&format!("tool_format = {}\n", toml_string(&f.tool_format)));
    }
    s
}

fn model_section(found: Option<&Found>) -> String {
    let (provider, model) = found.map_or(("openai", "gpt-4.1-mini"), |f| (&f.id, &f.model));
    let window = match found.map_or(0, |f| f.context_window) {
        0 => "# context_window = 128000\n".to_string(),
        w => format!("context_window = {w}\n"),
    };
    format!(
        "[models.default]\nprovider = {}\nmodel = {}\n{window}",
        toml_string(provider),
        toml_string(model)
    )
}

/// A TOML basic string (JSON's escapes are valid TOML).
fn toml_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The provider of the running daemon's default agent (`main`, else the first).
fn from_status(s: &pb::StatusResponse) -> Option<Found> {
    let agent = s
        .agents
        .iter()
        .find(|a| a.id == "main")
        .or_else(|| s.agents.first())?;
    let p = s.providers.iter().find(|p| p.id == agent.provider)?;
    if agent.model.is_empty() {
        return None;
    }
    Some(Found {
        id: p.id.clone(),
        kind: p.kind.clone(),
        base_url: p.base_url.clone(),
        api_key_env: p.api_key_env.clone(),
        tool_format: p.tool_format.clone(),
        model: agent.model.clone(),
        context_window: agent.context_window,
    })
}

pub async fn run(ctx: &Ctx) -> Result<u8, CliError> {
    let status = match rpc::connect(&ctx.home, ctx.explicit_home).await {
        Ok(mut c) => c
            .daemon
            .status(pb::StatusRequest {})
            .await
            .ok()
            .map(|r| r.into_inner()),
        Err(_) => None,
    };
    let in_use = status.as_ref().and_then(from_status);
    let from_daemon = in_use.is_some();
    let found = in_use.or_else(|| zero_config(&ctx.home));
    let config = CONFIG
        .replace("{provider}", &provider_section(found.as_ref()))
        .replace("{model}", &model_section(found.as_ref()));
    let files = write_files(&ctx.home, &config)?;
    let config_path = ctx.home.join("config.toml");
    let wrote_config = files.wrote.contains(&config_path);
    let next = if from_daemon && wrote_config {
        format!(
            "pincerd is running with this provider and model already; run `pincer config reload` so it reads {} from now on",
            config_path.display()
        )
    } else if status.is_some() {
        format!(
            "after editing {}, run `pincer config reload`",
            config_path.display()
        )
    } else {
        format!(
            "edit {} if needed, then `{}` and `pincer chat`",
            config_path.display(),
            rpc::start_command(&ctx.home, ctx.explicit_home)
        )
    };
    if ctx.json {
        out::json(&serde_json::json!({
            "wrote": files.wrote, "kept": files.kept,
            "provider": found.as_ref().map(|f| &f.id), "model": found.as_ref().map(|f| &f.model),
            "daemon_running": status.is_some(), "next": next,
        }));
        return Ok(0);
    }
    for path in &files.wrote {
        outln!("wrote {}", path.display());
    }
    for path in &files.kept {
        outln!("kept  {} (already exists)", path.display());
    }
    outln!("next: {next}");
    Ok(0)
}

/// What `write_files` did.
struct Written {
    wrote: Vec<PathBuf>,
    kept: Vec<PathBuf>,
}

/// Writes every starter file that does not exist yet.
fn write_files(home: &Path, config: &str) -> Result<Written, CliError> {
    let workspace = home.join("workspace");
    for dir in [
        workspace.join("memory"),
        workspace.join("skills/write-skill"),
    ] {
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    let files: [(PathBuf, &str); 8] = [
        (home.join("config.toml"), config),
        (workspace.join("AGENTS.md"), AGENTS_MD),
        (workspace.join("SOUL.md"), SOUL_MD),
        (workspace.join("IDENTITY.md"), IDENTITY_MD),
        (workspace.join("TOOLS.md"), TOOLS_MD),
        (workspace.join("USER.md"), USER_MD),
        (workspace.join("MEMORY.md"), MEMORY_MD),
        (workspace.join("skills/write-skill/SKILL.md"), SKILL_MD),
    ];
    let mut written = Written {
        wrote: Vec::new(),
        kept: Vec::new(),
    };
    for (path, content) in files {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, content.as_bytes()).map_err(|e| {
                    CliError::failed(format!("cannot write {}: {e}", path.display()))
                })?;
                written.wrote.push(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                written.kept.push(path);
            }
            Err(e) => {
                return Err(CliError::failed(format!(
                    "cannot create {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(written)
}
