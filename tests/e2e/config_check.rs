//! What a new user meets in the config (issue 23): a misspelled tool name
//! refused with the nearest one, names only a server can confirm checked
//! against its list, messages that name the key and say types in words,
//! reload reports judged against what pincerd runs and logged, and the
//! problems `pincer status` and `pincer doctor` show.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::peers::peer;

/// `ask = ["exce"]` used to be valid, and `exec` then ran without asking.
#[tokio::test(flavor = "multi_thread")]
async fn a_misspelled_tool_name_is_refused_with_the_nearest_name() {
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        "http://127.0.0.1:9/v1",
        "tools = { ask = [\"exce\"] }",
    ));
    let file = home.path().join("config.toml");
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 78, "{}", check.stdout);
    assert!(
        check.stderr.contains(&format!(
            "{}:16:18: key `agents.main.tools`: unknown tool `exce` (did you mean `exec`?)",
            file.display()
        )),
        "{}",
        check.stderr
    );
    // pincerd refuses to start on it, with the same sentence.
    let out = home.pincerd().output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did you mean `exec`?"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And doctor, offline, says so.
    let doctor = home.cli(&["doctor"]).await;
    assert!(
        doctor.stdout.contains("✗ config:") && doctor.stdout.contains("did you mean `exec`?"),
        "{}",
        doctor.stdout
    );
}

/// A valid config naming an MCP tool its server does not list loads, and
/// `pincer config check` and `pincer doctor` warn about the name.
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_tool_name_the_server_does_not_list_is_a_warning() {
    let home = TestHome::new();
    let time = format!(
        "[{:?}, \"--local-timezone\", \"UTC\"]",
        peer("mcp-server-time").display().to_string()
    );
    home.write_config(&format!(
        "{}\n[mcp.time]\ncommand = {time}\n\n[tools]\ndeny = [\"mcp__time__convert_time\", \"mcp__time__get_current_tim\"]\n",
        provider_config("openai", "http://127.0.0.1:9/v1", "")
    ));
    let file = home.path().join("config.toml");
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 0, "{}", check.stderr);
    let warning = format!(
        "warning: {}:22:36: key `tools.deny`: the MCP server `time` lists no tool `mcp__time__get_current_tim` (did you mean `mcp__time__get_current_time`?), so the entry matches nothing",
        file.display()
    );
    assert!(check.stdout.contains(&warning), "{}", check.stdout);
    // The name the server lists gets no warning.
    assert_eq!(
        check.stdout.matches("warning:").count(),
        1,
        "{}",
        check.stdout
    );
    let json = home.cli(&["--json", "config", "check"]).await.json();
    assert_eq!(json["valid"], true);
    assert_eq!(
        json["warnings"].as_array().map(Vec::len),
        Some(1),
        "{json:#}"
    );

    // The running daemon's doctor asks its own servers.
    let _d = home.start();
    let doctor = home.cli(&["doctor"]).await;
    assert!(
        doctor.stdout.contains(&format!(
            "! tools: {}",
            warning.trim_start_matches("warning: ")
        )),
        "{}",
        doctor.stdout
    );
}

/// An unclosed header is reported under its key (its comment is no part
/// of it), and a wrong type is said in words.
#[tokio::test(flavor = "multi_thread")]
async fn config_messages_name_the_key_and_say_types_in_words() {
    let home = TestHome::new();
    home.write_config("[daemon]\nlog_level = \"info\"\n\n[agents.main  # Bob's agent\n");
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 78);
    assert!(
        check
            .stderr
            .contains(":4:13: key `agents.main`: unclosed table, expected `]`"),
        "{}",
        check.stderr
    );
    home.write_config("[daemon]\nmax_concurrent_turns = \"eight\"\n");
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 78);
    assert!(
        check.stderr.contains(
            "key `daemon.max_concurrent_turns`: expected a whole number, not the text \"eight\""
        ),
        "{}",
        check.stderr
    );
}

/// Waits until the log holds `needle`; the log.
async fn logged(home: &TestHome, needle: &str) -> String {
    let started = Instant::now();
    loop {
        let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap_or_default();
        if log.contains(needle) {
            return log;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not logged: {needle}\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A restart-only key set 8 → 3 → 8: the second reload used to report
/// "needs a restart (3 → 8)" while pincerd ran with 8. Each reload logs
/// what it did.
#[tokio::test(flavor = "multi_thread")]
async fn reload_compares_with_what_runs_and_logs_what_changed() {
    let home = TestHome::new();
    let base = provider_config("openai", "http://127.0.0.1:9/v1", "");
    home.write_config(&base);
    let _d = home.start();

    home.write_config(&format!("[daemon]\nmax_concurrent_turns = 3\n\n{base}"));
    let out = home.cli(&["config", "reload"]).await;
    assert!(
        out.ok()
            .contains("needs a restart of pincerd: daemon.max_concurrent_turns (8 → 3)"),
        "{}",
        out.stdout
    );
    logged(
        &home,
        "config reloaded (a reload request): needs a restart: daemon.max_concurrent_turns (8 → 3)",
    )
    .await;

    home.write_config(&format!("[daemon]\nmax_concurrent_turns = 8\n\n{base}"));
    let out = home.cli(&["config", "reload"]).await;
    assert_eq!(
        out.ok().trim(),
        "config reloaded: nothing changed",
        "pincerd runs with 8"
    );
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["max_concurrent_turns"], 8);

    home.write_config(&format!(
        "[daemon]\nmax_concurrent_turns = 8\n\n{base}\n[agents.helper]\nmodel = \"default\"\n"
    ));
    home.cli(&["config", "reload"]).await.ok();
    logged(
        &home,
        "config reloaded (a reload request): applied: agent `helper` added",
    )
    .await;
}

/// A provider whose key is missing shows in `pincer status` (it used to
/// show only in doctor or a failed turn), in the sentence doctor uses.
#[tokio::test(flavor = "multi_thread")]
async fn status_shows_a_missing_provider_key() {
    let home = TestHome::new();
    home.write_config(
        "[providers.nokey]\nkind = \"anthropic\"\napi_key_env = \"PINCER_TEST_UNSET_KEY\"\n\n[models.default]\nprovider = \"nokey\"\nmodel = \"claude-x\"\n",
    );
    let _d = home.start();
    let sentence = "provider `nokey` reads its API key from $PINCER_TEST_UNSET_KEY, which is not set in pincerd's environment; export it before starting pincerd";
    let status = home.cli(&["status"]).await;
    assert!(
        status.ok().contains(&format!("problem:  {sentence}")),
        "{}",
        status.stdout
    );
    let json = home.cli(&["--json", "status"]).await.json();
    assert_eq!(json["provider_problem"], sentence);
    let doctor = home.cli(&["doctor"]).await;
    assert!(
        doctor
            .stdout
            .contains(&format!("✗ provider nokey: {sentence}")),
        "{}",
        doctor.stdout
    );
}

/// The guide's Troubleshooting says doctor lists the files memory skipped;
/// it now does, from the index status `pincer memory status` shows.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_lists_the_memory_files_that_were_skipped() {
    let home = TestHome::new();
    home.write_config("[memory]\nembedder = \"none\"\n");
    let memory = home.workspace().join("memory");
    std::fs::create_dir_all(&memory).unwrap();
    std::fs::write(memory.join("big.md"), "x".repeat(5 * 1024 * 1024)).unwrap();
    let _d = home.start();
    let started = Instant::now();
    let skipped = loop {
        let s = home.cli(&["memory", "status", "--json"]).await.json();
        let skipped = &s["indexes"][0]["skipped"];
        if skipped.as_array().is_some_and(|a| !a.is_empty()) {
            break skipped[0].as_str().unwrap().to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing skipped: {s:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(skipped, "memory/big.md: larger than 4 MiB");
    let doctor = home.cli(&["doctor"]).await;
    assert!(
        doctor.stdout.contains(
            "! memory main: skipped memory/big.md: larger than 4 MiB; the search does not see it"
        ),
        "{}",
        doctor.stdout
    );
}
