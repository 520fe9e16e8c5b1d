//! Stopping the daemon while a turn runs: the socket keeps answering
//! (`Status` says `stopping`, new turns are refused), the running turn gets
//! `shutdown_grace_s` and is then aborted and recorded as aborted, and the
//! daemon exits — it never waits for the whole turn.

use std::process::Command;
use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::peers::peer;
use pincer_testkit::scripted::{ScriptedLlm, Step};

fn status_json(home: &TestHome) -> Option<serde_json::Value> {
    let out = Command::new(peer("grpcurl"))
        .args(["-plaintext", "-unix", "-authority", "localhost", "-d", "{}"])
        .arg(home.path().join("run/pincerd.sock"))
        .arg("pincer.v1.Daemon/Status")
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_turn_honours_the_grace_and_records_the_abort() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "[daemon]\nshutdown_grace_s = 2\n",
    ));
    llm.script(
        "[endless]",
        vec![Step {
            text: "thinking".into(),
            hang: true,
            ..Default::default()
        }],
    );
    let daemon = home.start();
    let send = home.cli_spawn(&["send", "[endless] go"]);
    let started = Instant::now();
    while llm.journal().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "no model call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = status_json(&home).expect("status while running");
    assert_eq!(status["state"], "running", "{status}");

    // SAFETY: signals our own child process.
    unsafe { libc::kill(daemon.pid() as i32, libc::SIGTERM) };
    let stopping_since = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = status_json(&home).expect("the socket answers while stopping");
    assert_eq!(status["state"], "stopping", "{status}");
    let refused = home.cli(&["send", "another"]).await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("shutting down"),
        "a new turn is refused with the reason: {}",
        refused.stderr
    );

    let code = tokio::task::spawn_blocking(move || daemon.wait_exit())
        .await
        .unwrap();
    let took = stopping_since.elapsed();
    assert_eq!(
        code,
        Some(0),
        "pincerd exits cleanly after aborting the turn"
    );
    assert!(
        took < Duration::from_secs(6),
        "the 2 s grace was not honoured: stopping took {took:?}"
    );
    let _ = tokio::time::timeout(Duration::from_secs(10), send.wait_with_output()).await;
    let transcript = home.transcript("main");
    assert!(
        transcript
            .iter()
            .any(|e| e["kind"] == "meta" && e["event"] == "turn_aborted"),
        "the aborted turn is recorded: {transcript:?}"
    );
}
