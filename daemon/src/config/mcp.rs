//! MCP server settings (SPEC §8.1): what `[mcp.<name>]` and a plugin's
//! `[server]` say about reaching a server. The client that starts and talks
//! to servers is `tools::mcp`; it reads these, so the config never needs it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
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
