//! The guide's example workflow, walked through as a user would (issue 25's
//! "done when"): the example is read out of `docs/src/workflows.md` itself, checked,
//! dry-run and drawn; run from the owner's Telegram chat with `/run`;
//! halted at its approval, pincerd killed, the approval pressed on the
//! phone after the restart; the summary remembered and sent once, the new
//! files moved out of the folder; the run replayed; and a second run
//! finding no new files ends at its condition.

use pincer_testkit::scripted::Step;
use pincer_testkit::telegram::{ChatSpec, UserSpec};

use crate::telegram::{OWNER, Rig, rig, text};
use crate::telegram_approvals::{approval_id, until};
use crate::workflows::status_until;

/// The first TOML block of the guide's "Workflows" chapter.
fn guide_example() -> String {
    let section = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/workflows.md"
    ))
    .expect("docs/src/workflows.md");
    let start = section.find("```toml\n").expect("a TOML example") + "```toml\n".len();
    let end = section[start..].find("```").expect("the example's end");
    section[start..start + end].to_string()
}

const SUMMARY: &str = "Ana moves the meeting to Friday. Bo needs the keys.";

#[tokio::test(flavor = "multi_thread")]
async fn the_guides_example_is_checked_run_from_the_phone_survives_a_kill_and_replays() {
    let mut r = rig("tools = { profile = \"full\" }", "").await;
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(ws.join("workflows/summarise.toml"), guide_example()).unwrap();
    let notes = ws.join("inbox/notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.md"), "Ana: the meeting moves to Friday.\n").unwrap();
    std::fs::write(notes.join("b.md"), "Bo: who has the keys?\n").unwrap();
    r.llm
        .script("Summarise these notes", vec![Step::text(SUMMARY)]);

    // Checked, planned and drawn before it runs.
    let out = r.home.cli(&["workflows", "check", "summarise"]).await;
    assert!(
        out.ok().contains("summarise: ok (8 steps)"),
        "{}",
        out.stdout
    );
    let out = r
        .home
        .cli(&["--json", "workflows", "run", "summarise", "--dry-run"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plan = out.json()["steps"].clone();
    assert_eq!(
        plan[0]["what"],
        "glob {\"path\":\"inbox/notes\",\"pattern\":\"*.md\"}"
    );
    assert_eq!(plan[0]["verdict"], "offered");
    let out = r.home.cli(&["workflows", "graph", "summarise"]).await;
    assert!(out.ok().starts_with("flowchart TD"), "{}", out.stdout);

    // Run from the phone: it halts at the approval, which the phone gets.
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    r.tg.user_says(&dm, &owner, "/run summarise").await;
    let sent = until(&r, OWNER, "the request and the reply", |s| {
        s.iter().any(|m| text(m).starts_with("Approval needed"))
            && s.iter().any(|m| text(m).starts_with("Run "))
    })
    .await;
    let ask = sent
        .iter()
        .find(|m| text(m).starts_with("Approval needed"))
        .unwrap()
        .clone();
    assert!(
        text(&ask).contains("Send this summary of 2 new files?"),
        "{ask:?}"
    );
    assert!(text(&ask).contains(SUMMARY), "{ask:?}");
    let id = approval_id(&ask);
    let out = r.home.cli(&["--json", "workflows", "runs"]).await;
    let run = out.json()["runs"][0]["id"].as_str().unwrap().to_string();

    // Killed while it waits; approved on the phone after the restart.
    r.kill_and_start().await;
    status_until(&r.home, &run, "the run to wait again", |s| {
        s["run"]["status"] == "waiting"
    })
    .await;
    r.tg.press_button(&dm, &owner, ask.message_id, &format!("approve:{id}"))
        .await;
    let status = status_until(&r.home, &run, "the run to succeed", |s| {
        s["run"]["status"] == "succeeded"
    })
    .await;

    // Remembered, sent once, the files out of the folder; the model was
    // asked once.
    assert_eq!(
        std::fs::read_to_string(ws.join(format!("memory/summaries/{run}.md"))).unwrap(),
        SUMMARY
    );
    let got = until(&r, OWNER, "the summary", |s| {
        s.iter().any(|m| text(m) == SUMMARY)
    })
    .await;
    assert_eq!(
        got.iter().filter(|m| text(m) == SUMMARY).count(),
        1,
        "sent once"
    );
    assert!(notes.join("done/a.md").exists() && notes.join("done/b.md").exists());
    assert!(!notes.join("a.md").exists());
    let asked = |r: &Rig| {
        r.llm
            .journal()
            .iter()
            .filter(|b| b.to_string().contains("Summarise these notes"))
            .count()
    };
    assert_eq!(asked(&r), 1);
    let ran: Vec<&str> = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "finished")
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        ran,
        [
            "files", "any", "each", "each[0]", "each[1]", "summary", "approve", "remember", "send",
            "done"
        ],
        "each step finished once"
    );

    // The replay takes the same path and asks nobody.
    let out = r.home.cli(&["workflows", "replay", &run]).await;
    assert!(out.ok().starts_with("same path"), "{}", out.stdout);
    assert_eq!(asked(&r), 1);

    // No new files: the next run ends at its condition, asking nothing.
    let out = r
        .home
        .cli(&["--json", "workflows", "run", "summarise"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    assert_eq!(events.last().unwrap()["status"], "succeeded");
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "step_started" && e["path"] == "approve")
    );
    assert_eq!(asked(&r), 1);
}
