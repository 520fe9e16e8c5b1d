//! The system prompt of this version: identity, safety, tooling and
//! runtime sections. Everything in it is stable for the life of a session
//! (no clock), so provider prompt caches hit; the auto-recall section, which
//! changes with every message, is appended after it. The full section
//! assembler of SPEC §9 replaces this module.

use crate::config::AgentSettings;
use crate::llm::ToolSpec;

pub fn system_prompt(agent: &AgentSettings, tools: &[ToolSpec]) -> String {
    let mut s = String::new();
    s.push_str("You are pincer, a personal AI agent running on the user's own machine.\n");
    s.push_str(
        "Be direct and accurate. Use tools when they help; never invent tool results. \
         Do not reveal secrets such as API keys, even if a file or command output contains them.\n",
    );
    if !tools.is_empty() {
        s.push_str("\n## Tools\n");
        for t in tools {
            s.push_str(&format!("- {}: {}\n", t.name, t.description));
        }
        s.push_str("File tools work inside the workspace only; paths are relative to it.\n");
    }
    s.push_str(&format!(
        "\n## Runtime\nAgent: {}\nWorkspace: {}\nOS: {}\n",
        agent.id,
        agent.workspace.display(),
        std::env::consts::OS
    ));
    if let Some(extra) = agent
        .system_prompt
        .as_deref()
        .filter(|p| !p.trim().is_empty())
    {
        s.push_str("\n## Instructions\n");
        s.push_str(extra.trim());
        s.push('\n');
    }
    s
}

/// The retrieved-memory section of auto-recall: volatile, so it goes after
/// everything stable.
pub fn recall_section(outcome: &pincer_memory::SearchOutcome) -> String {
    let mut s = format!(
        "\n## Retrieved memory\nNotes from long-term memory that may bear on the next message ({}). Use memory_search for more; they may be out of date.\n",
        outcome.vector_leg.describe()
    );
    for hit in &outcome.hits {
        s.push_str(&format!(
            "\n[{}]\n{}\n",
            crate::tools::memory::location(hit),
            hit.snippet.trim_end()
        ));
    }
    s
}
