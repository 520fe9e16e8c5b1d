//! The crash suite (issue 29; docs/src/hardening.md): `kill -9` of pincerd
//! at random points, round after round, while it runs turns, a workflow, a
//! burst of chat messages, a memory re-index and a compaction; after each
//! restart what it promised still holds — no transcript line lost or
//! corrupted, the registry matching the transcripts, every chat message
//! answered exactly once (Telegram: but for its residual window), no
//! workflow step finished twice, the index searchable, the next turn
//! working.
//!
//! `PINCER_CRASH_ROUNDS` rounds per scenario (10 by default, what
//! tests/run.sh runs; 100 for the long version); the kill points come from
//! `PINCER_CRASH_SEED` (a random one otherwise), printed so that a failing
//! round can be run again.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pincer_testkit::harness::{Daemon, TestHome, provider_config, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use pincer_testkit::telegram::{ChatSpec, TelegramEmulator, UserSpec};
use serde_json::{Value, json};

/// Rounds per scenario.
fn rounds() -> usize {
    std::env::var("PINCER_CRASH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10)
}

/// Kill points: xorshift from a seed the failure message names.
struct Points {
    seed: u64,
    state: u64,
}

impl Points {
    fn new(scenario: &str) -> Self {
        let seed = std::env::var("PINCER_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("crash {scenario}: PINCER_CRASH_SEED={seed}");
        Self {
            seed,
            state: seed | 1,
        }
    }

    /// A time in `[0, max)`, to the microsecond.
    fn within(&mut self, max: Duration) -> Duration {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let us = max.as_micros().max(1) as u64;
        Duration::from_micros(self.state % us)
    }
}

/// SIGKILLs `daemon` `after` from now, from another thread: the test goes
/// on talking to it until it is gone.
fn kill_after(daemon: &Daemon, after: Duration) -> std::thread::JoinHandle<()> {
    let pid = daemon.pid() as i32;
    std::thread::spawn(move || {
        std::thread::sleep(after);
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    })
}

/// Every line of every transcript under `home`: each parses as JSON but,
/// where `torn_tail` allows it, the last of a file (a write the kill cut,
/// which the next open moves aside). Panics naming the file and line.
fn transcripts(home: &TestHome, torn_tail: bool, seed: u64) -> Vec<(String, Vec<Value>)> {
    let root = home.path().join("sessions");
    let mut out = Vec::new();
    for agent in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(agent.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = file.path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let mut entries = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                match serde_json::from_str::<Value>(line) {
                    Ok(v) => entries.push(v),
                    Err(e) => assert!(
                        torn_tail && i + 1 == lines.len() && !text.ends_with('\n'),
                        "seed {seed}: {} line {} is corrupt ({e}): {line:?}",
                        path.display(),
                        i + 1
                    ),
                }
            }
            let id = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            out.push((id, entries));
        }
    }
    out
}

/// The registry and the transcripts agree: every transcript is a session
/// `pincer sessions list` knows.
async fn registry_matches(home: &TestHome, seed: u64) {
    let list = home.cli(&["--json", "sessions", "list"]).await;
    assert_eq!(list.code, 0, "seed {seed}: {}", list.stderr);
    let ids: Vec<String> = list
        .json()
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect();
    for (id, _) in transcripts(home, true, seed) {
        assert!(
            ids.contains(&id),
            "seed {seed}: transcript {id} has no session in the registry ({ids:?})"
        );
    }
}

/// Runs `pincer args…` and SIGKILLs `daemon` within `within` of its start
/// (the time a measured run of it took); whether the kill came before the
/// command answered. The daemon is reaped.
async fn kill_during(home: &TestHome, daemon: Daemon, args: &[&str], within: Duration) -> bool {
    let command = home.cli_spawn(args);
    let killer = kill_after(&daemon, within);
    let finished = command.wait_with_output().await.map(|o| o.status.success());
    killer.join().unwrap();
    daemon.kill9();
    finished.is_ok_and(|ok| !ok)
}

// ---------------------------------------------------------------- turns

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_turns_loses_no_answered_turn_and_the_next_turn_works() {
    let mut points = Points::new("turns");
    let seed = points.seed;
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    // Every request of the home is this conversation's (a compaction's
    // summary can leave no user message holding a marker).
    llm.script_cycle(
        "",
        vec![
            Step::tool("write", json!({"path": "turns.txt", "content": "a turn"})),
            Step::text("answered"),
        ],
    );
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "",
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    let mut answered: Vec<String> = Vec::new();
    for round in 0..rounds() {
        let daemon = home.start();
        let killer = kill_after(&daemon, points.within(Duration::from_millis(1500)));
        for i in 0.. {
            let message = format!("[crash-turn] r{round} m{i}");
            let out = home.cli(&["send", &message]).await;
            if out.code != 0 {
                break;
            }
            assert!(
                out.stdout.contains("answered"),
                "seed {seed}: {}",
                out.stdout
            );
            answered.push(message);
        }
        killer.join().unwrap();
        daemon.kill9();

        let daemon = home.start();
        let entries: Vec<Value> = transcripts(&home, true, seed)
            .into_iter()
            .flat_map(|(_, e)| e)
            .collect();
        // Each answered message is there, with its answer after it.
        for message in &answered {
            let at = entries
                .iter()
                .position(|e| e["kind"] == "user" && e["text"] == message.as_str())
                .unwrap_or_else(|| panic!("seed {seed}: the answered {message:?} is lost"));
            let answer = entries[at + 1..]
                .iter()
                .take_while(|e| e["kind"] != "user")
                .any(|e| e["kind"] == "assistant" && e["text"] == "answered");
            assert!(answer, "seed {seed}: the answer to {message:?} is lost");
        }
        registry_matches(&home, seed).await;
        let next = format!("[crash-turn] after r{round}");
        let out = home.cli(&["send", &next]).await;
        assert_eq!(
            out.code, 0,
            "seed {seed}: the turn after the kill: {}",
            out.stderr
        );
        answered.push(next);
        // The next turn's open moved any torn line aside.
        transcripts(&home, false, seed);
        daemon.stop();
    }
    assert!(
        answered.len() > rounds(),
        "seed {seed}: no turn was answered before any kill"
    );
    eprintln!(
        "crash turns: {} kills, {} answered turns kept, each followed by a working turn",
        rounds(),
        answered.len()
    );
}

// -------------------------------------------------------------- workflow

/// Eight command steps, each writing its name and the run's id once.
const EIGHT_STEPS: &str = r#"
description = "eight steps that each leave a line"

[[steps]]
id = "s1"
kind = "command"
command = "echo '{{ run.id }} s1' >> log.txt; sleep 0.05"

[[steps]]
id = "s2"
kind = "command"
command = "echo '{{ run.id }} s2' >> log.txt; sleep 0.05"

[[steps]]
id = "s3"
kind = "command"
command = "echo '{{ run.id }} s3' >> log.txt; sleep 0.05"

[[steps]]
id = "s4"
kind = "command"
command = "echo '{{ run.id }} s4' >> log.txt; sleep 0.05"

[[steps]]
id = "s5"
kind = "command"
command = "echo '{{ run.id }} s5' >> log.txt; sleep 0.05"

[[steps]]
id = "s6"
kind = "command"
command = "echo '{{ run.id }} s6' >> log.txt; sleep 0.05"

[[steps]]
id = "s7"
kind = "command"
command = "echo '{{ run.id }} s7' >> log.txt; sleep 0.05"

[[steps]]
id = "s8"
kind = "command"
command = "echo '{{ run.id }} s8' >> log.txt"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_workflow_runs_finishes_no_step_twice() {
    let mut points = Points::new("workflow");
    let seed = points.seed;
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "",
    ));
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(ws.join("workflows/eight.toml"), EIGHT_STEPS).unwrap();
    let mut runs_settled = 0;
    let mut waited = 0;
    for round in 0..rounds() {
        let before: Vec<String> = runs(&home).await;
        let daemon = home.start();
        let killer = kill_after(&daemon, points.within(Duration::from_millis(700)));
        let _cli = home.cli_spawn(&["workflows", "run", "eight"]);
        killer.join().unwrap();
        daemon.kill9();

        let daemon = home.start();
        let Some(run) = runs(&home).await.into_iter().find(|r| !before.contains(r)) else {
            // Killed before the run was recorded: nothing to check.
            daemon.stop();
            continue;
        };
        let what = format!("run {run} to settle (seed {seed})");
        let status = crate::workflows::status_until(&home, &run, &what, |s| {
            ["succeeded", "waiting"].contains(&s["run"]["status"].as_str().unwrap_or(""))
        })
        .await;
        let mut skipped = None;
        if status["run"]["status"] == "waiting" {
            // A step the kill interrupted, not idempotent: it may or may
            // not have written; the owner skips it.
            let unknown = status["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["state"] == "unknown")
                .and_then(|s| s["path"].as_str())
                .map(str::to_string);
            assert!(
                unknown.is_some(),
                "seed {seed} round {round}: waiting for what? {status}"
            );
            skipped = unknown;
            let out = home.cli(&["workflows", "resolve", &run, "skip"]).await;
            assert_eq!(out.code, 0, "seed {seed}: {}", out.stderr);
            waited += 1;
        }
        let status = crate::workflows::status_until(&home, &run, &what, |s| {
            s["run"]["status"] == "succeeded"
        })
        .await;
        runs_settled += 1;
        let log = std::fs::read_to_string(ws.join("log.txt")).unwrap_or_default();
        for step in 1..=8 {
            let path = format!("s{step}");
            let line = format!("{run} {path}");
            let written = log.lines().filter(|l| *l == line).count();
            let rows = status["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["path"] == path.as_str())
                .count();
            assert_eq!(
                rows, 1,
                "seed {seed}: step {path} of {run} has {rows} ledger rows: {status}"
            );
            if skipped.as_deref() == Some(path.as_str()) {
                assert!(
                    written <= 1,
                    "seed {seed}: the skipped {path} ran {written} times"
                );
            } else {
                assert_eq!(
                    written, 1,
                    "seed {seed}: step {path} of {run} ran {written} times:\n{log}"
                );
            }
        }
        daemon.stop();
    }
    eprintln!(
        "crash workflow: {runs_settled} runs killed and settled, {waited} waited for the owner"
    );
}

/// The ids of every workflow run, newest first.
async fn runs(home: &TestHome) -> Vec<String> {
    let Ok(out) = tokio::time::timeout(
        Duration::from_secs(30),
        home.cli(&["--json", "workflows", "runs", "-n", "1000"]),
    )
    .await
    else {
        return Vec::new();
    };
    out.json()["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect()
}

// -------------------------------------------------------- Telegram burst

/// A count from the delivery ledger.
pub(crate) fn ledger_count(home: &TestHome, sql: &str) -> i64 {
    let db = rusqlite::Connection::open(home.path().join("state/channels.db")).expect("the ledger");
    db.query_row(sql, [], |row| row.get(0)).expect(sql)
}

/// Waits until the ledger has `n` answered messages.
async fn all_answered(home: &TestHome, n: i64, seed: u64) {
    let start = Instant::now();
    let answered = "SELECT COUNT(*) FROM inbound WHERE answered_at IS NOT NULL";
    while ledger_count(home, answered) < n {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "seed {seed}: {} of {n} messages answered ({} claimed)",
            ledger_count(home, answered),
            ledger_count(home, "SELECT COUNT(*) FROM inbound"),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Once all `sent_in` messages are answered: each was claimed once and
/// every planned chunk confirmed; how many chunks were confirmed.
async fn settled(home: &TestHome, sent_in: i64, seed: u64) -> i64 {
    all_answered(home, sent_in, seed).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        ledger_count(home, "SELECT COUNT(*) FROM inbound"),
        sent_in,
        "seed {seed}: each message claimed once"
    );
    let confirmed = ledger_count(
        home,
        "SELECT COUNT(*) FROM chunks WHERE platform_id IS NOT NULL",
    );
    let planned = ledger_count(home, "SELECT COUNT(*) FROM chunks");
    assert_eq!(
        confirmed, planned,
        "seed {seed}: every planned chunk went out"
    );
    confirmed
}

/// Two chunks per answer, so that a kill can fall between the chunks of
/// one.
fn two_chunks(max_chars: usize) -> String {
    let words = max_chars / 8;
    (0..2)
        .map(|p| {
            (0..words)
                .map(|j| format!("p{p}w{j}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_telegram_bursts_answers_every_message_once_but_for_the_residual_window() {
    let mut points = Points::new("telegram");
    let seed = points.seed;
    let mut r = crate::telegram::rig_with(
        TelegramEmulator::start_honoring_offset(),
        "",
        "dm_policy = \"open\"",
    )
    .await;
    r.llm
        .script_cycle("[burst]", vec![Step::text(&two_chunks(4000))]);
    let users: Vec<UserSpec> = (0..10).map(|i| UserSpec::new(700 + i, "U")).collect();
    let mut sent_in = 0;
    for round in 0..rounds() {
        let daemon = r.daemon.take().expect("running");
        let killer = kill_after(&daemon, points.within(Duration::from_millis(600)));
        for u in &users {
            r.tg.user_says(&ChatSpec::private(u), u, &format!("r{round} [burst]"))
                .await;
            sent_in += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        killer.join().unwrap();
        daemon.kill9();
        r.daemon = Some(
            r.home
                .start_with_env(&[("TELEGRAM_BOT_TOKEN", r.tg.token())]),
        );
    }
    let confirmed = settled(&r.home, sent_in, seed).await;
    let mut sent_out = 0;
    for u in &users {
        sent_out += r.tg.bot_messages(u.id).await.len() as i64;
    }
    // Telegram's sendMessage has no idempotency key: a kill between its
    // answer and the ledger's commit resends that chunk, at most one per
    // chat per kill (a chat sends one chunk at a time).
    let resent = sent_out - confirmed;
    assert!(
        (0..=(users.len() * rounds()) as i64).contains(&resent),
        "seed {seed}: {sent_out} messages sent for {confirmed} confirmed chunks"
    );
    eprintln!(
        "crash telegram: {} kills, {sent_in} messages answered, {confirmed} chunks, {resent} resent in the residual window",
        rounds()
    );
}

// --------------------------------------------------------- Discord burst

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_discord_bursts_answers_every_message_exactly_once() {
    use pincer_testkit::discord_fake::{CHANNEL_ID, DiscordFake, OTHER_CHANNEL_ID, Say, TOKEN};
    let mut points = Points::new("discord");
    let seed = points.seed;
    let dc = DiscordFake::start().await;
    let mut channels = vec![CHANNEL_ID.to_string(), OTHER_CHANNEL_ID.to_string()];
    for i in 0..8 {
        channels.push(dc.add_text_channel(&format!("crash-{i}")));
    }
    let groups: String = channels[1..]
        .iter()
        .map(|c| format!("[channels.discord.groups.\"{c}\"]\n"))
        .collect();
    let mut r = crate::discord::rig_on(dc, "", &groups).await;
    r.llm.script_cycle("", vec![Step::text(&two_chunks(2000))]);
    let mut sent_in = 0;
    for round in 0..rounds() {
        let daemon = r.daemon.take().expect("running");
        let killer = kill_after(&daemon, points.within(Duration::from_millis(600)));
        for channel in &channels {
            r.dc.user_says(
                channel,
                &crate::discord::ann(),
                Say::text(&format!("r{round} [burst]")).mention_bot(),
            );
            sent_in += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        killer.join().unwrap();
        daemon.kill9();
        r.daemon = Some(r.home.start_with_env(&[("DISCORD_BOT_TOKEN", TOKEN)]));
    }
    let confirmed = settled(&r.home, sent_in, seed).await;
    let sent_out: i64 = channels
        .iter()
        .map(|c| r.dc.bot_messages(c).len() as i64)
        .sum();
    // Each part goes with a nonce: none is posted twice.
    assert_eq!(
        sent_out, confirmed,
        "seed {seed}: {sent_out} posted for {confirmed} chunks"
    );
    eprintln!(
        "crash discord: {} kills, {sent_in} messages answered exactly once, {confirmed} chunks",
        rounds()
    );
}

// ----------------------------------------------------------- re-index

/// Notes enough that a full re-index takes a while.
fn write_notes(ws: &Path, n: usize) {
    let dir = ws.join("memory/notes");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..n {
        let body: String = (0..40)
            .map(|j| format!("Note {i} line {j}: heron{i:04}q fishes at dawn near stone {j}.\n"))
            .collect();
        std::fs::write(
            dir.join(format!("n{i:04}.md")),
            format!("# Note {i}\n\n{body}"),
        )
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_a_memory_reindex_leaves_an_index_that_searches_and_catches_up() {
    let mut points = Points::new("reindex");
    let seed = points.seed;
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    // Full text only: the vector leg's model is another suite's business.
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "[memory]\nembedder = \"none\"\n",
    ));
    write_notes(&home.workspace(), 600);
    // How long a full re-index takes: the kills fall inside it.
    let daemon = home.start();
    home.cli(&["memory", "reindex"]).await;
    let started = Instant::now();
    let out = home.cli(&["memory", "reindex", "--full"]).await;
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    daemon.stop();
    let mut interrupted = 0;
    for round in 0..rounds() {
        let daemon = home.start();
        let at = points.within(took);
        if kill_during(&home, daemon, &["memory", "reindex", "--full"], at).await {
            interrupted += 1;
        }

        let daemon = home.start();
        let out = home.cli(&["memory", "reindex"]).await;
        assert_eq!(
            out.code, 0,
            "seed {seed} round {round}: reindex after the kill: {}",
            out.stderr
        );
        let note = (round * 29) % 600;
        let needle = format!("heron{note:04}q");
        let found = home
            .cli(&["memory", "search", "--json", "--min-score", "0", &needle])
            .await;
        assert_eq!(found.code, 0, "seed {seed}: {}", found.stderr);
        let want = format!("n{note:04}.md");
        assert!(
            found.json()["hits"].to_string().contains(&want),
            "seed {seed} round {round}: `{needle}` does not find {want}: {}",
            found.stdout
        );
        let status = home.cli(&["memory", "status", "--json"]).await.json();
        assert_eq!(
            status["indexes"][0]["files"], 600,
            "seed {seed} round {round}: every note indexed again: {status}"
        );
        daemon.stop();
    }
    eprintln!(
        "crash reindex: a full re-index of 600 notes takes {took:?}; {} kills, {interrupted} of them before it answered",
        rounds()
    );
}

// ---------------------------------------------------------- compaction

/// Four turns of about 600 tokens each into the session `main`.
async fn four_turns(home: &TestHome, tag: &str, seed: u64) {
    let filler = "The cellar keeps apples and pears through the winter. ".repeat(40);
    for t in 0..4 {
        let out = home
            .cli(&["send", &format!("[compact] {tag} t{t} {filler}")])
            .await;
        assert_eq!(out.code, 0, "seed {seed}: {}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_a_compaction_keeps_the_session_whole_and_usable() {
    let mut points = Points::new("compaction");
    let seed = points.seed;
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    // Answers and summaries alike: whatever asks gets this text.
    llm.script_cycle("", vec![Step::text("summary or answer: noted.")]);
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        Some(64_000),
        "",
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    // How long a compaction takes: the kills fall inside it.
    let daemon = home.start();
    four_turns(&home, "calibration", seed).await;
    let started = Instant::now();
    let out = home.cli(&["--json", "sessions", "compact", "main"]).await;
    let took = started.elapsed();
    assert_eq!(
        out.json()["compacted"],
        true,
        "{}{}",
        out.stdout,
        out.stderr
    );
    daemon.stop();
    let mut interrupted = 0;
    for round in 0..rounds() {
        let daemon = home.start();
        four_turns(&home, &format!("r{round}"), seed).await;
        let at = points.within(took);
        if kill_during(&home, daemon, &["sessions", "compact", "main"], at).await {
            interrupted += 1;
        }

        let daemon = home.start();
        let entries: Vec<Value> = transcripts(&home, true, seed)
            .into_iter()
            .flat_map(|(_, e)| e)
            .collect();
        let users = entries.iter().filter(|e| e["kind"] == "user").count();
        assert!(
            users >= 4 * (round + 2),
            "seed {seed}: user turns lost: {users}"
        );
        registry_matches(&home, seed).await;
        let out = home
            .cli(&["send", &format!("[compact] after r{round}")])
            .await;
        assert_eq!(
            out.code, 0,
            "seed {seed}: the turn after the kill: {}",
            out.stderr
        );
        transcripts(&home, false, seed);
        let shown = home.cli(&["--json", "sessions", "prompt", "main"]).await;
        assert_eq!(
            shown.code, 0,
            "seed {seed}: the session's prompt: {}",
            shown.stderr
        );
        daemon.stop();
    }
    eprintln!(
        "crash compaction: a compaction takes {took:?}; {} kills, {interrupted} of them before it answered",
        rounds()
    );
}
