//! Tool orchestration benches (issue: tool orchestration): parse throughput
//! of each text tool-call format on a realistic reply (prose, three calls,
//! a code fence), and the time the policy pipeline takes to resolve 200
//! tools through every layer.
//!
//! Run with `cargo bench -p pincer-daemon --bench tool_orchestration`.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pincer_daemon::config::{PolicySettings, SandboxMode, ToolLayer};
use pincer_daemon::llm::ToolSpec;
use pincer_daemon::llm::toolcall::{self, render};
use pincer_daemon::tools::policy::{PolicyInput, resolve};
use pincer_daemon::tools::{ToolDef, ToolFlags, ToolOutput, ToolRegistry, ToolSource};
use serde_json::{Map, Value, json};

fn specs() -> Vec<ToolSpec> {
    ToolRegistry::core()
        .all()
        .iter()
        .map(|t| t.spec())
        .collect()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A reply with prose around three calls, in each form.
fn replies(tools: &[ToolSpec]) -> Vec<(&'static str, String)> {
    let calls = [
        (
            "read",
            args(json!({"path": "notes/today.md", "offset": 10, "limit": 200})),
        ),
        (
            "grep",
            args(json!({"pattern": "TODO|FIXME", "path": "src", "ignore_case": true})),
        ),
        (
            "exec",
            args(json!({"command": "cargo test --workspace 2>&1 | tail -n 40", "timeout_s": 600})),
        ),
    ];
    let prose = "Let me look at the notes first, then search the code for open items and run the tests.\n\n";
    let tail = "\n\nI'll summarise once the results are in.";
    let render_all = |f: &dyn Fn(&str, &Map<String, Value>) -> String| {
        let body: Vec<String> = calls.iter().map(|(n, a)| f(n, a)).collect();
        format!("{prose}{}{tail}", body.join("\n"))
    };
    let spec = |n: &str| tools.iter().find(|t| t.name == n);
    vec![
        (
            "hermes",
            render_all(&|n, a| {
                render::render_call(pincer_daemon::config::ToolFormat::Hermes, spec(n), n, a)
            }),
        ),
        (
            "xml",
            render_all(&|n, a| {
                render::render_call(pincer_daemon::config::ToolFormat::Xml, spec(n), n, a)
            }),
        ),
        (
            "use_mcp_tool",
            render_all(&|n, a| render::render_mcp_call("pincer", n, a)),
        ),
        (
            "fenced hermes",
            format!(
                "```json\n{}\n```",
                render_all(&|n, a| render::render_call(
                    pincer_daemon::config::ToolFormat::Hermes,
                    spec(n),
                    n,
                    a
                ))
            ),
        ),
    ]
}

fn parse(c: &mut Criterion) {
    let tools = specs();
    let mut group = c.benchmark_group("parse");
    for (name, text) in replies(&tools) {
        assert_eq!(toolcall::parse(&text, &tools).calls.len(), 3, "{name}");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| toolcall::parse(std::hint::black_box(&text), &tools))
        });
    }
    group.finish();
}

/// 200 tools: the core tools, then plugin and MCP tools, some optional.
fn registry_of_200() -> ToolRegistry {
    let mut tools = ToolRegistry::core().all().to_vec();
    let mut n = 0;
    while tools.len() < 200 {
        let (source, name) = if n % 2 == 0 {
            (
                ToolSource::Plugin {
                    id: format!("plugin{}", n % 7),
                    server: format!("plugin{}", n % 7),
                },
                format!("p{n}_tool"),
            )
        } else {
            (
                ToolSource::Mcp {
                    server: format!("srv{}", n % 5),
                },
                format!("mcp__srv{}__t{n}", n % 5),
            )
        };
        tools.push(ToolDef::dynamic(
            &name,
            "a bench tool",
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            Vec::new(),
            ToolFlags {
                optional: n % 10 == 0,
                ..Default::default()
            },
            source,
            Arc::new(|_, _| Box::pin(async { ToolOutput::ok("") })),
        ));
        n += 1;
    }
    ToolRegistry::from_tools(tools)
}

fn layer(allow: &[&str], deny: &[&str]) -> ToolLayer {
    ToolLayer {
        profile: None,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    }
}

fn policy(c: &mut Criterion) {
    let registry = registry_of_200();
    let mut by_provider = std::collections::BTreeMap::new();
    by_provider.insert("p".to_string(), layer(&[], &["mcp:srv3"]));
    let settings = PolicySettings {
        global: layer(&[], &["p1*_tool"]),
        by_provider,
        sandbox_mode: SandboxMode::All,
        sandbox: layer(&[], &["group:runtime"]),
        subagents: layer(&[], &["sessions_spawn"]),
    };
    let text = "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[agents.main]\ntools = { profile = \"coding\", allow = [\"group:plugins\", \"plugin3\"], deny = [\"exec\"] }\n";
    // The config may name the plugin `plugin3` only when it is installed.
    let dir = tempfile::tempdir().expect("bench home");
    let plugin = dir.path().join("plugins/plugin3");
    std::fs::create_dir_all(&plugin).expect("plugin folder");
    std::fs::write(
        plugin.join(pincer_daemon::config::plugins::MANIFEST),
        "id = \"plugin3\"\n[server]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .expect("plugin manifest");
    let home = pincer_daemon::home::Home::at(dir.path());
    let config = pincer_daemon::config::load::parse(
        &home,
        std::path::Path::new("/b/config.toml"),
        text,
        &|| None,
    )
    .expect("bench config");
    let agent = config.agent("main").expect("agent");
    let channel = layer(&[], &["web_fetch"]);
    let sender = layer(&[], &["p4*"]);
    let spawn = layer(&["group:fs", "group:plugins"], &[]);
    let mut input = PolicyInput::owner(agent);
    let channel = [channel];
    let sender = [sender];
    input.channel = &channel;
    input.sender = &sender;
    input.subagent = Some(&spawn);
    input.owner = false;
    let offered = resolve(&registry, &settings, &input).offered().len();
    assert!(offered > 10 && offered < 200, "{offered} offered");
    c.bench_function("policy/resolve 200 tools, 9 layers", |b| {
        b.iter(|| resolve(std::hint::black_box(&registry), &settings, &input))
    });
}

criterion_group!(benches, parse, policy);
criterion_main!(benches);
