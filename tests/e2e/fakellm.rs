//! A full tool turn against fakellm (PyPI), a scripted OpenAI + Anthropic
//! server: `read`, then `exec`, then the final answer, with the tool
//! arguments streamed in several deltas.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::peers::{PyServer, admin};
use serde_json::Value;

const RULES: &str = r#"version: 1
rules:
  - name: t1_read
    when: {turn: 1}
    respond: {tool_calls: [{name: read, arguments: {path: "notes.txt"}}]}
  - name: t2_exec
    when: {turn: 2, tool_result_contains: "fakellm-secret-7"}
    respond: {tool_calls: [{name: exec, arguments: {command: "echo exec-ran-$((40+2))"}}]}
  - name: t3_final
    when: {turn: 3, tool_result_contains: "exec-ran-42"}
    respond: {content: "Your note says fakellm-secret-7 and exec printed exec-ran-42."}
"#;

async fn tool_turn(kind: &str) {
    let home = TestHome::new();
    let server = PyServer::fakellm(home.path(), RULES);
    let base = match kind {
        "anthropic" => server.url(),
        _ => format!("{}/v1", server.url()),
    };
    home.write_config(&provider_config(kind, &base, ""));
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(
        home.workspace().join("notes.txt"),
        "remember: fakellm-secret-7\n",
    )
    .unwrap();
    let _d = home.start();

    let out = home.cli(&["send", "--json", "what do my notes say?"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    let calls: Vec<(String, Value)> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_started")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                serde_json::from_str(e["arguments"].as_str().unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_eq!(calls[0].0, "read");
    // fakellm streams the arguments in pieces; they arrive whole.
    assert_eq!(calls[0].1["path"], "notes.txt");
    assert_eq!(calls[1].0, "exec");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "turn_finished");
    assert_eq!(
        done["text"],
        "Your note says fakellm-secret-7 and exec printed exec-ran-42."
    );

    let stats = admin("GET", &format!("{}/_fakellm/stats", server.url()), None).await;
    let text = stats.to_string();
    for rule in ["t1_read", "t2_exec", "t3_final"] {
        assert!(text.contains(rule), "rule {rule} never matched: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fakellm_openai_read_exec_answer() {
    tool_turn("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fakellm_anthropic_read_exec_answer() {
    tool_turn("anthropic").await;
}
