//! Sub-workflows (SPEC §13) end to end: a `workflow` step runs another
//! workflow of the workspace inside its parent's run — its inputs
//! rendered, its steps in the same ledger under the step's path, its
//! output the step's — survives `kill -9` while halted at an approval,
//! and replays; a parent whose sub-workflow cannot run is refused before
//! it starts.

use crate::workflow_halts::{home, next_request, request_of, start, status_is};

/// Saves a word to a file and says so.
const SAVE: &str = r#"
output = "{{ inputs.word }} saved as {{ inputs.name }}"

[inputs.word]
type = "string"

[inputs.name]
type = "string"
default = "word"

[[steps]]
id = "save"
kind = "tool"
tool = "write"
arguments = { path = "{{ inputs.name }}.txt", content = "{{ inputs.word }}!" }
"#;

/// Saves two words through `save`, the second with a default name.
const OUTER: &str = r#"
[inputs.w]
type = "string"

[[steps]]
id = "one"
kind = "workflow"
workflow = "save"
inputs = { word = "{{ inputs.w }}", name = "one" }

[[steps]]
id = "two"
kind = "workflow"
workflow = "save"
inputs = { word = "{{ steps.one.output | upper }}" }

[[steps]]
id = "report"
kind = "tool"
tool = "write"
arguments = { path = "report.txt", content = "{{ steps.one.output }} / {{ steps.two.output }}" }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_workflow_runs_in_its_parents_run_and_gives_its_output_and_the_run_replays() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/save.toml"), SAVE).unwrap();
    std::fs::write(ws.join("workflows/outer.toml"), OUTER).unwrap();
    let _d = home.start();

    // The dry run shows the sub-workflows' steps, inputs rendered.
    let out = home
        .cli(&[
            "--json",
            "workflows",
            "run",
            "outer",
            "--input",
            "w=hey",
            "--dry-run",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plan = out.json()["steps"].clone();
    let planned: Vec<&str> = plan
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(planned, ["one", "one/save", "two", "two/save", "report"]);
    assert_eq!(
        plan[1]["what"],
        "write {\"content\":\"hey!\",\"path\":\"one.txt\"}"
    );
    assert_eq!(plan[1]["verdict"], "offered");
    assert!(!ws.join("one.txt").exists(), "the dry run ran nothing");

    let out = home
        .cli(&["--json", "workflows", "run", "outer", "--input", "w=hey"])
        .await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let run = out.json_lines()[0]["run"].as_str().unwrap().to_string();
    let status = status_is(&home, &run, "succeeded").await;
    assert_eq!(std::fs::read_to_string(ws.join("one.txt")).unwrap(), "hey!");
    assert_eq!(
        std::fs::read_to_string(ws.join("word.txt")).unwrap(),
        "HEY SAVED AS ONE!"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("report.txt")).unwrap(),
        "hey saved as one / HEY SAVED AS ONE saved as word"
    );
    // One run, one ledger: the sub-workflows' steps under their step.
    let paths: Vec<&str> = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["one", "one/save", "two", "two/save", "report"]);
    let out = home.cli(&["--json", "workflows", "runs"]).await;
    assert_eq!(out.json()["runs"].as_array().unwrap().len(), 1);

    let out = home.cli(&["workflows", "replay", &run]).await;
    assert!(
        out.ok().contains("same path"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    // A changed sub-workflow changes what the run would do.
    std::fs::write(
        ws.join("workflows/save.toml"),
        SAVE.replace("saved as", "kept as"),
    )
    .unwrap();
    let out = home
        .cli(&["--json", "workflows", "replay", &run, "--current"])
        .await;
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let divergence = out.json()["divergence"].as_str().unwrap().to_string();
    assert!(divergence.contains("`one`"), "{divergence}");
    assert!(llm.journal().is_empty(), "no model was asked");
}

/// A sub-workflow that writes, halts for approval, and writes again.
const CHILD: &str = r#"
[inputs.x]
type = "string"

[[steps]]
id = "c1"
kind = "command"
command = "echo child >> log.txt"

[[steps]]
id = "ok"
kind = "approval"
prompt = "Go on with {{ inputs.x }}?"

[[steps]]
id = "c2"
kind = "command"
command = "echo after >> log.txt"
"#;

const PARENT: &str = r#"
[[steps]]
id = "before"
kind = "command"
command = "echo before >> log.txt"

[[steps]]
id = "sub"
kind = "workflow"
workflow = "child"
inputs = { x = "the plan" }

[[steps]]
id = "last"
kind = "command"
command = "echo last >> log.txt"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_workflow_halted_at_an_approval_survives_a_kill_and_finishes_once() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/child.toml"), CHILD).unwrap();
    std::fs::write(ws.join("workflows/parent.toml"), PARENT).unwrap();
    let d = home.start();
    let run = start(&home, "parent", &[]).await;
    let asked = request_of(&home, &run).await;
    assert_eq!(asked["step"], "sub/ok");
    assert_eq!(asked["workflow"], "parent");
    assert_eq!(asked["prompt"], "Go on with the plan?");
    let id = asked["id"].as_str().unwrap().to_string();
    status_is(&home, &run, "waiting").await;

    // The file changes while pincerd is down: the run goes on with the
    // sub-workflow it started with.
    d.kill9();
    std::fs::write(
        ws.join("workflows/child.toml"),
        CHILD.replace("echo after", "echo changed"),
    )
    .unwrap();
    let _d = home.start();
    let again = request_of(&home, &run).await;
    assert_eq!(
        again["id"],
        id.as_str(),
        "the same request after the restart"
    );
    home.cli(&["workflows", "approve", &id]).await.ok();
    let status = status_is(&home, &run, "succeeded").await;
    // Each step ran once: nothing before the halt ran again.
    assert_eq!(
        std::fs::read_to_string(ws.join("log.txt")).unwrap(),
        "before\nchild\nafter\nlast\n"
    );
    let sub = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|s| s["path"] == "sub")
        .unwrap();
    assert_eq!(sub["state"], "finished", "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_sub_workflow_cannot_run_is_refused_before_it_starts() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/child.toml"),
        "[[steps]]\nid = \"x\"\nkind = \"tool\"\ntool = \"nope\"\n",
    )
    .unwrap();
    std::fs::write(ws.join("workflows/parent.toml"), PARENT).unwrap();
    let _d = home.start();
    let out = home.cli(&["workflows", "run", "parent"]).await;
    assert_eq!(out.code, 1);
    let parent = ws.join("workflows/parent.toml").display().to_string();
    assert!(
        out.stderr.contains(&format!(
            "{parent}:7:1: the sub-workflow `child` cannot run (`pincer workflows check child` says why)"
        )),
        "{}",
        out.stderr
    );
    assert!(!ws.join("log.txt").exists(), "nothing ran");
    // A sub-workflow given an input it does not take fails its step.
    std::fs::write(ws.join("workflows/child.toml"), CHILD).unwrap();
    std::fs::write(
        ws.join("workflows/parent.toml"),
        PARENT.replace("x = \"the plan\"", "y = 1"),
    )
    .unwrap();
    let out = home.cli(&["--json", "workflows", "run", "parent"]).await;
    let run = out.json_lines()[0]["run"].as_str().unwrap().to_string();
    let status = status_is(&home, &run, "failed").await;
    let error = status["run"]["error"].as_str().unwrap();
    assert!(
        error.contains("step `sub` failed: workflow `child` has no input `y`"),
        "{error}"
    );
}

/// A sub-workflow whose approval asks for a redraft.
const DRAFTER: &str = r#"
[[steps]]
id = "draft"
kind = "llm"
prompt = "[wf-sub-draft] Write it."

[[steps]]
id = "ok"
kind = "approval"
prompt = "Good?"
preview = "{{ steps.draft.output }}"
revise = "draft"

[[steps]]
id = "keep"
kind = "tool"
tool = "write"
arguments = { path = "kept.txt", content = "{{ steps.draft.output }}" }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_redraft_inside_a_sub_workflow_is_what_its_later_steps_read_after_a_kill() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/drafter.toml"), DRAFTER).unwrap();
    std::fs::write(
        ws.join("workflows/outer.toml"),
        "[[steps]]\nid = \"sub\"\nkind = \"workflow\"\nworkflow = \"drafter\"\n",
    )
    .unwrap();
    llm.script(
        "[wf-sub-draft]",
        vec![
            pincer_testkit::scripted::Step::text("First draft."),
            pincer_testkit::scripted::Step::text("Second draft."),
        ],
    );
    let d = home.start();
    let run = start(&home, "outer", &[]).await;
    let first = request_of(&home, &run).await;
    assert_eq!(first["step"], "sub/ok");
    let id = first["id"].as_str().unwrap().to_string();
    home.cli(&["workflows", "revise", &id, "again"]).await.ok();
    let second = next_request(&home, &run, &id).await;
    assert_eq!(second["data"], "Second draft.");

    // Killed while the second request waits: after the restart the
    // sub-workflow's draft is the redraft, and the model is not asked
    // again.
    d.kill9();
    let _d = home.start();
    let again = request_of(&home, &run).await;
    assert_eq!(again["id"], second["id"]);
    let calls = llm.journal().len();
    home.cli(&["workflows", "approve", again["id"].as_str().unwrap()])
        .await
        .ok();
    status_is(&home, &run, "succeeded").await;
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "Second draft."
    );
    assert_eq!(llm.journal().len(), calls);
}
