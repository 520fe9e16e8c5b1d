//! Workflow overhead per `tool` step (SPEC §13, §14: ≤ 1 ms p50 with the
//! per-step state fsync measured apart) without a model: whole runs of a
//! workflow of 1 and of 100 `ls` steps (each an empty folder) through the
//! engine — admission, the run's session and transcript, the template
//! rendering, the agent's whole tool pipeline and audit, the step ledger —
//! and, apart, the ledger's two writes per step (`started`, then
//! `finished` with the cursor) on their own. The overhead of one step is
//! (100 steps − 1 step) / 99; the ledger's share is the last case.
//!
//! Run with `cargo bench -p pincer-daemon --bench workflow_overhead`.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use pincer_daemon::agent::Runtime;
use pincer_daemon::agent::hub::Hub;
use pincer_daemon::config;
use pincer_daemon::home::Home;
use pincer_daemon::llm::client::ModelClient;
use pincer_daemon::session::SessionKey;
use pincer_daemon::session::registry::Registry;
use pincer_daemon::workflow::engine::Workflows;
use pincer_daemon::workflow::runner::RunEvent;
use pincer_daemon::workflow::store::{NewRun, RunStore, StepEnd, StepState};

/// A workflow of `n` steps, each listing an empty folder of its own (the
/// loop guard stops a run of identical calls, as it stops a turn's).
fn steps(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!("[[steps]]\nid = \"s{i}\"\nkind = \"tool\"\ntool = \"ls\"\narguments = {{ path = \"empty/{i}\" }}\n\n")
        })
        .collect()
}

fn setup(rt: &tokio::runtime::Runtime) -> (Workflows, Hub, tempfile::TempDir) {
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        home.create_dirs().expect("dirs");
        std::fs::write(
            home.config_file(),
            "[providers.s]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[models.default]\nprovider = \"s\"\nmodel = \"m\"\n[agents.main]\nmodel = \"default\"\n",
        )
        .expect("config");
        let config = config::load(&home).expect("config loads");
        let workspace = config.agent("main").expect("main").workspace.clone();
        std::fs::create_dir_all(workspace.join("workflows")).expect("workflows");
        for i in 0..100 {
            std::fs::create_dir_all(workspace.join(format!("empty/{i}"))).expect("empty");
        }
        std::fs::write(workspace.join("workflows/one.toml"), steps(1)).expect("one");
        std::fs::write(workspace.join("workflows/hundred.toml"), steps(100)).expect("hundred");
        let registry = Registry::open(&home.registry_db()).expect("registry");
        let models = ModelClient::new(&config.providers).expect("client");
        let hub = Hub::new(Runtime::new(home.clone(), registry, config, models), 8);
        let workflows = Workflows::open(
            hub.runtime().clone(),
            Arc::new(hub.clone()),
            &home.workflows_db(),
        )
        .expect("workflows");
        (workflows, hub, dir)
    })
}

async fn run(workflows: &Workflows, hub: &Hub, name: &str) {
    let config = hub.runtime().config();
    let agent = config.agent("main").expect("main");
    let origin = pincer_daemon::routing::owner(&SessionKey::main("main").expect("key"));
    let (_, mut events) = workflows
        .start(agent, &origin, name, serde_json::Map::new())
        .await
        .expect("start");
    while let Some(event) = events.recv().await {
        if let RunEvent::Finished { status, error, .. } = event {
            assert_eq!(status.as_str(), "succeeded", "{error:?}");
            return;
        }
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (workflows, hub, dir) = setup(&rt);
    let mut group = c.benchmark_group("workflow_run");
    group.sample_size(20);
    for (case, name) in [("1_tool_step", "one"), ("100_tool_steps", "hundred")] {
        group.bench_function(case, |b| {
            b.to_async(&rt).iter(|| run(&workflows, &hub, name))
        });
    }
    group.finish();

    // The ledger alone: a step's `started` row, then its end with the
    // cursor, as the runner writes them (each a WAL commit).
    let store = RunStore::open(&dir.path().join("ledger.db")).expect("store");
    rt.block_on(async {
        store
            .create(NewRun {
                id: "bench".into(),
                workflow: "w".into(),
                agent: "main".into(),
                hash: String::new(),
                source: String::new(),
                subs: Default::default(),
                inputs: serde_json::json!({}),
                principal: "owner".into(),
                chat: None,
                session_key: "agent:main:workflow:bench".into(),
                parent: None,
                seed: 1,
                first: Some("s0".into()),
            })
            .await
            .expect("run");
    });
    let n = AtomicU64::new(0);
    c.bench_function("workflow_ledger/step_started_and_finished", |b| {
        b.to_async(&rt).iter(|| async {
            let i = n.fetch_add(1, Ordering::Relaxed);
            let path = format!("s{}", i % 100);
            let seq = store.start_step("bench", &path, 1).await.expect("start");
            store
                .end_step(
                    "bench",
                    seq,
                    StepEnd {
                        state: StepState::Finished,
                        output: Some(serde_json::json!("[]")),
                        error: None,
                        tokens: 0,
                    },
                    None,
                )
                .await
                .expect("end");
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
