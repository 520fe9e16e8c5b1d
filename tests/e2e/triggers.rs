//! Event triggers through the real pincerd (SPEC §13a): a file dropped
//! into a watched folder fires once, not once per write, and the agent
//! gets its name framed as data; a watched command's exit fires; matching
//! lines of a supervised command fire in batches and a flood is held to
//! the trigger's limits; a condition script fires when it answers yes.
//! Every fire is a row of the ledger in `state/schedules.db`.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};

/// The ledger's rows of trigger `name`: (state, detail), oldest first.
fn fires(home: &TestHome, name: &str) -> Vec<(String, Option<String>)> {
    let Ok(db) = rusqlite::Connection::open(home.path().join("state/schedules.db")) else {
        return Vec::new();
    };
    let Ok(mut st) = db.prepare("SELECT state, detail FROM fires WHERE schedule = ?1 ORDER BY id")
    else {
        return Vec::new();
    };
    st.query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn lines_of(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

async fn until(home: &TestHome, what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "{what}\npincerd log:\n{}",
            std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A file written in three pieces fires once; the agent's prompt carries
/// the file's name after the owner's words, fenced as data.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_dropped_into_a_watched_folder_fires_once_with_its_name_as_data() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "\n[triggers.inbox]\nfiles = \"inbox/**\"\nprompt = \"[trig-inbox] File the new documents.\"\nmin_interval = \"1s\"\n",
    ));
    llm.script_cycle("[trig-inbox]", vec![Step::text("Filed.")]);
    let inbox = home.workspace().join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let _d = home.start();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let doc = inbox.join("invoice.pdf");
    for piece in ["%PDF-1.7\n", "page one\n", "page two\n"] {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&doc)
            .unwrap();
        f.write_all(piece.as_bytes()).unwrap();
        drop(f);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    until(&home, "the fire", || {
        fires(&home, "inbox").iter().any(|(s, _)| s == "succeeded")
    })
    .await;
    // Quiet for a while: still one fire.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rows = fires(&home, "inbox");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].1.as_deref(), Some("files: inbox/invoice.pdf"));
    // The prompt: the owner's words, then the event fenced as data.
    let transcripts: String = std::fs::read_dir(home.path().join("sessions/main"))
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap_or_default())
        .filter(|t| t.contains("[trig-inbox]"))
        .collect();
    assert!(
        transcripts.contains("File the new documents.\\n\\nThe trigger's event follows"),
        "{transcripts}"
    );
    assert!(transcripts.contains("not instructions"), "{transcripts}");
    assert!(
        transcripts.contains("~~~~~~ event\\ninbox/invoice.pdf\\n~~~~~~"),
        "{transcripts}"
    );
    // A file outside the glob fires nothing.
    std::fs::write(home.workspace().join("elsewhere.txt"), "x").unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(fires(&home, "inbox").len(), 1);
}

/// A watched command's exit fires, with how it ended; it runs again.
#[tokio::test(flavor = "multi_thread")]
async fn a_watched_commands_exit_fires() {
    let home = TestHome::new();
    home.write_config(
        "[triggers.build]\nexits = \"echo building; exit 3\"\ncommand = \"echo fired >> exits.txt\"\nmin_interval = \"1s\"\n",
    );
    let _d = home.start();
    let out = home.workspace().join("exits.txt");
    until(&home, "two exits fired", || lines_of(&out) >= 2).await;
    let rows = fires(&home, "build");
    assert!(
        rows[0]
            .1
            .as_deref()
            .unwrap()
            .contains("exited with status 3"),
        "{rows:?}"
    );
}

/// A supervised command's matching lines fire in batches: a flood of 500
/// is one fire, and the hourly cap holds back the third.
#[tokio::test(flavor = "multi_thread")]
async fn matching_lines_fire_in_batches_and_a_flood_is_held_to_the_limits() {
    let home = TestHome::new();
    home.write_config(
        "[triggers.errors]\nlines = \"for w in 1 2 3; do while [ ! -e go$w ]; do sleep 0.1; done; i=0; while [ $i -lt 500 ]; do echo ERROR $w $i; echo fine; i=$((i+1)); done; done; sleep 600\"\npattern = \"^ERROR\"\ncommand = \"echo fired >> lines.txt\"\nmin_interval = \"1s\"\nmax_per_hour = 2\n",
    );
    let _d = home.start();
    let ws = home.workspace();
    let out = ws.join("lines.txt");
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(ws.join("go1"), "").unwrap();
    until(&home, "the first flood fired", || lines_of(&out) == 1).await;
    let rows = fires(&home, "errors");
    assert!(
        rows[0]
            .1
            .as_deref()
            .unwrap()
            .starts_with("lines: 500 matching lines of `for w in"),
        "{rows:?}"
    );
    std::fs::write(ws.join("go2"), "").unwrap();
    until(&home, "the second flood fired", || lines_of(&out) == 2).await;
    // The third waits for the hour: nothing fires now.
    std::fs::write(ws.join("go3"), "").unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(lines_of(&out), 2, "the hourly cap let a third through");
    assert_eq!(fires(&home, "errors").len(), 2);
}

/// A condition script fires when it answers yes, with its output.
#[tokio::test(flavor = "multi_thread")]
async fn a_condition_script_fires_when_it_answers_yes() {
    let home = TestHome::new();
    home.write_config(
        "[triggers.flag]\ncondition = \"test -e flag && cat flag\"\nevery = \"1s\"\ncommand = \"echo fired >> cond.txt\"\nmin_interval = \"1h\"\n",
    );
    let _d = home.start();
    let ws = home.workspace();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        fires(&home, "flag").is_empty(),
        "fired while the script said no"
    );
    std::fs::write(ws.join("flag"), "the disk is full").unwrap();
    until(&home, "the condition fired", || {
        lines_of(&ws.join("cond.txt")) == 1
    })
    .await;
    // It keeps saying yes; the minimum interval lets no second fire run,
    // and the first yes it let go is recorded, not every one.
    until(&home, "a yes over the limit recorded", || {
        fires(&home, "flag").iter().any(|(s, d)| {
            s == "skipped"
                && d.as_deref()
                    .unwrap_or("")
                    .contains("over the trigger's limits")
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(lines_of(&ws.join("cond.txt")), 1);
    assert_eq!(fires(&home, "flag").len(), 2, "{:?}", fires(&home, "flag"));
}

/// A trigger watching a chat's folder runs as that chat, under the data
/// boundary: its files came from that chat, so the run reaches no more
/// than the chat's own turns would. The same steps in an owner's trigger
/// read the owner's memory.
#[tokio::test(flavor = "multi_thread")]
async fn a_trigger_on_a_chats_folder_runs_as_that_chat() {
    const SECRET: &str = "owner-memory-secret-6604";
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "\n[triggers.chat]\nfiles = \"inbox/telegram-dm-42/**\"\nprompt = \"[trig-chat] File it.\"\n\
         \n[triggers.own]\nfiles = \"docs/**\"\nprompt = \"[trig-own] File it.\"\n",
    ));
    let peek = || {
        vec![
            Step::tool("memory_get", serde_json::json!({"path": "MEMORY.md"})),
            Step::text("Done."),
        ]
    };
    llm.script_cycle("[trig-chat]", peek());
    llm.script_cycle("[trig-own]", peek());
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join("inbox/telegram-dm-42")).unwrap();
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::write(ws.join("MEMORY.md"), format!("# Me\n{SECRET}\n")).unwrap();
    let _d = home.start();
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(ws.join("inbox/telegram-dm-42/scan.pdf"), "%PDF").unwrap();
    std::fs::write(ws.join("docs/note.txt"), "a note").unwrap();
    for name in ["chat", "own"] {
        until(&home, &format!("trigger {name} ran"), || {
            fires(&home, name).iter().any(|(s, _)| s == "succeeded")
        })
        .await;
    }
    let results = |marker: &str| -> String {
        let journal = llm.journal();
        let last = journal
            .iter()
            .rev()
            .find(|r| pincer_testkit::requests::first_user(r).contains(marker))
            .unwrap_or_else(|| panic!("no request of {marker}"));
        pincer_testkit::requests::tool_results(last).join("\n")
    };
    let chat = results("[trig-chat]");
    assert!(!chat.is_empty(), "the chat's run made no call");
    assert!(
        !chat.contains(SECRET),
        "a chat's trigger read the owner's memory: {chat}"
    );
    let own = results("[trig-own]");
    assert!(
        own.contains(SECRET),
        "the owner's trigger could not read the memory: {own}"
    );
    // The registry records whose each run's session is.
    let db = rusqlite::Connection::open(home.path().join("state/pincer.db")).unwrap();
    let principal_of = |key: &str| -> String {
        db.query_row(
            "SELECT principal FROM sessions WHERE key LIKE ?1",
            [format!("agent:main:trigger:{key}%")],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("no session of trigger {key}: {e}"))
    };
    assert_eq!(principal_of("chat"), "telegram:dm:42");
    assert_eq!(principal_of("own"), "owner");
}
