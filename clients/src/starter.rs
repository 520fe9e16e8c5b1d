//! The texts `pincer init` writes: the commented config.toml (its
//! `{provider}` and `{model}` lines are filled by `init.rs`), the six
//! bootstrap files of the default workspace and a starter skill.

pub const CONFIG: &str = r#"# pincer configuration. Every key: the guide's configuration reference
# (docs/src/config-reference.md in pincer's source).
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

# [context]                       # prompt caps and compaction (the guide: "Context")
# keep_tool_results = 5
# reserve_tokens = 20000          # compact when the prompt nears the window
# compaction_model = "default"

[tools.exec]
timeout_s = 120
max_output_chars = 30000
"#;

pub const AGENTS_MD: &str = "# AGENTS.md

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

pub const SOUL_MD: &str = "# SOUL.md

Who the agent is: its voice and values, in a few lines.

- Calm, direct and honest; says \"I don't know\" when it doesn't.
- Prefers doing the work to describing it.
";

pub const IDENTITY_MD: &str = "# IDENTITY.md

Name: pincer
What I am: your personal agent, running on your own machine.
";

pub const TOOLS_MD: &str = "# TOOLS.md

Notes on the tools and machines the agent may use: hosts, paths, commands
that work here, things to avoid. Example:

- Projects live in ~/src; run tests with `make test`.
";

pub const USER_MD: &str = "# USER.md

About you: name, time zone, what you work on, how you like answers.
";

pub const MEMORY_MD: &str = "# MEMORY.md

Long-term notes the agent keeps about you and your work. Only your own
sessions see this file, never group chats.
";

pub const SKILL_MD: &str = "---
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
