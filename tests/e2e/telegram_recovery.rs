//! The Telegram bridge through an outage: the emulator stopped and started
//! again on its port. The recovery is logged once, and `pincer channels
//! status` marks the last error as past instead of showing its "trying
//! again in …" as if it were still so.

use std::time::{Duration, Instant};

use crate::telegram::{Rig, rig};

/// The bridge's entry of `pincer channels status --json`.
async fn status(r: &Rig) -> serde_json::Value {
    r.home.cli(&["--json", "channels", "status"]).await.json()[0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_an_outage_the_recovery_is_logged_and_the_error_shown_as_past() {
    let mut r = rig("", "").await;
    r.tg.stop();
    let start = Instant::now();
    loop {
        let s = status(&r).await;
        if s["connected"] == false && s["last_error"] != "" {
            assert_eq!(s["recovered_at"], 0, "the error is current: {s}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the outage was not noticed: {s}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Long enough for a second failed poll (the backoff starts at 1 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    r.tg.resume();
    let start = Instant::now();
    let s = loop {
        let s = status(&r).await;
        if s["connected"] == true {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no reconnection: {s}\n{}",
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(s["recovered_at"].as_u64().unwrap_or(0) > 0, "{s}");
    assert!(
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot reach Telegram")),
        "what happened is kept: {s}"
    );
    let shown = r.home.cli(&["channels", "status"]).await;
    assert!(
        shown.ok().contains("recovered") && !shown.ok().contains("last error"),
        "{}",
        shown.ok()
    );
    let log = r.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("telegram: reconnected after"))
        .collect();
    assert_eq!(lines.len(), 1, "one line for the recovery:\n{log}");
    assert!(lines[0].contains("INFO"), "{}", lines[0]);
    assert!(lines[0].contains(" failures / "), "{}", lines[0]);
}
