//! Tools: `[tools]` into [`ToolSettings`] (limits, loop detection, hooks,
//! time limits, `web_fetch`, sub-agents) and the policy layers into
//! [`PolicySettings`], every pattern checked by [`super::tool_names`].

use std::collections::BTreeMap;
use std::time::Duration;

use toml::Spanned;

use super::file::{ConfigFile, LayerSection};
use super::locate::{ConfigError, Locator, header_span, join_keys};
use super::tool_names::ToolNames;
use super::{
    ExecSandboxMode, ExecSandboxSettings, FsSettings, HookEvent, HookSettings, LoopSettings,
    PolicySettings, SandboxMode, SubagentLimits, ToolLayer, ToolSettings, WebFetchSettings,
};
use crate::home::expand_tilde;

/// Characters a tool call's arguments may have by default: room for a
/// large file in one `write` (about 50k tokens), far below what would make
/// a transcript line unreadable over the API.
pub const DEFAULT_MAX_ARGUMENT_CHARS: usize = 200_000;

fn loop_settings(loc: &Locator<'_>, file: &ConfigFile) -> Result<LoopSettings, ConfigError> {
    let l = &file.tools.loop_detection;
    let s = LoopSettings {
        enabled: l.enabled.unwrap_or(true),
        window: l.window.as_ref().map_or(30, |w| *w.get_ref()),
        warning: l.warning.unwrap_or(10),
        critical: l.critical.unwrap_or(20),
        breaker: l.breaker.unwrap_or(30),
    };
    if !(1 <= s.warning
        && s.warning <= s.critical
        && s.critical <= s.breaker
        && s.breaker <= s.window)
    {
        let span = l
            .window
            .as_ref()
            .map(|w| w.span())
            .unwrap_or_else(|| header_span(loc.text, "tools.loop_detection"));
        return Err(loc.at(
            span,
            format!(
                "[tools.loop_detection] needs 1 <= warning <= critical <= breaker <= window (got {}, {}, {}, {})",
                s.warning, s.critical, s.breaker, s.window
            ),
        ));
    }
    Ok(s)
}

pub(super) fn tool_settings(
    loc: &Locator<'_>,
    names: &ToolNames,
    file: &ConfigFile,
) -> Result<ToolSettings, ConfigError> {
    Ok(ToolSettings {
        exec_timeout: Duration::from_secs(file.tools.exec.timeout_s.unwrap_or(120)),
        exec_max_output_chars: file.tools.exec.max_output_chars.unwrap_or(30_000),
        exec_sandbox: exec_sandbox(loc, file)?,
        max_result_chars: file.tools.max_result_chars.unwrap_or(40_000),
        max_argument_chars: file
            .tools
            .max_argument_chars
            .unwrap_or(DEFAULT_MAX_ARGUMENT_CHARS),
        fs: FsSettings {
            allow_hard_links: file.tools.fs.allow_hard_links.unwrap_or(false),
            edit_workflows: file.tools.fs.edit_workflows.unwrap_or(false),
        },
        max_rollbacks: file.tools.rollback.max_consecutive.unwrap_or(5),
        refusal_keywords: file.tools.rollback.refusal_keywords.clone(),
        loops: loop_settings(loc, file)?,
        hooks: hook_settings(loc, names, file)?,
        timeouts: file
            .tools
            .timeouts
            .iter()
            .map(|(k, v)| (k.clone(), Duration::from_secs(*v)))
            .collect(),
        default_timeout: Duration::from_secs(file.tools.default_timeout_s.unwrap_or(600)),
        approval_timeout: Duration::from_secs(file.tools.approval_timeout_s.unwrap_or(600)),
        audit_retention: match file.tools.audit_days.unwrap_or(90) {
            0 => None,
            days => Some(Duration::from_secs(u64::from(days) * 24 * 60 * 60)),
        },
        subagents: SubagentLimits {
            max_depth: file.tools.subagents.max_depth.unwrap_or(1),
            max_children: file.tools.subagents.max_children.unwrap_or(5),
        },
        web_fetch: WebFetchSettings {
            allow_private: file.tools.web_fetch.allow_private.unwrap_or(false),
            allow_hosts: file.tools.web_fetch.allow_hosts.clone(),
            use_env_proxy: file.tools.web_fetch.use_env_proxy.unwrap_or(false),
        },
    })
}

fn exec_sandbox(loc: &Locator<'_>, file: &ConfigFile) -> Result<ExecSandboxSettings, ConfigError> {
    let exec = &file.tools.exec;
    let mode = match &exec.sandbox {
        None => ExecSandboxMode::Auto,
        Some(m) => match m.get_ref().as_str() {
            "auto" => ExecSandboxMode::Auto,
            "required" => ExecSandboxMode::Required,
            "off" => ExecSandboxMode::Off,
            other => {
                return Err(loc.at(
                    m.span(),
                    format!("unknown sandbox mode `{other}`: use auto, required or off"),
                ));
            }
        },
    };
    let paths = |key: &str, list: &[String]| {
        list.iter()
            .map(|p| {
                let path = expand_tilde(p);
                if path.is_absolute() {
                    Ok(path)
                } else {
                    Err(loc.at(
                        header_span(loc.text, "tools.exec"),
                        format!("[tools.exec] {key}: `{p}` is not an absolute path"),
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(ExecSandboxSettings {
        mode,
        network: exec.network.unwrap_or(true),
        read_paths: paths("read_paths", &exec.read_paths)?,
        write_paths: paths("write_paths", &exec.write_paths)?,
    })
}

fn hook_settings(
    loc: &Locator<'_>,
    names: &ToolNames,
    file: &ConfigFile,
) -> Result<Vec<HookSettings>, ConfigError> {
    let mut out = Vec::new();
    for (n, h) in file.tools.hooks.iter().enumerate() {
        let event = match h.event.get_ref().as_str() {
            "before_tool_call" => HookEvent::BeforeToolCall,
            "after_tool_call" => HookEvent::AfterToolCall,
            other => {
                return Err(loc.at(
                    h.event.span(),
                    format!(
                        "unknown hook event `{other}`: use before_tool_call or after_tool_call"
                    ),
                ));
            }
        };
        if h.command.get_ref().is_empty() || h.command.get_ref()[0].trim().is_empty() {
            return Err(loc.at(
                h.command.span(),
                "a hook needs a command: [\"program\", \"arg\", …]",
            ));
        }
        for pattern in &h.tools {
            names.check(loc, pattern.get_ref(), pattern.span())?;
        }
        let program = expand_tilde(&h.command.get_ref()[0]);
        let mut command = h.command.get_ref().clone();
        command[0] = program.to_string_lossy().into_owned();
        out.push(HookSettings {
            name: h.name.clone().unwrap_or_else(|| format!("hooks[{n}]")),
            event,
            command,
            tools: h.tools.iter().map(|t| t.get_ref().clone()).collect(),
            timeout: Duration::from_secs(h.timeout_s.unwrap_or(10)),
            sandbox: h.sandbox,
        });
    }
    Ok(out)
}

const PROFILES: &[&str] = &["minimal", "messaging", "coding", "full"];

/// A policy layer, its profile and patterns checked.
pub(super) fn layer(
    loc: &Locator<'_>,
    names: &ToolNames,
    section: &LayerSection,
) -> Result<ToolLayer, ConfigError> {
    if let Some(ask) = section.ask.first() {
        return Err(loc.at(
            ask.span(),
            "`ask` is set per agent: [agents.<id>.tools] ask = [\"exec\"]",
        ));
    }
    patterns_and_profile(
        loc,
        names,
        section.profile.as_ref(),
        &section.allow,
        &section.deny,
    )
}

pub(super) fn patterns_and_profile(
    loc: &Locator<'_>,
    names: &ToolNames,
    profile: Option<&Spanned<String>>,
    allow: &[Spanned<String>],
    deny: &[Spanned<String>],
) -> Result<ToolLayer, ConfigError> {
    if let Some(profile) = profile
        && !PROFILES.contains(&profile.get_ref().as_str())
    {
        return Err(loc.at(
            profile.span(),
            format!(
                "unknown tool profile `{}`: use minimal, messaging, coding or full",
                profile.get_ref()
            ),
        ));
    }
    for pattern in allow.iter().chain(deny) {
        names.check(loc, pattern.get_ref(), pattern.span())?;
    }
    Ok(ToolLayer {
        profile: profile.map(|p| p.get_ref().clone()),
        allow: allow.iter().map(|p| p.get_ref().clone()).collect(),
        deny: deny.iter().map(|p| p.get_ref().clone()).collect(),
    })
}

pub(super) fn policy_settings(
    loc: &Locator<'_>,
    names: &ToolNames,
    file: &ConfigFile,
) -> Result<PolicySettings, ConfigError> {
    let t = &file.tools;
    let mut by_provider = BTreeMap::new();
    for (key, section) in &t.by_provider {
        let provider = key.split('/').next().unwrap_or_default();
        if !file.providers.contains_key(provider) && !file.providers.is_empty() {
            return Err(loc.at(
                header_span(loc.text, &format!("tools.by_provider.{key}")),
                format!(
                    "[tools.by_provider.\"{key}\"]: no provider `{provider}` is defined (providers: {})",
                    join_keys(&file.providers)
                ),
            ));
        }
        let layer = layer(loc, names, section)?;
        if let Some(p) = &section.profile {
            return Err(loc.at(
                p.span(),
                "a per-provider layer can only narrow (allow/deny); set profiles on [tools] or an agent",
            ));
        }
        by_provider.insert(key.clone(), layer);
    }
    let sandbox_mode = match t.sandbox.mode.as_ref() {
        None => SandboxMode::Off,
        Some(m) => match m.get_ref().as_str() {
            "off" => SandboxMode::Off,
            "non-main" => SandboxMode::NonMain,
            "all" => SandboxMode::All,
            other => {
                return Err(loc.at(
                    m.span(),
                    format!("unknown sandbox mode `{other}`: use off, non-main or all"),
                ));
            }
        },
    };
    Ok(PolicySettings {
        global: patterns_and_profile(loc, names, t.profile.as_ref(), &t.allow, &t.deny)?,
        by_provider,
        sandbox_mode,
        sandbox: patterns_and_profile(loc, names, None, &t.sandbox.allow, &t.sandbox.deny)?,
        subagents: patterns_and_profile(loc, names, None, &t.subagents.allow, &t.subagents.deny)?,
    })
}
