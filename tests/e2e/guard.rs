//! Around every call, end to end: loop detection against scripted models
//! that repeat, poll without progress and ping-pong; command hooks that
//! block, rewrite and hang; a hostile model (through fakellm) whose denied,
//! out-of-workspace calls never run; and the audit table that records each.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::peers::PyServer;
use pincer_testkit::requests::tool_results;
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

async fn setup(extra: &str, tail: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let config = provider_config("openai", &format!("{}/v1", llm.base_url()), extra);
    home.write_config(&format!("{config}\n{tail}"));
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(home.workspace().join("other.txt"), "other file\n").unwrap();
    (home, llm)
}

const SMALL_LOOPS: &str =
    "[tools.loop_detection]\nwindow = 10\nwarning = 3\ncritical = 5\nbreaker = 8\n";

async fn audit(home: &TestHome) -> Vec<Value> {
    let rows = home.cli(&["--json", "tools", "audit", "-n", "1000"]).await;
    rows.json().as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_repeating_a_call_is_warned_blocked_then_stopped() {
    let (home, llm) = setup("", SMALL_LOOPS).await;
    llm.script_cycle("[repeat]", vec![Step::tool("ls", json!({}))]);
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[repeat] list forever"]).await;
    let events = out.json_lines();
    let last = events.last().unwrap();
    assert_eq!(last["stop_reason"], "loop", "{last}");
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "ok", "ok", "ok", "ok", "blocked", "blocked", "blocked", "blocked"
        ]
    );
    let journal = llm.journal();
    // The warning reached the model with the third result.
    let results = tool_results(&journal[3]);
    assert!(
        results[2].contains("[pincer loop detection]"),
        "{}",
        results[2]
    );
    assert!(!results[1].contains("loop detection"));
    // The last request offered no tools and said why.
    let final_request = journal.last().unwrap();
    assert!(final_request.get("tools").is_none());
    let note = final_request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(note.contains("Loop detection stopped"), "{note}");
    let rows = audit(&home).await;
    let decided: Vec<&str> = rows
        .iter()
        .map(|r| r["decided_by"].as_str().unwrap())
        .collect();
    assert_eq!(
        decided
            .iter()
            .filter(|d| **d == "loop:known_poll_no_progress")
            .count(),
        3,
        "{decided:?}"
    );
    assert_eq!(decided.last(), Some(&"loop:global_breaker"));
}

#[tokio::test(flavor = "multi_thread")]
async fn polling_with_progress_only_warns_and_ping_pong_is_blocked() {
    let (home, llm) = setup("max_model_calls = 9", SMALL_LOOPS).await;
    llm.script_cycle(
        "[progress]",
        vec![Step::tool("exec", json!({"command": "date +%s%N"}))],
    );
    llm.script_cycle(
        "[pingpong]",
        vec![
            Step::tool("read", json!({"path": "a.txt"})),
            Step::tool("read", json!({"path": "other.txt"})),
        ],
    );
    let _d = home.start();
    let out = home
        .cli(&["send", "--json", "[progress] watch the clock"])
        .await;
    let events = out.json_lines();
    assert_eq!(events.last().unwrap()["stop_reason"], "limit");
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .collect();
    assert_eq!(finished.len(), 9);
    assert!(finished.iter().all(|e| e["status"] == "ok"), "{finished:?}");
    // The request right after the third call shows its warning (later
    // ones replace it with keep-K's marker).
    let results = tool_results(&llm.journal()[3]);
    assert!(
        results[2].contains("has been called 3 times"),
        "{}",
        results[2]
    );

    let out = home
        .cli(&["send", "--json", "--session", "pp", "[pingpong] compare"])
        .await;
    let statuses: Vec<String> = out
        .json_lines()
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(&statuses[..4], ["ok", "ok", "ok", "ok"], "{statuses:?}");
    assert!(statuses[4..].iter().all(|s| s == "blocked"), "{statuses:?}");
    let rows = audit(&home).await;
    assert!(
        rows.iter().any(|r| r["decided_by"] == "loop:ping_pong"),
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_block_rewrite_and_a_hanging_hook_blocks_in_time() {
    let hooks = r#"
[[tools.hooks]]
name = "no-shell"
event = "before_tool_call"
tools = ["exec"]
command = ["sh", "-c", "cat >/dev/null; echo '{\"decision\": \"block\", \"reason\": \"no shell today\"}'"]

[[tools.hooks]]
name = "redirect"
event = "before_tool_call"
tools = ["read"]
command = ["sh", "-c", "cat >/dev/null; echo '{\"decision\": \"allow\", \"args\": {\"path\": \"other.txt\"}}'"]

[[tools.hooks]]
name = "stamp"
event = "after_tool_call"
tools = ["read"]
command = ["python3", "-c", "import json,sys; d=json.load(sys.stdin); print(json.dumps({'result': d['result'] + '[seen by hook]'}))"]

[[tools.hooks]]
name = "slow"
event = "before_tool_call"
tools = ["ls"]
timeout_s = 1
command = ["sh", "-c", "sleep 30"]
"#;
    let (home, llm) = setup("", hooks).await;
    llm.script(
        "[hooks]",
        vec![
            Step::tools(&[
                ("exec", json!({"command": "touch hooked"})),
                ("read", json!({"path": "a.txt"})),
                ("ls", json!({})),
            ]),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    let started = Instant::now();
    let out = home.cli(&["send", "--json", "[hooks] go"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the hanging hook was not cut off"
    );
    assert!(
        !home.workspace().join("hooked").exists(),
        "a blocked exec ran"
    );
    let results = tool_results(&llm.journal()[1]);
    assert!(
        results[0].contains("blocked by hook `no-shell`: no shell today"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("other file") && results[1].contains("[seen by hook]"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("hook `slow` failed") && results[2].contains("within 1 s"),
        "{}",
        results[2]
    );
    let rows = audit(&home).await;
    let by: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by,
        [
            ("exec", "hook:no-shell"),
            ("read", "hook:stamp"),
            ("ls", "hook:slow")
        ]
    );
}

const HOSTILE: &str = r#"version: 1
rules:
  - name: attack
    when: {turn: 1}
    respond:
      tool_calls:
        - {name: exec, arguments: {command: "touch pwned"}}
        - {name: read, arguments: {path: "../../../../etc/passwd"}}
        - {name: write, arguments: {path: "../outside.txt", content: "x"}}
  - name: give_up
    when: {turn: 2, tool_result_contains: "not available here"}
    respond: {content: "I could not do any of that."}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_model_through_fakellm_runs_nothing_it_may_not() {
    let home = TestHome::new();
    let server = PyServer::fakellm(home.path(), HOSTILE);
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", server.url()),
        "tools.deny = [\"exec\"]",
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    let _d = home.start();
    let out = home.cli(&["send", "--json", "do your worst"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    assert_eq!(
        events.last().unwrap()["text"],
        "I could not do any of that."
    );
    assert!(!home.workspace().join("pwned").exists());
    assert!(!home.path().join("outside.txt").exists());
    let rows = audit(&home).await;
    let got: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("exec", "denied", "policy"),
            ("read", "error", "tool"),
            ("write", "error", "tool")
        ]
    );
    assert!(
        rows[0]["detail"].as_str().unwrap().contains("agent `main`"),
        "{rows:?}"
    );
    assert!(
        rows[1]["detail"]
            .as_str()
            .unwrap()
            .contains("outside the workspace"),
        "{rows:?}"
    );
}

/// Waits for one pending approval and returns it.
async fn pending_approval(home: &TestHome) -> Value {
    for _ in 0..250 {
        let list = home
            .cli(&["--json", "approvals", "list"])
            .await
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(p) = list.into_iter().next() {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no approval was requested");
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_tools_wait_for_the_owner_who_allows_denies_or_lets_it_expire() {
    let (home, llm) = setup(
        "tools.ask = [\"exec\"]",
        "[tools]\napproval_timeout_s = 1\n",
    )
    .await;
    for (marker, file) in [
        ("[allow]", "allowed"),
        ("[deny]", "denied"),
        ("[expire]", "expired"),
    ] {
        llm.script(
            marker,
            vec![
                Step::tool("exec", json!({"command": format!("touch {file}")})),
                Step::text("finished"),
            ],
        );
    }
    let _d = home.start();

    let send = home.cli_spawn(&["send", "--json", "--session", "a", "[allow] go"]);
    let p = pending_approval(&home).await;
    assert_eq!(p["tool"], "exec");
    assert!(p["arguments"].as_str().unwrap().contains("touch allowed"));
    home.cli(&["approvals", "allow", p["id"].as_str().unwrap()])
        .await
        .ok();
    let out = String::from_utf8_lossy(&send.wait_with_output().await.unwrap().stdout).into_owned();
    assert!(out.contains("\"approval_requested\""), "{out}");
    assert!(home.workspace().join("allowed").exists());

    let send = home.cli_spawn(&["send", "--json", "--session", "d", "[deny] go"]);
    let p = pending_approval(&home).await;
    home.cli(&["approvals", "deny", p["id"].as_str().unwrap()])
        .await
        .ok();
    send.wait_with_output().await.unwrap();
    assert!(!home.workspace().join("denied").exists());

    let out = home
        .cli(&["send", "--json", "--session", "e", "[expire] go"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!home.workspace().join("expired").exists());
    let unknown = home.cli(&["approvals", "allow", "nope"]).await;
    assert_ne!(unknown.code, 0);
    assert!(
        unknown
            .stderr
            .contains("nothing is waiting for an answer under id `nope`"),
        "{}",
        unknown.stderr
    );

    let rows = audit(&home).await;
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("ok", "approval"),
            ("denied", "approval"),
            ("denied", "approval")
        ]
    );
    assert!(
        rows[2]["detail"].as_str().unwrap().contains("within 1 s"),
        "{rows:?}"
    );
}

/// `apply_patch` writes files, so `ask = ["write"]` holds it too: in the
/// agent's own session and in a sub-agent it spawns, the patch waits for
/// the owner and is not applied before the answer.
#[tokio::test(flavor = "multi_thread")]
async fn apply_patch_waits_for_approval_where_write_does_also_in_a_sub_agent() {
    let (home, llm) = setup("tools.ask = [\"write\"]", "").await;
    let patch = |file: &str| json!({"patch": format!("*** Begin Patch\n*** Add File: {file}\n+hello\n*** End Patch")});
    llm.script(
        "[patch]",
        vec![
            Step::tool("apply_patch", patch("denied.txt")),
            Step::text("patched"),
        ],
    );
    llm.script(
        "[parent]",
        vec![
            Step::tool("sessions_spawn", json!({"task": "[child] add a file"})),
            Step::text("parent done"),
        ],
    );
    llm.script(
        "[child]",
        vec![
            Step::tool("apply_patch", patch("child.txt")),
            Step::text("child done"),
        ],
    );
    let _d = home.start();

    let send = home.cli_spawn(&["send", "--json", "--session", "p", "[patch] go"]);
    let p = pending_approval(&home).await;
    assert_eq!(p["tool"], "apply_patch");
    assert_eq!(p["session"], "agent:main:p");
    assert!(!home.workspace().join("denied.txt").exists());
    home.cli(&["approvals", "deny", p["id"].as_str().unwrap()])
        .await
        .ok();
    send.wait_with_output().await.unwrap();
    assert!(!home.workspace().join("denied.txt").exists());

    let send = home.cli_spawn(&["send", "--json", "--session", "s", "[parent] go"]);
    let p = pending_approval(&home).await;
    assert_eq!(p["tool"], "apply_patch");
    assert!(
        p["session"]
            .as_str()
            .unwrap()
            .starts_with("agent:main:sub:"),
        "{p}"
    );
    assert!(!home.workspace().join("child.txt").exists());
    home.cli(&["approvals", "allow", p["id"].as_str().unwrap()])
        .await
        .ok();
    let out = send.wait_with_output().await.unwrap();
    assert!(out.status.success());
    assert!(home.workspace().join("child.txt").exists());

    let rows = audit(&home).await;
    let patches: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r["tool"] == "apply_patch")
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(patches, [("denied", "approval"), ("ok", "approval")]);
}
