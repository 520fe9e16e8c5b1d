//! Faults from llmock (PyPI), a fault-injecting LLM server: truncated
//! streams are retried and never taken as answers; malformed tool arguments
//! become tool errors the model sees; 429 with Retry-After is honoured.
//! (fakellm 0.3.5 ignores error statuses on streaming requests, so the 429
//! case runs here, where `Retry-After` is also sent.)

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::peers::{PyServer, admin};
use serde_json::{Value, json};

struct Mock {
    server: PyServer,
}

impl Mock {
    fn start() -> Self {
        Self {
            server: PyServer::start(
                "llmock",
                &[
                    "serve",
                    "--port",
                    "0",
                    "--tool-mode",
                    "off",
                    "--response-style",
                    "static",
                ],
            ),
        }
    }
    async fn queue(&self, behaviors: Value) {
        let r = admin(
            "POST",
            &format!("{}/_llmock/scenario", self.server.url()),
            Some(json!({"behaviors": behaviors})),
        )
        .await;
        assert!(
            r.get("queued").is_some(),
            "llmock refused the scenario: {r}"
        );
    }
    async fn requests(&self) -> Vec<Value> {
        admin(
            "GET",
            &format!("{}/_llmock/requests", self.server.url()),
            None,
        )
        .await["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
    async fn pending(&self) -> usize {
        let r = admin(
            "GET",
            &format!("{}/_llmock/scenario", self.server.url()),
            None,
        )
        .await;
        r.get("pending")
            .and_then(Value::as_u64)
            .or_else(|| {
                r.get("behaviors")
                    .and_then(Value::as_array)
                    .map(|a| a.len() as u64)
            })
            .unwrap_or(0) as usize
    }
    fn base(&self, kind: &str) -> String {
        match kind {
            "anthropic" => format!("{}/anthropic", self.server.url()),
            _ => format!("{}/v1", self.server.url()),
        }
    }
}

async fn truncated_stream_is_retried(kind: &str) {
    let mock = Mock::start();
    let home = TestHome::new();
    home.write_config(&provider_config(kind, &mock.base(kind), ""));
    mock.queue(json!([
        {"type": "reply", "text": "This answer will be cut short by the server."},
        {"type": "stream_fault", "kind": "truncate", "after_chunks": 3},
        {"type": "reply", "text": "The complete second answer."}
    ]))
    .await;
    let _d = home.start();
    let out = home.cli(&["send", "--json", "hello"]).await;
    let events = out.json_lines();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let retry = events
        .iter()
        .find(|e| e["type"] == "retrying")
        .unwrap_or_else(|| panic!("no retry: {events:?}"));
    assert!(
        retry["reason"]
            .as_str()
            .unwrap()
            .contains("ended before its terminator"),
        "{retry}"
    );
    assert_eq!(
        events.last().unwrap()["text"],
        "The complete second answer."
    );
    let requests = mock.requests().await;
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["fault"]
            .as_str()
            .map(|f| f.contains("truncate")),
        Some(true),
        "{}",
        requests[0]
    );
    // Only the complete answer was recorded.
    let transcript = home.transcript("main");
    let answers: Vec<&Value> = transcript
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["text"], "The complete second answer.");
    assert_eq!(mock.pending().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn truncated_openai_stream_is_an_error_and_retried() {
    truncated_stream_is_retried("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn truncated_anthropic_stream_is_an_error_and_retried() {
    truncated_stream_is_retried("anthropic").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_tool_arguments_become_a_tool_error_the_model_sees() {
    let mock = Mock::start();
    let home = TestHome::new();
    home.write_config(&provider_config("openai", &mock.base("openai"), ""));
    mock.queue(json!([
        {"type": "reply", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"type": "tool_fault", "kind": "malformed_arguments"},
        {"type": "reply", "text": "I will fix my arguments."}
    ]))
    .await;
    let _d = home.start();
    let out = home.cli(&["send", "--json", "read my notes"]).await;
    let events = out.json_lines();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .expect("a tool call");
    assert_eq!(finished["status"], "error");
    assert!(
        finished["result"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{finished}"
    );
    assert_eq!(events.last().unwrap()["text"], "I will fix my arguments.");
    let requests = mock.requests().await;
    assert_eq!(requests.len(), 2);
    let tool_msg = requests[1]["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("the tool result went back to the model");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{tool_msg}"
    );
}

async fn rate_limit_then_success(kind: &str) {
    let mock = Mock::start();
    let home = TestHome::new();
    home.write_config(&provider_config(kind, &mock.base(kind), ""));
    mock.queue(json!([
        {"type": "fail", "status": 429, "retry_after": 1, "message": "slow down"},
        {"type": "reply", "text": "Worth the wait."}
    ]))
    .await;
    let _d = home.start();
    let out = home.cli(&["send", "--json", "hi"]).await;
    let events = out.json_lines();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let retry = events
        .iter()
        .find(|e| e["type"] == "retrying")
        .expect("a retry event");
    // Retry-After (1 s) wins over the 20 ms configured backoff.
    assert_eq!(retry["delay_ms"], 1000, "{retry}");
    assert!(retry["reason"].as_str().unwrap().contains("429"));
    assert_eq!(events.last().unwrap()["text"], "Worth the wait.");
    let requests = mock.requests().await;
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["status"], 429);
    let gap =
        requests[1]["started_at"].as_f64().unwrap() - requests[0]["ended_at"].as_f64().unwrap();
    assert!(
        gap >= 0.95,
        "the retry came after {gap:.3} s, before Retry-After"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_with_retry_after_then_success_openai() {
    rate_limit_then_success("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_with_retry_after_then_success_anthropic() {
    rate_limit_then_success("anthropic").await;
}
