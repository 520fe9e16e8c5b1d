//! `pincer init`: a commented starter `config.toml` and the bootstrap files
//! of the default workspace. Existing files are never overwritten. The
//! config names the provider and model pincerd uses now: the running
//! daemon's (from `Daemon.Status`), else what its zero-config would pick
//! from this environment (`zeroconf.rs`), so `init` + `config reload` never
//! turns a working setup into a different one.

use std::path::{Path, PathBuf};

use pincer_proto::v1 as pb;

use crate::Ctx;
use crate::error::CliError;
use crate::out::outln;
use crate::rpc;
use crate::zeroconf::{self, Found};

const CONFIG: &str = r#"# pincer configuration. Reference: README.md ("Configuration").
# Secrets are never written here: name an environment variable
# (api_key_env) or a file in PINCER_HOME/secrets/ (api_key_file).
# After editing: `pincer config check`, then `pincer config reload`.

[daemon]
max_concurrent_turns = 8          # turns running at once, across sessions
# log_level = "info"              # or an EnvFilter such as "pincer_daemon=debug"

{provider}
# [providers.anthropic]
# kind = "anthropic"
# api_key_env = "ANTHROPIC_API_KEY"

# [providers.local]               # e.g. `ollama serve` or `llama-server --port 8080`
# kind = "openai"
# base_url = "http://127.0.0.1:11434/v1"

{model}# fallbacks = ["anthropic/claude-sonnet-4-5"]

[agents.main]                     # the CLI's default agent
model = "default"
# max_model_calls = 40            # per turn; then one last call without tools
# max_turn_seconds = 1800
# prompt_mode = "auto"            # full | minimal | none; auto = minimal for windows <= 16k
# tools = { allow = [], deny = ["exec"] }

# [context]                       # prompt caps and compaction (README "Context")
# keep_tool_results = 5
# reserve_tokens = 20000          # compact when the prompt nears the window
# compaction_model = "default"

[tools.exec]
timeout_s = 120
max_output_chars = 30000
"#;

const AGENTS_MD: &str = "# AGENTS.md

How the agent works with you. pincer puts this file into every session's
prompt (sub-agents and small models get it too), so keep it short and true.

## Working here
- Answer in the language I write in. Be brief; lead with the answer.
- Before changing a file, read it. After changing code, run its tests.
- Ask before deleting anything or running something that cannot be undone.

## Memory
- When you learn something lasting about me or my work, add it to MEMORY.md.
- Day-to-day notes go to memory/YYYY-MM-DD.md.
";

const SOUL_MD: &str = "# SOUL.md

Who the agent is: its voice and values, in a few lines.

- Calm, direct and honest; says \"I don't know\" when it doesn't.
- Prefers doing the work to describing it.
";

const IDENTITY_MD: &str = "# IDENTITY.md

Name: pincer
What I am: your personal agent, running on your own machine.
";

const TOOLS_MD: &str = "# TOOLS.md

Notes on the tools and machines the agent may use: hosts, paths, commands
that work here, things to avoid. Example:

- Projects live in ~/src; run tests with `make test`.
";

const USER_MD: &str = "# USER.md

About you: name, time zone, what you work on, how you like answers.
";

const MEMORY_MD: &str = "# MEMORY.md

Long-term notes the agent keeps about you and your work. Only your own
sessions see this file, never group chats.
";

const SKILL_MD: &str = "---
name: write-skill
description: How to add a new skill to this workspace; read it when asked to teach the agent a repeatable task.
---
# Writing a skill

A skill is a folder `skills/<name>/` holding `SKILL.md`. The file starts with
a front matter block giving `name` and a one-line `description` that says
when to use it; the prompt lists only these, and the agent reads the whole
file when a task matches.

1. Pick a short name and create `skills/<name>/SKILL.md`.
2. Write the front matter, then the steps, as plainly as for a colleague.
3. Check it with `pincer skills list`.
";

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
    let found = status
        .as_ref()
        .and_then(from_status)
        .or_else(zeroconf::detect);
    let config = CONFIG
        .replace("{provider}", &provider_section(found.as_ref()))
        .replace("{model}", &model_section(found.as_ref()));
    let wrote_config = write_files(&ctx.home, &config)?;
    let config_path = ctx.home.join("config.toml");
    if status.is_some() && wrote_config {
        outln!(
            "next: pincerd is running with these settings already; run `pincer config reload` so it reads {} from now on",
            config_path.display()
        );
    } else if status.is_some() {
        outln!(
            "next: after editing {}, run `pincer config reload`",
            config_path.display()
        );
    } else {
        outln!(
            "next: edit {} if needed, then `{}` and `pincer chat`",
            config_path.display(),
            rpc::start_command(&ctx.home, ctx.explicit_home)
        );
    }
    Ok(0)
}

/// Writes every starter file that does not exist yet; whether config.toml was written.
fn write_files(home: &Path, config: &str) -> Result<bool, CliError> {
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
    let mut wrote_config = false;
    for (i, (path, content)) in files.into_iter().enumerate() {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, content.as_bytes()).map_err(|e| {
                    CliError::failed(format!("cannot write {}: {e}", path.display()))
                })?;
                outln!("wrote {}", path.display());
                wrote_config |= i == 0;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                outln!("kept  {} (already exists)", path.display());
            }
            Err(e) => {
                return Err(CliError::failed(format!(
                    "cannot create {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(wrote_config)
}
