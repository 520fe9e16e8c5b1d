//! The agents' prompts: each one's mode and compaction point, and what
//! the caps cut or a skill gets wrong.

use super::{Finding, Level, finding};
use crate::config::Config;
use crate::llm::windows::ContextWindow;

/// What each agent's prompt will be: its mode and compaction point, and
/// whatever the caps cut or a skill gets wrong, so nothing is lost from
/// the prompt without the owner knowing.
pub fn check_context(config: &Config) -> Vec<Finding> {
    let c = &config.context;
    let mut out = Vec::new();
    if !c.compaction {
        out.push(finding(
            Level::Warn,
            "context",
            "compaction is off ([context] compaction = false): a session that outgrows the model's window fails until it is reset",
        ));
    }
    for agent in config.agents.values() {
        let subject = format!("agent {}", agent.id);
        let window = agent.context_window();
        let mode = agent.prompt_mode.resolve(window, false);
        out.push(finding(
            Level::Ok,
            subject.clone(),
            format!(
                "prompt mode {}, a {window}-token window, compaction past {} tokens",
                mode.as_str(),
                window.saturating_sub(c.reserve_for(window))
            ),
        ));
        let total = c.bootstrap_total_for(window);
        let caps = crate::context::bootstrap::Caps {
            file_chars: c.bootstrap_file_chars,
            total_chars: total,
        };
        let files = crate::context::bootstrap::load(
            &agent.workspace,
            &crate::context::bootstrap::FILES,
            caps,
        );
        for (name, t) in files.iter().filter_map(|f| Some((f.name, f.trimmed?))) {
            out.push(finding(
                Level::Warn,
                subject.clone(),
                format!(
                    "{name} has {} characters; the prompt keeps {} of them (the first 70 % and the last 20 %): shorten it, or raise [context] bootstrap_max_chars / bootstrap_total_max_chars (all files together get {total})",
                    t.from, t.cap
                ),
            ));
        }
        for skill in crate::context::skills::discover(&agent.workspace) {
            if let Some(problem) = skill.problem {
                out.push(finding(
                    Level::Warn,
                    subject.clone(),
                    format!("skill {}: {problem}", skill.path),
                ));
            }
        }
    }
    out
}
