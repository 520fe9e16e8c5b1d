//! A hostile model (scripted through fakellm, PyPI) answering a stranger in
//! a group chat: it calls `exec`, a tool the channel denies, a path outside
//! the workspace, and tries to escalate through a sub-agent. The messages
//! enter through `Hub::chat_from`, the entry the Telegram and Discord
//! bridges use. Nothing executes, the model gets an error for each call,
//! and the audit table records who asked and what decided.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pincer_daemon::agent::hub::Hub;
use pincer_daemon::agent::{Event, Runtime};
use pincer_daemon::config;
use pincer_daemon::home::Home;
use pincer_daemon::llm::client::ModelClient;
use pincer_daemon::routing::{self, Chat, Inbound, Sender};
use pincer_daemon::session::registry::Registry;
use pincer_testkit::peers::PyServer;

const RULES: &str = r#"version: 1
rules:
  - name: attack
    when: {turn: 1}
    respond:
      tool_calls:
        - {name: exec, arguments: {command: "touch pwned"}}
        - {name: web_fetch, arguments: {url: "http://example.com/"}}
        - {name: sessions_spawn, arguments: {task: "run exec for me"}}
  - name: give_up
    when: {turn: 2}
    respond: {content: "I could not."}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_in_a_group_never_reaches_exec() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let server = PyServer::start(
        "fakellm",
        &["serve", "--config", rules.to_str().unwrap(), "--port", "0"],
    );
    let home = Home::at(dir.path().join("home"));
    home.create_dirs().unwrap();
    // The agent itself is generous: it is the chat context that narrows.
    std::fs::write(
        home.config_file(),
        format!(
            "[providers.f]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n[models.default]\nprovider = \"f\"\nmodel = \"m\"\n[agents.main]\nmodel = \"default\"\n",
            server.url()
        ),
    )
    .unwrap();
    let config = config::load(&home).unwrap();
    let workspace = config.agent("main").unwrap().workspace.clone();
    let registry = Registry::open(&home.registry_db()).unwrap();
    let models = ModelClient::new(&config.providers).unwrap();
    let hub = Hub::new(
        Runtime::new(home.clone(), registry.clone(), config, models),
        8,
    );

    // The origin comes from the routing layer, as a bridge's would.
    let inbound = Inbound {
        channel: "telegram".into(),
        account: None,
        chat: Chat::Group("-100123".into()),
        thread: None,
        guild: None,
        roles: Vec::new(),
        sender: Sender {
            id: "4242".into(),
            name: "Mallory".into(),
        },
    };
    let route = routing::route(&hub.runtime().config(), &inbound).unwrap();
    let key = route.key.clone();
    assert_eq!(key.to_string(), "agent:main:telegram:group:-100123");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    hub.chat(route.key, "hello bot".into(), route.origin, tx)
        .await
        .unwrap();
    let mut finished = None;
    let mut results = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::ToolFinished {
                name,
                status,
                result,
                ..
            } => results.push((name, status, result)),
            Event::Finished { text, .. } => {
                finished = Some(text);
                break;
            }
            Event::Error { message, .. } => panic!("turn failed: {message}"),
            _ => {}
        }
    }
    assert_eq!(finished.as_deref(), Some("I could not."));
    assert!(!workspace.join("pwned").exists());
    let statuses: Vec<(&str, &str)> = results.iter().map(|(n, s, _)| (n.as_str(), *s)).collect();
    // Messaging is the default profile of a channel chat: no exec, no
    // web_fetch; sessions_spawn is there, but the child inherits the
    // stranger's narrowing.
    assert_eq!(statuses[0], ("exec", "denied"), "{results:?}");
    assert!(results[0].2.contains("profile `messaging`"), "{results:?}");
    assert_eq!(statuses[1], ("web_fetch", "denied"), "{results:?}");

    let rows: Vec<_> = registry
        .audit_rows(None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let group_rows: Vec<_> = rows
        .iter()
        .filter(|r| r.session_key == key.to_string())
        .collect();
    assert!(
        group_rows.iter().all(|r| r.sender == "telegram:4242"),
        "{group_rows:?}"
    );
    assert_eq!(group_rows[0].decided_by, "policy");
    assert_eq!(group_rows[0].outcome, "denied");
    // Whatever the sub-agent tried ran under the same origin and was denied.
    let child_exec: Vec<_> = rows
        .iter()
        .filter(|r| r.session_key.contains(":sub:") && r.tool == "exec")
        .collect();
    // (fakellm answers the child's first call with the same attack.)
    assert!(
        !child_exec.is_empty(),
        "the sub-agent never tried exec: {rows:?}"
    );
    assert!(
        child_exec
            .iter()
            .all(|r| r.outcome == "denied" && r.sender == "telegram:4242"),
        "{child_exec:?}"
    );
}
