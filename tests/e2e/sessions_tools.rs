//! The session tools end to end: a sub-agent spawned with a narrower
//! policy answers its parent; a message sent to another of the owner's
//! sessions comes back with that session's answer, and one to a session
//! that does not exist makes none; `session_status` describes the
//! session.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::requests::{first_user, offered_tools, tool_results};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

fn last_tool_result(request: &Value) -> String {
    tool_results(request).pop().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_agents_send_and_status() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    // One turn at a time in all: the parent waits for its child and for
    // the other session, which must not wait for a slot it holds.
    home.write_config(&format!(
        "[daemon]\nmax_concurrent_turns = 1\n\n{}",
        provider_config(
            "openai",
            &format!("{}/v1", llm.base_url()),
            "\n[tools.subagents]\ndeny = [\"web_fetch\"]\n",
        )
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("a.txt"), "x").unwrap();
    llm.script(
        "[parent]",
        vec![
            Step::tool(
                "sessions_spawn",
                json!({"task": "[child] list the files", "deny": ["exec"]}),
            ),
            Step::tool("session_status", json!({})),
            Step::tool(
                "sessions_send",
                json!({"session": "other", "message": "ping"}),
            ),
            Step::tool(
                "sessions_send",
                json!({"session": "nowhere", "message": "ping"}),
            ),
            Step::text("all done"),
        ],
    );
    llm.script(
        "[child]",
        vec![Step::tool("ls", json!({})), Step::text("child saw a.txt")],
    );
    llm.script(
        "[other]",
        vec![Step::text("hello"), Step::text("pong from other")],
    );
    let _d = home.start();
    let out = home
        .cli(&["send", "--session", "other", "[other] hi"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = home.cli(&["send", "--json", "[parent] go"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json_lines().last().unwrap()["text"], "all done");

    let journal = llm.journal();
    let child_first = journal
        .iter()
        .find(|r| first_user(r).starts_with("[child]"))
        .expect("the child was called");
    let child_tools = offered_tools(child_first);
    assert!(child_tools.contains(&"ls".to_string()), "{child_tools:?}");
    for removed in ["exec", "sessions_spawn", "web_fetch"] {
        assert!(
            !child_tools.contains(&removed.to_string()),
            "{removed} offered to the child: {child_tools:?}"
        );
    }
    let parent: Vec<&Value> = journal
        .iter()
        .filter(|r| first_user(r).starts_with("[parent]"))
        .collect();
    assert!(offered_tools(parent[0]).contains(&"sessions_spawn".to_string()));
    let spawned = last_tool_result(parent[1]);
    assert!(
        spawned.starts_with("[sub-agent agent:main:sub:") && spawned.contains("child saw a.txt"),
        "{spawned}"
    );
    let status = last_tool_result(parent[2]);
    assert!(
        status.contains("session: agent:main:main") && status.contains("now: "),
        "{status}"
    );
    let sent = last_tool_result(parent[3]);
    assert_eq!(sent, "pong from other");
    let other = journal
        .iter()
        .find(|r| first_user(r).starts_with("[other]") && r.to_string().contains("ping"))
        .unwrap();
    assert!(
        other
            .to_string()
            .contains("[message from session agent:main:main]\\nping"),
        "{other}"
    );
    let nowhere = last_tool_result(parent[4]);
    assert!(
        nowhere.contains("no session agent:main:nowhere"),
        "{nowhere}"
    );

    let sessions = home.cli(&["--json", "sessions", "list"]).await.json();
    let keys: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.iter().any(|k| k.starts_with("agent:main:sub:")),
        "{keys:?}"
    );
    assert!(keys.contains(&"agent:main:other"), "{keys:?}");
    assert!(
        !keys.contains(&"agent:main:nowhere"),
        "sessions_send made a session: {keys:?}"
    );
}
