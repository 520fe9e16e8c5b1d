//! Table-driven tests of the policy pipeline: each case is a config file
//! (parsed by the real loader), a chat context, the tools expected on offer
//! and, for some removed tools, the layer expected to have removed them.

use std::path::Path;
use std::sync::Arc;

use super::pattern::ToolPatterns;
use super::policy::{PolicyInput, resolve};
use super::{ToolDef, ToolFlags, ToolOutput, ToolRegistry, ToolSource};
use crate::config::{ToolLayer, load};
use crate::home::Home;

fn tool_def(name: &str, groups: &[&str], flags: ToolFlags, source: ToolSource) -> ToolDef {
    ToolDef::dynamic(
        name,
        "test tool",
        serde_json::json!({"type": "object", "properties": {}}),
        groups.iter().map(|g| g.to_string()).collect(),
        flags,
        source,
        Arc::new(|_, _| Box::pin(async { ToolOutput::ok("") })),
    )
}

/// Core tools plus the kinds of tool the pipeline treats differently.
fn registry() -> ToolRegistry {
    let plain = ToolFlags::default();
    let mut tools = ToolRegistry::core().all().to_vec();
    let owner_only = ToolFlags {
        owner_only: true,
        ..plain
    };
    tools.push(tool_def(
        "gateway_restart",
        &[],
        owner_only,
        ToolSource::Core,
    ));
    let plugin = ToolSource::Plugin {
        id: "weather".into(),
        server: "weather".into(),
    };
    let optional = ToolFlags {
        optional: true,
        ..plain
    };
    tools.push(tool_def("weather__forecast", &[], optional, plugin.clone()));
    tools.push(tool_def("weather__alerts", &[], plain, plugin));
    tools.push(tool_def(
        "mcp__time__now",
        &[],
        plain,
        ToolSource::Mcp {
            server: "time".into(),
        },
    ));
    ToolRegistry::from_tools(tools)
}

const ALL: &[&str] = &[
    "read",
    "write",
    "edit",
    "ls",
    "glob",
    "grep",
    "exec",
    "apply_patch",
    "process",
    "web_fetch",
    "memory_search",
    "memory_get",
    "sessions_list",
    "session_status",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "message",
    "workflow_run",
    "schedule",
    "gateway_restart",
    "weather__alerts",
    "mcp__time__now",
];

struct Case {
    name: &'static str,
    /// Config text after the provider/model lines.
    config: &'static str,
    ctx: Ctx,
    offered: Vec<&'static str>,
    /// (tool, text the removing layer's name contains)
    removed_by: &'static [(&'static str, &'static str)],
}

#[derive(Default, Clone)]
struct Ctx {
    channel: Option<ToolLayer>,
    sender: Option<ToolLayer>,
    stranger: bool,
    not_main: bool,
    subagent: Option<ToolLayer>,
    channel_default: bool,
}

fn layer(allow: &[&str], deny: &[&str]) -> ToolLayer {
    ToolLayer {
        profile: None,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    }
}

fn but(except: &[&str]) -> Vec<&'static str> {
    ALL.iter()
        .copied()
        .filter(|t| !except.contains(t))
        .collect()
}

const HEAD: &str = "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[mcp.time]\nurl = \"http://127.0.0.1:1/mcp\"\n";

/// A home with the `weather` plugin installed: the config may name it
/// and its tools only then.
fn home_with_weather() -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("plugins/weather");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(
        plugin.join(crate::config::plugins::MANIFEST),
        "id = \"weather\"\n[server]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    let home = Home::at(dir.path());
    (dir, home)
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "full by default: everything but optional tools",
            config: "[agents.main]\n",
            ctx: Ctx::default(),
            offered: ALL.to_vec(),
            removed_by: &[("weather__forecast", "optional")],
        },
        Case {
            name: "an optional tool named by its plugin id",
            config: "[agents.main]\ntools.allow = [\"weather\"]\n",
            ctx: Ctx::default(),
            offered: vec!["weather__forecast", "weather__alerts"],
            removed_by: &[("read", "agent `main`")],
        },
        Case {
            name: "an optional tool added to a profile by group:plugins",
            config: "[agents.main]\ntools = { profile = \"minimal\", allow = [\"group:plugins\"] }\n",
            ctx: Ctx::default(),
            offered: vec![
                "session_status",
                "weather__forecast",
                "weather__alerts",
                "mcp__time__now",
            ],
            removed_by: &[("exec", "profile `minimal`")],
        },
        Case {
            name: "a wildcard does not name an optional tool",
            config: "[agents.main]\ntools.allow = [\"weather__*\"]\n",
            ctx: Ctx::default(),
            offered: vec!["weather__alerts"],
            removed_by: &[("weather__forecast", "optional")],
        },
        Case {
            name: "messaging profile with additions and a deny (SPEC sample)",
            config: "[agents.main]\ntools = { profile = \"messaging\", allow = [\"memory_search\", \"web_fetch\"], deny = [\"exec\"] }\n",
            ctx: Ctx::default(),
            offered: vec![
                "web_fetch",
                "memory_search",
                "memory_get",
                "sessions_list",
                "session_status",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
                "message",
                "schedule",
            ],
            removed_by: &[("exec", "profile `messaging`"), ("read", "profile")],
        },
        Case {
            name: "coding profile: groups",
            config: "[agents.main]\ntools.profile = \"coding\"\n",
            ctx: Ctx::default(),
            offered: vec![
                "read",
                "write",
                "edit",
                "ls",
                "glob",
                "grep",
                "exec",
                "apply_patch",
                "process",
                "web_fetch",
                "memory_search",
                "memory_get",
                "sessions_list",
                "session_status",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
            ],
            removed_by: &[
                ("message", "profile `coding`"),
                ("mcp__time__now", "profile"),
            ],
        },
        Case {
            name: "deny wins over allow, case-insensitive globs",
            config: "[tools]\nallow = [\"group:fs\", \"exec\"]\ndeny = [\"EX*\", \"Write\"]\n[agents.main]\n",
            ctx: Ctx::default(),
            offered: vec!["read", "edit", "ls", "glob", "grep"],
            removed_by: &[
                ("exec", "global"),
                ("write", "global"),
                ("apply_patch", "global"),
                ("message", "global"),
            ],
        },
        Case {
            name: "apply_patch follows write",
            config: "[agents.main]\ntools.deny = [\"write\"]\n",
            ctx: Ctx::default(),
            offered: but(&["write", "apply_patch"]),
            removed_by: &[("apply_patch", "agent `main`")],
        },
        Case {
            name: "an allow list naming write offers apply_patch, which writes too",
            config: "[agents.main]\ntools.allow = [\"read\", \"write\"]\n",
            ctx: Ctx::default(),
            offered: vec!["read", "write", "apply_patch"],
            removed_by: &[("edit", "agent `main`")],
        },
        Case {
            name: "a glob that matches write denies apply_patch too",
            config: "[agents.main]\ntools.deny = [\"wr*\"]\n",
            ctx: Ctx::default(),
            offered: but(&["write", "apply_patch"]),
            removed_by: &[("apply_patch", "agent `main`")],
        },
        Case {
            name: "per-provider and per-model layers",
            config: "[tools.by_provider.p]\ndeny = [\"group:runtime\"]\n[tools.by_provider.\"p/m\"]\ndeny = [\"mcp:time\"]\n[agents.main]\n",
            ctx: Ctx::default(),
            offered: but(&["exec", "process", "mcp__time__now"]),
            removed_by: &[
                ("exec", "provider `p`"),
                ("mcp__time__now", "provider `p/m`"),
            ],
        },
        Case {
            name: "a layer can only narrow: a later allow cannot add back",
            config: "[tools]\ndeny = [\"exec\"]\n[agents.main]\ntools.allow = [\"exec\", \"read\"]\n",
            ctx: Ctx::default(),
            offered: vec!["read"],
            removed_by: &[("exec", "global"), ("write", "agent")],
        },
        Case {
            name: "channel and sender layers",
            config: "[agents.main]\n",
            ctx: Ctx {
                channel: Some(layer(&[], &["web_fetch"])),
                sender: Some(layer(&["read", "message", "web_fetch"], &[])),
                ..Ctx::default()
            },
            offered: vec!["read", "message"],
            removed_by: &[("web_fetch", "channel/group"), ("ls", "sender")],
        },
        Case {
            name: "a stranger in a group: messaging by default, no runtime, no owner's memory",
            config: "[agents.main]\n",
            ctx: Ctx {
                channel_default: true,
                stranger: true,
                ..Ctx::default()
            },
            offered: vec![
                "sessions_list",
                "session_status",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
                "message",
            ],
            removed_by: &[
                ("exec", "profile `messaging`"),
                ("memory_search", "data boundary"),
                ("memory_get", "data boundary"),
            ],
        },
        Case {
            name: "an agent whose memory is shared keeps the memory tools for a stranger",
            config: "[agents.main]\nmemory = \"shared\"\n",
            ctx: Ctx {
                channel_default: true,
                stranger: true,
                ..Ctx::default()
            },
            offered: vec![
                "sessions_list",
                "session_status",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
                "message",
                "memory_search",
                "memory_get",
            ],
            removed_by: &[],
        },
        Case {
            name: "exec allowed by the agent does not reach a stranger: the boundary removes it",
            config: "[agents.main]\ntools = { profile = \"messaging\", allow = [\"exec\"] }\n",
            ctx: Ctx {
                stranger: true,
                ..Ctx::default()
            },
            offered: vec![
                "sessions_list",
                "session_status",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
                "message",
            ],
            removed_by: &[("exec", "data boundary"), ("process", "profile")],
        },
        Case {
            name: "a coding agent offers a stranger no runtime, MCP or plugin tools",
            config: "[agents.main]\ntools.profile = \"coding\"\n",
            ctx: Ctx {
                channel_default: true,
                stranger: true,
                ..Ctx::default()
            },
            offered: vec![
                "read",
                "write",
                "edit",
                "ls",
                "glob",
                "grep",
                "apply_patch",
                "web_fetch",
                "sessions_list",
                "session_status",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
            ],
            removed_by: &[
                ("exec", "data boundary"),
                ("process", "data boundary"),
                ("memory_search", "data boundary"),
            ],
        },
        Case {
            name: "the chat's own layer names exec: a stranger gets it",
            config: "[agents.main]\ntools.profile = \"coding\"\n",
            ctx: Ctx {
                channel: Some(layer(&["exec", "read"], &[])),
                stranger: true,
                ..Ctx::default()
            },
            offered: vec!["exec", "read"],
            removed_by: &[("process", "channel/group"), ("write", "channel/group")],
        },
        Case {
            name: "the sender's layer naming group:runtime counts; a glob does not",
            config: "[agents.main]\ntools.profile = \"coding\"\n",
            ctx: Ctx {
                channel: Some(layer(&["ex*", "pro*", "read"], &[])),
                stranger: true,
                ..Ctx::default()
            },
            offered: vec!["read"],
            removed_by: &[("exec", "data boundary"), ("process", "data boundary")],
        },
        Case {
            name: "the chat's own layer names an MCP server and a plugin",
            config: "[agents.main]\n",
            ctx: Ctx {
                sender: Some(layer(&["mcp:time", "weather", "read"], &[])),
                stranger: true,
                ..Ctx::default()
            },
            offered: vec![
                "mcp__time__now",
                "weather__alerts",
                "weather__forecast",
                "read",
            ],
            removed_by: &[("exec", "sender")],
        },
        Case {
            name: "owner-only tools, runtime, MCP and plugins are removed for non-owners",
            config: "[agents.main]\n",
            ctx: Ctx {
                stranger: true,
                ..Ctx::default()
            },
            offered: but(&[
                "gateway_restart",
                "schedule",
                "exec",
                "process",
                "memory_search",
                "memory_get",
                "weather__alerts",
                "mcp__time__now",
            ]),
            removed_by: &[
                ("gateway_restart", "owner-only"),
                ("schedule", "owner-only"),
                ("exec", "data boundary"),
                ("weather__alerts", "data boundary"),
                ("mcp__time__now", "data boundary"),
            ],
        },
        Case {
            name: "sandbox layer applies to non-main sessions in non-main mode",
            config: "[tools.sandbox]\nmode = \"non-main\"\ndeny = [\"group:runtime\", \"group:web\"]\n[agents.main]\n",
            ctx: Ctx {
                not_main: true,
                ..Ctx::default()
            },
            offered: but(&["exec", "process", "web_fetch"]),
            removed_by: &[("exec", "sandbox")],
        },
        Case {
            name: "sandbox layer does not apply to the main session",
            config: "[tools.sandbox]\nmode = \"non-main\"\ndeny = [\"group:runtime\"]\n[agents.main]\n",
            ctx: Ctx::default(),
            offered: ALL.to_vec(),
            removed_by: &[],
        },
        Case {
            name: "sub-agents narrow by config and by spawn",
            config: "[tools.subagents]\ndeny = [\"message\", \"sessions_*\"]\n[agents.main]\ntools.profile = \"coding\"\n",
            ctx: Ctx {
                subagent: Some(layer(
                    &["group:fs", "web_fetch", "sessions_list"],
                    &["write"],
                )),
                ..Ctx::default()
            },
            offered: vec!["read", "edit", "ls", "glob", "grep", "web_fetch"],
            removed_by: &[
                ("sessions_list", "sub-agent [tools.subagents]"),
                ("write", "sub-agent spawn"),
                ("exec", "sub-agent spawn"),
            ],
        },
        Case {
            name: "group:messaging is the message and schedule tools",
            config: "[agents.main]\ntools = { allow = [\"group:messaging\"] }\n",
            ctx: Ctx::default(),
            offered: vec!["message", "schedule"],
            removed_by: &[("sessions_send", "agent `main`"), ("read", "agent `main`")],
        },
        Case {
            name: "layers that leave nothing",
            config: "[agents.main]\ntools.deny = [\"*\"]\n",
            ctx: Ctx::default(),
            offered: vec![],
            removed_by: &[("read", "agent `main`")],
        },
    ]
}

#[test]
fn every_layer_as_a_table() {
    let (_dir, home) = home_with_weather();
    let registry = registry();
    for case in cases() {
        let text = format!("{HEAD}{}", case.config);
        let config = load::parse(&home, Path::new("/t/config.toml"), &text, &|| None)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let agent = config.agent("main").unwrap();
        let mut input = PolicyInput::owner(agent);
        input.channel = case.ctx.channel.as_slice();
        input.sender = case.ctx.sender.as_slice();
        input.owner = !case.ctx.stranger;
        input.main_session = !case.ctx.not_main;
        input.subagent = case.ctx.subagent.as_ref();
        if case.ctx.channel_default {
            input.default_profile = "messaging";
        }
        let resolution = resolve(&registry, &config.policy, &input);
        let mut offered: Vec<&str> = resolution
            .offered()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let mut want = case.offered.clone();
        offered.sort_unstable();
        want.sort_unstable();
        assert_eq!(offered, want, "{}", case.name);
        for (tool, layer) in case.removed_by {
            let verdict = resolution
                .verdicts
                .iter()
                .find(|v| v.tool.name == *tool)
                .unwrap();
            let removal = verdict
                .removed
                .as_ref()
                .unwrap_or_else(|| panic!("{}: {tool} was not removed", case.name));
            assert!(
                removal.layer.contains(layer),
                "{}: {tool} removed by {:?}, expected {layer}",
                case.name,
                removal
            );
        }
        assert_eq!(
            resolution.why_none().is_some(),
            case.offered.is_empty(),
            "{}",
            case.name
        );
    }
}

#[test]
fn bad_patterns_are_config_errors() {
    let home = Home::at("/tmp/pincer-policy-test");
    for (text, expect) in [
        (
            "[tools]\ndeny = [\"group:shell\"]\n",
            "unknown tool group `group:shell`",
        ),
        ("[tools]\nallow = [\"[a\"]\n", "not a valid glob"),
        (
            "[tools.sandbox]\nmode = \"sometimes\"\n",
            "unknown sandbox mode",
        ),
        (
            "[tools.by_provider.nope]\ndeny = [\"exec\"]\n",
            "no provider `nope`",
        ),
        (
            "[tools.by_provider.p]\nprofile = \"full\"\n",
            "can only narrow",
        ),
        ("[agents.main]\ntools.deny = [\"\"]\n", "empty tool pattern"),
    ] {
        let text = format!("{HEAD}{text}");
        let err = load::parse(&home, Path::new("/t/config.toml"), &text, &|| None)
            .expect_err(text.as_str());
        assert!(err.to_string().contains(expect), "{text}: {err}");
    }
}

/// `ask` lists and hooks name tools with the same matcher as the layers:
/// whatever names `write` names `apply_patch`, which also writes files, so
/// neither an approval nor a hook on `write` can be walked around.
#[test]
fn ask_and_hook_patterns_that_name_write_name_apply_patch() {
    let registry = registry();
    let tool = |name: &str| registry.get(name).unwrap();
    let matches_any = |p: &[&str], tool: &ToolDef| ToolPatterns::of_strs(p).matches(tool);
    for ask in [&["write"][..], &["WRITE"], &["wr*"], &["group:fs"], &["*"]] {
        assert!(
            matches_any(ask, tool("apply_patch")),
            "{ask:?} does not name apply_patch"
        );
        assert!(matches_any(ask, tool("write")), "{ask:?}");
    }
    // The other way round: a pattern for apply_patch is not one for write.
    assert!(!matches_any(&["apply_patch"], tool("write")));
    assert!(matches_any(&["apply_patch"], tool("apply_patch")));
    assert!(!matches_any(&["write"], tool("edit")));
    // Only the core apply_patch follows write: an MCP tool that happens to
    // have its name is matched by that name alone.
    let foreign = tool_def(
        "apply_patch",
        &[],
        ToolFlags::default(),
        ToolSource::Mcp {
            server: "files".into(),
        },
    );
    assert!(!matches_any(&["write"], &foreign));
    assert!(matches_any(&["apply_patch"], &foreign));
}

/// Whether a call waits for the owner is decided with the rest of the
/// policy, so `pincer tools list` shows what the pipeline will ask: the
/// agent's `ask` marks offered tools only, `apply_patch` with `write`.
#[test]
fn the_resolution_says_which_offered_tools_ask() {
    let home = Home::at("/tmp/pincer-policy-test");
    let text = format!(
        "{HEAD}[agents.main]\ntools = {{ ask = [\"write\", \"exec\", \"mcp:time\"], deny = [\"exec\"] }}\n"
    );
    let config = load::parse(&home, Path::new("/t/config.toml"), &text, &|| None).unwrap();
    let registry = registry();
    let resolution = resolve(
        &registry,
        &config.policy,
        &PolicyInput::owner(config.agent("main").unwrap()),
    );
    let asking: Vec<&str> = resolution
        .verdicts
        .iter()
        .filter(|v| v.asks)
        .map(|v| v.tool.name.as_str())
        .collect();
    assert_eq!(asking, ["write", "apply_patch", "mcp__time__now"]);
    assert!(resolution.asks("apply_patch"));
    // Denied: never offered, so never asked for.
    assert!(!resolution.asks("exec"));
    assert!(!resolution.asks("read"));
    assert!(!resolution.asks("no_such_tool"));
}
