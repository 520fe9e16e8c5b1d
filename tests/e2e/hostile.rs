//! A hostile model's output against the workspace and the session store,
//! through the real daemon: a FIFO where a file should be, a file of
//! several gigabytes, a tool call larger than the API's messages.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

/// A home whose model has a window large enough for a 5 MB call (so the
/// turn goes on without compacting).
async fn setup(extra: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        Some(4_000_000),
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
    eprintln!("pincerd's peak RSS: {} kB; the turn took {took:?}", peak_kb);
    assert!(
        peak_kb < 100 * 1024,
        "pincerd's peak RSS was {} MB",
        peak_kb / 1024
    );
}

/// A `write` of 5,000,000 characters, each line different (a model's real
/// output, not a repetition the client would cut).
fn huge_write_script(llm: &ScriptedLlm) {
    let content: String = (0..500_000).map(|i| format!("{i:09}\n")).collect();
    assert_eq!(content.len(), 5_000_000);
    llm.script(
        "[huge-write]",
        vec![
            Step::tool("write", json!({"path": "big.txt", "content": content})),
            Step::text("done with the big file"),
        ],
    );
}

/// The transcript's `tool_call` line, as written.
fn tool_call_line(home: &TestHome) -> String {
    std::fs::read_to_string(home.transcript_path("main"))
        .unwrap()
        .lines()
        .find(|l| l.contains(r#""kind":"tool_call""#))
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_five_million_character_call_is_refused_and_the_session_stays_readable() {
    let (home, llm) = setup("").await;
    huge_write_script(&llm);
    let _daemon = home.start();
    let out = home.cli(&["send", "--json", "[huge-write] write it"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let events = out.json_lines();
    let calls = finished_calls(&events);
    assert_eq!(calls[0]["status"], "error", "{:?}", calls[0]);
    let result = calls[0]["result"].as_str().unwrap();
    assert!(
        result.contains("this `write` call was not run: its arguments are")
            && result.contains("[tools] max_argument_chars"),
        "{result}"
    );
    assert!(!home.workspace().join("big.txt").exists());
    // Kept shortened, still a JSON call; the next request carried that.
    let line = tool_call_line(&home);
    assert!(
        line.len() < 250_000,
        "the transcript line is {} bytes",
        line.len()
    );
    let entry: Value = serde_json::from_str(&line).unwrap();
    let args: Value = serde_json::from_str(entry["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["path"], "big.txt");
    assert!(
        args["content"]
            .as_str()
            .unwrap()
            .contains("characters omitted")
    );
    let second = llm.journal()[1].to_string();
    assert!(second.len() < 1_000_000, "{} bytes", second.len());

    let show = home.cli(&["sessions", "show", "main"]).await;
    assert!(
        show.ok().contains("this `write` call was not run"),
        "{}",
        show.stdout
    );
    let prompt = home.cli(&["sessions", "prompt", "main"]).await;
    assert!(
        prompt.ok().contains("characters omitted"),
        "the prompt shows the shortened call"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_with_a_five_megabyte_line_stays_readable() {
    // As before tool arguments were capped: the call runs and the
    // transcript keeps its 5 MB of arguments, and so does the last prompt.
    let (home, llm) = setup("[tools]\nmax_argument_chars = 10000000\n").await;
    huge_write_script(&llm);
    let _daemon = home.start();
    let out = home.cli(&["send", "--json", "[huge-write] write it"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let started = out
        .json_lines()
        .into_iter()
        .find(|e| e["type"] == "tool_call_started")
        .unwrap();
    // The event is shortened for the wire but still JSON.
    let args: Value = serde_json::from_str(started["arguments"].as_str().unwrap()).unwrap();
    assert!(
        args["content"]
            .as_str()
            .unwrap()
            .contains("characters omitted")
    );
    assert_eq!(
        std::fs::metadata(home.workspace().join("big.txt"))
            .unwrap()
            .len(),
        5_000_000
    );
    assert!(tool_call_line(&home).len() > 5_000_000);

    let show = home.cli(&["sessions", "show", "main"]).await;
    let text = show.ok();
    assert!(text.contains("done with the big file"), "{text}");
    assert!(
        text.contains("note: 1 entries were too long to show whole"),
        "{text}"
    );
    let json = home.cli(&["sessions", "show", "main", "--json"]).await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc = json.json();
    assert_eq!(doc["shortened"], 1, "{}", doc["shortened"]);
    assert_eq!(doc["left_out"], 0);
    let prompt = home.cli(&["sessions", "prompt", "main"]).await;
    assert!(
        prompt
            .ok()
            .contains("note: this prompt is too large to show whole in one reply"),
        "{}",
        &prompt.stdout[prompt.stdout.len().saturating_sub(500)..]
    );
    let prompt = home.cli(&["sessions", "prompt", "main", "--json"]).await;
    assert_eq!(prompt.code, 0, "{}", prompt.stderr);
    assert!(
        prompt.json()["note"]
            .as_str()
            .unwrap()
            .contains("shortened")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transcript_and_prompt_written_before_the_caps_stay_readable() {
    let (home, llm) = setup("").await;
    llm.script("[old]", vec![Step::text("hello back")]);
    let daemon = home.start();
    home.cli(&["send", "[old] hello"]).await.ok();
    assert_eq!(
        tokio::task::spawn_blocking(move || daemon.stop())
            .await
            .unwrap(),
        Some(0)
    );
    // What an older pincerd wrote for a 5 MB call: the transcript line and
    // the last prompt, each over the 4 MiB a reply may have.
    let content: String = (0..500_000).map(|i| format!("{i:09}\n")).collect();
    let transcript = home.transcript_path("main");
    let mut lines = std::fs::read_to_string(&transcript).unwrap();
    // And 40 long replies before it: more than one reply holds, even
    // though each is shown whole.
    for i in 0..40 {
        let text = format!("reply {i} {}", "z".repeat(90_000));
        lines.push_str(
            &json!({"id": format!("r{i}"), "ts": "2026-01-01T00:00:00Z", "kind": "assistant",
                    "text": text, "model": "test/test-model", "stop": "stop"})
            .to_string(),
        );
        lines.push('\n');
    }
    lines.push_str(
        &json!({"id": "old-call", "ts": "2026-01-01T00:00:00Z", "kind": "tool_call",
                "call_id": "c1", "name": "write",
                "arguments": json!({"path": "big.txt", "content": content}).to_string()})
        .to_string(),
    );
    lines.push('\n');
    std::fs::write(&transcript, lines).unwrap();
    let prompt_file = transcript.with_extension("prompt.json");
    std::fs::write(
        &prompt_file,
        json!({"ts": "2026-01-01T00:00:00Z", "model": "test/test-model", "tool_format": "native",
               "estimated_tokens": 1_500_000, "system": "You are pincer.",
               "messages": [{"role": "user", "parts": [{"type": "text", "text": content}]}],
               "tools": ["write"]})
        .to_string(),
    )
    .unwrap();

    let _daemon = home.start();
    let show = home.cli(&["sessions", "show", "main"]).await;
    let text = show.ok();
    let tail = &text[text.len().saturating_sub(800)..];
    assert!(text.contains("reply 39 zzz"), "{tail}");
    assert!(
        text.contains("note: 1 entries were too long to show whole"),
        "{tail}"
    );
    // The older entries are a page back.
    let (_, again) = tail
        .split_once("`pincer sessions show main --before ")
        .unwrap_or_else(|| panic!("no paging note: {tail}"));
    let before = again.split('`').next().unwrap();
    let older = home
        .cli(&["sessions", "show", "main", "--before", before])
        .await;
    let older = older.ok();
    assert!(older.contains("hello back"), "{}", &older[..300]);
    assert!(!older.contains("reply 39 zzz"));
    let prompt = home.cli(&["sessions", "prompt", "main"]).await;
    let text = prompt.ok();
    assert!(text.contains("You are pincer."), "{}", &text[..200]);
    assert!(
        text.contains("note: this prompt is too large to show whole in one reply"),
        "{}",
        &text[text.len().saturating_sub(500)..]
    );
}

/// `web_fetch` does not go through `HTTP(S)_PROXY` unless the config says
/// so: a proxy resolves names itself, so the address the SSRF check
/// vetted would not be the one fetched. With a dead proxy in the
/// environment the fetch still reaches the host; with `use_env_proxy`
/// it goes to the proxy and fails.
#[tokio::test(flavor = "multi_thread")]
async fn web_fetch_ignores_environment_proxies_unless_told() {
    for (use_proxy, fetched) in [(false, true), (true, false)] {
        let llm = ScriptedLlm::start().await.expect("scripted llm");
        let home = TestHome::new();
        home.write_config(&format!(
            "{}\n[tools.web_fetch]\nallow_private = true\nuse_env_proxy = {use_proxy}\n",
            pincer_testkit::harness::provider_config(
                "openai",
                &format!("{}/v1", llm.base_url()),
                ""
            )
        ));
        // By name: NO_PROXY below exempts the provider's address only.
        let target = format!("{}/some/page", llm.base_url()).replace("127.0.0.1", "localhost");
        llm.script(
            "[proxy]",
            vec![
                Step::tool("web_fetch", json!({"url": target})),
                Step::text("done"),
            ],
        );
        // Port 9 (discard) on loopback: nothing listens, a proxy there
        // refuses every connection. The model's own calls (providers do
        // use the environment's proxy) are exempted by NO_PROXY.
        let _d = home.start_with_env(&[
            ("HTTP_PROXY", "http://127.0.0.1:9"),
            ("http_proxy", "http://127.0.0.1:9"),
            ("NO_PROXY", "127.0.0.1"),
            ("no_proxy", "127.0.0.1"),
        ]);
        home.cli(&["send", "[proxy] fetch it"]).await;
        let result = pincer_testkit::requests::tool_results(&llm.journal()[1]).join("\n");
        assert_eq!(
            !result.contains("cannot fetch"),
            fetched,
            "use_env_proxy = {use_proxy}: {result}"
        );
    }
}
