//! Agent overhead per model call (SPEC §14: ≤ 0.5 ms p50 with the
//! end-of-turn fsync measured apart) with a zero-latency scripted model on
//! loopback.
//!
//! `agent_turn/*`: one turn through the hub (registry, transcript, prompt,
//! HTTP + SSE, tool dispatch, the end-of-turn fsync) per iteration, each in
//! a fresh session so the history does not grow between samples. The
//! `notes` agent's workspace holds the six bootstrap files and three
//! skills, so its cases include reading and assembling them (SPEC §9).
//! The `*_tmpfs` cases run the same turns with the home on `/dev/shm`,
//! where an fsync costs next to nothing: the turn without its fsync.
//!
//! `agent_turn_parts/*`: each part of a turn alone, against the same
//! setup, so the whole can be read as a sum:
//! - `http_loopback_bare`: one streamed request to the scripted model
//!   with a bare pooled HTTP client and the body the turn sends (the
//!   floor: loopback TCP, the fake's own JSON parse and SSE);
//! - `http_loopback_minimal_body`: the same with a one-message body
//!   (what the fake's parse of the turn's body costs, by difference);
//! - `request_body_json`: the request's body built and written as JSON;
//! - `model_client_call`: the same call through `ModelClient::complete`
//!   (request body built, SSE decoded);
//! - `registry_writes_one_call_turn`: the registry writes a one-call turn
//!   makes (new session, turn marked running, usage, turn finished);
//! - `tool_env_and_policy`: the tools a turn is offered and their
//!   environment (policy resolution), built once per turn;
//! - `session_prompt_{main,notes}`: the system prompt's assembly;
//! - `request_build`: one call's request from the history (history,
//!   guard, volatile context, estimate);
//! - `transcript_create_and_2_appends`, `transcript_3_appends`: what a
//!   one-call turn and a tool's extra call append;
//! - `fsync_after_append`: the end-of-turn fsync of one appended line, on
//!   the disk the `agent_turn` cases use.
//!
//! The per-call cost of a further call is
//! `2_model_calls_with_ls_tool − 1_model_call_text`.
//!
//! Run with `cargo bench -p pincer-daemon --bench agent_overhead`.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::StreamExt;
use pincer_daemon::agent::hub::Hub;
use pincer_daemon::agent::{Event, Runtime};
use pincer_daemon::config::{self, AgentSettings, Config};
use pincer_daemon::context::guard::{self, Guard};
use pincer_daemon::context::tokens::Counter;
use pincer_daemon::context::{history, prompt::turn_context};
use pincer_daemon::home::Home;
use pincer_daemon::llm::client::ModelClient;
use pincer_daemon::llm::{Request, ToolSpec};
use pincer_daemon::routing::ChatOrigin;
use pincer_daemon::session::registry::{NewSession, Registry};
use pincer_daemon::session::transcript::{Body, Transcript};
use pincer_daemon::session::{Principal, SessionKey};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use tokio_util::sync::CancellationToken;

struct Setup {
    hub: Hub,
    home: Home,
    config: Arc<Config>,
    _dir: tempfile::TempDir,
}

fn setup(rt: &tokio::runtime::Runtime, llm: &ScriptedLlm, under: Option<&Path>) -> Setup {
    rt.block_on(async {
        let dir = match under {
            Some(base) => tempfile::tempdir_in(base).expect("tempdir"),
            None => tempfile::tempdir().expect("tempdir"),
        };
        let home = Home::at(dir.path());
        home.create_dirs().expect("dirs");
        let notes = dir.path().join("notes");
        for name in [
            "AGENTS.md",
            "SOUL.md",
            "IDENTITY.md",
            "TOOLS.md",
            "USER.md",
            "MEMORY.md",
        ] {
            std::fs::create_dir_all(&notes).expect("workspace");
            std::fs::write(
                notes.join(name),
                format!("# {name}\n\n{}", "- a rule worth following\n".repeat(80)),
            )
            .expect("bootstrap file");
        }
        for skill in ["release", "review", "triage"] {
            let folder = notes.join("skills").join(skill);
            std::fs::create_dir_all(&folder).expect("skill folder");
            std::fs::write(
                folder.join("SKILL.md"),
                format!("---\nname: {skill}\ndescription: How to {skill}.\n---\n# {skill}\n"),
            )
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
        let hub = Hub::new(Runtime::new(home.clone(), registry, config, models), 8);
        let config = hub.config();
        Setup {
            hub,
            home,
            config,
            _dir: dir,
        }
    })
}

fn scripted(rt: &tokio::runtime::Runtime) -> ScriptedLlm {
    rt.block_on(async {
        let llm = ScriptedLlm::start().await.expect("scripted llm");
        llm.set_journal(false);
        llm.script_cycle("[text]", vec![Step::text("ok")]);
        llm.script_cycle(
            "[tool]",
            vec![
                Step::tool("ls", serde_json::json!({})),
                Step::text("listed"),
            ],
        );
        llm
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

/// The tool specs a turn of `settings`' agent in `key`'s session is
/// offered: the registry, the call scope and the policy, as a turn builds
/// them.
async fn offered_specs(
    s: &Setup,
    settings: &AgentSettings,
    key: &SessionKey,
    origin: &ChatOrigin,
    cancel: &CancellationToken,
) -> Vec<ToolSpec> {
    let registry = s.hub.tool_registry().await;
    let scope = pincer_daemon::agent::call_env::CallScope::outside_turn(
        s.hub.runtime(),
        &s.config,
        settings,
        key,
        "probe",
        origin,
        cancel,
    );
    let env = pincer_daemon::agent::call_env::build(&scope, &registry);
    env.offered.iter().map(|t| t.spec()).collect()
}

/// What a turn of `agent` offers and sends on its first call: the tool
/// specs and the system prompt.
async fn first_request(s: &Setup, agent: &str, text: &str) -> (Vec<ToolSpec>, String, Request) {
    let key = SessionKey::parse(&format!("agent:{agent}:probe")).expect("key");
    let origin = pincer_daemon::routing::owner(&key);
    let settings = s.config.agent(agent).expect("agent").clone();
    let cancel = CancellationToken::new();
    let specs = offered_specs(s, &settings, &key, &origin, &cancel).await;
    let chat = pincer_daemon::context::chat_kind(&key, &origin);
    let prompt =
        pincer_daemon::context::session_prompt(&s.config.context, &settings, &chat, &specs, None);
    let request = Request {
        system: prompt.system.clone(),
        messages: vec![pincer_daemon::llm::Message::user(format!(
            "{}{text}",
            turn_context(&pincer_daemon::context::now_text(), None)
        ))],
        tools: specs.clone(),
    };
    (specs, prompt.system, request)
}

fn bench_turns(c: &mut Criterion, rt: &tokio::runtime::Runtime, llm: &ScriptedLlm) {
    let disk = setup(rt, llm, None);
    let shm = Path::new("/dev/shm");
    let tmpfs = shm.is_dir().then(|| setup(rt, llm, Some(shm)));
    let counter = AtomicU64::new(0);
    let mut group = c.benchmark_group("agent_turn");
    // (benchmark, setup, agent, script marker)
    let mut cases = vec![
        ("1_model_call_text", &disk, "main", "[text]"),
        ("2_model_calls_with_ls_tool", &disk, "main", "[tool]"),
        (
            "1_model_call_text_bootstrap_and_skills",
            &disk,
            "notes",
            "[text]",
        ),
    ];
    if let Some(tmpfs) = &tmpfs {
        cases.push(("1_model_call_text_tmpfs", tmpfs, "main", "[text]"));
        cases.push(("2_model_calls_with_ls_tool_tmpfs", tmpfs, "main", "[tool]"));
    }
    for (name, s, agent, marker) in cases {
        group.bench_function(name, |b| {
            b.to_async(rt).iter(|| {
                turn(
                    &s.hub,
                    agent,
                    counter.fetch_add(1, Ordering::Relaxed),
                    marker,
                )
            })
        });
    }
    group.finish();
    bench_parts(c, rt, llm, &disk);
}

fn bench_parts(c: &mut Criterion, rt: &tokio::runtime::Runtime, llm: &ScriptedLlm, s: &Setup) {
    let (specs, system, request) = rt.block_on(first_request(s, "main", "[text] go"));
    let mut group = c.benchmark_group("agent_turn_parts");
    group.measurement_time(Duration::from_secs(4));

    // The floor: the body the turn sends, posted by a bare pooled client,
    // its stream read to the end.
    let target = s.config.agent("main").expect("agent").models[0].clone();
    let body =
        serde_json::to_vec(&pincer_daemon::llm::openai::body(&request, &target)).expect("body");
    eprintln!("the turn's first request body: {} bytes", body.len());
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", llm.base_url());
    let minimal = serde_json::to_vec(&serde_json::json!({
        "model": "m",
        "stream": true,
        "messages": [{"role": "user", "content": "[text] go"}],
    }))
    .expect("body");
    for (name, body) in [
        ("http_loopback_bare", &body),
        ("http_loopback_minimal_body", &minimal),
    ] {
        group.bench_function(name, |b| {
            b.to_async(rt).iter(|| async {
                let response = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("send");
                let mut stream = response.bytes_stream();
                while let Some(chunk) = stream.next().await {
                    chunk.expect("chunk");
                }
            })
        });
    }
    group.bench_function("request_body_json", |b| {
        b.iter(|| {
            serde_json::to_vec(&pincer_daemon::llm::openai::body(&request, &target)).expect("body")
        })
    });

    let models = s.hub.runtime().models();
    let targets = vec![target.clone()];
    group.bench_function("model_client_call", |b| {
        b.to_async(rt).iter(|| async {
            let cancel = CancellationToken::new();
            models
                .complete(&targets, &request, &mut |_| {}, &cancel)
                .await
                .expect("reply");
        })
    });

    let registry = s.hub.runtime().registry().clone();
    let n = AtomicU64::new(0);
    group.bench_function("registry_writes_one_call_turn", |b| {
        b.to_async(rt).iter(|| async {
            let key = format!("agent:main:parts-{}", n.fetch_add(1, Ordering::Relaxed));
            let row = registry
                .get_or_create(&key, "main", "cli", NewSession::of(Principal::Owner))
                .await
                .expect("row");
            registry.start_turn(&row.id);
            registry.add_usage(&row.id, 11, 7).expect("usage");
            registry.finish_turn(&row.id, None).await.expect("finish");
        })
    });

    group.bench_function("tool_env_and_policy", |b| {
        let key = SessionKey::parse("agent:main:probe").expect("key");
        let origin = pincer_daemon::routing::owner(&key);
        let settings = s.config.agent("main").expect("agent").clone();
        let cancel = CancellationToken::new();
        b.to_async(rt).iter(|| async {
            std::hint::black_box(offered_specs(s, &settings, &key, &origin, &cancel).await);
        })
    });

    for agent in ["main", "notes"] {
        let key = SessionKey::parse(&format!("agent:{agent}:probe")).expect("key");
        let origin = pincer_daemon::routing::owner(&key);
        let settings = s.config.agent(agent).expect("agent").clone();
        let chat = pincer_daemon::context::chat_kind(&key, &origin);
        group.bench_function(format!("session_prompt_{agent}"), |b| {
            b.iter(|| {
                pincer_daemon::context::session_prompt(
                    &s.config.context,
                    &settings,
                    &chat,
                    &specs,
                    None,
                )
            })
        });
    }

    // One call's request from a one-call turn's history.
    let dir = tempfile::tempdir_in(s.home.root()).expect("tempdir");
    let (mut transcript, _, _) = Transcript::open(&dir.path().join("h.jsonl")).expect("open");
    let entries = vec![
        transcript
            .append(
                Some("t"),
                Body::User {
                    text: "[text] go".into(),
                    images: Vec::new(),
                },
            )
            .expect("append"),
    ];
    let allowed: HashSet<String> = specs.iter().map(|t| t.name.clone()).collect();
    let guard = Guard {
        keep_tool_results: s.config.context.keep_tool_results,
        max_result_chars: 400_000,
        max_turns: s.config.context.max_history_turns,
        allowed: Some(&allowed),
    };
    let counter = Counter::for_model("m");
    let tool_tokens = counter.tools(&specs);
    let volatile = turn_context(&pincer_daemon::context::now_text(), None);
    group.bench_function("request_build", |b| {
        b.iter(|| {
            let mut messages = guard::apply(history::messages(&entries, None), &guard);
            if let Some(pincer_daemon::llm::Part::Text(t)) =
                messages.last_mut().and_then(|m| m.parts.first_mut())
            {
                *t = format!("{volatile}{t}");
            }
            let request = Request {
                system: system.clone(),
                messages,
                tools: specs.clone(),
            };
            std::hint::black_box(counter.request(&request, tool_tokens));
            request
        })
    });

    let files = AtomicU64::new(0);
    let assistant = || Body::Assistant {
        text: "ok".into(),
        model: "s/m".into(),
        usage: Some(pincer_daemon::session::transcript::Usage {
            input: 11,
            output: 7,
        }),
        stop: "stop".into(),
    };
    group.bench_function("transcript_create_and_2_appends", |b| {
        b.iter(|| {
            let path = dir
                .path()
                .join(format!("{}.jsonl", files.fetch_add(1, Ordering::Relaxed)));
            let (mut t, _, _) = Transcript::open(&path).expect("open");
            t.append(
                Some("t"),
                Body::User {
                    text: "[text] go".into(),
                    images: Vec::new(),
                },
            )
            .expect("append");
            t.append(Some("t"), assistant()).expect("append");
        })
    });
    group.bench_function("transcript_3_appends", |b| {
        b.iter(|| {
            transcript
                .append(
                    Some("t"),
                    Body::ToolCall {
                        call_id: "call_0_ls".into(),
                        name: "ls".into(),
                        arguments: "{}".into(),
                    },
                )
                .expect("append");
            transcript
                .append(
                    Some("t"),
                    Body::ToolResult {
                        call_id: "call_0_ls".into(),
                        name: "ls".into(),
                        content: "AGENTS.md\nMEMORY.md\n".into(),
                        is_error: false,
                        duration_ms: 0,
                    },
                )
                .expect("append");
            transcript.append(Some("t"), assistant()).expect("append");
        })
    });
    group.bench_function("fsync_after_append", |b| {
        b.iter(|| {
            transcript.append(Some("t"), assistant()).expect("append");
            transcript.sync().expect("sync");
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let llm = scripted(&rt);
    bench_turns(c, &rt, &llm);
}

criterion_group!(benches, bench);
criterion_main!(benches);
