//! `pincer init`: a commented starter `config.toml` and the bootstrap files
//! of the default workspace. Existing files are never overwritten.

use std::path::Path;

use crate::rpc::CliError;

const CONFIG: &str = r#"# pincer configuration. Reference: README.md ("Configuration").
# Secrets are never written here: name an environment variable
# (api_key_env) or a file in PINCER_HOME/secrets/ (api_key_file).
# After editing: `pincer config check`, then `pincer config reload`.

[daemon]
max_concurrent_turns = 8          # turns running at once, across sessions
# log_level = "info"              # or an EnvFilter such as "pincer_daemon=debug"

# An OpenAI-compatible provider: OpenAI, OpenRouter, Ollama, llama.cpp, vLLM, LM Studio.
[providers.openai]
kind = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"

# [providers.anthropic]
# kind = "anthropic"
# api_key_env = "ANTHROPIC_API_KEY"

# [providers.local]               # e.g. `ollama serve` or `llama-server --port 8080`
# kind = "openai"
# base_url = "http://127.0.0.1:11434/v1"

[models.default]
provider = "openai"
model = "gpt-4.1-mini"
# context_window = 128000
# fallbacks = ["anthropic/claude-sonnet-4-5"]

[agents.main]                     # the CLI's default agent
model = "default"
# max_model_calls = 40            # per turn; then one last call without tools
# max_turn_seconds = 1800
# tools = { allow = [], deny = ["exec"] }

[tools.exec]
timeout_s = 120
max_output_chars = 30000
"#;

const AGENTS_MD: &str = "# AGENTS.md\n\nHow this agent works with you. Write down conventions, preferences and\nrules the agent should follow in this workspace.\n";
const SOUL_MD: &str = "# SOUL.md\n\nWho the agent is: its voice and values. Keep it short.\n";
const USER_MD: &str =
    "# USER.md\n\nAbout you: name, time zone, what you work on, how you like answers.\n";
const MEMORY_MD: &str = "# MEMORY.md\n\nLong-term notes the agent keeps about you and your work.\n";

pub fn run(home: &Path) -> Result<u8, CliError> {
    let workspace = home.join("workspace");
    std::fs::create_dir_all(workspace.join("memory"))
        .map_err(|e| CliError::failed(format!("cannot create {}: {e}", workspace.display())))?;
    let files: [(std::path::PathBuf, &str); 5] = [
        (home.join("config.toml"), CONFIG),
        (workspace.join("AGENTS.md"), AGENTS_MD),
        (workspace.join("SOUL.md"), SOUL_MD),
        (workspace.join("USER.md"), USER_MD),
        (workspace.join("MEMORY.md"), MEMORY_MD),
    ];
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
                println!("wrote {}", path.display());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                println!("kept  {} (already exists)", path.display());
            }
            Err(e) => {
                return Err(CliError::failed(format!(
                    "cannot create {}: {e}",
                    path.display()
                )));
            }
        }
    }
    println!(
        "next: edit {} (or export OPENAI_API_KEY), then `pincerd --background` and `pincer chat`",
        home.join("config.toml").display()
    );
    Ok(0)
}
