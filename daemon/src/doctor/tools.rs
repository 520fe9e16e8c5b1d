//! The tool names the config's policy lists use that only an MCP server
//! or a plugin can confirm, against what the servers list.

use super::{Finding, Level, finding};
use crate::config::Config;
use crate::home::Home;

/// The tool names the config's policy lists use that only a server can
/// confirm (`Config::tool_names_to_check`: `mcp__<server>__<tool>`, and a
/// plugin's tool), each compared with what the servers list: a warning for
/// a name none lists, since its entry then matches nothing. `running` is
/// the daemon's own servers, asked when they run the same config;
/// otherwise (offline, or a changed `[mcp]`) the servers are started for
/// the check and stopped after. Nothing starts when there is nothing to
/// check.
pub async fn check_tool_names(
    home: &Home,
    config: &Config,
    running: Option<(&Config, &crate::tools::mcp::McpManager)>,
) -> Vec<Finding> {
    if config.tool_names_to_check.is_empty() {
        return Vec::new();
    }
    let listings = match running {
        Some((rc, mcp))
            if rc.mcp == config.mcp && rc.tools.exec_sandbox == config.tools.exec_sandbox =>
        {
            mcp.listings().await
        }
        _ => {
            let mcp = crate::tools::mcp::McpManager::new(
                config.mcp.clone(),
                std::sync::Arc::new(crate::sandbox::Sandbox::new(home)),
                config.tools.exec_sandbox.clone(),
            );
            let listings = mcp.listings().await;
            mcp.stop();
            listings
        }
    };
    tool_name_findings(&config.tool_names_to_check, &listings)
}

/// The warnings for names no listing has (see [`check_tool_names`]).
fn tool_name_findings(
    names: &[crate::config::tool_names::NameToCheck],
    listings: &[crate::tools::mcp::Listing],
) -> Vec<Finding> {
    let has = |tools: &[String], name: &str| tools.iter().any(|t| t.eq_ignore_ascii_case(name));
    let mut out = Vec::new();
    for n in names {
        let (name, place) = (&n.name, &n.place);
        // The listings that could hold the name: its server's, or every
        // plugin's for a plugin's tool.
        let from: Vec<&crate::tools::mcp::Listing> = listings
            .iter()
            .filter(|l| match &n.server {
                Some(server) => l.plugin.is_none() && l.server.eq_ignore_ascii_case(server),
                None => l.plugin.is_some(),
            })
            .collect();
        // A server with no listing is a disabled one (`enabled = false`):
        // its tools are off on purpose, nothing to warn about.
        if from.is_empty()
            || from
                .iter()
                .any(|l| l.tools.as_ref().is_ok_and(|tools| has(tools, name)))
        {
            continue;
        }
        let failed: Vec<String> = from
            .iter()
            .filter_map(|l| l.tools.as_ref().err())
            .map(ToString::to_string)
            .collect();
        let mut listed: Vec<String> = from
            .iter()
            .filter_map(|l| l.tools.as_ref().ok())
            .flatten()
            .cloned()
            .collect();
        if n.server.is_none() {
            // A plugin's tool may as well be a misspelled core tool.
            listed.extend(
                crate::config::tool_names::CORE_TOOL_NAMES
                    .iter()
                    .map(|t| t.to_string()),
            );
        }
        let message = if !failed.is_empty() {
            format!(
                "{place}: `{name}` could not be checked ({}); until it is, the entry may match nothing",
                failed.join("; ")
            )
        } else {
            let lower: Vec<String> = listed.iter().map(|t| t.to_lowercase()).collect();
            let near = crate::config::locate::nearest(&name.to_lowercase(), &lower)
                .and_then(|best| listed.iter().find(|t| t.to_lowercase() == best))
                .map(|best| format!(" (did you mean `{best}`?)"))
                .unwrap_or_default();
            match &n.server {
                Some(server) => format!(
                    "{place}: the MCP server `{server}` lists no tool `{name}`{near}, so the entry matches nothing"
                ),
                None => format!(
                    "{place}: `{name}` is no core tool and no plugin lists it{near}, so the entry matches nothing"
                ),
            }
        };
        out.push(finding(Level::Warn, "tools", message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tool_names::NameToCheck;
    use crate::tools::mcp::{Listing, McpError};

    fn name(name: &str, server: Option<&str>) -> NameToCheck {
        NameToCheck {
            name: name.into(),
            server: server.map(str::to_string),
            place: "/h/config.toml:3:9: key `tools.deny`".into(),
        }
    }

    fn listing(server: &str, plugin: bool, tools: Result<&[&str], McpError>) -> Listing {
        Listing {
            server: server.into(),
            plugin: plugin.then(|| server.to_string()),
            tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn a_name_no_server_lists_is_a_warning_with_the_nearest_listed_name() {
        let listings = [
            listing(
                "time",
                false,
                Ok(&["mcp__time__get_current_time", "mcp__time__convert_time"]),
            ),
            listing("weather", true, Ok(&["forecast"])),
            listing(
                "down",
                false,
                Err(McpError::Timeout {
                    server: "down".into(),
                    secs: 30,
                }),
            ),
        ];
        let findings = tool_name_findings(
            &[
                name("mcp__time__get_current_time", Some("time")),
                name("MCP__TIME__CONVERT_TIME", Some("time")),
                name("mcp__time__get_current_tim", Some("time")),
                name("forecast", None),
                name("forecst", None),
                name("exce", None),
                name("mcp__down__x", Some("down")),
                name("mcp__off__x", Some("off")),
            ],
            &listings,
        );
        let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
        assert!(findings.iter().all(|f| f.level == Level::Warn));
        assert_eq!(
            messages,
            [
                "/h/config.toml:3:9: key `tools.deny`: the MCP server `time` lists no tool `mcp__time__get_current_tim` (did you mean `mcp__time__get_current_time`?), so the entry matches nothing",
                "/h/config.toml:3:9: key `tools.deny`: `forecst` is no core tool and no plugin lists it (did you mean `forecast`?), so the entry matches nothing",
                "/h/config.toml:3:9: key `tools.deny`: `exce` is no core tool and no plugin lists it (did you mean `exec`?), so the entry matches nothing",
                "/h/config.toml:3:9: key `tools.deny`: `mcp__down__x` could not be checked (the MCP server `down` did not start within 30 s); until it is, the entry may match nothing",
            ]
        );
    }
}
