//! Tool calls written as text (`tool_format = "hermes" | "xml"`) and
//! rollback, end to end through pincerd against the scripted model: the
//! model sees its tools in the system prompt and its results as
//! `<tool_result>` blocks; clients never see call markup; unreadable markup,
//! unknown tools and repeated dedupe calls are rolled back and asked again.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

async fn setup(format: &str, extra: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let config = provider_config("openai", &format!("{}/v1", llm.base_url()), extra).replacen(
        "kind = \"openai\"\n",
        &format!("kind = \"openai\"\ntool_format = \"{format}\"\n"),
        1,
    );
    home.write_config(&config);
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("notes.txt"), "the number is 42\n").unwrap();
    (home, llm)
}

fn content(message: &Value) -> String {
    message["content"].as_str().unwrap_or_default().to_string()
}

fn text_deltas(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn hermes_calls_in_text_run_and_results_return_as_text() {
    let (home, llm) = setup("hermes", "").await;
    llm.script(
        "[hermes]",
        vec![
            Step::text(
                "I'll read it.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>",
            ),
            Step::text("The number is 42."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[hermes] the number?"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_started")
        .collect();
    assert_eq!(started.len(), 1, "{events:?}");
    assert_eq!(started[0]["name"], "read");
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .unwrap();
    assert_eq!(finished["status"], "ok");
    let shown = text_deltas(&events);
    assert!(
        !shown.contains("tool_call"),
        "markup reached the client: {shown}"
    );
    assert!(shown.contains("I'll read it.") && shown.contains("The number is 42."));

    let journal = llm.journal();
    assert_eq!(journal.len(), 2);
    assert!(
        journal[0].get("tools").is_none(),
        "text formats send no `tools`"
    );
    let system = content(&journal[0]["messages"][0]);
    assert!(
        system.contains("<tools>") && system.contains("\"name\":\"read\""),
        "{system}"
    );
    let msgs = journal[1]["messages"].as_array().unwrap();
    assert!(
        msgs.iter().all(|m| m["role"] != "tool"),
        "no native tool messages"
    );
    let assistant = content(&msgs[msgs.len() - 2]);
    assert!(
        assistant.contains("<tool_call>") && assistant.contains("notes.txt"),
        "{assistant}"
    );
    let result = content(msgs.last().unwrap());
    assert!(
        result.starts_with("<tool_result name=\"read\" call_id=\"call_0\">")
            && result.contains("the number is 42"),
        "{result}"
    );
    // The prefix the provider can cache is identical across the calls.
    assert_eq!(journal[0]["messages"][0], journal[1]["messages"][0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_xml_markup_is_rolled_back_and_asked_again() {
    let (home, llm) = setup("xml", "").await;
    llm.script(
        "[xml]",
        vec![
            // Cut off inside the call: not a call, not an answer.
            Step::text("Reading.\n<read>\n<path>notes.t"),
            Step::text(
                "<use_mcp_tool>\n<server_name>pincer</server_name>\n<tool_name>read</tool_name>\n<arguments>\n{\"path\": \"notes.txt\"}\n</arguments>\n</use_mcp_tool>",
            ),
            Step::text("<read path=\"notes.txt\" limit=\"1\"/>"),
            Step::text("It says 42."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[xml] the number?"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    assert_eq!(events.last().unwrap()["text"], "It says 42.");
    let retry = events
        .iter()
        .find(|e| e["type"] == "retrying")
        .expect("a rollback event");
    assert!(
        retry["reason"].as_str().unwrap().starts_with("rollback:"),
        "{retry}"
    );
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .collect();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c["status"] == "ok"), "{calls:?}");

    let journal = llm.journal();
    assert_eq!(journal.len(), 4);
    let system = content(&journal[0]["messages"][0]);
    assert!(system.contains("## read"), "{system}");
    // The dropped reply is not in the next request; the note is.
    let second = journal[1]["messages"].as_array().unwrap();
    assert!(
        second
            .iter()
            .all(|m| !content(m).contains("notes.t\n") && !content(m).contains("Reading."))
    );
    let note = content(second.last().unwrap());
    assert!(
        note.contains("discarded") && note.contains("cut off"),
        "{note}"
    );
    // After the successful call, the rollback note is gone.
    let third = journal[2]["messages"].as_array().unwrap();
    assert!(third.iter().all(|m| !content(m).contains("discarded")));
    // Past calls are written back in the configured (xml) form.
    assert!(
        third
            .iter()
            .any(|m| content(m).contains("<read>\n<path>notes.txt</path>\n</read>"))
    );

    let transcript = home.transcript("main");
    let rollbacks: Vec<&Value> = transcript
        .iter()
        .filter(|e| e["event"] == "rollback")
        .collect();
    assert_eq!(rollbacks.len(), 1, "{transcript:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_tools_roll_back_at_most_the_configured_times() {
    let (home, llm) = setup("native", "\n[tools.rollback]\nmax_consecutive = 2").await;
    llm.script(
        "[unknown]",
        vec![
            Step::tool("teleport", json!({})),
            Step::tool("teleport", json!({})),
            // The limit is reached: this one runs and gets its error result.
            Step::tool("teleport", json!({})),
            Step::text("I cannot teleport."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[unknown] go"]).await;
    let events = out.json_lines();
    assert_eq!(events.last().unwrap()["text"], "I cannot teleport.");
    let rollbacks = events.iter().filter(|e| e["type"] == "retrying").count();
    assert_eq!(rollbacks, 2);
    let journal = llm.journal();
    assert_eq!(journal.len(), 4);
    let note = content(journal[1]["messages"].as_array().unwrap().last().unwrap());
    assert!(
        note.contains("`teleport`") && note.contains("read"),
        "{note}"
    );
    let last = journal[3]["messages"].as_array().unwrap();
    let result = last.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        content(result).contains("unknown tool `teleport`"),
        "{result}"
    );
}

/// In `hermes` mode a model may also write a tool's element form, bare or
/// inside `<tool_call>`: both run, for tools offered in the turn, and the
/// client sees neither.
#[tokio::test(flavor = "multi_thread")]
async fn hermes_mode_runs_the_element_form_bare_and_inside_tool_call() {
    let (home, llm) = setup("hermes", "").await;
    llm.script(
        "[elements]",
        vec![
            Step::text("First.\n<exec><command>touch bare.txt</command></exec>"),
            Step::text("Second.\n<tool_call>\n<exec>\n<command>touch wrapped.txt</command>\n</exec>\n</tool_call>"),
            Step::text("Both made."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[elements] go"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .collect();
    assert_eq!(finished.len(), 2, "{events:?}");
    assert!(
        finished
            .iter()
            .all(|e| e["name"] == "exec" && e["status"] == "ok")
    );
    assert!(home.workspace().join("bare.txt").exists());
    assert!(home.workspace().join("wrapped.txt").exists());
    assert!(events.iter().all(|e| e["type"] != "retrying"), "{events:?}");
    let shown = text_deltas(&events);
    assert!(
        !shown.contains("<exec>") && !shown.contains("tool_call"),
        "markup reached the client: {shown}"
    );
    assert!(
        shown.contains("First.") && shown.contains("Both made."),
        "{shown}"
    );
}

/// In `native` mode calls come from the provider's structured tool calls
/// only: call markup in the reply's text (a model quoting a call, or
/// repeating one it read in a fetched page) is shown as written and never
/// runs.
#[tokio::test(flavor = "multi_thread")]
async fn native_mode_shows_text_form_calls_and_runs_none() {
    let (home, llm) = setup("native", "").await;
    let quoted = "A hermes call looks like <tool_call>{\"name\": \"exec\", \"arguments\": {\"command\": \"touch quoted.txt\"}}</tool_call> and an xml one like <exec><command>touch quoted.txt</command></exec>.";
    llm.script("[quote]", vec![Step::text(quoted)]);
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[quote] show me"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    assert!(
        events.iter().all(|e| e["type"] != "tool_call_started"),
        "{events:?}"
    );
    assert!(!home.workspace().join("quoted.txt").exists());
    assert_eq!(events.last().unwrap()["text"], quoted);
    assert_eq!(llm.journal().len(), 1);
}
