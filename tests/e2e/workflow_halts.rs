//! Workflow halts (SPEC §13) end to end: a run halted at an `approval` or
//! `input` step waits on the daemon's approvals store, is listed by
//! `pincer approvals list` beside tool calls, is answered by `pincer
//! workflows approve|deny|edit|revise|input`, and survives `kill -9`.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::Value;

pub(crate) async fn home() -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "",
    ));
    std::fs::create_dir_all(home.workspace().join("workflows")).unwrap();
    (home, llm)
}

/// Waits until `pincer approvals list` shows a request of run `run`; the
/// request.
pub(crate) async fn request_of(home: &TestHome, run: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = home.cli(&["--json", "approvals", "list"]).await;
        if out.code == 0
            && let Some(found) = out
                .json()
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["run"] == run)
        {
            return found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "waited a minute for run {run} to ask: {}{}",
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until run `run` asks again, with a request other than `asked`;
/// the new request.
pub(crate) async fn next_request(home: &TestHome, run: &str, asked: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = request_of(home, run).await;
        if r["id"] != asked {
            return r;
        }
        assert!(Instant::now() < deadline, "no request after {asked}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `name` in the background (`pincer workflows run`); its run id.
pub(crate) async fn start(home: &TestHome, name: &str, inputs: &[&str]) -> String {
    let mut args = vec!["workflows", "run", name];
    for i in inputs {
        args.extend(["--input", i]);
    }
    let runs = || async {
        let out = home.cli(&["--json", "workflows", "runs"]).await;
        out.json()["runs"].as_array().unwrap().clone()
    };
    let before = runs().await;
    let _cli = home.cli_spawn(&args);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(run) = runs()
            .await
            .into_iter()
            .find(|r| r["workflow"] == name && !before.iter().any(|b| b["id"] == r["id"]))
        {
            return run["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no run of {name} started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls the run until its status is `want`; its status.
pub(crate) async fn status_is(home: &TestHome, run: &str, want: &str) -> Value {
    let what = format!("run {run} to be {want}");
    crate::workflows::status_until(home, run, &what, |s| s["run"]["status"] == want).await
}

const PUBLISH: &str = r#"
[inputs.text]
type = "string"

[[steps]]
id = "before"
kind = "command"
command = "echo before >> log.txt"

[[steps]]
id = "ok"
kind = "approval"
prompt = "Publish {{ inputs.text }}?"
preview = "{{ {'text': inputs.text} }}"
edit = true

[[steps]]
id = "after"
kind = "tool"
tool = "write"
arguments = { path = "published.txt", content = "{{ steps.ok.output.data.text }}" }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_halts_the_run_survives_a_kill_and_goes_on_once_approved() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/publish.toml"), PUBLISH).unwrap();
    let d = home.start();
    let run = start(&home, "publish", &["text=hello"]).await;
    let asked = request_of(&home, &run).await;
    assert_eq!(asked["kind"], "approval");
    assert_eq!(asked["workflow"], "publish");
    assert_eq!(asked["step"], "ok");
    assert_eq!(asked["prompt"], "Publish hello?");
    assert_eq!(asked["data"]["text"], "hello");
    assert_eq!(asked["approvers"][0], "owner");
    let id = asked["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 8);
    let status = status_is(&home, &run, "waiting").await;
    assert!(
        status["run"]["error"]
            .as_str()
            .unwrap()
            .contains(&format!("waits for approval {id}")),
        "{status}"
    );

    // Killed while it waits: the same request waits after the restart.
    d.kill9();
    let _d = home.start();
    let again = request_of(&home, &run).await;
    assert_eq!(again["id"], id.as_str(), "the same request, not a new one");
    let listed = home.cli(&["approvals", "list"]).await;
    assert!(
        listed
            .ok()
            .contains(&format!("`pincer workflows approve|deny|edit {id}`")),
        "{}",
        listed.stdout
    );

    let out = home.cli(&["workflows", "approve", &id]).await;
    assert_eq!(out.ok().trim(), format!("Approved {id}."));
    let status = status_is(&home, &run, "succeeded").await;
    assert_eq!(
        std::fs::read_to_string(ws.join("published.txt")).unwrap(),
        "hello"
    );
    // `before` ran once, before the kill.
    assert_eq!(
        std::fs::read_to_string(ws.join("log.txt")).unwrap(),
        "before\n"
    );
    let ok = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|s| s["path"] == "ok")
        .unwrap();
    assert_eq!(ok["output"]["approved"], true, "{ok}");
    assert_eq!(ok["output"]["approvers"][0], "owner");

    // Answered: a second answer is refused with the reason.
    let out = home.cli(&["workflows", "deny", &id]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("nothing is waiting for an answer under id"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_approves_the_changed_data_and_a_denial_fails_the_step() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/publish.toml"), PUBLISH).unwrap();
    let _d = home.start();

    let run = start(&home, "publish", &["text=draft"]).await;
    let id = request_of(&home, &run).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Not JSON: refused, nothing recorded, it still waits.
    let out = home.cli(&["workflows", "edit", &id, "{text: final}"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("is not JSON"), "{}", out.stderr);
    // An input's answer to an approval: refused with the verbs it takes.
    let out = home.cli(&["workflows", "input", &id, "{}"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("asks for a decision, not data: approve, deny, edit"),
        "{}",
        out.stderr
    );
    let out = home
        .cli(&["workflows", "edit", &id, r#"{"text": "final"}"#])
        .await;
    assert_eq!(out.ok().trim(), format!("Approved {id} with your changes."));
    status_is(&home, &run, "succeeded").await;
    assert_eq!(
        std::fs::read_to_string(ws.join("published.txt")).unwrap(),
        "final"
    );

    let run = start(&home, "publish", &["text=no"]).await;
    let id = request_of(&home, &run).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    home.cli(&["workflows", "deny", &id]).await.ok();
    let status = status_is(&home, &run, "failed").await;
    assert!(
        status["run"]["error"]
            .as_str()
            .unwrap()
            .contains("step `ok` failed: denied by the owner"),
        "{status}"
    );
}

const ASK: &str = r#"
[[steps]]
id = "who"
kind = "input"
prompt = "Who gets the report?"
schema = { type = "object", required = ["to"], properties = { to = { type = "string" } } }

[[steps]]
id = "save"
kind = "tool"
tool = "write"
arguments = { path = "to.txt", content = "{{ steps.who.output.to }}" }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_input_refuses_data_that_fails_its_schema_then_takes_good_data() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/ask.toml"), ASK).unwrap();
    let _d = home.start();
    let run = start(&home, "ask", &[]).await;
    let asked = request_of(&home, &run).await;
    assert_eq!(asked["kind"], "input");
    assert_eq!(asked["schema"]["required"][0], "to");
    let id = asked["id"].as_str().unwrap().to_string();

    let out = home
        .cli(&["workflows", "input", &id, r#"{"to": 42}"#])
        .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(
            "the data does not fit the step's schema: at /to: 42 is not of type \"string\""
        ),
        "{}",
        out.stderr
    );
    // Refused data is not an answer: the same request still waits.
    assert_eq!(request_of(&home, &run).await["id"], id.as_str());
    let out = home.cli(&["workflows", "approve", &id]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("asks for data"), "{}", out.stderr);

    let out = home
        .cli(&["workflows", "input", &id, r#"{"to": "ana@example.org"}"#])
        .await;
    assert_eq!(out.ok().trim(), format!("Answered {id}."));
    status_is(&home, &run, "succeeded").await;
    assert_eq!(
        std::fs::read_to_string(ws.join("to.txt")).unwrap(),
        "ana@example.org"
    );
}

const DIGEST: &str = r#"
[[steps]]
id = "draft"
kind = "llm"
prompt = "[wf-digest] Write the digest."

[[steps]]
id = "ok"
kind = "approval"
prompt = "Send the digest?"
preview = "{{ steps.draft.output }}"
revise = "draft"

[[steps]]
id = "send"
kind = "tool"
tool = "write"
arguments = { path = "digest.txt", content = "{{ steps.draft.output }}" }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_revise_redrafts_with_the_guidance_and_asks_again() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/digest.toml"), DIGEST).unwrap();
    llm.script(
        "[wf-digest]",
        vec![
            Step::text("A long digest of many words."),
            Step::text("Short digest."),
        ],
    );
    let _d = home.start();
    let run = start(&home, "digest", &[]).await;
    let first = request_of(&home, &run).await;
    assert_eq!(first["data"], "A long digest of many words.");
    assert_eq!(first["revisions_left"], 3);
    let id = first["id"].as_str().unwrap().to_string();
    let out = home
        .cli(&["workflows", "revise", &id, "make", "it", "shorter"])
        .await;
    assert!(out.ok().contains("Asked for a new draft"), "{}", out.stdout);

    // A new request with the new draft and one revision fewer.
    let second = next_request(&home, &run, &id).await;
    assert_eq!(second["data"], "Short digest.");
    assert_eq!(second["revisions_left"], 2);
    let journal = llm.journal();
    let redraft = journal.last().unwrap().to_string();
    assert!(redraft.contains("make it shorter"), "{redraft}");
    assert!(
        redraft.contains("A long digest of many words."),
        "{redraft}"
    );

    let second_id = second["id"].as_str().unwrap();
    home.cli(&["workflows", "approve", second_id]).await.ok();
    status_is(&home, &run, "succeeded").await;
    // Later steps see the new draft.
    assert_eq!(
        std::fs::read_to_string(ws.join("digest.txt")).unwrap(),
        "Short digest."
    );
    // The replay records the redraft again, as the run did.
    let calls = llm.journal().len();
    let out = home.cli(&["workflows", "replay", &run]).await;
    assert!(
        out.ok().contains("same path"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(llm.journal().len(), calls, "the replay asked no model");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quorum_of_named_approvers_is_counted_and_the_owner_alone_is_not_enough() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/two.toml"),
        r#"
[[steps]]
id = "ok"
kind = "approval"
prompt = "Both of you?"
approvers = ["telegram:11", "telegram:22"]
quorum = 2
"#,
    )
    .unwrap();
    let _d = home.start();
    let run = start(&home, "two", &[]).await;
    let asked = request_of(&home, &run).await;
    assert_eq!(asked["quorum"], 2);
    let id = asked["id"].as_str().unwrap().to_string();
    // The owner is not among the approvers: they cannot approve…
    let out = home.cli(&["workflows", "approve", &id]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(
            "only the step's approvers (telegram:11, telegram:22) can approve this; the owner may always deny it or cancel the run"
        ),
        "{}",
        out.stderr
    );
    // …but may cancel the run, which ends its request.
    let out = home.cli(&["workflows", "cancel", &run]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    status_is(&home, &run, "cancelled").await;
    let out = home.cli(&["--json", "approvals", "list"]).await;
    assert_eq!(out.json().as_array().unwrap().len(), 0, "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn whoever_started_a_run_cannot_approve_a_step_that_asks_someone_else() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/pay.toml"),
        "[[steps]]\nid = \"ok\"\nkind = \"approval\"\nprompt = \"Pay?\"\napprovers = [\"owner\", \"telegram:7\"]\nnot_initiator = true\n",
    )
    .unwrap();
    let _d = home.start();
    let run = start(&home, "pay", &[]).await;
    let asked = request_of(&home, &run).await;
    assert_eq!(asked["initiator"], "owner");
    let id = asked["id"].as_str().unwrap().to_string();
    let listed = home.cli(&["approvals", "list"]).await;
    assert!(
        listed
            .ok()
            .contains("(owner, telegram:7, not owner, who started the run)"),
        "{}",
        listed.stdout
    );
    let out = home.cli(&["workflows", "approve", &id]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("you started this run, and its step asks someone else to approve it"),
        "{}",
        out.stderr
    );
    // Still waiting; the owner may deny it.
    status_is(&home, &run, "waiting").await;
    home.cli(&["workflows", "deny", &id]).await.ok();
    status_is(&home, &run, "failed").await;
}
