//! The soak suite (issue 29; docs/src/hardening.md): bounded mixed traffic
//! against one pincerd — CLI turns with tool calls in five sessions,
//! Telegram DMs from several people, memory notes edited in place, MCP
//! calls, workflow runs, compactions, a schedule firing every 10 s — while
//! a sampler reads its RSS, open descriptors, threads and SQLite files
//! every 2 s. After the first third (the warm-up) nothing may keep
//! growing: anonymous RSS (the heap and caches; the executable's own
//! pages are file-backed and say nothing of leaks) by at most 1 MB (SPEC
//! §14), descriptors and threads not
//! past their level, no WAL file past the size at which SQLite
//! checkpoints it, and
//! the databases by a bounded number of bytes per recorded operation.
//!
//! `PINCER_SOAK_SECS` seconds (120 by default; 1800 for the long
//! version); `PINCER_SOAK_ONLY` (`turns,chat,notes,runs,compactions`)
//! and `PINCER_SOAK_TEXT_ONLY` (turns without tool calls) narrow the
//! traffic down to find what grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pincer_testkit::peers::peer;
use pincer_testkit::scripted::Step;
use pincer_testkit::telegram::{ChatSpec, TelegramEmulator, UserSpec};
use serde_json::json;

fn soak_secs() -> u64 {
    std::env::var("PINCER_SOAK_SECS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120)
}

/// One reading of the daemon.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    secs: u64,
    /// Anonymous resident memory (RssAnon): the heap, stacks, caches —
    /// what a leak grows.
    rss_kb: u64,
    /// File-backed resident memory (RssFile): the executable's pages as
    /// code paths are first run (about 45 MB of a debug build), which
    /// says nothing of leaks.
    file_kb: u64,
    fds: u64,
    threads: u64,
    /// The databases in `state/`, their WAL files apart.
    db_bytes: u64,
    /// The largest WAL file.
    wal_bytes: u64,
    /// Operations recorded so far (turns, chat messages, note edits, runs,
    /// compactions).
    ops: u64,
}

fn read(pid: u32, state: &std::path::Path, started: Instant, ops: u64) -> Sample {
    let status = pincer_testkit::load::status_fields(pid, &["RssAnon:", "RssFile:", "Threads:"]);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let (mut db_bytes, mut wal_bytes) = (0, 0);
    for entry in std::fs::read_dir(state).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let len = entry.metadata().map_or(0, |m| m.len());
        if name.ends_with(".db") {
            db_bytes += len;
        } else if name.ends_with(".db-wal") {
            wal_bytes = wal_bytes.max(len);
        }
    }
    Sample {
        secs: started.elapsed().as_secs(),
        rss_kb: status[0],
        file_kb: status[1],
        fds,
        threads: status[2],
        db_bytes,
        wal_bytes,
        ops,
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

const WORKFLOW: &str = r#"
description = "a note and a command"

[[steps]]
id = "note"
kind = "tool"
tool = "write"
arguments = { path = "soak/run.txt", content = "run {{ run.id }}" }

[[steps]]
id = "done"
kind = "command"
command = "echo done"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn mixed_traffic_for_minutes_grows_no_memory_descriptors_threads_or_databases() {
    let secs = soak_secs();
    let time = peer("mcp-server-time").display().to_string();
    // A small window: sessions compact as they fill, so a session's
    // history stays bounded and what grows is what must not.
    let r = crate::telegram::rig_model(
        TelegramEmulator::start(),
        "",
        &format!(
            "dm_policy = \"open\"\n\
             [memory]\nembedder = \"none\"\n\
             [mcp.time]\ncommand = [\"{time}\"]\n\
             [schedules.soak]\nevery = \"10s\"\ncommand = \"echo tick\"\n"
        ),
        "context_window = 8000",
    )
    .await;
    // A compaction's request (its history inside `<conversation>`) gets a
    // summary that keeps the marker, so that the turns after it are still
    // the turns' conversation.
    r.llm.script_cycle(
        "</conversation>",
        vec![Step::text("- [soak] the user ran soak turns; all answered")],
    );
    // Every turn: a write, an MCP call, then the answer
    // (`PINCER_SOAK_TEXT_ONLY`: the answer alone).
    let text_only = std::env::var_os("PINCER_SOAK_TEXT_ONLY").is_some();
    r.llm.script_cycle(
        if text_only { "[none]" } else { "[soak]" },
        vec![
            Step::tool(
                "write",
                json!({"path": "soak/turn.txt", "content": "a turn"}),
            ),
            Step::tool("mcp__time__get_current_time", json!({"timezone": "UTC"})),
            Step::text("soaked"),
        ],
    );
    r.llm.script_cycle("[soak]", vec![Step::text("soaked")]);
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(ws.join("workflows/soak.toml"), WORKFLOW).unwrap();
    let pid = r.daemon.as_ref().expect("running").pid();
    let state = r.home.path().join("state");

    let ops = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let sampler = {
        let (ops, samples, state) = (ops.clone(), samples.clone(), state.clone());
        tokio::spawn(async move {
            while Instant::now() < deadline {
                let s = read(pid, &state, started, ops.load(Ordering::Relaxed));
                samples.lock().unwrap().push(s);
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };

    // `PINCER_SOAK_ONLY=turns,chat,notes,runs,compactions`: some of the
    // traffic alone, to find what grows.
    let only = std::env::var("PINCER_SOAK_ONLY").unwrap_or_default();
    let on = |what: &str| only.is_empty() || only.split(',').any(|w| w == what);
    let users: Vec<UserSpec> = (0..5).map(|i| UserSpec::new(900 + i, "Soak")).collect();
    // About 600 tokens a message: each session reaches its compaction
    // threshold every few turns, so its history is at its steady size
    // within the warm-up.
    let filler = "The soak keeps every session busy with a long message. ".repeat(45);
    let mut i = 0u64;
    let mut failed = Vec::new();
    while Instant::now() < deadline {
        let session = format!("soak-{}", i % 5);
        if on("turns") {
            let out = r
                .home
                .cli(&[
                    "send",
                    "--session",
                    &session,
                    &format!("[soak] turn {i} {filler}"),
                ])
                .await;
            if out.code != 0 {
                failed.push(format!("turn {i}: {}", out.stderr));
            }
            ops.fetch_add(1, Ordering::Relaxed);
        }
        if on("chat") {
            let u = &users[(i % 5) as usize];
            r.tg.user_says(
                &ChatSpec::private(u),
                u,
                &format!("[soak] chat {i} {filler}"),
            )
            .await;
            ops.fetch_add(1, Ordering::Relaxed);
        }
        if on("notes") && i.is_multiple_of(3) {
            std::fs::write(
                ws.join(format!("memory/soak-{}.md", i % 20)),
                format!("# Soak note\n\nedited at step {i}\n"),
            )
            .unwrap();
            ops.fetch_add(1, Ordering::Relaxed);
        }
        if on("runs") && i.is_multiple_of(5) {
            let out = r.home.cli(&["workflows", "run", "soak"]).await;
            if out.code != 0 {
                failed.push(format!("run {i}: {}", out.stderr));
            }
            ops.fetch_add(1, Ordering::Relaxed);
        }
        if on("compactions") && i % 10 == 9 {
            let out = r.home.cli(&["sessions", "compact", &session]).await;
            if out.code != 0 {
                failed.push(format!("compact {i}: {}", out.stderr));
            }
            ops.fetch_add(1, Ordering::Relaxed);
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    sampler.await.unwrap();
    let samples = samples.lock().unwrap().clone();
    eprintln!(
        "soak: {secs} s, {i} rounds, {} operations",
        ops.load(Ordering::Relaxed)
    );
    eprintln!("  s  anon kB  file kB  fds  threads  db bytes  WAL max  ops");
    for s in &samples {
        eprintln!(
            "{:>4} {:>8} {:>8} {:>4} {:>8} {:>9} {:>10} {:>4}",
            s.secs, s.rss_kb, s.file_kb, s.fds, s.threads, s.db_bytes, s.wal_bytes, s.ops
        );
    }
    for entry in std::fs::read_dir(&state).into_iter().flatten().flatten() {
        eprintln!(
            "  {:>10}  {}",
            entry.metadata().map_or(0, |m| m.len()),
            entry.file_name().to_string_lossy()
        );
    }
    assert!(
        failed.is_empty(),
        "requests failed under the soak: {failed:#?}"
    );
    assert!(samples.len() >= 9, "too few samples: {samples:?}");

    // After the warm-up (the first third), thirds compared.
    let third = samples.len() / 3;
    let (warm, rest) = samples.split_at(third);
    let (early, late) = rest.split_at(rest.len() / 2);
    let pick = |v: &[Sample], f: fn(&Sample) -> u64| v.iter().map(f).collect::<Vec<_>>();
    let growth = median(pick(&late[late.len().saturating_sub(3)..], |s| s.rss_kb)) as i64
        - median(pick(&early[..early.len().min(3)], |s| s.rss_kb)) as i64;
    assert!(
        growth <= 1024,
        "anonymous RSS grew {growth} kB after the warm-up (SPEC §14: at most 1 MB)"
    );
    let level = |v: &[Sample], f: fn(&Sample) -> u64| v.iter().map(f).max().unwrap_or(0);
    for (what, f, slack) in [
        (
            "open descriptors",
            (|s: &Sample| s.fds) as fn(&Sample) -> u64,
            4,
        ),
        ("threads", |s: &Sample| s.threads, 4),
    ] {
        let before = level(warm, f).max(level(early, f));
        assert!(
            level(late, f) <= before + slack,
            "{what} kept growing: {} late against {before} before",
            level(late, f)
        );
    }
    // SQLite checkpoints a WAL past 1,000 pages and then writes it again
    // from its start: a file stays at that mark (4 KB pages, 24-byte frame
    // headers, a transaction's overshoot) unless a reader held on to an
    // old snapshot and kept every checkpoint from finishing.
    const CHECKPOINT_MARK: u64 = 1_100 * (4_096 + 24);
    let wal_before = level(warm, |s| s.wal_bytes).max(level(early, |s| s.wal_bytes));
    assert!(
        level(late, |s| s.wal_bytes) <= wal_before.max(CHECKPOINT_MARK),
        "a WAL file grew past its checkpoints: {} bytes late, {wal_before} before",
        level(late, |s| s.wal_bytes)
    );
    let (first, last) = (early[0], samples[samples.len() - 1]);
    let per_op = (last.db_bytes.saturating_sub(first.db_bytes)) / (last.ops - first.ops).max(1);
    eprintln!("soak: RSS {growth:+} kB after the warm-up; databases {per_op} bytes per operation");
    assert!(
        per_op <= 8192,
        "the databases grew {per_op} bytes per operation"
    );
}
