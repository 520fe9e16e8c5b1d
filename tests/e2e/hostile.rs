//! A hostile model's output against the workspace and the session store,
//! through the real daemon: a FIFO where a file should be, a file of
//! several gigabytes, a tool call larger than the API's messages.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
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
    std::fs::create_dir_all(home.workspace()).unwrap();
    (home, llm)
}

/// The `tool_call_finished` events of a `send --json` run.
fn finished_calls(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .collect()
}

/// Peak resident memory of a process, in kB (`VmHWM`).
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_a_fifo_is_refused_at_once_and_sigterm_stays_prompt() {
    // A read time limit short enough that today's blocking open() would
    // show up as a timeout rather than a hung test.
    let (home, llm) = setup("[tools]\ntimeouts = { read = 3 }\n").await;
    let fifo = home.workspace().join("f");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    llm.script(
        "[fifo]",
        vec![
            Step::tool("read", json!({"path": "f"})),
            Step::text("it is a pipe"),
        ],
    );
    let daemon = home.start();
    let started = Instant::now();
    let out = home.cli(&["send", "--json", "[fifo] read f"]).await;
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    let calls = finished_calls(&events);
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["status"], "error", "{:?}", calls[0]);
    let result = calls[0]["result"].as_str().unwrap();
    assert!(
        result.contains("`f` is a named pipe (FIFO), not a regular file"),
        "{result}"
    );
    assert!(took < Duration::from_secs(2), "the turn took {took:?}");

    let stopping = Instant::now();
    let code = tokio::task::spawn_blocking(move || daemon.stop())
        .await
        .unwrap();
    let took = stopping.elapsed();
    assert_eq!(code, Some(0), "pincerd did not exit cleanly on SIGTERM");
    assert!(took < Duration::from_secs(3), "SIGTERM took {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_of_several_gigabytes_is_read_and_searched_in_little_memory() {
    let (home, llm) = setup("").await;
    // 64 KiB of text lines, then a 4 GiB hole: reading it whole would take
    // 4 GiB of memory without touching the disk.
    let path = home.workspace().join("huge.log");
    let text: String = (1..=3000).map(|i| format!("line {i:05} ok\n")).collect();
    std::fs::write(&path, &text).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    llm.script(
        "[huge]",
        vec![
            Step::tools(&[
                ("read", json!({"path": "huge.log"})),
                (
                    "grep",
                    json!({"pattern": "line 0299[0-9]", "path": "huge.log"}),
                ),
            ]),
            Step::text("read it"),
        ],
    );
    let daemon = home.start();
    let started = Instant::now();
    let out = home.cli(&["send", "--json", "[huge] look"]).await;
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    let calls = finished_calls(&events);
    assert_eq!(calls.len(), 2, "{events:?}");
    for call in &calls {
        assert_eq!(call["status"], "ok", "{call:?}");
    }
    // The tool results as the model got them (the events show a preview).
    let results = pincer_testkit::requests::tool_results(&llm.journal()[1]);
    assert!(
        results[0].starts_with("     1\tline 00001 ok\n"),
        "{}",
        &results[0][..100]
    );
    assert!(
        results[0].contains("use offset="),
        "{}",
        &results[0][results[0].len() - 300..]
    );
    assert!(
        results[1].contains("huge.log:2990: line 02990 ok"),
        "{}",
        results[1]
    );
    assert!(took < Duration::from_secs(10), "the turn took {took:?}");
    let peak_kb = peak_rss_kb(daemon.pid());
    assert!(
        peak_kb < 100 * 1024,
        "pincerd's peak RSS was {} MB",
        peak_kb / 1024
    );
}
