//! Workflows (SPEC §13) end to end: files in an agent's workspace listed,
//! checked against the agent's real tool policy, shown and drawn by the
//! real `pincer` and `pincerd`.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::ScriptedLlm;

/// README's example workflow.
const SUMMARISE: &str = r#"
description = "Summarise the notes in a folder, ask before sending, remember it, send it"

[inputs.folder]
type = "string"
default = "inbox"

[[steps]]
id = "notes"
kind = "tool"
tool = "read"
arguments = { path = "{{ inputs.folder }}/notes.md" }

[[steps]]
id = "summary"
kind = "llm"
prompt = "Summarise these notes in three lines:\n{{ steps.notes.output }}"

[[steps]]
id = "approve"
kind = "approval"
prompt = "Send this summary?"
preview = "{{ steps.summary.output }}"

[[steps]]
id = "remember"
kind = "tool"
tool = "write"
arguments = { path = "memory/summary-{{ run.id }}.md", content = "{{ steps.summary.output }}" }

[[steps]]
id = "send"
kind = "tool"
tool = "message"
arguments = { text = "{{ steps.summary.output }}" }
"#;

async fn home() -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "tools = { deny = [\"web_fetch\"] }\n",
    ));
    let dir = home.workspace().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    (home, llm)
}

#[tokio::test(flavor = "multi_thread")]
async fn workflows_are_listed_checked_shown_and_drawn() {
    let (home, _llm) = home().await;
    let dir = home.workspace().join("workflows");
    std::fs::write(dir.join("summarise.toml"), SUMMARISE).unwrap();
    // The agent's policy denies web_fetch: a workflow may not use it.
    std::fs::write(
        dir.join("fetch.toml"),
        "[[steps]]\nid = \"page\"\nkind = \"tool\"\ntool = \"web_fetch\"\n\n[[steps]]\nid = \"say\"\nkind = \"tool\"\ntool = \"mesage\"\n",
    )
    .unwrap();
    let _d = home.start();

    let out = home.cli(&["--json", "workflows", "list"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    let names: Vec<&str> = r["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fetch", "summarise"]);
    assert_eq!(r["workflows"][1]["steps"], 5);
    assert_eq!(r["workflows"][1]["inputs"][0]["default"], "inbox");
    assert_eq!(r["workflows"][0]["problems"].as_array().unwrap().len(), 2);

    // Every problem with its file and line; exit 78 like a bad config.
    let out = home.cli(&["workflows", "check"]).await;
    assert_eq!(out.code, 78, "{}\n{}", out.stdout, out.stderr);
    let fetch = dir.join("fetch.toml").display().to_string();
    assert!(
        out.stderr.contains(&format!(
            "{fetch}:4:8: key `steps.page.tool`: the agent's policy removes `web_fetch` (agent `main` layer: "
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "{fetch}:9:8: key `steps.say.tool`: no tool is called `mesage` (did you mean `message`?)"
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("summarise: ok (5 steps)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("1 of 2 workflow(s) cannot run"),
        "{}",
        out.stderr
    );

    let out = home.cli(&["workflows", "check", "summarise"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = home.cli(&["workflows", "check", "sumarise"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no workflow `sumarise`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("(did you mean `summarise`?)"),
        "{}",
        out.stderr
    );

    let out = home
        .cli(&["--json", "workflows", "show", "summarise"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    let kinds: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool", "llm", "approval", "tool", "tool"]);
    assert_eq!(r["hash"].as_str().unwrap().len(), 64);
    assert_eq!(r["admission"], "queue");

    let out = home.cli(&["workflows", "show", "fetch"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no tool is called `mesage`"),
        "{}",
        out.stderr
    );

    let out = home.cli(&["workflows", "graph", "summarise"]).await;
    let text = out.ok();
    assert!(text.starts_with("flowchart TD\n"), "{text}");
    assert!(
        text.contains("s_approve[/\"approve · approval\"/]"),
        "{text}"
    );
    assert!(text.contains("s_remember --> s_send"), "{text}");
    assert!(text.contains("s_send --> finish"), "{text}");
}
