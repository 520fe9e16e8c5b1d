//! MCP end to end against real servers (SPEC §15): server-everything and
//! server-filesystem from npm, mcp-server-time from PyPI, over stdio; the
//! official conformance suite's client scenarios over Streamable HTTP; and
//! a crashed server started again.

use std::time::Duration;

use pincer_testkit::harness::{TestHome, bins, provider_config};
use pincer_testkit::peers::{node22, npm_dir, npm_peer, peer};
use pincer_testkit::requests::tool_results;
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

async fn setup(mcp: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let config = provider_config("openai", &format!("{}/v1", llm.base_url()), "");
    home.write_config(&format!("{config}\n{mcp}"));
    std::fs::create_dir_all(home.workspace()).unwrap();
    (home, llm)
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_over_stdio_with_its_unrequested_notifications() {
    let everything = npm_peer("mcp-server-everything");
    let mcp = format!(
        "[mcp.everything]\ncommand = {}\n",
        toml_list(&[everything.display().to_string(), "stdio".into()])
    );
    let (home, llm) = setup(&mcp).await;
    llm.script(
        "[mcp]",
        vec![
            Step::tool("mcp__everything__toggle-simulated-logging", json!({})),
            Step::tool("mcp__everything__echo", json!({"message": "hello mcp"})),
            Step::tool("mcp__everything__get-sum", json!({"a": 2, "b": 40})),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    let list = home.cli(&["--json", "tools", "list"]).await.json();
    let echo = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .unwrap_or_else(|| panic!("no echo tool: {list}"));
    assert_eq!(echo["source"], "mcp:everything");
    assert_eq!(echo["offered"], true);
    assert!(echo["groups"].as_array().unwrap().is_empty());
    assert_eq!(list["servers"][0]["state"], "running", "{list}");

    let out = home.cli(&["send", "--json", "[mcp] echo something"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Logging notifications arrive unasked between the calls.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let journal = llm.journal();
    let results = tool_results(journal.last().unwrap());
    assert!(results[1].contains("hello mcp"), "{results:?}");
    assert!(results[2].contains("42"), "{results:?}");
    let statuses: Vec<String> = out
        .json_lines()
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, ["ok", "ok", "ok"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_error_results_and_time_from_pypi() {
    let allowed = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("inside.txt"), "inside text").unwrap();
    let mcp = format!(
        "[mcp.fs]\ncommand = {}\n[mcp.time]\ncommand = {}\n",
        toml_list(&[
            npm_peer("mcp-server-filesystem").display().to_string(),
            allowed.path().display().to_string()
        ]),
        toml_list(&[
            peer("mcp-server-time").display().to_string(),
            "--local-timezone".into(),
            "UTC".into()
        ])
    );
    let (home, llm) = setup(&mcp).await;
    let inside = allowed.path().join("inside.txt").display().to_string();
    llm.script(
        "[fs]",
        vec![
            Step::tools(&[
                ("mcp__fs__read_text_file", json!({"path": inside})),
                ("mcp__fs__read_text_file", json!({"path": "/etc/passwd"})),
                ("mcp__time__get_current_time", json!({"timezone": "UTC"})),
            ]),
            Step::text("read"),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[fs] read both"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let statuses: Vec<String> = out
        .json_lines()
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, ["ok", "error", "ok"]);
    let results = tool_results(&llm.journal()[1]);
    assert!(results[0].contains("inside text"), "{results:?}");
    assert!(
        results[1].starts_with("ERROR: ") && results[1].to_lowercase().contains("denied"),
        "{results:?}"
    );
    assert!(
        results[2].contains("\"timezone\": \"UTC\"") || results[2].contains("\"timezone\":\"UTC\""),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_server_is_started_again_and_a_broken_one_is_reported() {
    // A stdio server that exits when told to: mcp-server-time behind a
    // shell that records its pid.
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    let time = peer("mcp-server-time").display().to_string();
    let mcp = format!(
        "[mcp.time]\ncommand = [\"sh\", \"-c\", \"echo $$ > {}; exec {} --local-timezone UTC\"]\n[mcp.broken]\ncommand = [\"/nonexistent/mcp-server\"]\n",
        pidfile.path().display(),
        time
    );
    let (home, _llm) = setup(&mcp).await;
    let _d = home.start();
    let list = home.cli(&["--json", "tools", "list"]).await.json();
    let state = |list: &Value, name: &str| {
        list["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["state"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(state(&list, "time"), "running");
    assert!(state(&list, "broken").contains("cannot start"), "{list}");
    let pid: i32 = std::fs::read_to_string(pidfile.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: a process this test's daemon started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The next use finds it gone and restarts it (after the backoff).
    let mut restarted = false;
    for _ in 0..40 {
        let list = home.cli(&["--json", "tools", "list"]).await.json();
        if state(&list, "time") == "running"
            && list["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "mcp__time__get_current_time")
        {
            let new_pid: i32 = std::fs::read_to_string(pidfile.path())
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            if new_pid != pid {
                restarted = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(restarted, "the time server was not started again");
}

/// Runs one client scenario of the official conformance suite with pincer as
/// the client: the suite starts its server and runs our script with the
/// server's URL; the script points a fresh pincerd at it and sends one turn
/// in which the scripted model calls `add_numbers`.
async fn conformance(scenario: &str) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    llm.script_cycle(
        "[conformance]",
        vec![
            Step::tool("mcp__conf__add_numbers", json!({"a": 2, "b": 3})),
            Step::text("the sum is in"),
        ],
    );
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("client.sh");
    let config = provider_config("openai", &format!("{}/v1", llm.base_url()), "");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
set -e
home=$(mktemp -d)
cat > "$home/config.toml" <<'EOF'
{config}
EOF
printf '[mcp.conf]\nurl = "%s"\n' "$1" >> "$home/config.toml"
"{pincerd}" --home "$home" --log-stderr &
pid=$!
for i in $(seq 1 100); do [ -S "$home/run/pincerd.sock" ] && break; sleep 0.05; done
"{pincer}" --home "$home" send "[conformance] go"
"{pincer}" --home "$home" --json tools list
kill "$pid"
wait "$pid" || true
"#,
            pincerd = bins().pincerd.display(),
            pincer = bins().pincer.display(),
        ),
    )
    .unwrap();
    let suite = npm_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let out = tokio::process::Command::new(node22())
        .arg(&suite)
        .args([
            "client",
            "--command",
            &format!("sh {}", script.display()),
            "--scenario",
            scenario,
            "-o",
        ])
        .arg(work.path().join("results"))
        .current_dir(work.path())
        .output()
        .await
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "conformance {scenario} failed:\n{stdout}\n{stderr}"
    );
    // Every check the suite recorded passed (INFO lines are traffic).
    let checks: Vec<Value> = walk_json(&work.path().join("results"), "checks.json");
    assert!(!checks.is_empty(), "no checks.json written:\n{stdout}");
    let failed: Vec<&Value> = checks
        .iter()
        .filter(|c| matches!(c["status"].as_str(), Some("FAILURE")))
        .collect();
    assert!(failed.is_empty(), "{scenario}: {failed:#?}");
    let passed = checks.iter().filter(|c| c["status"] == "SUCCESS").count();
    assert!(passed > 0, "{scenario}: nothing passed: {checks:#?}");
}

fn walk_json(dir: &std::path::Path, file: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_json(&p, file));
        } else if p.file_name().is_some_and(|n| n == file)
            && let Ok(text) = std::fs::read_to_string(&p)
            && let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text)
        {
            out.extend(items);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn conformance_initialize_over_streamable_http() {
    conformance("initialize").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn conformance_tools_call_over_streamable_http() {
    conformance("tools_call").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_tool_list_is_offered_on_the_next_turn() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp_list_changed.py");
    let mcp = format!(
        "[mcp.lc]\ncommand = {}\n",
        toml_list(&[
            peer("python").display().to_string(),
            fixture.display().to_string()
        ])
    );
    let (home, llm) = setup(&mcp).await;
    llm.script(
        "[unlock]",
        vec![
            Step::tool("mcp__lc__unlock", json!({})),
            Step::text("unlocked"),
        ],
    );
    llm.script(
        "[after]",
        vec![
            Step::tool("mcp__lc__secret", json!({})),
            Step::text("got it"),
        ],
    );
    let _d = home.start();
    let before = home.cli(&["--json", "tools", "list"]).await.json();
    let names = |list: &Value| -> Vec<String> {
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!names(&before).contains(&"mcp__lc__secret".to_string()));
    home.cli(&["send", "--session", "a", "[unlock] go"])
        .await
        .ok();
    let after = home.cli(&["--json", "tools", "list"]).await.json();
    assert!(
        names(&after).contains(&"mcp__lc__secret".to_string()),
        "{after}"
    );
    home.cli(&["send", "--session", "b", "[after] go"])
        .await
        .ok();
    let journal = llm.journal();
    let results = tool_results(journal.last().unwrap());
    assert!(results[0].contains("the secret is 7"), "{results:?}");
}
