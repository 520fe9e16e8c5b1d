//! The CLI as a user meets it (issue 13): a closed pipe, server errors and
//! their exit codes, a daemon that dies mid-turn, `pincer stop`, `logs`
//! with the daemon down, help texts, `--json` (one document, errors as
//! JSON), the audit table's columns, `init` after a zero-config start and
//! the message size limit. Every test runs the real binaries.

use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, bins, provider_config, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::json;

/// A home whose config points at a fresh scripted model.
async fn scripted_home() -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        Some(128_000),
        "",
    ));
    (home, llm)
}

/// Polls `check` every 20 ms for up to 20 s.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Whether another process holds the flock on `path` (what `pincer stop`
/// waits for).
fn lock_is_held(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; released when `file` closes.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    rc != 0
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_pipe_ends_the_command_quietly_as_ls_does() {
    let (home, _llm) = scripted_home().await;
    let _d = home.start();
    for args in [&["tools", "list"][..], &["status"], &["--json", "status"]] {
        // The reading end is closed before pincer writes anything, which is
        // what `| head -1` does to the rest of a long listing.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(&bins().pincer)
            .arg("--home")
            .arg(home.path())
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{args:?} printed to stderr: {stderr}");
        assert!(
            out.status.code() == Some(0) || out.status.signal() == Some(libc::SIGPIPE),
            "{args:?} ended with {:?}",
            out.status
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_error_is_exit_1_with_the_servers_words_not_not_running() {
    let (home, llm) = scripted_home().await;
    llm.script(
        "[cfail]",
        vec![
            Step::text("one"),
            Step::text("two"),
            Step::error(400, "the summary was refused (cfail-marker)"),
            Step::error(400, "the summary was refused (cfail-marker)"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "[cfail] first"]).await.ok();
    home.cli(&["send", "[cfail] second"]).await.ok();
    let out = home.cli(&["sessions", "compact", "main"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(!out.stderr.contains("not running"), "{}", out.stderr);
    assert!(out.stderr.contains("cfail-marker"), "{}", out.stderr);
    // Under --json the same error is one JSON object with the same code.
    let out = home.cli(&["--json", "sessions", "compact", "main"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    let v = out.json();
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(v["error"].as_str().unwrap().contains("cfail-marker"), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_killed_mid_turn_is_a_sentence_not_h2_text() {
    let (home, llm) = scripted_home().await;
    llm.script(
        "[hang]",
        vec![Step {
            text: "half an answer".into(),
            hang: true,
            ..Default::default()
        }],
    );
    let d = home.start();
    let send = home.cli_spawn(&["send", "[hang] tell me"]);
    until("the turn to be running", async || {
        home.cli(&["--json", "status"]).await.json()["running_turns"] == 1
    })
    .await;
    d.kill9();
    let out = tokio::time::timeout(Duration::from_secs(60), send.wait_with_output())
        .await
        .expect("send did not end after the daemon died")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("pincerd stopped while the turn was running"),
        "{stderr}"
    );
    assert!(stderr.contains("pincer logs"), "{stderr}");
    for raw in [
        "h2 protocol",
        "os error",
        "transport error",
        "error reading a body",
    ] {
        assert!(
            !stderr.contains(raw),
            "raw transport text `{raw}`: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_keeps_the_typed_line_when_pincerd_is_gone_and_sends_it_again() {
    use tokio::io::AsyncWriteExt;
    let (home, llm) = scripted_home().await;
    // One conversation: the session's first message picks the script.
    llm.script(
        "[chat1]",
        vec![Step::text("first reply"), Step::text("second reply")],
    );
    let d = home.start();
    let stdout_path = home.path().join("chat.stdout");
    let stderr_path = home.path().join("chat.stderr");
    let mut chat = home
        .pincer(&["chat"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    stdin.write_all(b"[chat1] hello\n").await.unwrap();
    until("the first reply", async || {
        read(&stdout_path).contains("first reply")
    })
    .await;
    d.kill9();
    stdin.write_all(b"[chat2] are you there?\n").await.unwrap();
    until("the chat to say the line was not sent", async || {
        read(&stderr_path).contains("not sent")
    })
    .await;
    let stderr = read(&stderr_path);
    assert!(stderr.contains("[chat2] are you there?"), "{stderr}");
    assert!(!stderr.contains("os error"), "{stderr}");
    assert!(!stderr.contains("transport error"), "{stderr}");
    // Start it again: an empty line sends the kept message.
    let _d = home.start();
    stdin.write_all(b"\n").await.unwrap();
    until("the kept line to be answered", async || {
        read(&stdout_path).contains("second reply")
    })
    .await;
    stdin.write_all(b"/exit\n").await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), chat.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_waits_until_pincerd_has_exited() {
    let (home, _llm) = scripted_home().await;
    let d = home.start();
    let lock = home.path().join("run/pincerd.lock");
    assert!(lock_is_held(&lock));
    let out = home.cli(&["stop"]).await;
    let stdout = out.ok();
    assert!(stdout.contains("stopping pincerd"), "{stdout}");
    assert!(stdout.contains("pincerd stopped"), "{stdout}");
    // By the time `stop` returns, the daemon is gone.
    assert!(!lock_is_held(&lock), "the instance lock is still held");
    assert!(!home.path().join("run/pincerd.sock").exists());
    assert_eq!(d.wait_exit(), Some(0));

    let again = home.cli(&["stop"]).await;
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.stderr.contains("pincerd is not running"), "{again:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_during_a_turn_says_what_runs_and_status_says_stopping() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&format!(
        "[daemon]\nshutdown_grace_s = 1\n\n{}",
        provider_config("openai", &format!("{}/v1", llm.base_url()), "")
    ));
    llm.script(
        "[slow]",
        vec![Step {
            text: "thinking".into(),
            hang: true,
            ..Default::default()
        }],
    );
    let d = home.start();
    let _send = home.cli_spawn(&["send", "[slow] take your time"]);
    until("the turn to be running", async || {
        home.cli(&["--json", "status"]).await.json()["running_turns"] == 1
    })
    .await;
    let stop_out = home.path().join("stop.stdout");
    let mut stop = home
        .pincer(&["stop"])
        .stdout(std::fs::File::create(&stop_out).unwrap())
        .spawn()
        .unwrap();
    until("stop to say what is running", async || {
        read(&stop_out).contains("stopping pincerd (1 turn running; it gets up to 1 s)")
    })
    .await;
    // While it stops, status says so: from the daemon (state stopping) or,
    // once the socket is closed, from the lock it still holds (exit 3).
    let status = home.cli(&["status"]).await;
    let said = format!("{}{}", status.stdout, status.stderr);
    assert!(said.contains("stopping"), "{status:?}");
    assert!(status.code == 0 || status.code == 3, "{status:?}");
    // However it ends, `stop` returns once the process is gone.
    d.kill9();
    let code = tokio::time::timeout(Duration::from_secs(20), stop.wait())
        .await
        .expect("stop did not return after pincerd exited")
        .unwrap();
    assert_eq!(code.code(), Some(0));
    assert!(
        read(&stop_out).contains("pincerd stopped"),
        "{}",
        read(&stop_out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_without_a_socket_reads_as_stopping() {
    let home = TestHome::new();
    let run = home.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    // What a daemon in its last seconds looks like: the socket is gone, the
    // instance lock is still held.
    let lock = std::fs::File::create(run.join("pincerd.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let out = home.cli(&["status"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("pincerd is stopping"), "{}", out.stderr);
    drop(lock);
    let out = home.cli(&["status"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.stderr.contains("pincerd is not running"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_read_with_the_daemon_down_and_follow_rotation() {
    let (home, _llm) = scripted_home().await;
    let d = home.start();
    assert_eq!(d.stop(), Some(0));
    let out = home.cli(&["logs", "-n", "5"]).await;
    assert!(out.ok().contains("pincerd stopped"), "{}", out.stdout);
    let lines = home.cli(&["--json", "logs", "-n", "3"]).await.json();
    assert_eq!(lines.as_array().map(Vec::len), Some(3), "{lines}");

    let log = home.path().join("logs/pincerd.log");
    let stdout_path = home.path().join("follow.stdout");
    let mut follow = home
        .pincer(&["logs", "-f", "-n", "1"])
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .spawn()
        .unwrap();
    let append = |line: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    };
    // Printed as the last line or as a new one, whichever comes first:
    // either way the follower is running once it shows.
    append("appended-after-start");
    until("the appended line", async || {
        read(&stdout_path).contains("appended-after-start")
    })
    .await;
    // Rotation: the file becomes pincerd.log.1 and a new one starts.
    std::fs::rename(&log, home.path().join("logs/pincerd.log.1")).unwrap();
    append("written-after-rotation");
    until("the line of the new file", async || {
        read(&stdout_path).contains("written-after-rotation")
    })
    .await;
    follow.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn not_running_errors_help_and_json_errors() {
    let home = TestHome::new();
    let out = home.cli(&["status"]).await;
    assert_eq!(out.code, 3);
    assert!(!out.stderr.contains("service"), "{}", out.stderr);
    assert!(out.stderr.contains("pincerd --home"), "{}", out.stderr);

    let out = home.cli(&["--json", "status"]).await;
    assert_eq!(out.code, 3);
    let v = out.json();
    assert_eq!(v["exit_code"], 3, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("pincerd is not running"),
        "{v}"
    );

    // A usage error under --json is JSON too, with clap's exit code 2.
    let out = home.cli(&["--json", "sessions", "shw", "x"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.json()["exit_code"], 2, "{}", out.stdout);

    // Every --agent and --session says what it is; no `-n` shows a default
    // it does not have.
    for cmd in [
        &["send", "--help"][..],
        &["chat", "--help"],
        &["abort", "--help"],
        &["sessions", "list", "--help"],
        &["sessions", "show", "--help"],
        &["sessions", "prompt", "--help"],
        &["tools", "list", "--help"],
        &["tools", "audit", "--help"],
        &["skills", "list", "--help"],
        &["memory", "search", "--help"],
        &["memory", "get", "--help"],
        &["memory", "status", "--help"],
        &["memory", "reindex", "--help"],
    ] {
        let help = home.cli(cmd).await;
        let text = help.ok();
        for line in text.lines() {
            let flag = line.trim_start();
            if flag.starts_with("--agent <") || flag.starts_with("--session <") {
                let described = flag.split_once('>').map(|(_, d)| d.trim()).unwrap_or("");
                assert!(
                    !described.is_empty(),
                    "{cmd:?}: `{line}` has no description"
                );
            }
            assert!(!line.contains("[default: 0]"), "{cmd:?}: {line}");
        }
    }

    // config check honours --json, valid and invalid.
    home.write_config(&provider_config("openai", "http://127.0.0.1:9/v1", ""));
    let out = home.cli(&["--json", "config", "check"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["valid"], true, "{}", out.stdout);
    home.write_config("[agents.main]\nmodle = \"x\"\n");
    let out = home.cli(&["--json", "config", "check"]).await;
    assert_eq!(out.code, 78, "{out:?}");
    let v = out.json();
    assert_eq!(v["exit_code"], 78, "{v}");
    assert!(v["error"].as_str().unwrap().contains("modle"), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_shows_time_and_session_and_json_is_one_document() {
    let (home, llm) = scripted_home().await;
    std::fs::create_dir_all(home.workspace()).unwrap();
    llm.script(
        "[audit]",
        vec![
            Step::tool("ls", json!({})),
            Step::tool("ls", json!({})),
            Step::text("listed twice"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "--session", "tools3", "[audit] list"])
        .await
        .ok();
    let out = home.cli(&["tools", "audit"]).await;
    let text = out.ok();
    let header = text.lines().next().unwrap_or_default();
    assert!(
        header.contains("TIME") && header.contains("SESSION"),
        "{text}"
    );
    assert!(text.contains("agent:main:tools3"), "{text}");
    let out = home
        .cli(&["tools", "audit", "--session", "agent:main:tools3"])
        .await;
    assert_eq!(out.ok().matches("agent:main:tools3").count(), 2);
    // The short name resolves as in `sessions show tools3`.
    let out = home.cli(&["tools", "audit", "--session", "tools3"]).await;
    assert_eq!(out.ok().matches("agent:main:tools3").count(), 2);

    // One JSON document for every listing, however many rows.
    let rows = home.cli(&["--json", "tools", "audit"]).await.json();
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 2);
    assert!(rows[0]["ts"].as_str().is_some_and(|t| t.contains('T')));
    assert!(
        home.cli(&["--json", "approvals", "list"])
            .await
            .json()
            .is_array()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn init_after_a_zero_config_start_keeps_the_provider_in_use() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.script(
        "[init1]",
        vec![Step::text("before init"), Step::text("after reload")],
    );
    let base = format!("{}/v1", llm.base_url());
    let home = TestHome::new();
    let _d = home.start_with_env(&[
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", &base),
        ("PINCER_MODEL", "env-model"),
    ]);
    assert_eq!(
        home.cli(&["send", "[init1] hi"]).await.ok().trim(),
        "before init"
    );
    let out = home.cli(&["init"]).await;
    assert!(out.ok().contains("pincer config reload"), "{}", out.stdout);
    let config = read(&home.path().join("config.toml"));
    assert!(config.contains(&base), "{config}");
    assert!(config.contains("\"env-model\""), "{config}");
    home.cli(&["config", "reload"]).await.ok();
    let started = Instant::now();
    let out = home.cli(&["send", "[init1] still there?"]).await;
    assert_eq!(out.ok().trim(), "after reload");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(llm.journal().last().unwrap()["model"], "env-model");
}

#[tokio::test(flavor = "multi_thread")]
async fn init_without_a_daemon_follows_the_zero_config_environment() {
    let home = TestHome::new();
    let out = home
        .pincer(&["--json", "init"])
        .env_remove("OPENAI_API_KEY")
        .env("ANTHROPIC_API_KEY", "sk-ant")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
        .env("PINCER_MODEL", "claude-test")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["provider"], "anthropic", "{report}");
    assert_eq!(
        report["wrote"].as_array().map(Vec::len),
        Some(8),
        "{report}"
    );
    assert_eq!(report["daemon_running"], false, "{report}");
    let config = read(&home.path().join("config.toml"));
    assert!(config.contains("kind = \"anthropic\""), "{config}");
    assert!(
        config.contains("base_url = \"http://127.0.0.1:9\""),
        "{config}"
    );
    assert!(
        config.contains("api_key_env = \"ANTHROPIC_API_KEY\""),
        "{config}"
    );
    assert!(config.contains("model = \"claude-test\""), "{config}");
    assert_eq!(home.cli(&["config", "check"]).await.code, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_over_the_limit_is_refused_with_a_sentence() {
    let (home, _llm) = scripted_home().await;
    let _d = home.start();
    let big = "x".repeat(2 * 1024 * 1024);
    let out = home.cli_with_stdin(&["send", "-"], &big).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("1 MiB"), "{}", out.stderr);
    assert!(out.stderr.contains("2097152 bytes"), "{}", out.stderr);
    assert!(!out.stderr.contains("decoded"), "{}", out.stderr);
}
