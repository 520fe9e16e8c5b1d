//! Agents: `[agents.<id>]` into [`AgentSettings`] (models and fallbacks,
//! workspace, limits, prompt mode, compaction models, the agent's tool
//! layer and `ask` list, whose its memory is (`memory = "owner" | "shared"`)
//! and which sessions its session tools see (`visibility = "self" | "tree"
//! | "agent"`)).

use std::time::Duration;

use toml::Spanned;

use super::AgentSettings;
use super::file::AgentSection;
use super::locate::{ConfigError, Locator, header_span};
use super::models::ModelResolver;
use super::tool_names::ToolNames;
use super::tools::patterns_and_profile;
use crate::home::{Home, expand_tilde};

pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(super) fn agent_settings(
    home: &Home,
    loc: &Locator<'_>,
    names: &ToolNames,
    resolver: &ModelResolver<'_>,
    (id, section): (&str, &AgentSection),
    default_compaction_model: Option<&Spanned<String>>,
    no_provider: bool,
) -> Result<AgentSettings, ConfigError> {
    let models = match &section.model {
        Some(reference) => resolver.chain(reference.get_ref(), Some(reference.span()))?,
        // Without any provider the turn reports `provider_problem` instead.
        None if no_provider => Vec::new(),
        None => match resolver.chain("default", None) {
            Ok(chain) => chain,
            Err(_) => {
                return Err(loc.at(
                    header_span(loc.text, &format!("agents.{id}")),
                    format!(
                        "agent `{id}` has no `model` and there is no [models.default]; add `model = \"...\"`"
                    ),
                ));
            }
        },
    };
    if let Some(n) = &section.max_model_calls
        && *n.get_ref() == 0
    {
        return Err(loc.at(n.span(), "must be at least 1"));
    }
    let tools = patterns_and_profile(
        loc,
        names,
        section.tools.profile.as_ref(),
        &section.tools.allow,
        &section.tools.deny,
    )?;
    for pattern in &section.tools.ask {
        names.check(loc, pattern.get_ref(), pattern.span())?;
    }
    let ask = section
        .tools
        .ask
        .iter()
        .map(|p| p.get_ref().clone())
        .collect();
    let workspace = match &section.workspace {
        Some(w) => {
            let p = expand_tilde(w);
            if p.is_absolute() {
                p
            } else {
                home.root().join(p)
            }
        }
        None if id == "main" => home.default_workspace(),
        None => home.agent_workspace(id),
    };
    Ok(AgentSettings {
        id: id.to_string(),
        models,
        workspace,
        max_model_calls: section
            .max_model_calls
            .as_ref()
            .map_or(40, |n| *n.get_ref()),
        max_turn_duration: Duration::from_secs(section.max_turn_seconds.unwrap_or(30 * 60)),
        system_prompt: section.system_prompt.clone(),
        prompt_mode: super::context::prompt_mode(loc, section.prompt_mode.as_ref())?,
        compaction_models: match section
            .compaction_model
            .as_ref()
            .or(default_compaction_model)
        {
            Some(reference) => resolver.chain(reference.get_ref(), Some(reference.span()))?,
            None => Vec::new(),
        },
        tools,
        ask,
        memory: match &section.memory {
            None => super::MemoryScope::Owner,
            Some(m) => match m.get_ref().trim() {
                "owner" => super::MemoryScope::Owner,
                "shared" => super::MemoryScope::Shared,
                other => {
                    return Err(loc.at(
                        m.span(),
                        format!(
                            "unknown memory `{other}`: use owner (only the owner reads the agent's memory) or shared (everyone who talks to the agent does)"
                        ),
                    ));
                }
            },
        },
        scheduled_runs_may_schedule: section.scheduled_runs_may_schedule.unwrap_or(false),
        visibility: match &section.visibility {
            None => None,
            Some(v) => Some(match v.get_ref().trim() {
                "self" => super::Visibility::Own,
                "tree" => super::Visibility::Tree,
                "agent" => super::Visibility::Agent,
                other => {
                    return Err(loc.at(
                        v.span(),
                        format!(
                            "unknown visibility `{other}`: use self (the calling session), tree (it and its sub-agents) or agent (every session of the agent; the owner only)"
                        ),
                    ));
                }
            }),
        },
    })
}
