//! Plugins (SPEC §8.1): a folder under `PINCER_HOME/plugins/` with a
//! `pincer-plugin.toml` that names an id, the MCP server that provides the
//! plugin's tools (a command, relative to the folder, or a URL), which of
//! them are `optional`, and hooks.
//!
//! Rules: a plugin whose id is a core tool's name, or an id an earlier
//! plugin (in folder-name order) took, is refused; a plugin tool whose name
//! is taken by a core or earlier tool is skipped (the registry does that,
//! and `pincer tools list` shows it); an `optional` tool is offered only
//! when an allow list names it, its plugin id or `group:plugins`. A refused
//! plugin does not stop the daemon: the reason is logged and shown by
//! `pincer doctor`.
//!
//! ```toml
//! id = "weather"
//! description = "Forecasts"
//! [server]
//! command = ["python3", "server.py"]     # or url = "http://127.0.0.1:8000/mcp"
//! [tools.forecast]
//! optional = true
//! [[hooks]]
//! event = "before_tool_call"
//! tools = ["forecast"]
//! command = ["./check.sh"]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::mcp::{McpServerConfig, Transport};
use super::tool_names::check_pattern;
use super::url::check_http_url;
use super::{HookEvent, HookSettings};

pub const MANIFEST: &str = "pincer-plugin.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    id: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    server: ServerSection,
    #[serde(default)]
    tools: BTreeMap<String, ToolSection>,
    #[serde(default)]
    hooks: Vec<HookSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    command: Option<Vec<String>>,
    url: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    startup_timeout_s: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolSection {
    #[serde(default)]
    optional: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HookSection {
    event: String,
    command: Vec<String>,
    #[serde(default)]
    tools: Vec<String>,
    timeout_s: Option<u64>,
}

/// A loaded plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    pub id: String,
    pub dir: PathBuf,
    pub server: McpServerConfig,
    pub hooks: Vec<HookSettings>,
}

/// Every plugin found, and a sentence for each folder that was refused.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discovered {
    pub plugins: Vec<Plugin>,
    pub problems: Vec<String>,
}

/// Reads `dir/*/pincer-plugin.toml` in folder-name order. `core_tools` are
/// the names a plugin id may not take.
pub fn discover(dir: &Path, core_tools: &[&str]) -> Discovered {
    let mut out = Discovered::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut folders: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    folders.sort();
    for folder in folders {
        match load(&folder) {
            Err(e) => out.problems.push(e),
            Ok(plugin) => {
                let id = &plugin.id;
                if core_tools.iter().any(|t| t.eq_ignore_ascii_case(id)) {
                    out.problems.push(format!(
                        "plugin {}: refused, its id `{id}` is the name of a core tool",
                        folder.display()
                    ));
                } else if let Some(first) =
                    out.plugins.iter().find(|p| p.id.eq_ignore_ascii_case(id))
                {
                    out.problems.push(format!(
                        "plugin {}: refused, the id `{id}` is taken by {}",
                        folder.display(),
                        first.dir.display()
                    ));
                } else {
                    out.plugins.push(plugin);
                }
            }
        }
    }
    out
}

fn load(folder: &Path) -> Result<Plugin, String> {
    let path = folder.join(MANIFEST);
    let shown = path.display();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("plugin {shown}: cannot read it: {e}"))?;
    let manifest: Manifest = toml::from_str(&text).map_err(|e| {
        let msg = super::locate::in_words(e.message());
        match e.span() {
            Some(span) => {
                let (line, col) = super::locate::line_col(&text, span.start);
                format!("plugin {shown}:{line}:{col}: {msg}")
            }
            None => format!("plugin {shown}: {msg}"),
        }
    })?;
    let id = manifest.id.trim().to_string();
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "plugin {shown}: `id` uses letters, digits, - and _"
        ));
    }
    if id.starts_with("mcp") || id.starts_with("group") {
        return Err(format!(
            "plugin {shown}: the id `{id}` would clash with policy patterns (mcp:…, group:…)"
        ));
    }
    let resolve = |program: &str| -> String {
        // A program given with a path is relative to the plugin's folder;
        // a bare name is looked up on PATH.
        if program.contains('/') && !Path::new(program).is_absolute() {
            folder.join(program).display().to_string()
        } else {
            program.to_string()
        }
    };
    let transport = match (&manifest.server.command, &manifest.server.url) {
        (Some(cmd), None) if !cmd.is_empty() => {
            let mut command = cmd.clone();
            command[0] = resolve(&command[0]);
            Transport::Stdio {
                command,
                env: manifest.server.env.clone(),
                cwd: Some(folder.to_path_buf()),
                sandbox: false,
            }
        }
        (None, Some(url)) if check_http_url(url).is_ok() => Transport::Http {
            url: url.clone(),
            headers: manifest.server.headers.clone(),
        },
        _ => {
            return Err(format!(
                "plugin {shown}: [server] needs `command = [\"program\", …]` or an http(s) `url`, not both"
            ));
        }
    };
    let mut hooks = Vec::new();
    for (n, h) in manifest.hooks.iter().enumerate() {
        let event = match h.event.as_str() {
            "before_tool_call" => HookEvent::BeforeToolCall,
            "after_tool_call" => HookEvent::AfterToolCall,
            other => {
                return Err(format!(
                    "plugin {shown}: hooks[{n}]: unknown event `{other}` (before_tool_call or after_tool_call)"
                ));
            }
        };
        let Some(program) = h.command.first() else {
            return Err(format!("plugin {shown}: hooks[{n}] has no command"));
        };
        // The same check config hooks get: a typo would otherwise make a
        // hook that silently matches nothing.
        for pattern in &h.tools {
            if let Err(why) = check_pattern(pattern) {
                return Err(format!("plugin {shown}: hooks[{n}] `tools`: {why}"));
            }
        }
        let mut command = h.command.clone();
        command[0] = resolve(program);
        hooks.push(HookSettings {
            name: format!("{id}:{n}"),
            event,
            command,
            tools: h.tools.clone(),
            timeout: Duration::from_secs(h.timeout_s.unwrap_or(10)),
            sandbox: false,
        });
    }
    Ok(Plugin {
        server: McpServerConfig {
            name: id.clone(),
            transport,
            startup_timeout: Duration::from_secs(manifest.server.startup_timeout_s.unwrap_or(30)),
            plugin: Some(id.clone()),
            optional: manifest
                .tools
                .iter()
                .filter(|(_, t)| t.optional)
                .map(|(name, _)| name.clone())
                .collect(),
        },
        id,
        dir: folder.to_path_buf(),
        hooks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(root: &Path, folder: &str, manifest: &str) {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(MANIFEST), manifest).unwrap();
    }

    #[test]
    fn discovery_and_its_refusals() {
        let root = tempfile::tempdir().unwrap();
        let core = ["read", "exec"];
        plugin(
            root.path(),
            "a-weather",
            "id = \"weather\"\n[server]\ncommand = [\"./server.py\", \"--fast\"]\n[tools.forecast]\noptional = true\n[[hooks]]\nevent = \"before_tool_call\"\ncommand = [\"./check.sh\"]\ntools = [\"forecast\"]\n",
        );
        plugin(
            root.path(),
            "b-again",
            "id = \"Weather\"\n[server]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        );
        plugin(
            root.path(),
            "c-exec",
            "id = \"exec\"\n[server]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        );
        plugin(
            root.path(),
            "d-bad",
            "id = \"x\"\n[server]\ncomand = [\"x\"]\n",
        );
        plugin(root.path(), "e-none", "id = \"y\"\n[server]\n");
        std::fs::create_dir_all(root.path().join("f-not-a-plugin")).unwrap();
        let found = discover(root.path(), &core);
        assert_eq!(found.plugins.len(), 1, "{found:?}");
        let p = &found.plugins[0];
        assert_eq!(p.id, "weather");
        assert_eq!(p.server.optional, ["forecast"]);
        let Transport::Stdio { command, cwd, .. } = &p.server.transport else {
            panic!()
        };
        assert_eq!(
            command[0],
            root.path()
                .join("a-weather/./server.py")
                .display()
                .to_string()
        );
        assert_eq!(
            cwd.as_deref(),
            Some(root.path().join("a-weather").as_path())
        );
        assert!(p.hooks[0].command[0].ends_with("a-weather/./check.sh"));
        let problems = found.problems.join("\n");
        assert!(problems.contains("the id `Weather` is taken"), "{problems}");
        assert!(
            problems.contains("`exec` is the name of a core tool"),
            "{problems}"
        );
        assert!(
            problems.contains("d-bad/pincer-plugin.toml:3:1") && problems.contains("comand"),
            "{problems}"
        );
        assert!(problems.contains("needs `command"), "{problems}");
        assert!(
            discover(&root.path().join("missing"), &core)
                .plugins
                .is_empty()
        );
    }

    /// Plugin hooks' tool patterns used to skip the check config hooks get,
    /// so a typo silently made a hook that matched nothing.
    #[test]
    fn a_plugin_hook_with_a_bad_tool_pattern_is_refused() {
        let root = tempfile::tempdir().unwrap();
        for (folder, pattern) in [("a-group", "group:nope"), ("b-glob", "fore[cast")] {
            plugin(
                root.path(),
                folder,
                &format!(
                    "id = \"{}\"\n[server]\nurl = \"http://127.0.0.1:1/mcp\"\n[[hooks]]\nevent = \"before_tool_call\"\ncommand = [\"./check.sh\"]\ntools = [\"forecast\", \"{pattern}\"]\n",
                    folder.replace('-', "_")
                ),
            );
        }
        let found = discover(root.path(), &["read"]);
        assert!(found.plugins.is_empty(), "{found:?}");
        let [group, glob] = &found.problems[..] else {
            panic!("{found:?}")
        };
        let manifest = |folder: &str| root.path().join(folder).join(MANIFEST);
        assert!(
            group.contains(&manifest("a-group").display().to_string())
                && group.contains("hooks[0]")
                && group.contains("unknown tool group `group:nope`"),
            "{group}"
        );
        assert!(
            glob.contains(&manifest("b-glob").display().to_string())
                && glob.contains("`fore[cast` is not a valid glob"),
            "{glob}"
        );
        assert!(
            discover(&root.path().join("missing"), &["read"])
                .plugins
                .is_empty()
        );
    }
}
