//! What a new user hit (issue 23), through the real binaries: which tools
//! ask for approval in `tools list`, the arguments in `tools audit`, the
//! text of each model call of a turn (`segments`, and a blank line between
//! them when piped), `logs --json` as fields, and the small messages of
//! `send`, `stop`, `pincerd` and `pincerd zero-config`.

use pincer_testkit::harness::{TestHome, bins, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

/// A home whose config points at a fresh scripted model; `extra` goes
/// into `[agents.main]`.
async fn scripted_home(extra: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        Some(128_000),
        extra,
    ));
    (home, llm)
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_says_which_tools_ask_for_approval() {
    let (home, _llm) = scripted_home("tools.ask = [\"exec\", \"write\"]").await;
    let _d = home.start();
    let list = home.cli(&["--json", "tools", "list"]).await.json();
    assert_eq!(tool(&list, "exec")["asks"], true, "{list}");
    assert_eq!(tool(&list, "write")["asks"], true, "{list}");
    // apply_patch writes files: `ask = ["write"]` holds it too.
    assert_eq!(tool(&list, "apply_patch")["asks"], true, "{list}");
    assert_eq!(tool(&list, "read")["asks"], false, "{list}");

    let text = home.cli(&["tools", "list"]).await;
    let line = |name: &str| {
        text.ok()
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name}: {}", text.stdout))
            .to_string()
    };
    assert!(line("exec").contains("asks"), "{}", text.stdout);
    assert!(!line("read").contains("asks"), "{}", text.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_refuses_an_unknown_channel_and_names_the_nearest() {
    let (home, _llm) = scripted_home("").await;
    let _d = home.start();
    let out = home
        .cli(&["tools", "list", "--channel", "telegrm", "--peer", "1"])
        .await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("unknown channel `telegrm`")
            && out.stderr.contains("did you mean `telegram`")
            && out.stderr.contains("discord"),
        "{}",
        out.stderr
    );
    home.cli(&["tools", "list", "--channel", "telegram", "--peer", "1"])
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_keeps_the_arguments_redacted_and_capped() {
    let (home, llm) = scripted_home("").await;
    std::fs::create_dir_all(home.workspace()).unwrap();
    let key = "sk-proj-abcdefghijklmnopqrstuvwxyz012345";
    let long = "y".repeat(5000);
    llm.script(
        "[audit-args]",
        vec![
            Step::tool("exec", json!({"command": format!("echo audit-me {key}")})),
            Step::tool("exec", json!({"command": format!("echo {long}")})),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "[audit-args] go"]).await.ok();
    let rows = home.cli(&["--json", "tools", "audit"]).await.json();
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let first = rows[0]["arguments"].as_str().expect("arguments");
    assert!(first.contains("echo audit-me [REDACTED]"), "{first}");
    assert!(!first.contains(key), "{first}");
    let second = rows[1]["arguments"].as_str().expect("arguments");
    assert!(second.chars().count() <= 2048, "{}", second.len());
    assert!(second.contains("characters omitted"), "{second}");

    let text = home.cli(&["tools", "audit"]).await;
    assert!(
        text.ok().contains("echo audit-me [REDACTED]"),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains(key), "{}", text.stdout);
    let header = text.stdout.lines().next().unwrap_or_default();
    assert!(header.contains("ARGUMENTS"), "{header}");
}

fn two_segment_script(llm: &ScriptedLlm, marker: &str) {
    llm.script(
        marker,
        vec![
            Step {
                text: "Running it.".into(),
                ..Step::tool("exec", json!({"command": "echo hi"}))
            },
            Step::text("Hello from exec."),
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_text_of_each_model_call_is_kept_apart() {
    let (home, llm) = scripted_home("").await;
    std::fs::create_dir_all(home.workspace()).unwrap();
    two_segment_script(&llm, "[seg-pipe]");
    two_segment_script(&llm, "[seg-json]");
    let _d = home.start();

    // Piped: a blank line between the two calls' texts.
    let out = home.cli(&["send", "[seg-pipe] run it"]).await;
    assert_eq!(out.ok(), "Running it.\n\nHello from exec.\n", "{out:?}");

    // --json: `text` is still the last call's, `segments` has both.
    // Another session: the scripted model tells conversations apart by
    // their first message.
    let out = home
        .cli(&["--json", "send", "--session", "seg", "[seg-json] run it"])
        .await;
    let events = out.json_lines();
    let finished = events.last().expect("events");
    assert_eq!(finished["type"], "turn_finished", "{finished}");
    assert_eq!(finished["text"], "Hello from exec.", "{finished}");
    assert_eq!(
        finished["segments"],
        json!(["Running it.", "Hello from exec."]),
        "{finished}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_json_has_fields_not_lines() {
    let (home, llm) = scripted_home("").await;
    llm.script("[log-fail]", vec![Step::error(400, "no such model")]);
    let d = home.start();
    let out = home.cli(&["send", "[log-fail] hi"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(d.stop(), Some(0));

    let lines = home.cli(&["--json", "logs", "-n", "200"]).await.json();
    let lines = lines.as_array().expect("an array");
    for l in lines {
        assert!(l.get("line").is_none(), "{l}");
        for key in ["time", "level", "target", "message"] {
            assert!(l[key].is_string(), "no {key} in {l}");
        }
    }
    let stopped = lines
        .iter()
        .find(|l| l["message"] == "pincerd stopped")
        .unwrap_or_else(|| panic!("no stop line in {lines:?}"));
    assert_eq!(stopped["level"], "INFO", "{stopped}");
    assert!(
        stopped["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("pincer_daemon")),
        "{stopped}"
    );
    let failed = lines
        .iter()
        .find(|l| l["message"] == "turn failed")
        .unwrap_or_else(|| panic!("no failed turn in {lines:?}"));
    assert_eq!(failed["level"], "WARN", "{failed}");
    assert_eq!(failed["fields"]["code"], "provider", "{failed}");
    assert!(failed["fields"]["session"].is_string(), "{failed}");

    // For people: one line each, time, level, target, message, fields.
    let text = home.cli(&["logs", "-n", "200"]).await;
    let line = text
        .ok()
        .lines()
        .find(|l| l.contains("turn failed"))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    assert!(
        line.contains(" WARN ") && line.contains("code=provider"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_send_prints_nothing_on_stdout() {
    let (home, llm) = scripted_home("").await;
    llm.script("[fail]", vec![Step::error(400, "no such model")]);
    let _d = home.start();
    let out = home.cli(&["send", "[fail] hi"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout, "", "{out:?}");
    assert!(out.stderr.contains("no such model"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_with_nothing_running_says_so_with_exit_3() {
    let home = TestHome::new();
    let out = home.cli(&["stop"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    let socket = home.path().join("run/pincerd.sock");
    assert!(
        out.stderr.contains(&format!(
            "pincerd is not running (no socket at {})",
            socket.display()
        )),
        "{}",
        out.stderr
    );
    // Stopping what is not running needs no start command.
    assert!(!out.stderr.contains("start it with"), "{}", out.stderr);
    let out = home.cli(&["--json", "stop"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("pincerd is not running (no socket at")),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_foreground_pincerd_names_itself_once() {
    let home = TestHome::new();
    let _d = home.start();
    let second = home.pincerd().output().unwrap();
    assert_eq!(second.status.code(), Some(75));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("already running"), "{err}");
    assert!(!err.contains("pincerd: pincerd"), "{err}");
}

#[test]
fn pincerd_version_names_the_commit_or_says_why_not() {
    let run = |bin: &std::path::Path| {
        let out = std::process::Command::new(bin)
            .arg("--version")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let pincer = run(&bins().pincer);
    let pincerd = run(&bins().pincerd);
    // `pincer 0.1.0 (1a2b3c4d5e6f)`: the commit in brackets.
    let commit = pincer
        .split_once('(')
        .and_then(|(_, c)| c.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{pincer}"));
    assert!(pincerd.starts_with("pincerd "), "{pincerd}");
    assert!(
        pincerd.contains(&format!("({commit})"))
            || (pincerd.contains("not stamped") && pincerd.contains("pincer --version")),
        "pincerd: {pincerd}; pincer: {pincer}"
    );
}

#[test]
fn zero_config_with_nothing_found_says_what_it_looked_for() {
    let home = TestHome::new();
    let mut cmd = std::process::Command::new(&bins().pincerd);
    cmd.arg("zero-config")
        .arg("--home")
        .arg(home.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        // A local model server answers on this machine: nothing to check.
        return;
    }
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "{}");
    for needle in [
        "no model provider",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "127.0.0.1:11434",
        "[providers]",
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in {stderr}");
    }
}
