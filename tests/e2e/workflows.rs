//! Workflows (SPEC §13) end to end: files in an agent's workspace listed,
//! checked against the agent's real tool policy, shown and drawn by the
//! real `pincer` and `pincerd`.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};

/// A shorter form of the guide's example workflow (docs/src/workflows.md).
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

const FRUITS: &str = r#"
description = "The fruits in a note, each written to a file"
output = "{{ steps.facts.output.fruits | join(', ') }}"

[inputs.note]
type = "string"
default = "notes.md"

[[steps]]
id = "read"
kind = "tool"
tool = "read"
arguments = { path = "{{ inputs.note }}" }

[[steps]]
id = "facts"
kind = "llm"
prompt = "[wf-fruits] List the fruits in this note as JSON: {{ steps.read.output }}"
schema = { type = "object", required = ["fruits"], properties = { fruits = { type = "array", items = { type = "string" } } } }

[[steps]]
id = "many"
kind = "condition"
if = "steps.facts.output.fruits | length > 1"
then = "each"
else = "end"

[[steps]]
id = "each"
kind = "for_each"
items = "steps.facts.output.fruits"
as = "fruit"
concurrency = 2
do = { id = "save", kind = "tool", tool = "write", arguments = { path = "fruits/{{ index }}.txt", content = "{{ fruit }}" } }

[[steps]]
id = "optional"
kind = "tool"
tool = "read"
arguments = { path = "missing.txt" }
retry = { attempts = 2, delay_ms = 10 }
on_error = "continue"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_run_calls_tools_and_the_model_checks_its_answer_and_keeps_a_ledger() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/fruits.toml"), FRUITS).unwrap();
    std::fs::write(ws.join("notes.md"), "We bought apples and a pear.\n").unwrap();
    // The first answer is not JSON: it is sent back once with the error.
    llm.script(
        "[wf-fruits]",
        vec![
            Step::text("Apples and a pear."),
            Step::text("{\"fruits\": [\"apple\", \"pear\"]}"),
        ],
    );
    let _d = home.start();

    let out = home.cli(&["--json", "workflows", "run", "fruits"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let events = out.json_lines();
    let run = events[0]["run"].as_str().unwrap().to_string();
    let last = events.last().unwrap();
    assert_eq!(last["event"], "finished");
    assert_eq!(last["status"], "succeeded", "{last}");
    assert_eq!(last["output"], "apple, pear");
    let finished: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["event"] == "step_finished")
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let finished: Vec<(&str, &str)> = finished
        .iter()
        .map(|(p, s)| (p.as_str(), s.as_str()))
        .collect();
    for want in [
        ("read", "finished"),
        ("facts", "finished"),
        ("many", "finished"),
        ("each[0]", "finished"),
        ("each[1]", "finished"),
        ("each", "finished"),
        ("optional", "failed"),
    ] {
        assert!(finished.contains(&want), "{want:?} in {finished:?}");
    }
    assert_eq!(
        finished.iter().filter(|(p, _)| *p == "optional").count(),
        2,
        "two attempts: {finished:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("fruits/0.txt")).unwrap(),
        "apple"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("fruits/1.txt")).unwrap(),
        "pear"
    );

    // The repair: the second request carries the first answer and the error.
    let journal = llm.journal();
    assert_eq!(journal.len(), 2);
    let repair = journal[1].to_string();
    assert!(repair.contains("the answer is not JSON"), "{repair}");
    assert!(journal[0].to_string().contains("We bought apples"));

    // The ledger, and the run's transcript in its own session.
    let out = home.cli(&["--json", "workflows", "status", &run]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let status = out.json();
    assert_eq!(status["run"]["status"], "succeeded");
    assert_eq!(status["run"]["principal"], "owner");
    assert_eq!(status["run"]["hash"].as_str().unwrap().len(), 64);
    assert_eq!(status["run"]["inputs"]["note"], "notes.md");
    let key = status["run"]["session_key"].as_str().unwrap().to_string();
    assert_eq!(key, format!("agent:main:workflow:{run}"));
    assert!(
        status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["state"] != "started"),
        "every attempt ended: {status}"
    );
    let out = home.cli(&["--json", "sessions", "show", &key]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = out.stdout;
    assert!(shown.contains("\"tool_call\""), "{shown}");
    assert!(shown.contains("We bought apples"), "{shown}");

    let out = home.cli(&["workflows", "runs"]).await;
    assert!(out.ok().contains(&run));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_refused_before_it_starts_with_bad_inputs() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/fruits.toml"), FRUITS).unwrap();
    let _d = home.start();
    let out = home
        .cli(&["workflows", "run", "fruits", "--input", "nte=x.md"])
        .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("workflow `fruits` has no input `nte` (did you mean `note`?)"),
        "{}",
        out.stderr
    );
    let out = home.cli(&["--json", "workflows", "runs"]).await;
    assert_eq!(out.json()["runs"].as_array().unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_renders_what_it_can_says_the_policy_and_runs_nothing() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/fruits.toml"), FRUITS).unwrap();
    std::fs::write(ws.join("notes.md"), "apples\n").unwrap();
    let _d = home.start();
    let out = home
        .cli(&[
            "--json",
            "workflows",
            "run",
            "fruits",
            "--dry-run",
            "--input",
            "note=other.md",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let steps = out.json()["steps"].as_array().unwrap().clone();
    let at = |path: &str| {
        steps
            .iter()
            .find(|s| s["path"] == path)
            .unwrap_or_else(|| panic!("no {path} in {steps:?}"))
            .clone()
    };
    // The input renders; a step's output cannot yet.
    assert_eq!(at("read")["what"], "read {\"path\":\"other.md\"}");
    assert_eq!(at("read")["verdict"], "offered");
    assert!(
        at("facts")["what"]
            .as_str()
            .unwrap()
            .contains("{{ steps.read.output }}")
    );
    assert_eq!(
        at("many")["next"],
        "if steps.facts.output.fruits | length > 1: each, else the end"
    );
    assert_eq!(at("each[…]")["tool"], "write");
    assert_eq!(at("optional")["next"], "the end");
    assert!(llm.journal().is_empty(), "no model call");
    let out = home.cli(&["--json", "workflows", "runs"]).await;
    assert_eq!(out.json()["runs"].as_array().unwrap().len(), 0, "no run");
    assert!(!ws.join("fruits").exists());
}

/// `steps` with a command step in the middle that `kill -9` interrupts.
fn interrupted(idempotent: bool) -> String {
    format!(
        r#"
[[steps]]
id = "first"
kind = "command"
command = "echo first >> log.txt"

[[steps]]
id = "slow"
kind = "command"
command = "echo slow >> log.txt; test -f go || sleep 30"
idempotent = {idempotent}

[[steps]]
id = "last"
kind = "command"
command = "echo last >> log.txt"
"#
    )
}

/// Polls `pincer workflows status RUN --json` until `done` holds.
pub(crate) async fn status_until(
    home: &TestHome,
    run: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = home.cli(&["--json", "workflows", "status", run]).await;
        if out.code == 0 && done(&out.json()) {
            return out.json();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited a minute for {what}: {}{}",
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Starts workflow `name` in the background; its run id, once the step
/// `slow` has started and done its first work (the ledger says `started`
/// before the command runs: a kill in between is a step that never ran,
/// which these tests are not about).
async fn start_until_slow(home: &TestHome, name: &str) -> String {
    let _cli = home.cli_spawn(&["workflows", "run", name]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let run = loop {
        let out = home.cli(&["--json", "workflows", "runs"]).await;
        if let Some(id) = out.json()["runs"][0]["id"].as_str() {
            break id.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no run started");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    status_until(home, &run, "step `slow` to start", |s| {
        s["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["path"] == "slow" && r["state"] == "started")
    })
    .await;
    let log = home.workspace().join("log.txt");
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("slow")
    {
        assert!(std::time::Instant::now() < deadline, "`slow` never wrote");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    run
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_in_a_step_that_is_not_idempotent_waits_for_the_owner_and_runs_nothing_twice()
{
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/slow.toml"), interrupted(false)).unwrap();
    let d = home.start();
    let run = start_until_slow(&home, "slow").await;
    d.kill9();

    std::fs::write(ws.join("go"), "").unwrap();
    let _d = home.start();
    let status = status_until(&home, &run, "the run to wait", |s| {
        s["run"]["status"] == "waiting"
    })
    .await;
    let error = status["run"]["error"].as_str().unwrap();
    assert!(
        error.contains("step `slow` was running when pincerd stopped and is not marked idempotent"),
        "{error}"
    );
    assert!(
        error.contains(&format!("pincer workflows resolve {run} rerun|skip|fail")),
        "{error}"
    );
    assert!(
        status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["path"] == "slow" && r["state"] == "unknown"),
        "{status}"
    );
    // Nothing ran while it waited.
    assert_eq!(
        std::fs::read_to_string(ws.join("log.txt")).unwrap(),
        "first\nslow\n"
    );

    let out = home.cli(&["workflows", "resolve", &run, "skip"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    status_until(&home, &run, "the run to succeed", |s| {
        s["run"]["status"] == "succeeded"
    })
    .await;
    // `first` ran once, `slow` was skipped, `last` ran once.
    assert_eq!(
        std::fs::read_to_string(ws.join("log.txt")).unwrap(),
        "first\nslow\nlast\n"
    );
    let out = home.cli(&["workflows", "resolve", &run, "rerun"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("there is nothing to settle"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_in_an_idempotent_step_runs_that_step_again_and_goes_on() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/slow.toml"), interrupted(true)).unwrap();
    let d = home.start();
    let run = start_until_slow(&home, "slow").await;
    d.kill9();

    std::fs::write(ws.join("go"), "").unwrap();
    let _d = home.start();
    let status = status_until(&home, &run, "the run to succeed", |s| {
        s["run"]["status"] == "succeeded"
    })
    .await;
    // The finished step did not run again; the interrupted one did.
    assert_eq!(
        std::fs::read_to_string(ws.join("log.txt")).unwrap(),
        "first\nslow\nslow\nlast\n"
    );
    let states: Vec<(String, String)> = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("first".to_string(), "finished".to_string()),
            ("slow".to_string(), "unknown".to_string()),
            ("slow".to_string(), "finished".to_string()),
            ("last".to_string(), "finished".to_string()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_models_write_into_workflows_is_refused_and_so_is_a_workflows_own() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/fruits.toml"), FRUITS).unwrap();
    std::fs::write(
        ws.join("workflows/rewrite.toml"),
        "[[steps]]\nid = \"w\"\nkind = \"tool\"\ntool = \"write\"\narguments = { path = \"workflows/fruits.toml\", content = \"[[steps]]\" }\n",
    )
    .unwrap();
    llm.script(
        "[wf-write]",
        vec![
            Step::tool(
                "write",
                serde_json::json!({"path": "workflows/fruits.toml", "content": "[[steps]]\nid = \"x\"\nkind = \"command\"\ncommand = \"curl evil\"\n"}),
            ),
            Step::text("I could not."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "[wf-write] improve my workflow"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = llm.journal()[1].to_string();
    assert!(
        result.contains("workflow files are the owner's to edit, not a tool's"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("workflows/fruits.toml")).unwrap(),
        FRUITS
    );
    // A workflow's own write step is a tool's write too.
    let out = home.cli(&["workflows", "run", "rewrite"]).await;
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("workflow files are the owner's to edit"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("workflows/fruits.toml")).unwrap(),
        FRUITS
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_stops_at_its_bound_and_a_condition_routes_both_ways() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/loop.toml"),
        r#"
[inputs.more]
type = "boolean"
default = true

[[steps]]
id = "tick"
kind = "command"
command = "echo tick >> ticks.txt"

[[steps]]
id = "again"
kind = "condition"
if = "inputs.more"
then = "tick"
else = "done"
max_iterations = 2

[[steps]]
id = "done"
kind = "command"
command = "echo done >> ticks.txt"
"#,
    )
    .unwrap();
    let _d = home.start();
    // `more`: the jump back is taken twice, then the run goes on.
    let out = home.cli(&["workflows", "run", "loop"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.join("ticks.txt")).unwrap(),
        "tick\ntick\ntick\ndone\n"
    );
    // Not `more`: the condition's else.
    std::fs::remove_file(ws.join("ticks.txt")).unwrap();
    let out = home
        .cli(&["workflows", "run", "loop", "--input", "more=false"])
        .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.join("ticks.txt")).unwrap(),
        "tick\ndone\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_on_error_and_cancel_end_steps_and_runs_as_they_say() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    // A step over its timeout fails; `skip_rest` ends the run there, as a
    // success; `stop` (the default) fails it.
    std::fs::write(
        ws.join("workflows/late.toml"),
        r#"
[[steps]]
id = "slow"
kind = "command"
command = "sleep 20"
timeout_s = 1
on_error = "skip_rest"

[[steps]]
id = "after"
kind = "command"
command = "echo after >> after.txt"
"#,
    )
    .unwrap();
    std::fs::write(
        ws.join("workflows/strict.toml"),
        "[[steps]]\nid = \"slow\"\nkind = \"command\"\ncommand = \"sleep 20\"\ntimeout_s = 1\n\n[[steps]]\nid = \"after\"\nkind = \"command\"\ncommand = \"echo after >> after.txt\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("workflows/long.toml"),
        "[[steps]]\nid = \"slow\"\nkind = \"command\"\ncommand = \"echo slow > long.txt; sleep 30\"\n\n[[steps]]\nid = \"after\"\nkind = \"command\"\ncommand = \"echo after >> after.txt\"\n",
    )
    .unwrap();
    let _d = home.start();

    let started = std::time::Instant::now();
    let out = home.cli(&["--json", "workflows", "run", "late"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let last = out.json_lines().last().unwrap().clone();
    assert_eq!(last["status"], "succeeded", "{last}");
    let failed = out
        .json_lines()
        .into_iter()
        .find(|e| e["event"] == "step_finished" && e["path"] == "slow")
        .unwrap();
    assert_eq!(failed["state"], "failed");
    assert!(!ws.join("after.txt").exists(), "skip_rest skipped `after`");

    let out = home.cli(&["workflows", "run", "strict"]).await;
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("the run failed: step `slow` failed"),
        "{}",
        out.stderr
    );
    assert!(!ws.join("after.txt").exists(), "stop stopped the run");

    // Cancelled while its step runs: the step ends, nothing after it runs.
    let _cli = home.cli_spawn(&["workflows", "run", "long"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ws.join("long.txt").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the step never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let runs = home.cli(&["--json", "workflows", "runs"]).await.json();
    let run = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workflow"] == "long")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = home.cli(&["workflows", "cancel", &run]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let status = status_until(&home, &run, "the run to end", |s| {
        s["run"]["status"] == "cancelled"
    })
    .await;
    assert_eq!(status["run"]["error"], "the run was cancelled");
    assert!(!ws.join("after.txt").exists());
    let out = home.cli(&["workflows", "cancel", &run]).await;
    assert_eq!(out.code, 1, "a second cancel finds nothing going on");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_while_a_run_is_busy_queues_or_is_dropped_as_the_workflow_says() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    let busy = |admission: &str| {
        format!(
            "admission = \"{admission}\"\n\n[inputs.name]\ntype = \"string\"\n\n[[steps]]\nid = \"work\"\nkind = \"command\"\ncommand = \"echo {{{{ inputs.name }}}} start >> order.txt; sleep 2; echo {{{{ inputs.name }}}} end >> order.txt\"\n"
        )
    };
    std::fs::write(ws.join("workflows/queued.toml"), busy("queue")).unwrap();
    std::fs::write(ws.join("workflows/dropped.toml"), busy("drop")).unwrap();
    let _d = home.start();

    // queue (the default): the second start waits for the first run.
    let first = home.cli_spawn(&["workflows", "run", "queued", "--input", "name=a"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(ws.join("order.txt"))
        .unwrap_or_default()
        .contains("a start")
    {
        assert!(std::time::Instant::now() < deadline, "run a never started");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let out = home
        .cli(&["workflows", "run", "queued", "--input", "name=b"])
        .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let _ = first.wait_with_output().await;
    assert_eq!(
        std::fs::read_to_string(ws.join("order.txt")).unwrap(),
        "a start\na end\nb start\nb end\n"
    );

    // drop: a start while it runs is refused and leaves no run.
    std::fs::remove_file(ws.join("order.txt")).unwrap();
    let first = home.cli_spawn(&["workflows", "run", "dropped", "--input", "name=c"]);
    while !std::fs::read_to_string(ws.join("order.txt"))
        .unwrap_or_default()
        .contains("c start")
    {
        assert!(std::time::Instant::now() < deadline, "run c never started");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let out = home
        .cli(&["workflows", "run", "dropped", "--input", "name=d"])
        .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("workflow `dropped` is running and its admission is `drop`"),
        "{}",
        out.stderr
    );
    let _ = first.wait_with_output().await;
    assert_eq!(
        std::fs::read_to_string(ws.join("order.txt")).unwrap(),
        "c start\nc end\n"
    );
    let runs = home.cli(&["--json", "workflows", "runs"]).await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 3, "a, b and c");
}

/// The transcript of run `run`'s session, each entry without what differs
/// between runs by nature: entry ids, timestamps, call durations, and the
/// run's own id (in its turn and call ids).
fn normalised_transcript(home: &TestHome, run: &str) -> Vec<serde_json::Value> {
    let dir = home.path().join("sessions/main");
    for file in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        if !text.contains(&format!("\"turn\":\"{run}\"")) {
            continue;
        }
        return text
            .lines()
            .map(|line| {
                let line = line.replace(run, "RUN");
                let mut entry: serde_json::Value = serde_json::from_str(&line).unwrap();
                let map = entry.as_object_mut().unwrap();
                for key in ["id", "parent", "ts", "duration_ms"] {
                    map.remove(key);
                }
                entry
            })
            .collect();
    }
    panic!("no transcript of run {run} in {}", dir.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_inputs_and_results_give_the_same_transcript_and_a_replay_says_same_path() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/fruits.toml"), FRUITS).unwrap();
    std::fs::write(ws.join("notes.md"), "We bought apples and a pear.\n").unwrap();
    let answers = || {
        vec![
            Step::text("Apples and a pear."),
            Step::text("{\"fruits\": [\"apple\", \"pear\"]}"),
        ]
    };
    llm.script("[wf-fruits]", [answers(), answers()].concat());
    let _d = home.start();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let out = home.cli(&["--json", "workflows", "run", "fruits"]).await;
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        runs.push(out.json_lines()[0]["run"].as_str().unwrap().to_string());
    }
    let first = normalised_transcript(&home, &runs[0]);
    assert!(first.len() >= 8, "{first:?}");
    assert_eq!(
        first,
        normalised_transcript(&home, &runs[1]),
        "two runs on the same inputs and results write the same transcript"
    );

    // The replay calls nothing: no model, no tool.
    let calls = llm.journal().len();
    std::fs::remove_file(ws.join("fruits/0.txt")).unwrap();
    let out = home.cli(&["workflows", "replay", &runs[0]]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.starts_with(&format!(
            "same path: the replay of run {} took the same 8 step attempts",
            runs[0]
        )),
        "{}",
        out.stdout
    );
    assert_eq!(llm.journal().len(), calls, "the replay asked no model");
    assert!(
        !ws.join("fruits/0.txt").exists(),
        "the replay wrote nothing"
    );

    // A changed file: the replay with it says where it goes another way.
    std::fs::write(
        ws.join("workflows/fruits.toml"),
        FRUITS
            .replace("concurrency = 2", "concurrency = 1")
            .replace("| length > 1", "| length > 5"),
    )
    .unwrap();
    let out = home
        .cli(&["--json", "workflows", "replay", &runs[0], "--current"])
        .await;
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let verdict = out.json();
    assert_eq!(verdict["same"], false);
    assert_eq!(
        verdict["divergence"],
        "at step `many` (attempt 1): the run's output was true, the replay's false",
        "{verdict}"
    );
    // The recorded file itself still replays the same.
    let out = home.cli(&["workflows", "replay", &runs[0]]).await;
    assert_eq!(out.code, 0, "{}", out.stdout);
    let out = home.cli(&["workflows", "replay", "nosuchrun"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no workflow run `nosuchrun`"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_runs_a_whole_workflow_with_one_tool_call() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(ws.join("workflows/fruits.toml"), FRUITS).unwrap();
    std::fs::write(ws.join("notes.md"), "We bought apples and a pear.\n").unwrap();
    llm.script(
        "[wf-fruits]",
        vec![Step::text("{\"fruits\": [\"apple\", \"pear\"]}")],
    );
    llm.script(
        "[run-tool]",
        vec![
            Step::tool("workflow_run", serde_json::json!({"name": "fruits"})),
            Step::text("ran it"),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "list the fruits [run-tool]"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let journal = llm.journal();
    let answered = journal
        .iter()
        .map(pincer_testkit::requests::tool_results)
        .find(|r| !r.is_empty())
        .expect("the tool's result went back to the model");
    let result: serde_json::Value = serde_json::from_str(&answered[0]).unwrap();
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(result["output"], "apple, pear");
    let run = result["run"].as_str().unwrap();
    let out = home.cli(&["--json", "workflows", "status", run]).await;
    assert_eq!(out.json()["run"]["principal"], "owner");
    assert_eq!(
        std::fs::read_to_string(ws.join("fruits/1.txt")).unwrap(),
        "pear"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_stops_when_its_model_calls_cost_more_than_its_limit() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    // $1,000 per million tokens: a call's few tokens cost a cent or so.
    home.write_config(
        &provider_config("openai", &format!("{}/v1", llm.base_url()), "").replace(
            "model = \"test-model\"\n",
            "model = \"test-model\"\ninput_usd_per_mtok = 1000.0\noutput_usd_per_mtok = 1000.0\n",
        ),
    );
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/costly.toml"),
        r#"
max_cost_usd = 0.001

[[steps]]
id = "one"
kind = "llm"
prompt = "[wf-cost] one"

[[steps]]
id = "two"
kind = "llm"
prompt = "[wf-cost] two"
"#,
    )
    .unwrap();
    llm.script("[wf-cost]", vec![Step::text("1"), Step::text("2")]);
    let _d = home.start();
    let out = home.cli(&["workflows", "run", "costly"]).await;
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("over its limit of $0.001 (max_cost_usd)"),
        "{}",
        out.stderr
    );
    assert_eq!(llm.journal().len(), 1, "the second call was never made");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_step_is_a_bounded_turn_of_the_agent_in_the_runs_session() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/greet.toml"),
        r#"
[[steps]]
id = "free"
kind = "agent"
prompt = "[wf-agent] Greet into greet.txt"
max_calls = 2

[[steps]]
id = "loop"
kind = "agent"
prompt = "[wf-agent-loop] Keep going"
max_calls = 2
on_error = "continue"
"#,
    )
    .unwrap();
    llm.script(
        "[wf-agent]",
        vec![
            Step::tool(
                "write",
                serde_json::json!({"path": "greet.txt", "content": "hi"}),
            ),
            Step::text("wrote it"),
        ],
    );
    // A model that never stops calling tools is cut at max_calls.
    llm.script_cycle(
        "[wf-agent-loop]",
        vec![Step::tool("ls", serde_json::json!({"path": "."}))],
    );
    let _d = home.start();
    let out = home.cli(&["--json", "workflows", "run", "greet"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let events = out.json_lines();
    let free = events
        .iter()
        .find(|e| e["event"] == "step_finished" && e["path"] == "free")
        .unwrap();
    assert_eq!(free["output"], "wrote it");
    assert_eq!(std::fs::read_to_string(ws.join("greet.txt")).unwrap(), "hi");
    let calls = llm
        .journal()
        .iter()
        .filter(|r| r.to_string().contains("[wf-agent-loop]"))
        .count();
    // An endless model is cut: `max_calls`, then the turn's closing
    // calls without tools.
    assert!((2..=4).contains(&calls), "{calls} calls");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_items_and_branches_write_the_transcript_in_their_order() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    // The later an item or branch, the sooner it finishes.
    std::fs::write(
        ws.join("workflows/race.toml"),
        r#"
[[steps]]
id = "each"
kind = "for_each"
items = "[0, 1, 2]"
concurrency = 3
do = { id = "nap", kind = "command", command = "sleep 0.{{ 6 - 2 * item }}; echo item{{ item }}" }

[[steps]]
id = "both"
kind = "parallel"
branches = [
  { id = "slow", kind = "command", command = "sleep 0.5; echo slow" },
  { id = "fast", kind = "command", command = "echo fast" },
]
"#,
    )
    .unwrap();
    let _d = home.start();
    let out = home.cli(&["--json", "workflows", "run", "race"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let run = out.json_lines()[0]["run"].as_str().unwrap().to_string();
    let entries: Vec<(String, String)> = normalised_transcript(&home, &run)
        .into_iter()
        .filter_map(|e| {
            let kind = e["kind"].as_str()?.to_string();
            let call = e["call_id"].as_str()?.to_string();
            Some((kind, call))
        })
        .collect();
    let want: Vec<(String, String)> = ["each[0]", "each[1]", "each[2]", "both.slow", "both.fast"]
        .iter()
        .flat_map(|p| {
            [
                ("tool_call".to_string(), format!("RUN:{p}")),
                ("tool_result".to_string(), format!("RUN:{p}")),
            ]
        })
        .collect();
    assert_eq!(entries, want);
}

/// Agent turns write straight to the transcript: a turn inside a
/// parallel or for_each waits for the items before it, so a fast turn
/// beside a slow command still comes after it.
#[tokio::test(flavor = "multi_thread")]
async fn agent_turns_in_branches_and_items_keep_the_transcript_in_their_order() {
    let (home, llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/turns.toml"),
        r#"
[[steps]]
id = "intro"
kind = "llm"
prompt = "[wf-turns] Begin"

[[steps]]
id = "both"
kind = "parallel"
branches = [
  { id = "slow", kind = "command", command = "sleep 0.5; echo slow" },
  { id = "think", kind = "agent", prompt = "[wf-think] Say hi", max_calls = 1 },
]

[[steps]]
id = "each"
kind = "for_each"
items = "[0, 1, 2]"
concurrency = 3
do = { id = "ask", kind = "agent", prompt = "[wf-item-{{ item }}] Say {{ item }}", max_calls = 1 }
"#,
    )
    .unwrap();
    // Every turn's conversation starts with the intro: the answers go out
    // in the order the model is called.
    llm.script(
        "[wf-turns]",
        ["begun", "hi", "said 0", "said 1", "said 2"]
            .map(Step::text)
            .to_vec(),
    );
    let _d = home.start();
    let out = home.cli(&["--json", "workflows", "run", "turns"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let run = out.json_lines()[0]["run"].as_str().unwrap().to_string();
    let entries: Vec<String> = normalised_transcript(&home, &run)
        .into_iter()
        .filter_map(|e| match e["kind"].as_str()? {
            kind @ ("tool_call" | "tool_result") => {
                Some(format!("{kind} {}", e["call_id"].as_str()?))
            }
            "user" => Some(e["text"].as_str()?.split(' ').next()?.to_string()),
            "assistant" => Some(e["text"].as_str()?.to_string()),
            _ => None,
        })
        .collect();
    let want = [
        "[wf-turns]",
        "begun",
        "tool_call RUN:both.slow",
        "tool_result RUN:both.slow",
        "[wf-think]",
        "hi",
        "[wf-item-0]",
        "said 0",
        "[wf-item-1]",
        "said 1",
        "[wf-item-2]",
        "said 2",
    ];
    assert_eq!(entries, want, "{entries:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_any_step_replays_its_recorded_winner() {
    let (home, _llm) = home().await;
    let ws = home.workspace();
    std::fs::write(
        ws.join("workflows/first.toml"),
        r#"
[[steps]]
id = "race"
kind = "parallel"
wait = "any"
branches = [
  { id = "slow", kind = "command", command = "sleep 5; echo slow" },
  { id = "fast", kind = "command", command = "echo fast" },
]
"#,
    )
    .unwrap();
    let _d = home.start();
    let out = home.cli(&["--json", "workflows", "run", "first"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let events = out.json_lines();
    let run = events[0]["run"].as_str().unwrap().to_string();
    let status = status_until(&home, &run, "the run to succeed", |s| {
        s["run"]["status"] == "succeeded"
    })
    .await;
    let race = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == "race")
        .unwrap()
        .clone();
    assert_eq!(race["output"]["winner"], "fast", "{race}");
    // Replayed, every result is there at once: the run's winner wins
    // again, and the branch it cancelled does not start.
    let out = home.cli(&["workflows", "replay", &run]).await;
    assert!(
        out.ok().starts_with("same path"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}
