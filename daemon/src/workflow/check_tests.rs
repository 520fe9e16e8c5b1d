//! The checker against the corpus of broken files in
//! `daemon/tests/fixtures/workflows/broken` (each names the line and
//! sentence it must be refused with on its first line, `# expect: LINE:
//! SENTENCE`), and good files read into the steps they say.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::check::{Context, Flow, ToolStatus, check};
use super::def::{Action, Next, Wait};
use super::graph::mermaid;
use super::library::Library;

const TOOLS: &[&str] = &[
    "read",
    "write",
    "exec",
    "web_fetch",
    "memory_search",
    "message",
];

/// The fixture agent: `web_fetch` and `exec` denied by its own list.
fn tools(name: &str) -> ToolStatus {
    match name {
        "web_fetch" | "exec" => ToolStatus::Removed {
            layer: "agent".into(),
            reason: "denied by its deny list".into(),
        },
        n if TOOLS.contains(&n) => ToolStatus::Offered,
        n => ToolStatus::Unknown {
            nearest: crate::config::locate::nearest(
                n,
                &TOOLS.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            ),
        },
    }
}

fn offered(_: &str) -> ToolStatus {
    ToolStatus::Offered
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/workflows/broken")
}

#[test]
fn every_broken_file_is_refused_with_its_sentence_at_its_line() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "the corpus is there");
    let mut wrong = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()));
        let (line, sentence) = expect.split_once(": ").unwrap();
        let line: usize = line.parse().unwrap();
        let name = path.file_stem().unwrap().to_str().unwrap();
        let workflows = vec![name.to_string(), "helper".to_string()];
        let cx = Context {
            name,
            path,
            workflows: &workflows,
            tools: &tools,
        };
        match check(&cx, &text) {
            Ok(_) => wrong.push(format!("{name}: accepted")),
            Err(problems) => {
                let hit = problems
                    .iter()
                    .any(|p| p.line == line && p.reason.contains(sentence));
                if !hit || problems.len() != 1 {
                    wrong.push(format!(
                        "{name}: want line {line} `{sentence}`, got {:?}",
                        problems
                            .iter()
                            .map(|p| format!("{}: {}", p.line, p.reason))
                            .collect::<Vec<_>>()
                    ));
                }
                assert!(problems.iter().all(|p| p.path == *path));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const SUMMARY: &str = r#"
description = "Summarise the new notes in a folder and send the summary to a chat"

[inputs.folder]
type = "string"
default = "inbox"

[inputs.limit]
type = "integer"

[[steps]]
id = "notes"
kind = "tool"
tool = "read"
arguments = { path = "{{ inputs.folder }}/index.md" }
retry = { attempts = 3, backoff = "exponential", delay_ms = 10 }
idempotent = true

[[steps]]
id = "summary"
kind = "llm"
prompt = "Summarise in {{ inputs.limit }} words:\n{{ steps.notes.output }}"
schema = '{"type": "object", "required": ["text"]}'

[[steps]]
id = "ok"
kind = "approval"
prompt = "Send this summary?"
preview = "{{ steps.summary.output.text }}"
revise = "summary"
edit = true

[[steps]]
id = "each"
kind = "for_each"
items = "[inputs.folder, 'notes']"
as = "part"
concurrency = 2
do = { id = "say", kind = "tool", tool = "message", arguments = { text = "{{ part }} #{{ index }}" } }

[[steps]]
id = "both"
kind = "parallel"
wait = "any"
branches = [
  { id = "a", kind = "llm", prompt = "A" },
  { id = "b", kind = "llm", prompt = "B", optional = true },
]

[[steps]]
id = "again"
kind = "condition"
if = "steps.summary.output.text | length > 10"
then = "end"
else = "summary"
max_iterations = 2
"#;

/// `SUMMARY` checked, every tool offered.
fn summary() -> super::def::Workflow {
    let cx = Context {
        name: "summary",
        path: Path::new("/w/workflows/summary.toml"),
        workflows: &["summary".to_string()],
        tools: &offered,
    };
    check(&cx, SUMMARY).unwrap_or_else(|p| panic!("{p:?}"))
}

#[test]
fn a_good_file_reads_into_its_steps() {
    let w = summary();
    assert_eq!(w.steps.len(), 6);
    assert_eq!(w.inputs.len(), 2);
    assert_eq!(w.inputs[0].name, "folder");
    assert_eq!(w.inputs[0].default, Some(json!("inbox")));
    assert_eq!(w.inputs[1].default, None, "no default: required");
    assert_eq!(w.hash.len(), 64);
    let notes = &w.steps[0];
    assert!(notes.idempotent);
    assert_eq!(notes.retry.attempts, 3);
    assert!(notes.retry.exponential);
    assert!(
        matches!(&notes.action, Action::Tool { tool, arguments } if tool == "read" && arguments["path"] == "{{ inputs.folder }}/index.md")
    );
    assert!(
        matches!(&w.steps[1].action, Action::Llm { schema: Some(s), repairs: 2, .. } if s["type"] == "object")
    );
    assert!(
        matches!(&w.steps[2].action, Action::Approval { approvers, quorum: 1, edit: true, revise: Some(r), .. } if approvers == &["owner"] && r == "summary")
    );
    assert!(
        matches!(&w.steps[3].action, Action::ForEach { var, concurrency: 2, body, .. } if var == "part" && body.id == "say")
    );
    assert!(
        matches!(&w.steps[4].action, Action::Parallel { branches, wait: Wait::Any } if branches.len() == 2 && branches[1].optional)
    );
    assert!(
        matches!(&w.steps[5].action, Action::Condition { then: Next::End, otherwise: Next::Step(s), .. } if s == "summary")
    );
    assert_eq!(w.steps[5].max_iterations, Some(2));

    let flow = Flow::of(&w);
    assert_eq!(flow.edges(5), [1], "the condition's else; then is the end");
    assert!(flow.ancestors(1).contains(&5), "the loop reaches back");
    assert!(!flow.ancestors(0).contains(&1));
}

#[test]
fn the_graph_draws_every_step_and_jump() {
    let g = mermaid(&summary());
    assert!(g.starts_with("flowchart TD\n"), "{g}");
    for line in [
        "  s_notes[\"notes · tool read\"]",
        "  s_ok[/\"ok · approval\"/]",
        "  subgraph s_each[\"each · for each part in [inputs.folder, 'notes']\"]",
        "    s_say[\"say · tool message\"]",
        "  s_again{\"again · condition\"}",
        "  start --> s_notes",
        "  s_again -- \"steps.summary.output.text | length #gt; 10\" --> finish",
        "  s_again -- else --> s_summary",
    ] {
        assert!(g.lines().any(|l| l == line), "no `{line}` in\n{g}");
    }
}

#[test]
fn workflows_that_start_each_other_are_refused_at_the_closing_step() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("workflows");
    std::fs::create_dir(&wf).unwrap();
    let calls = |other: &str| {
        format!("[[steps]]\nid = \"call\"\nkind = \"workflow\"\nworkflow = \"{other}\"\n")
    };
    std::fs::write(wf.join("a.toml"), calls("b")).unwrap();
    std::fs::write(wf.join("b.toml"), calls("a")).unwrap();
    std::fs::write(
        wf.join("c.toml"),
        "[[steps]]\nid = \"x\"\nkind = \"llm\"\nprompt = \"hi\"\n",
    )
    .unwrap();
    std::fs::write(wf.join("not a name.toml"), "").unwrap();
    let lib = Library::open(dir.path(), &offered);
    assert_eq!(lib.names().collect::<Vec<_>>(), ["a", "b", "c"]);
    let err = lib.get("a").unwrap_err().to_string();
    assert!(
        err.ends_with("a.toml:1:1: these workflows start each other in a circle: a → b → a"),
        "{err}"
    );
    let err = lib.get("b").unwrap_err().to_string();
    assert!(
        err.ends_with("b.toml:1:1: these workflows start each other in a circle: b → a → b"),
        "{err}"
    );
    assert!(lib.get("c").is_ok());
    assert_eq!(
        lib.get("cc").unwrap_err().to_string(),
        format!("no workflow `cc` in {} (did you mean `c`?)", wf.display())
    );
}

#[test]
fn sub_workflows_are_linked_bounded_in_depth_and_refused_when_they_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("workflows");
    std::fs::create_dir(&wf).unwrap();
    let calls = |other: &str| {
        format!(
            "[[steps]]\nid = \"first\"\nkind = \"llm\"\nprompt = \"hi\"\n\n[[steps]]\nid = \"call\"\nkind = \"workflow\"\nworkflow = \"{other}\"\n"
        )
    };
    // l0 → l1 → … → l5: five sub-workflows below l0, four below l1.
    for i in 0..5 {
        std::fs::write(wf.join(format!("l{i}.toml")), calls(&format!("l{}", i + 1))).unwrap();
    }
    std::fs::write(
        wf.join("l5.toml"),
        "[[steps]]\nid = \"x\"\nkind = \"llm\"\nprompt = \"hi\"\n",
    )
    .unwrap();
    std::fs::write(wf.join("uses_bad.toml"), calls("bad")).unwrap();
    std::fs::write(
        wf.join("bad.toml"),
        "[[steps]]\nid = \"x\"\nkind = \"nope\"\n",
    )
    .unwrap();
    let lib = Library::open(dir.path(), &offered);

    let err = lib.get("l0").unwrap_err().to_string();
    assert!(
        err.ends_with(
            "l0.toml:6:1: sub-workflows nest 5 deep here (l0 → l1 → l2 → l3 → l4 → l5); at most 4 may"
        ),
        "{err}"
    );
    let l1 = lib.get("l1").unwrap();
    let mut depth = 0;
    let mut w = l1.clone();
    while let Some(sub) = w.subs.values().next().cloned() {
        depth += 1;
        w = (*sub).clone();
    }
    assert_eq!(depth, 4, "l1 is linked down to l5");
    assert_eq!(
        l1.all_subs().keys().collect::<Vec<_>>(),
        ["l2", "l3", "l4", "l5"]
    );

    let err = lib.get("uses_bad").unwrap_err().to_string();
    assert!(
        err.ends_with(
            "uses_bad.toml:6:1: the sub-workflow `bad` cannot run (`pincer workflows check bad` says why)"
        ),
        "{err}"
    );
}

#[test]
fn a_workflow_step_takes_no_timeout_and_stays_out_of_for_each_and_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.toml");
    let names = ["w".to_string(), "other".to_string()];
    let cx = Context {
        name: "w",
        path: &path,
        workflows: &names,
        tools: &offered,
    };
    let text = "[[steps]]\nid = \"sub\"\nkind = \"workflow\"\nworkflow = \"other\"\ntimeout_s = 5\n\n[[steps]]\nid = \"each\"\nkind = \"for_each\"\nitems = \"[1]\"\n[steps.do]\nid = \"inner\"\nkind = \"workflow\"\nworkflow = \"other\"\n";
    let problems: Vec<String> = check(&cx, text)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        problems.iter().any(|p| p.ends_with(
            "w.toml:5:13: key `steps.sub.timeout_s`: a workflow step takes as long as its sub-workflow's steps: set `timeout_s` on those"
        )),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("a workflow step cannot be inside a for_each or parallel step")),
        "{problems:?}"
    );
}

#[test]
fn a_workflow_behind_a_symbolic_link_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("workflows");
    std::fs::create_dir(&wf).unwrap();
    let elsewhere = dir.path().join("elsewhere.toml");
    std::fs::write(
        &elsewhere,
        "[[steps]]\nid = \"x\"\nkind = \"llm\"\nprompt = \"hi\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&elsewhere, wf.join("linked.toml")).unwrap();
    let lib = Library::open(dir.path(), &offered);
    assert_eq!(lib.names().collect::<Vec<_>>(), ["linked"]);
    let err = lib.get("linked").unwrap_err().to_string();
    assert!(
        err.ends_with("linked.toml:1:1: a workflow file is read only as a regular file, not through a symbolic link: copy the file here"),
        "{err}"
    );
}
