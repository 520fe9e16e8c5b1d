//! Fast cases against the in-repo scripted model: tool turns, bad model
//! output, limits, abort, queueing, parallel sessions, crash recovery.

use std::time::Duration;

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::requests::{offered_tools, tool_results, without_turn_context};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

async fn setup(extra: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        extra,
    ));
    (home, llm)
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_turn_reads_and_execs_then_answers() {
    let (home, llm) = setup("").await;
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(
        home.workspace().join("notes.txt"),
        "the secret number is 42\n",
    )
    .unwrap();
    llm.script(
        "[tool-turn]",
        vec![
            Step {
                text: "Let me look.".into(),
                ..Step::tool("read", json!({"path": "notes.txt"}))
            },
            Step::tool("exec", json!({"command": "echo from-exec; pwd"})),
            Step::text("The number is 42 and exec said from-exec."),
        ],
    );
    let _d = home.start();
    let out = home
        .cli(&["send", "--json", "[tool-turn] what is the number?"])
        .await;
    let events = out.json_lines();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"turn_started"));
    assert_eq!(kinds.last(), Some(&"turn_finished"));
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_started")
        .collect();
    assert_eq!(started.len(), 2);
    assert_eq!(started[0]["name"], "read");
    // The argument deltas were joined into one JSON document.
    assert_eq!(
        serde_json::from_str::<Value>(started[0]["arguments"].as_str().unwrap()).unwrap(),
        json!({"path": "notes.txt"})
    );
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .collect();
    assert_eq!(finished[0]["status"], "ok");
    assert!(
        finished[0]["result"]
            .as_str()
            .unwrap()
            .contains("the secret number is 42")
    );
    assert!(
        finished[1]["result"]
            .as_str()
            .unwrap()
            .contains("from-exec")
    );
    let final_event = events.last().unwrap();
    assert_eq!(
        final_event["text"],
        "The number is 42 and exec said from-exec."
    );
    assert_eq!(final_event["model_calls"], 3);
    assert_eq!(final_event["tool_calls"], 2);

    // The model saw both results; exec ran inside the workspace.
    let journal = llm.journal();
    assert_eq!(journal.len(), 3);
    let results = tool_results(&journal[2]);
    assert!(results[0].contains("the secret number is 42"));
    let ws = home.workspace().canonicalize().unwrap();
    assert!(results[1].contains(ws.to_str().unwrap()), "{results:?}");
    // The tools were offered with their schemas.
    let tools = offered_tools(&journal[0]);
    assert!(tools.iter().any(|t| t == "read") && tools.iter().any(|t| t == "exec"));

    // Everything is in the transcript, in order.
    let kinds: Vec<String> = home
        .transcript("main")
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "tool_call",
            "tool_result",
            "assistant",
            "tool_call",
            "tool_result",
            "assistant"
        ]
    );
    // The human rendering shows text and tool calls.
    llm.script(
        "[tool-turn-2]",
        vec![Step::tool("ls", json!({})), Step::text("listed")],
    );
    let out = home
        .cli(&["send", "--session", "other", "[tool-turn-2] list"])
        .await;
    assert_eq!(out.ok().trim(), "listed");
    assert!(out.stderr.contains("⚙ ls"), "{}", out.stderr);
    // Usage was accounted in the registry.
    let list = home.cli(&["--json", "sessions", "list"]).await.json();
    let main = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "agent:main:main")
        .unwrap();
    assert_eq!(main["input_tokens"], 33);
    assert_eq!(main["output_tokens"], 21);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_wire_format_round_trip() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&provider_config("anthropic", &llm.base_url(), ""));
    llm.script(
        "[anthropic]",
        vec![
            Step::tool("ls", json!({"path": "."})),
            Step::text("Empty workspace."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "[anthropic] list files"]).await;
    assert_eq!(out.ok().trim(), "Empty workspace.");
    let journal = llm.journal();
    // The second request carries the tool_use and its tool_result.
    let msgs = journal[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(journal[0]["tools"][0]["input_schema"]["type"], "object");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_model_output_becomes_tool_errors_the_model_sees() {
    // Rollback off: every bad call gets its error result.
    let (home, llm) = setup("\n[tools.rollback]\nmax_consecutive = 0").await;
    llm.script(
        "[bad-output]",
        vec![
            Step {
                tool_calls: vec![
                    ("read".into(), "{\"path\": \"a.txt\"".into()), // truncated JSON
                    ("no_such_tool".into(), "{}".into()),           // unknown tool
                    ("read".into(), "{\"path\": \"../../etc/passwd\"}".into()), // outside the workspace
                    ("read".into(), "{\"paht\": \"a.txt\"}".into()),            // wrong parameter
                ],
                ..Default::default()
            },
            Step::text("I see the errors."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "[bad-output] go"]).await;
    assert_eq!(out.ok().trim(), "I see the errors.");
    let results = tool_results(&llm.journal()[1]);
    assert_eq!(results.len(), 4);
    assert!(results[0].contains("not valid JSON"), "{}", results[0]);
    assert!(
        results[1].contains("unknown tool `no_such_tool`") && results[1].contains("read"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("outside the workspace"),
        "{}",
        results[2]
    );
    assert!(
        results[3].contains("invalid arguments") && results[3].contains("path"),
        "{}",
        results[3]
    );
    assert!(results.iter().all(|r| r.starts_with("ERROR: ")));
}

#[tokio::test(flavor = "multi_thread")]
async fn call_limit_ends_with_a_last_call_without_tools() {
    let (home, llm) = setup("max_model_calls = 2").await;
    llm.script(
        "[limit]",
        vec![
            Step::tool("ls", json!({})),
            Step::tool("ls", json!({})),
            Step::text("Here is what I found."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[limit] loop forever"]).await;
    let last = out.json_lines().pop().unwrap();
    assert_eq!(last["stop_reason"], "limit");
    assert_eq!(last["text"], "Here is what I found.");
    let journal = llm.journal();
    assert_eq!(journal.len(), 3);
    assert!(
        journal[2].get("tools").is_none(),
        "the last call must offer no tools"
    );
    let last_user = journal[2]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(last_user.contains("Do not call tools"), "{last_user}");
}

#[tokio::test(flavor = "multi_thread")]
async fn abort_mid_turn_kills_the_process_group_and_records_the_turn() {
    let (home, llm) = setup("").await;
    llm.script(
        "[abort]",
        vec![Step::tool(
            "exec",
            json!({"command": "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"}),
        )],
    );
    let _d = home.start();
    let send = home.cli_spawn(&["send", "--json", "[abort] run something long"]);
    // Wait until the command is running.
    let shell_pid = home.workspace().join("shell.pid");
    let child_pid = home.workspace().join("child.pid");
    for _ in 0..500 {
        if child_pid.exists() && shell_pid.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let abort = home.cli(&["--json", "abort"]).await;
    assert_eq!(abort.json()["aborted"], true);
    let out = tokio::time::timeout(Duration::from_secs(20), send.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["stop_reason"], "aborted");
    assert_eq!(out.status.code(), Some(130));
    // The whole process group is gone, background child included.
    for file in [&shell_pid, &child_pid] {
        let pid: i32 = std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut alive = true;
        for _ in 0..100 {
            // SAFETY: signal 0 only checks for existence.
            alive = unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid);
            if !alive {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive, "process {pid} survived the abort");
    }
    let transcript = home.transcript("main");
    let kinds: Vec<&str> = transcript
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["user", "assistant", "tool_call", "tool_result", "meta"]
    );
    assert_eq!(transcript[4]["event"], "turn_aborted");
    // Abort with nothing running says so.
    assert_eq!(
        home.cli(&["--json", "abort"]).await.json()["aborted"],
        false
    );
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.split(") ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_sessions_run_in_parallel() {
    let (home, llm) = setup("").await;
    // Each command waits for the other to start: only parallel turns finish.
    let wait_for = |me: &str, other: &str| {
        format!(
            "touch {me}; for i in $(seq 400); do [ -f {other} ] && echo met && exit 0; sleep 0.05; done; echo alone; exit 1"
        )
    };
    llm.script(
        "[par-a]",
        vec![
            Step::tool("exec", json!({"command": wait_for("a", "b")})),
            Step::text("a done"),
        ],
    );
    llm.script(
        "[par-b]",
        vec![
            Step::tool("exec", json!({"command": wait_for("b", "a")})),
            Step::text("b done"),
        ],
    );
    let _d = home.start();
    let (a, b) = tokio::join!(
        home.cli(&["send", "--session", "a", "[par-a] go"]),
        home.cli(&["send", "--session", "b", "[par-b] go"])
    );
    assert_eq!(a.ok().trim(), "a done");
    assert_eq!(b.ok().trim(), "b done");
    for req in &llm.journal()[2..] {
        assert!(tool_results(req)[0].contains("met"), "{req}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_ups_queue_behind_the_running_turn() {
    let (home, llm) = setup("").await;
    llm.script(
        "[queue]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "for i in $(seq 400); do [ -f go ] && exit 0; sleep 0.05; done"}),
            ),
            Step::text("first answered"),
            Step::text("second answered"),
        ],
    );
    let _d = home.start();
    let first = home.cli_spawn(&["send", "--json", "[queue] first"]);
    while !home.path().join("sessions/main").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = home.cli_spawn(&["send", "--json", "second, while busy"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(home.workspace().join("go"), "").unwrap();
    let first =
        String::from_utf8_lossy(&first.wait_with_output().await.unwrap().stdout).into_owned();
    let second =
        String::from_utf8_lossy(&second.wait_with_output().await.unwrap().stdout).into_owned();
    assert!(first.contains("first answered"), "{first}");
    assert!(second.contains("\"queued\""), "{second}");
    assert!(second.contains("second answered"), "{second}");
    // The queued message was delivered as its own next turn.
    let journal = llm.journal();
    assert_eq!(journal.len(), 3);
    let last_user = journal[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let text = last_user["content"].as_str().unwrap();
    assert!(text.starts_with("<turn-context>\nCurrent time: "), "{text}");
    assert_eq!(without_turn_context(text), "second, while busy");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_turn_then_restart_continues_the_session() {
    let (home, llm) = setup("").await;
    llm.script(
        "[crash]",
        vec![
            Step::tool("exec", json!({"command": "touch started; sleep 300"})),
            Step::text("back after the crash"),
        ],
    );
    let daemon = home.start();
    let send = home.cli_spawn(&["send", "[crash] start"]);
    while !home.workspace().join("started").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.kill9();
    let out = send.wait_with_output().await.unwrap();
    assert_ne!(out.status.code(), Some(0));
    // A torn line, as if the crash hit mid-write.
    let path = home.transcript_path("main");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"id":"torn","ts":"2026-01-01T00:00:00Z","kind":"assistant","te"#);
    std::fs::write(&path, bytes).unwrap();

    let _d = home.start(); // the stale socket is replaced
    // The start reported the interrupted turn, which repaired the torn
    // line first: its bytes are kept beside the transcript.
    let mut torn = path.clone().into_os_string();
    torn.push(".torn");
    assert!(std::path::Path::new(&torn).exists());
    let show = home
        .cli(&["--json", "sessions", "show", "main"])
        .await
        .json();
    let kinds: Vec<&str> = show["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["user", "assistant", "tool_call", "meta"]);

    let out = home.cli(&["send", "[crash] are you there?"]).await;
    assert_eq!(out.ok().trim(), "back after the crash");
    // The interrupted call got a synthetic result, so the history stays valid.
    let results = tool_results(llm.journal().last().unwrap());
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("interrupted"), "{results:?}");
    let show = home
        .cli(&["--json", "sessions", "show", "main"])
        .await
        .json();
    assert_eq!(show["recovered_torn_line"], false);
}

/// Whether process `pid` is gone (a zombie left to a reaper that does not
/// reap counts as gone: it runs nothing).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// `kill -9` of pincerd takes the commands it runs along (a foreground
/// `exec` and a background job, each with a grandchild in its process
/// group), and the next start reports the interrupted turn.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_takes_running_commands_along_and_the_restart_reports_the_turn() {
    let (home, llm) = setup("").await;
    llm.script(
        "[orphans]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "sleep 301 & echo $! > bg.pid; wait", "background": true}),
            ),
            Step::tool(
                "exec",
                json!({"command": "sleep 300 & echo $! > fg.pid; wait"}),
            ),
            Step::text("never reached"),
        ],
    );
    let daemon = home.start();
    let send = home.cli_spawn(&["send", "[orphans] start"]);
    let ws = home.workspace();
    let read_pid = |name: &str| {
        std::fs::read_to_string(ws.join(name))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let started = std::time::Instant::now();
    let (bg, fg) = loop {
        if let (Some(bg), Some(fg)) = (read_pid("bg.pid"), read_pid("fg.pid")) {
            break (bg, fg);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the commands did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!gone(&bg) && !gone(&fg));
    daemon.kill9();
    let killed = std::time::Instant::now();
    while !(gone(&bg) && gone(&fg)) {
        assert!(
            killed.elapsed() < Duration::from_secs(2),
            "orphaned after kill -9: background sleep {bg} gone: {}, foreground sleep {fg} gone: {}",
            gone(&bg),
            gone(&fg)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = send.wait_with_output().await;

    let _d = home.start();
    let list = home.cli(&["--json", "sessions", "list"]).await.json();
    let error = list[0]["last_error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("the turn was interrupted when pincerd stopped at "),
        "{list:#}"
    );
    let show = home
        .cli(&["--json", "sessions", "show", "main"])
        .await
        .json();
    let last = show["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "meta", "{last:#}");
    assert!(last.to_string().contains("turn_interrupted"), "{last:#}");
    let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
    assert!(
        log.contains("pincerd stopped during a turn of 1 session(s)"),
        "{log}"
    );
    // Reported once: a second start finds nothing left to report.
    drop(_d);
    let _d = home.start();
    let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
    assert_eq!(
        log.matches("pincerd stopped during a turn").count(),
        1,
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_then_falls_back_to_the_next_model() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&format!(
        r#"[providers.p]
kind = "openai"
base_url = "{base}/v1"
retry = {{ max_attempts = 2, initial_backoff_ms = 10 }}

[models.primary]
provider = "p"
model = "primary"
fallbacks = ["p/backup"]

[agents.main]
model = "primary"
"#,
        base = llm.base_url()
    ));
    llm.script(
        "[fallback]",
        vec![
            Step {
                status: Some(503),
                ..Default::default()
            },
            Step {
                text: "cut".into(),
                truncate: true,
                ..Default::default()
            },
            Step::text("from the backup"),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[fallback] hi"]).await;
    let events = out.json_lines();
    let retries: Vec<&Value> = events.iter().filter(|e| e["type"] == "retrying").collect();
    assert_eq!(retries.len(), 1, "{events:?}");
    assert!(retries[0]["reason"].as_str().unwrap().contains("503"));
    assert_eq!(events.last().unwrap()["text"], "from the backup");
    let models: Vec<String> = llm
        .journal()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(models, ["primary", "primary", "backup"]);
    let transcript = home.transcript("main");
    assert_eq!(transcript.last().unwrap()["model"], "p/backup");
}

#[tokio::test(flavor = "multi_thread")]
async fn length_finish_is_continued() {
    let (home, llm) = setup("").await;
    llm.script(
        "[length]",
        vec![
            Step {
                text: "part one, ".into(),
                finish: Some("length".into()),
                ..Default::default()
            },
            Step::text("part two."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "[length] write a lot"]).await;
    assert_eq!(out.ok().trim(), "part one, part two.");
    let journal = llm.journal();
    let last = journal[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(last.contains("Continue exactly where it stopped"), "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_chat_streams_resets_and_aborts_on_ctrl_c() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (home, llm) = setup("").await;
    llm.script(
        "[chat]",
        vec![
            Step::text("answer one"),
            Step::tool("exec", json!({"command": "touch running; sleep 300"})),
        ],
    );
    llm.script("[after-reset]", vec![Step::text("fresh start")]);
    let _d = home.start();
    let mut child = home
        .pincer(&["chat"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(b"[chat] hello\n").await.unwrap();
    assert_eq!(stdout.next_line().await.unwrap().unwrap(), "answer one");

    // Ctrl-C during a turn aborts that turn, and the chat goes on.
    stdin.write_all(b"now run something long\n").await.unwrap();
    while !home.workspace().join("running").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SAFETY: SIGINT to the chat process this test started.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) };
    for _ in 0..500 {
        if home
            .transcript("main")
            .iter()
            .any(|e| e["event"] == "turn_aborted")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        home.transcript("main")
            .iter()
            .any(|e| e["event"] == "turn_aborted")
    );

    stdin
        .write_all(b"/reset\n[after-reset] hi again\n/exit\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    while let Some(line) = stdout.next_line().await.unwrap() {
        rest.push(line);
    }
    assert!(rest.iter().any(|l| l == "fresh start"), "{rest:?}");
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("aborting") && stderr.contains("turn aborted"),
        "{stderr}"
    );
    assert!(stderr.contains("session reset"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn abort_during_the_model_stream_keeps_the_partial_text() {
    let (home, llm) = setup("").await;
    llm.script(
        "[stream-abort]",
        vec![Step {
            text: "partial answer so far".into(),
            hang: true,
            ..Default::default()
        }],
    );
    let _d = home.start();
    let send = home.cli_spawn(&["send", "--json", "[stream-abort] talk"]);
    for _ in 0..500 {
        if home.path().join("sessions/main").exists()
            && home.transcript("main").len() == 1
            && llm.journal().len() == 1
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(home.cli(&["--json", "abort"]).await.json()["aborted"], true);
    let out = tokio::time::timeout(Duration::from_secs(20), send.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130));
    let transcript = home.transcript("main");
    let partial = transcript
        .iter()
        .find(|e| e["kind"] == "assistant")
        .expect("the partial reply is recorded");
    assert_eq!(partial["text"], "partial answer so far");
    assert_eq!(partial["stop"], "aborted");
}

#[tokio::test(flavor = "multi_thread")]
async fn api_keys_do_not_reach_exec_or_the_transcript() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.p]\nkind = \"openai\"\nbase_url = \"{}/v1\"\napi_key_env = \"MY_PROVIDER_KEY\"\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\n",
        llm.base_url()
    ));
    llm.script(
        "[secrets]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "echo key=[$MY_PROVIDER_KEY] openai=[$OPENAI_API_KEY]"}),
            ),
            Step::text("done"),
        ],
    );
    let _d = home.start_with_env(&[
        ("MY_PROVIDER_KEY", "sk-live-very-secret"),
        ("OPENAI_API_KEY", "sk-other-secret"),
    ]);
    home.cli(&["send", "[secrets] show me the keys"]).await.ok();
    let results = tool_results(&llm.journal()[1]);
    assert!(results[0].contains("key=[] openai=[]"), "{results:?}");
    let transcript = std::fs::read_to_string(home.transcript_path("main")).unwrap();
    let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
    for text in [&transcript, &log] {
        assert!(!text.contains("sk-live-very-secret") && !text.contains("sk-other-secret"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wall_time_limit_stops_the_tool_and_asks_for_an_answer() {
    let (home, llm) = setup("max_turn_seconds = 2").await;
    llm.script(
        "[walltime]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "sleep 60 & echo $! > child.pid; wait"}),
            ),
            Step::text("Out of time; here is what I have."),
        ],
    );
    let _d = home.start();
    let started = std::time::Instant::now();
    let out = home
        .cli(&["send", "--json", "[walltime] take your time"])
        .await;
    let events = out.json_lines();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let tool = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .unwrap();
    assert!(
        tool["result"].as_str().unwrap().contains("time limit"),
        "{tool}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["stop_reason"], "limit");
    assert_eq!(last["text"], "Out of time; here is what I have.");
    assert!(llm.journal()[1].get("tools").is_none());
    // The command's process group was killed, not left running.
    let pid: i32 = std::fs::read_to_string(home.workspace().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signal 0 only checks whether the process exists.
    assert!(
        unsafe { libc::kill(pid, 0) } != 0 || is_zombie(pid),
        "the command's background child survived the time limit"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_global_limit_holds_other_sessions_back() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&format!(
        "[daemon]\nmax_concurrent_turns = 1\n\n{}",
        provider_config("openai", &format!("{}/v1", llm.base_url()), "")
    ));
    llm.script(
        "[limit-a]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "for i in $(seq 400); do [ -f go ] && exit 0; sleep 0.05; done"}),
            ),
            Step::text("a done"),
        ],
    );
    llm.script("[limit-b]", vec![Step::text("b done")]);
    let _d = home.start();
    let a = home.cli_spawn(&["send", "--session", "a", "[limit-a] go"]);
    while llm.journal().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = home.cli_spawn(&["send", "--session", "b", "[limit-b] go"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // B waits for the only permit: its model was not called yet.
    assert_eq!(llm.journal().len(), 1);
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["running_turns"], 1);
    assert_eq!(status["max_concurrent_turns"], 1);
    std::fs::write(home.workspace().join("go"), "").unwrap();
    let a = String::from_utf8_lossy(&a.wait_with_output().await.unwrap().stdout).into_owned();
    let b = String::from_utf8_lossy(&b.wait_with_output().await.unwrap().stdout).into_owned();
    assert_eq!((a.trim(), b.trim()), ("a done", "b done"));
    assert_eq!(llm.journal().len(), 3);
}

/// Transcripts the daemon holds open, from `/proc/<pid>/fd`.
fn open_transcripts(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.extension().is_some_and(|e| e == "jsonl"))
        .count()
}

/// A daemon serving many chats must not keep every transcript it ever
/// opened: idle sessions beyond the 32 most recent are closed (each held a
/// file descriptor and its history in memory), and a closed one is read
/// again, history and all, when its next message comes.
#[tokio::test(flavor = "multi_thread")]
async fn idle_sessions_close_their_transcripts_and_reopen_with_history() {
    let (home, llm) = setup("").await;
    llm.script_cycle("[idle]", vec![Step::text("noted")]);
    let daemon = home.start();
    for i in 0..40 {
        let session = format!("s{i}");
        home.cli(&[
            "send",
            "--session",
            &session,
            &format!("[idle] remember token-{i}"),
        ])
        .await
        .ok();
    }
    let open = open_transcripts(daemon.pid());
    assert!(
        (1..=32).contains(&open),
        "{open} transcripts open after 40 sessions went idle"
    );
    home.cli(&[
        "send",
        "--session",
        "s0",
        "[idle] what did I ask you to remember?",
    ])
    .await
    .ok();
    let last = llm.journal().pop().unwrap();
    let sent = last.to_string();
    assert!(
        sent.contains("remember token-0") && sent.contains("what did I ask you to remember?"),
        "the reopened session lost its history: {last}"
    );
    assert!(open_transcripts(daemon.pid()) <= 32);
}
