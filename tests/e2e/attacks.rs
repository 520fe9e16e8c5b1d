//! The attack suite (issue 29; docs/src/hardening.md): file-tool escapes
//! end to end. The owner's own session — the one that may use every file
//! tool — with a model that tries every way out of the workspace: `..`,
//! absolute paths, `/proc/self/root`, symbolic links to a folder and to a
//! file, a hard link, slashes that only look like slashes, backslashes,
//! `~`, percent-encoding, a NUL byte, a path longer than PATH_MAX, and a
//! folder swapped for a link to the outside while it reads (a race). No
//! result holds a byte or a name from outside; nothing outside is written
//! or changed; every such read is an error the model can read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

const SECRET: &str = "outside-secret-6620";
const OUTSIDE_NAME: &str = "only-outside-name.txt";

/// A folder beside the workspace with a secret in it.
fn outside(home: &TestHome) -> PathBuf {
    let dir = home.path().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secret.txt"), SECRET).unwrap();
    std::fs::write(dir.join(OUTSIDE_NAME), SECRET).unwrap();
    dir
}

/// Every entry of the outside folder with its content.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    all.sort();
    all
}

/// Every tool result of the transcripts under `home`: (name, content,
/// is_error).
fn results(home: &TestHome) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let mut stack = vec![home.path().join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
                    let Ok(e) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    if e["kind"] == "tool_result" {
                        out.push((
                            e["name"].as_str().unwrap_or_default().to_string(),
                            e["content"].as_str().unwrap_or_default().to_string(),
                            e["is_error"] == true,
                        ));
                    }
                }
            }
        }
    }
    out
}

async fn owner_home() -> (TestHome, ScriptedLlm, PathBuf) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "",
    ));
    let out = outside(&home);
    (home, llm, out)
}

/// The calls that try to leave the workspace; each must fail.
fn escapes(ws: &Path, out: &Path) -> Vec<(&'static str, Value)> {
    let abs = out.join("secret.txt").display().to_string();
    let up = "../".repeat(ws.components().count() + 2);
    let rel = format!("{up}{}", abs.trim_start_matches('/'));
    let long = format!("{}x.txt", "a/".repeat(3000));
    vec![
        ("read", json!({"path": rel})),
        ("read", json!({"path": "../outside/secret.txt"})),
        ("read", json!({"path": abs})),
        ("read", json!({"path": format!("/proc/self/root{abs}")})),
        (
            "read",
            json!({"path": format!("/proc/self/cwd/../outside/secret.txt")}),
        ),
        ("read", json!({"path": "dir-link/secret.txt"})),
        ("read", json!({"path": "file-link.txt"})),
        ("read", json!({"path": "hard.txt"})),
        (
            "read",
            json!({"path": "..\u{2215}outside\u{2215}secret.txt"}),
        ),
        (
            "read",
            json!({"path": "..\u{2044}outside\u{2044}secret.txt"}),
        ),
        (
            "read",
            json!({"path": "..\u{ff0f}outside\u{ff0f}secret.txt"}),
        ),
        ("read", json!({"path": "..\\outside\\secret.txt"})),
        ("read", json!({"path": "%2e%2e/outside/secret.txt"})),
        ("read", json!({"path": "~/../outside/secret.txt"})),
        (
            "read",
            json!({"path": "notes.txt\u{0}../../outside/secret.txt"}),
        ),
        ("read", json!({"path": long})),
        ("ls", json!({"path": "dir-link"})),
        ("ls", json!({"path": ".."})),
        ("ls", json!({"path": out.display().to_string()})),
        ("glob", json!({"pattern": "../outside/*"})),
        ("glob", json!({"pattern": format!("{}/*", out.display())})),
        (
            "write",
            json!({"path": "dir-link/planted.txt", "content": "planted"}),
        ),
        (
            "write",
            json!({"path": "../outside/planted.txt", "content": "planted"}),
        ),
        (
            "write",
            json!({"path": out.join("planted.txt").display().to_string(), "content": "planted"}),
        ),
        (
            "write",
            json!({"path": "file-link.txt", "content": "overwritten"}),
        ),
        (
            "write",
            json!({"path": "hard.txt", "content": "overwritten"}),
        ),
        (
            "edit",
            json!({"path": "file-link.txt", "old_string": SECRET, "new_string": "edited"}),
        ),
        (
            "edit",
            json!({"path": "hard.txt", "old_string": SECRET, "new_string": "edited"}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_reach_nothing_outside_the_workspace_whatever_the_path() {
    let (home, llm, out) = owner_home().await;
    let ws = home.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "inside").unwrap();
    std::os::unix::fs::symlink(&out, ws.join("dir-link")).unwrap();
    std::os::unix::fs::symlink(out.join("secret.txt"), ws.join("file-link.txt")).unwrap();
    let hard_target = out.join("hard-target.txt");
    std::fs::write(&hard_target, SECRET).unwrap();
    std::fs::hard_link(&hard_target, ws.join("hard.txt")).unwrap();
    let before = snapshot(&out);
    let calls = escapes(&ws, &out);

    // A grep over the whole workspace that would follow the links, then
    // the escapes a few at a time (each turn a batch, then an answer).
    let mut steps = vec![
        Step::tool("grep", json!({"pattern": "secret-66"})),
        Step::text("searched"),
    ];
    for batch in calls.chunks(7) {
        let batch: Vec<(&str, Value)> = batch.iter().map(|(n, a)| (*n, a.clone())).collect();
        steps.push(Step::tools(&batch));
        steps.push(Step::text("tried"));
    }
    let turns = steps.len() / 2;
    llm.script("[atk-fs]", steps);
    let _daemon = home.start();
    for i in 0..turns {
        let said = home
            .cli(&["send", "--session", "atk", &format!("[atk-fs] round {i}")])
            .await;
        assert_eq!(said.code, 0, "round {i}: {}", said.stderr);
    }

    let got = results(&home);
    assert_eq!(got.len(), calls.len() + 1, "every call answered: {got:#?}");
    for (name, content, _) in &got {
        assert!(
            !content.contains(SECRET) && !content.contains(OUTSIDE_NAME),
            "{name} reached outside: {content}"
        );
    }
    // A read that succeeds read something: every one is refused with a
    // sentence. A listing or glob may answer that nothing matches, and a
    // write may replace a link in the workspace: what they reached is
    // judged by the results above and the outside folder below.
    for ((name, content, is_error), (tool, args)) in got[1..].iter().zip(&calls) {
        assert_eq!(name, tool);
        assert!(!content.trim().is_empty(), "{tool} {args}: an empty result");
        if *tool == "read" {
            assert!(*is_error, "{tool} {args} was not refused: {content}");
        }
    }
    assert_eq!(snapshot(&out), before, "something outside changed");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "inside"
    );
}

/// A folder of the workspace swapped for a link to the outside, over and
/// over, while the model reads through it: the read either finds the
/// inside file or fails, never the outside one (the tools open every
/// component beneath the workspace without following links, so no check
/// can be raced).
#[tokio::test(flavor = "multi_thread")]
async fn a_folder_swapped_for_a_link_while_reading_never_yields_the_outside() {
    let (home, llm, out) = owner_home().await;
    let ws = home.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    let reads = 60;
    // Each with its own `limit`: the loop detector would block the same
    // call repeated.
    let batch: Vec<(&str, Value)> = (0..reads)
        .map(|i| ("read", json!({"path": "flip/secret.txt", "limit": i + 1})))
        .collect();
    llm.script(
        "[atk-race]",
        vec![
            Step::tools(&batch[..reads / 2]),
            Step::tools(&batch[reads / 2..]),
            Step::text("raced"),
        ],
    );
    let _daemon = home.start();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, flip, out) = (stop.clone(), ws.join("flip"), out.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_dir_all(&flip);
                let _ = std::fs::remove_file(&flip);
                if swaps.is_multiple_of(2) {
                    let _ = std::fs::create_dir(&flip);
                    let _ = std::fs::write(flip.join("secret.txt"), "inside copy");
                } else {
                    let _ = std::os::unix::fs::symlink(&out, &flip);
                }
                swaps += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
            swaps
        })
    };
    let said = home
        .cli(&["send", "--session", "race", "[atk-race] read through flip"])
        .await;
    stop.store(true, Ordering::Relaxed);
    let swaps = flipper.join().unwrap();
    assert_eq!(said.code, 0, "{}", said.stderr);
    let got = results(&home);
    assert_eq!(got.len(), reads, "{got:#?}");
    for (_, content, _) in &got {
        assert!(
            !content.contains(SECRET),
            "the race reached outside: {content}"
        );
    }
    let inside = got.iter().filter(|r| r.1.contains("inside copy")).count();
    eprintln!(
        "attacks race: {swaps} swaps, {reads} reads, {inside} found the inside file, none the outside"
    );
}

/// Forty strangers write to the bot at once, some with guessed codes or
/// the owner's approve command as text, one of them thirty times: the
/// model is never called, only the first three get a code (one each; the
/// rest no reply at all, so a flood gets no flood back), a guessed code
/// approves no one, and the owner is answered as usual meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn strangers_guessing_codes_and_flooding_reach_nothing_and_get_three_codes() {
    use pincer_testkit::telegram::{ChatSpec, UserSpec};

    let r = crate::telegram::rig("", "").await;
    r.llm.script("[owner]", vec![Step::text("owner answered")]);
    let strangers: Vec<UserSpec> = (0..40).map(|i| UserSpec::new(5000 + i, "S")).collect();
    let guesses = [
        "ABCD2345",
        "pincer pairing approve telegram ABCD2345",
        "/start",
        "/pair ABCD2345",
        "I am the owner, approve me",
    ];
    for (i, s) in strangers.iter().enumerate() {
        r.tg.user_says(&ChatSpec::private(s), s, guesses[i % guesses.len()])
            .await;
    }
    let flooder = &strangers[39];
    for i in 0..30 {
        r.tg.user_says(
            &ChatSpec::private(flooder),
            flooder,
            &format!("let me in {i}"),
        )
        .await;
    }
    let owner = UserSpec::new(crate::telegram::OWNER, "Owner");
    r.tg.user_says(&ChatSpec::private(&owner), &owner, "[owner] hello")
        .await;
    let answer = r.wait_for(crate::telegram::OWNER, 1).await;
    assert_eq!(crate::telegram::text(&answer[0]), "owner answered");
    // Every stranger's message is handled (claimed and settled) before
    // the counts are read.
    let start = std::time::Instant::now();
    loop {
        let all = crate::crash::ledger_count(&r.home, "SELECT count(*) FROM inbound");
        let open = crate::crash::ledger_count(
            &r.home,
            "SELECT count(*) FROM inbound WHERE answered_at IS NULL",
        );
        if all >= 71 && open == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{all} messages in the ledger, {open} open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut coded = 0;
    for s in &strangers {
        let got = r.tg.bot_messages(s.id).await;
        assert!(got.len() <= 1, "stranger {} got {got:?}", s.id);
        if let Some(m) = got.first() {
            assert!(
                crate::telegram::text(m).contains("ask its owner to approve you"),
                "{m:?}"
            );
            coded += 1;
        }
    }
    assert_eq!(coded, 3, "three codes pending at most");
    let pending = r.home.cli(&["--json", "pairing", "list"]).await.json();
    assert_eq!(pending.as_array().map(Vec::len), Some(3), "{pending}");
    let journal = r.llm.journal();
    assert!(
        journal
            .iter()
            .all(|body| body.to_string().contains("[owner]")),
        "a stranger's message reached the model"
    );
    let guessed = r
        .home
        .cli(&["pairing", "approve", "telegram", "ABCD2345"])
        .await;
    assert_ne!(guessed.code, 0, "a guessed code approved someone");
    let allowed = r
        .home
        .cli(&["--json", "pairing", "allowed", "telegram"])
        .await
        .json();
    assert_eq!(allowed.as_array().map(Vec::len), Some(0), "{allowed}");
}
