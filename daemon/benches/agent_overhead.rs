//! Agent overhead per model call (SPEC §14: ≤ 0.5 ms p50 with the
//! end-of-turn fsync measured apart; these cases include it) with a
//! zero-latency scripted model on loopback: one turn through the hub
//! (registry, transcript, prompt, HTTP + SSE, tool dispatch) per iteration,
//! each in a fresh session so the history does not grow between samples.
//! The `notes` agent's workspace holds the six bootstrap files and three
//! skills, so its cases include reading and assembling them (SPEC §9).
//!
//! Run with `cargo bench -p pincer-daemon --bench agent_overhead`.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use pincer_daemon::agent::hub::Hub;
use pincer_daemon::agent::{Event, Runtime};
use pincer_daemon::config::{self};
use pincer_daemon::home::Home;
use pincer_daemon::llm::client::ModelClient;
use pincer_daemon::session::SessionKey;
use pincer_daemon::session::registry::Registry;
use pincer_testkit::scripted::{ScriptedLlm, Step};

fn setup(rt: &tokio::runtime::Runtime) -> (Hub, ScriptedLlm, tempfile::TempDir) {
    rt.block_on(async {
        let llm = ScriptedLlm::start().await.expect("scripted llm");
        llm.set_journal(false);
        llm.script_cycle("[text]", vec![Step::text("ok")]);
        llm.script_cycle("[tool]", vec![Step::tool("ls", serde_json::json!({})), Step::text("listed")]);
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        home.create_dirs().expect("dirs");
        let notes = dir.path().join("notes");
        for name in ["AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md", "USER.md", "MEMORY.md"] {
            std::fs::create_dir_all(&notes).expect("workspace");
            std::fs::write(notes.join(name), format!("# {name}\n\n{}", "- a rule worth following\n".repeat(80)))
                .expect("bootstrap file");
        }
        for skill in ["release", "review", "triage"] {
            let folder = notes.join("skills").join(skill);
            std::fs::create_dir_all(&folder).expect("skill folder");
            std::fs::write(folder.join("SKILL.md"), format!("---\nname: {skill}\ndescription: How to {skill}.\n---\n# {skill}\n"))
                .expect("skill");
        }
        std::fs::write(
            home.config_file(),
            format!(
                "[providers.s]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n[models.default]\nprovider = \"s\"\nmodel = \"m\"\n[agents.main]\nmodel = \"default\"\n[agents.notes]\nmodel = \"default\"\nworkspace = \"{}\"\n",
                llm.base_url(),
                notes.display()
            ),
        )
        .expect("config");
        let config = config::load(&home).expect("config loads");
        let registry = Registry::open(&home.registry_db()).expect("registry");
        let models = ModelClient::new(&config.providers).expect("client");
        let hub = Hub::new(Runtime::new(home, registry, config, models), 8);
        (hub, llm, dir)
    })
}

async fn turn(hub: &Hub, agent: &str, n: u64, marker: &str) {
    let key = SessionKey::parse(&format!("agent:{agent}:bench-{n}")).expect("key");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let origin = pincer_daemon::routing::owner(&key);
    hub.chat(key, format!("{marker} go"), origin, tx)
        .await
        .expect("chat");
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Finished { .. } => return,
            Event::Error { message, .. } => panic!("turn failed: {message}"),
            _ => {}
        }
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (hub, _llm, _dir) = setup(&rt);
    let counter = AtomicU64::new(0);
    let mut group = c.benchmark_group("agent_turn");
    // (benchmark, agent, script marker)
    for (name, agent, marker) in [
        ("1_model_call_text", "main", "[text]"),
        ("2_model_calls_with_ls_tool", "main", "[tool]"),
        ("1_model_call_text_bootstrap_and_skills", "notes", "[text]"),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| turn(&hub, agent, counter.fetch_add(1, Ordering::Relaxed), marker))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
