//! MCP server settings (SPEC §8.1): what `[mcp.<name>]` and a plugin's
//! `[server]` say about reaching a server, and the loader of `[mcp.*]`. The
//! client that starts and talks to servers is `tools::mcp`; it reads these,
//! so the config never needs it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::agents::valid_id;
use super::file::ConfigFile;
use super::locate::{ConfigError, Locator};
use super::url::check_http_url;
use crate::home::{Home, expand_tilde};

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        /// Runs in the exec sandbox (`sandbox = true`), writing only in
        /// `cwd`.
        sandbox: bool,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One configured server (`[mcp.<name>]` or a plugin's).
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: Transport,
    pub startup_timeout: Duration,
    /// A plugin's server: its tools belong to the plugin and keep their own
    /// names (a `[mcp.*]` server's are `mcp__<server>__<tool>`).
    pub plugin: Option<String>,
    /// Tool names (as the server calls them) offered only when allowlisted.
    pub optional: Vec<String>,
}

pub(super) fn mcp_servers(
    loc: &Locator<'_>,
    home: &Home,
    file: &ConfigFile,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    let mut out = Vec::new();
    for (name, section) in &file.mcp {
        let span = section.span();
        let s = section.get_ref();
        if !valid_id(name) {
            return Err(loc.at(
                span,
                format!("[mcp.{name}]: a server name uses letters, digits, - and _"),
            ));
        }
        if s.enabled == Some(false) {
            continue;
        }
        let transport = match (&s.command, &s.url) {
            (Some(command), None) if !command.is_empty() && !command[0].trim().is_empty() => {
                let mut command = command.clone();
                command[0] = expand_tilde(&command[0]).to_string_lossy().into_owned();
                Transport::Stdio {
                    command,
                    env: s.env.clone(),
                    cwd: s.cwd.as_deref().map(|c| {
                        let p = expand_tilde(c);
                        if p.is_absolute() {
                            p
                        } else {
                            home.root().join(p)
                        }
                    }),
                    sandbox: s.sandbox.as_ref().is_some_and(|b| *b.get_ref()),
                }
            }
            (None, Some(url)) => {
                if let Some(b) = &s.sandbox {
                    return Err(loc.at(
                        b.span(),
                        format!("[mcp.{name}] sandbox: only a stdio server (`command`) runs in the sandbox; a `url` server is not started by pincer"),
                    ));
                }
                let value = url.get_ref().trim().to_string();
                if let Err(why) = check_http_url(&value) {
                    return Err(loc.at(url.span(), why.to_string()));
                }
                Transport::Http {
                    url: value,
                    headers: s.headers.clone(),
                }
            }
            (Some(_), Some(_)) => {
                return Err(loc.at(
                    span,
                    format!(
                        "[mcp.{name}] has both `command` and `url`; a server is one or the other"
                    ),
                ));
            }
            _ => {
                return Err(loc.at(
                    span,
                    format!("[mcp.{name}] needs `command = [\"program\", \"arg\"]` (stdio) or `url = \"http://…\"` (Streamable HTTP)"),
                ));
            }
        };
        out.push(McpServerConfig {
            name: name.clone(),
            transport,
            startup_timeout: Duration::from_secs(s.startup_timeout_s.unwrap_or(30)),
            plugin: None,
            optional: s.optional.clone(),
        });
    }
    Ok(out)
}
