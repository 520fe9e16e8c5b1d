//! Schedules through the real pincerd (SPEC §13a): a `command` schedule
//! from config.toml fires on the machine's clock, runs through the `exec`
//! pipeline and leaves its ledger in `state/schedules.db`; a restart
//! neither runs a finished fire again nor loses the deadline. A prompt
//! schedule's answer reaches the owner's DM on the Telegram emulator.
//! On the tests' clock (`PINCER_TEST_CLOCK`): a fire killed mid-run is
//! never run again; `pincer schedules …` makes, shows, pauses, runs and
//! removes schedules; a reminder the agent's `schedule` tool makes is
//! listed, fired and delivered; a failing schedule is disabled after ten
//! with the owner told once; a failed delivery is retried alone.

use std::time::{Duration, Instant};

use pincer_testkit::harness::TestHome;

/// The ledger's rows: (due_at ms, state, output), oldest first.
fn fires(home: &TestHome) -> Vec<(i64, String, Option<String>)> {
    let path = home.path().join("state/schedules.db");
    let Ok(db) = rusqlite::Connection::open(path) else {
        return Vec::new();
    };
    let Ok(mut st) =
        db.prepare("SELECT due_at, state, output FROM fires WHERE attempt > 0 ORDER BY id")
    else {
        return Vec::new();
    };
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn until(home: &TestHome, what: &str, done: impl Fn(&[(i64, String, Option<String>)]) -> bool) {
    let start = Instant::now();
    loop {
        let rows = fires(home);
        if done(&rows) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "{what}: the ledger is {rows:?}\npincerd log:\n{}",
            std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_schedule_fires_on_the_clock_and_a_restart_runs_nothing_twice() {
    let home = TestHome::new();
    home.write_config("[schedules.tick]\nevery = \"10s\"\ncommand = \"echo tick\"\n");
    let daemon = home.start();
    until(&home, "the first fire", |rows| {
        rows.iter()
            .any(|(_, state, out)| state == "succeeded" && out.as_deref() == Some("tick"))
    });
    let _ = daemon.stop();
    let before = fires(&home);
    let _daemon = home.start();
    until(&home, "a later fire", |rows| rows.len() > before.len());
    let after = fires(&home);
    // Each fire's instant once, and every one of them ended.
    let mut dues: Vec<i64> = after.iter().map(|(due, _, _)| *due).collect();
    dues.dedup();
    assert_eq!(dues.len(), after.len(), "a fire ran twice: {after:?}");
    assert!(
        after
            .iter()
            .all(|(_, state, _)| state == "succeeded" || state == "running" || state == "claimed"),
        "{after:?}"
    );
    // Its commands ran through exec, in the schedule's session.
    let sessions = home.path().join("sessions/main");
    let transcripts: String = std::fs::read_dir(sessions)
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(transcripts.contains("\"name\":\"exec\""), "{transcripts}");
}

/// A prompt schedule's answer reaches the owner's Telegram DM through the
/// emulator, once per fire.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_schedules_answer_reaches_the_owners_telegram() {
    use crate::telegram::{OWNER, rig, text};
    use crate::telegram_approvals::until as chat_until;
    use pincer_testkit::scripted::Step;

    let r = rig(
        "",
        "\n[schedules.morning]\nevery = \"10s\"\nprompt = \"[sched-morning] Summarise my notes\"\ndeliver = \"telegram:owner\"\n",
    )
    .await;
    r.llm
        .script_cycle("[sched-morning]", vec![Step::text("Nothing new today.")]);
    let got = chat_until(&r, OWNER, "the morning summary", |s| {
        s.iter().any(|m| text(m) == "Nothing new today.")
    })
    .await;
    let fired = fires(&r.home)
        .iter()
        .filter(|(_, state, _)| state == "succeeded")
        .count();
    let sent = got
        .iter()
        .filter(|m| text(m) == "Nothing new today.")
        .count();
    // Each finished fire's answer once, none twice.
    assert!(
        sent >= 1 && sent <= fired.max(1),
        "{sent} sent for {fired} fires"
    );
    // The turn ran in the schedule's own session, as the owner.
    let sessions: Vec<String> = std::fs::read_dir(r.home.path().join("sessions/main"))
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap_or_default())
        .filter(|t| t.contains("[sched-morning]"))
        .collect();
    assert!(
        !sessions.is_empty(),
        "no transcript has the scheduled prompt"
    );
}

/// Sets the test clock pincerd reads (`PINCER_TEST_CLOCK`).
pub(crate) fn set_clock(file: &std::path::Path, at: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, at).unwrap();
    std::fs::rename(tmp, file).unwrap();
}

/// On the tests' clock: nothing fires before 08:00; at 08:00 the fire
/// runs once; pincerd killed while the next day's fire runs leaves it
/// `unknown` after the restart and runs nothing again, and the day after
/// fires as usual.
#[tokio::test(flavor = "multi_thread")]
async fn on_the_test_clock_a_fire_killed_mid_run_is_unknown_and_never_run_again() {
    let home = TestHome::new();
    home.write_config(
        "[schedules.morning]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\ncommand = \"if [ -e slow ]; then sleep 60; fi; echo morning\"\n",
    );
    let clock = home.path().join("clock");
    let clock_env = clock.to_str().unwrap().to_string();
    set_clock(&clock, "2026-11-27T07:59:50Z");
    let env = [("PINCER_TEST_CLOCK", clock_env.as_str())];
    let daemon = home.start_with_env(&env);
    std::thread::sleep(Duration::from_secs(2));
    assert!(fires(&home).is_empty(), "fired before 08:00");
    set_clock(&clock, "2026-11-27T08:00:00Z");
    until(&home, "the 08:00 fire", |rows| {
        rows.iter()
            .any(|(_, s, out)| s == "succeeded" && out.as_deref() == Some("morning"))
    });
    assert_eq!(fires(&home).len(), 1);
    // The next day's run hangs; pincerd is killed while it runs.
    std::fs::write(home.workspace().join("slow"), "").unwrap();
    set_clock(&clock, "2026-11-28T08:00:00Z");
    until(&home, "the second fire running", |rows| {
        rows.len() == 2 && rows[1].1 == "running"
    });
    daemon.kill9();
    std::fs::remove_file(home.workspace().join("slow")).unwrap();
    set_clock(&clock, "2026-11-28T08:00:30Z");
    let _daemon = home.start_with_env(&env);
    until(&home, "the killed fire unknown", |rows| {
        rows.len() == 2 && rows[1].1 == "unknown"
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(fires(&home).len(), 2, "the unknown fire ran again");
    set_clock(&clock, "2026-11-29T08:00:00Z");
    until(&home, "the third day's fire", |rows| {
        rows.len() == 3 && rows[2].1 == "succeeded"
    });
}

/// Runs `pincer --json args…`, asserting it succeeds; its JSON.
async fn cli_json(home: &TestHome, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = home.cli(&all).await;
    out.ok();
    out.json()
}

pub(crate) fn ms(at: &str) -> i64 {
    at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// `pincer schedules …` on the tests' clock: a schedule made by the CLI is
/// checked like config.toml's, shown with its next fire in its own zone,
/// paused, run by hand, resumed, changed and removed (its ledger stays);
/// one of config.toml is changed only in the file.
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_makes_shows_pauses_runs_edits_and_removes_a_schedule() {
    let home = TestHome::new();
    home.write_config(
        "[schedules.from-file]\ncron = \"0 7 * * *\"\ntz = \"UTC\"\ncommand = \"echo file\"\n",
    );
    let clock = home.path().join("clock");
    // Friday 27 November 2026, 10:00 in New York.
    set_clock(&clock, "2026-11-27T15:00:00Z");
    let _daemon = home.start_with_env(&[("PINCER_TEST_CLOCK", clock.to_str().unwrap())]);

    let made = cli_json(
        &home,
        &[
            "schedules",
            "add",
            "standup",
            "--cron",
            "0 9 * * mon-fri",
            "--tz",
            "America/New_York",
            "--command",
            "echo standup",
        ],
    )
    .await;
    assert_eq!(made["source"], "made");
    assert_eq!(made["principal"], "owner");
    assert_eq!(made["zone"], "America/New_York");
    // The weekend is skipped: Monday 09:00 in New York.
    assert_eq!(
        made["next_local"],
        "2026-11-30 09:00:00 EST (America/New_York)"
    );
    assert_eq!(made["next_at_ms"], ms("2026-11-30T14:00:00Z"));

    // Checked like the file's: the field and why.
    let bad = home
        .cli(&[
            "schedules",
            "add",
            "bad",
            "--cron",
            "61 * * * *",
            "--command",
            "true",
        ])
        .await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("`cron`"), "{}", bad.stderr);
    let twice = home
        .cli(&[
            "schedules",
            "add",
            "standup",
            "--every",
            "1h",
            "--command",
            "true",
        ])
        .await;
    assert!(twice.stderr.contains("exists already"), "{}", twice.stderr);

    let list = cli_json(&home, &["schedules", "list"]).await;
    let names: Vec<&str> = list["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["from-file", "standup"]);
    let human = home.cli(&["schedules", "list"]).await;
    assert!(
        human
            .ok()
            .contains("2026-11-30 09:00:00 EST (America/New_York)"),
        "{}",
        human.stdout
    );

    let paused = cli_json(&home, &["schedules", "pause", "standup"]).await;
    assert_eq!(paused["state"], "paused");
    assert_eq!(paused["next_at_ms"], serde_json::Value::Null);

    // Run by hand while paused: it runs once, its deadline untouched.
    home.cli(&["schedules", "run-now", "standup"]).await.ok();
    let start = Instant::now();
    let history = loop {
        let h = cli_json(&home, &["schedules", "history", "standup"]).await;
        if h["fires"][0]["state"] == "succeeded" {
            break h;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{h}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(history["fires"].as_array().unwrap().len(), 1);
    assert_eq!(history["fires"][0]["output"], "standup");

    let resumed = cli_json(&home, &["schedules", "resume", "standup"]).await;
    assert_eq!(resumed["state"], "active");
    assert_eq!(resumed["next_at_ms"], ms("2026-11-30T14:00:00Z"));

    // `--every` replaces `--cron` (and the zone goes with it).
    let edited = cli_json(
        &home,
        &[
            "schedules",
            "edit",
            "standup",
            "--every",
            "2h",
            "--unset",
            "tz",
        ],
    )
    .await;
    assert_eq!(edited["kind"], "every");
    assert!(edited["fields"].get("cron").is_none(), "{edited}");

    let file = home
        .cli(&["schedules", "edit", "from-file", "--command", "echo other"])
        .await;
    assert_ne!(file.code, 0);
    assert!(file.stderr.contains("config.toml"), "{}", file.stderr);
    let file = home.cli(&["schedules", "remove", "from-file"]).await;
    assert!(file.stderr.contains("config.toml"), "{}", file.stderr);

    home.cli(&["schedules", "remove", "standup"]).await.ok();
    let gone = home.cli(&["schedules", "show", "standup"]).await;
    assert!(
        gone.stderr.contains("no schedule `standup`"),
        "{}",
        gone.stderr
    );
    let kept = cli_json(&home, &["schedules", "history", "standup"]).await;
    assert_eq!(kept["fires"][0]["output"], "standup", "{kept}");
}

/// End to end: the owner asks the agent in their Telegram DM for a
/// reminder; the agent's `schedule` tool makes it (as the owner, to be
/// delivered to that DM); the CLI lists it; the tests' clock reaches its
/// instant and the reminder's answer arrives in the DM once. The
/// scheduled run itself cannot make another schedule.
#[tokio::test(flavor = "multi_thread")]
async fn a_reminder_made_by_the_agent_is_listed_fired_by_the_clock_and_delivered_to_telegram() {
    use crate::telegram::{OWNER, rig_on_clock, text};
    use crate::telegram_approvals::until as chat_until;
    use pincer_testkit::scripted::Step;
    use pincer_testkit::telegram::{ChatSpec, UserSpec};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    set_clock(&clock, "2026-11-27T09:00:00Z");
    let r = rig_on_clock("", "", clock.to_str().unwrap()).await;
    r.llm.script(
        "[sched-ask]",
        vec![
            Step::tool(
                "schedule",
                json!({"action": "add", "name": "call-bob", "at": "2026-11-27 18:00", "tz": "UTC",
                       "prompt": "[sched-remind] Remind the owner to call Bob"}),
            ),
            Step::text("I will remind you at 18:00."),
        ],
    );
    r.llm.script(
        "[sched-remind]",
        vec![
            Step::tool(
                "schedule",
                json!({"action": "add", "name": "again", "every": "1h", "prompt": "more"}),
            ),
            Step::text("Time to call Bob!"),
        ],
    );
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    r.tg.user_says(&dm, &owner, "remind me at 6pm to call Bob [sched-ask]")
        .await;
    chat_until(&r, OWNER, "the agent's confirmation", |s| {
        s.iter().any(|m| text(m) == "I will remind you at 18:00.")
    })
    .await;

    let shown = cli_json(&r.home, &["schedules", "show", "call-bob"]).await;
    assert_eq!(shown["principal"], "owner");
    assert_eq!(shown["deliver"], "telegram:owner");
    assert_eq!(shown["kind"], "at");
    assert_eq!(shown["next_at_ms"], ms("2026-11-27T18:00:00Z"));

    set_clock(&clock, "2026-11-27T18:00:00Z");
    let got = chat_until(&r, OWNER, "the reminder", |s| {
        s.iter().any(|m| text(m) == "Time to call Bob!")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got_now = r.tg.bot_messages(OWNER).await;
    assert_eq!(
        got_now
            .iter()
            .filter(|m| text(m) == "Time to call Bob!")
            .count(),
        1,
        "{got:?}"
    );
    // The scheduled run's own `schedule` call was refused.
    let list = cli_json(&r.home, &["schedules", "list"]).await;
    assert_eq!(list["schedules"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["schedules"][0]["state"], "done");
}

/// A schedule whose runs keep failing backs off and is disabled after ten
/// failures in a row, and the owner is told once, in their Telegram DM.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_schedule_is_disabled_after_ten_and_the_owner_is_told_once() {
    use crate::telegram::{OWNER, rig_on_clock, text};
    use crate::telegram_approvals::until as chat_until;

    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    let mut at = "2026-11-27T00:00:00Z".parse::<jiff::Timestamp>().unwrap();
    set_clock(&clock, &at.to_string());
    let r = rig_on_clock(
        "",
        "\n[schedules.broken]\nevery = \"10s\"\ncommand = \"exit 3\"\n",
        clock.to_str().unwrap(),
    )
    .await;
    let failed = |home: &TestHome| fires(home).iter().filter(|(_, s, _)| s == "failed").count();
    for n in 1..=10 {
        // Past any back-off (an hour at most).
        at = at.checked_add(jiff::SignedDuration::from_hours(2)).unwrap();
        set_clock(&clock, &at.to_string());
        until(&r.home, &format!("failure {n}"), |_| failed(&r.home) == n);
    }
    chat_until(&r, OWNER, "the owner told", |s| {
        s.iter()
            .any(|m| text(m).contains("Schedule broken is disabled"))
    })
    .await;
    let shown = cli_json(&r.home, &["schedules", "show", "broken"]).await;
    assert_eq!(shown["state"], "disabled", "{shown}");
    assert!(
        shown["disabled"]
            .as_str()
            .unwrap()
            .contains("schedules resume broken"),
        "{shown}"
    );
    // `pincer doctor` names it (it exits non-zero: there is an error).
    let doctor = r.home.cli(&["--json", "doctor"]).await;
    let findings: Vec<serde_json::Value> = serde_json::from_str(&doctor.stdout).unwrap();
    assert!(
        findings.iter().any(|f| f["subject"] == "schedule broken"
            && f["level"] == "error"
            && f["message"].as_str().unwrap().starts_with("disabled")),
        "{findings:?}"
    );
    // Nothing runs while disabled, and the owner was told once.
    at = at.checked_add(jiff::SignedDuration::from_hours(5)).unwrap();
    set_clock(&clock, &at.to_string());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(failed(&r.home), 10);
    let told =
        r.tg.bot_messages(OWNER)
            .await
            .iter()
            .filter(|m| text(m).contains("is disabled"))
            .count();
    assert_eq!(told, 1);
}

/// A delivery that fails is retried from its record a minute later, on
/// the tests' clock, without running the fire again.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_delivery_is_retried_without_running_the_fire_again() {
    use crate::telegram::{OWNER, rig_on_clock, text};
    use crate::telegram_approvals::until as chat_until;
    use pincer_testkit::telegram::Failure;

    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    set_clock(&clock, "2026-11-27T07:59:00Z");
    let r = rig_on_clock(
        "",
        "\n[schedules.note]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\ncommand = \"echo the note\"\ndeliver = \"telegram:owner\"\n",
        clock.to_str().unwrap(),
    )
    .await;
    r.tg.fail_next_send(Failure::Api {
        code: 400,
        description: "Bad Request: chat not found".into(),
    })
    .await;
    set_clock(&clock, "2026-11-27T08:00:00Z");
    until(&r.home, "the fire", |rows| {
        rows.len() == 1 && rows[0].1 == "succeeded"
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        r.tg.bot_messages(OWNER)
            .await
            .iter()
            .all(|m| text(m) != "the note"),
        "the first try was to fail"
    );
    set_clock(&clock, "2026-11-27T08:01:05Z");
    chat_until(&r, OWNER, "the retried delivery", |s| {
        s.iter().any(|m| text(m) == "the note")
    })
    .await;
    assert_eq!(fires(&r.home).len(), 1, "the fire ran again");
}

/// A schedule that starts a workflow: its fire ends with the run; a fire
/// due while that run is busy follows the workflow's admission (`drop`
/// here): it is recorded as skipped, not as a failure, and starts nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_workflow_meeting_its_busy_run_follows_the_admission_policy() {
    let home = TestHome::new();
    home.write_config(
        "[schedules.slow]\ncron = \"* * * * *\"\ntz = \"UTC\"\nworkflow = \"slow\"\ninputs = { name = \"x\" }\n",
    );
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/slow.toml"),
        "admission = \"drop\"\n\n[inputs.name]\ntype = \"string\"\n\n[[steps]]\nid = \"work\"\nkind = \"command\"\ncommand = \"echo {{ inputs.name }} start >> order.txt; while [ -e hold ]; do sleep 0.1; done; echo end >> order.txt\"\n",
    )
    .unwrap();
    std::fs::write(ws.join("hold"), "").unwrap();
    let clock = home.path().join("clock");
    set_clock(&clock, "2026-11-27T07:59:59Z");
    let _daemon = home.start_with_env(&[("PINCER_TEST_CLOCK", clock.to_str().unwrap())]);
    // The file's schedules are brought in as the scheduler starts.
    let start = Instant::now();
    while cli_json(&home, &["schedules", "list"]).await["schedules"][0]["next_at_ms"]
        != ms("2026-11-27T08:00:00Z")
    {
        assert!(start.elapsed() < Duration::from_secs(20), "never scheduled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    set_clock(&clock, "2026-11-27T08:00:00Z");
    until(&home, "the first fire running", |rows| {
        rows.len() == 1 && rows[0].1 == "running"
    });
    set_clock(&clock, "2026-11-27T08:01:00Z");
    until(&home, "the second fire turned away", |rows| {
        rows.len() == 2 && rows[1].1 == "skipped"
    });
    std::fs::remove_file(ws.join("hold")).unwrap();
    until(&home, "the first fire ended with its run", |rows| {
        rows[0].1 == "succeeded"
    });
    assert_eq!(
        std::fs::read_to_string(ws.join("order.txt")).unwrap(),
        "x start\nend\n",
        "one run, not two"
    );
    let shown = cli_json(&home, &["schedules", "show", "slow"]).await;
    assert_eq!(shown["failures"], 0, "a turned-away fire is no failure");
    let history = cli_json(&home, &["schedules", "history", "slow"]).await;
    let detail = history["fires"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("admission is `drop`"), "{history}");
    let out = history["fires"][1]["output"].as_str().unwrap();
    assert!(out.contains("succeeded"), "{history}");
}

/// The heartbeat: while HEARTBEAT.md holds only headings and comments no
/// model is called; a beat answered with the token is delivered nowhere;
/// a real report reaches the owner's Telegram DM. Beats run in their own
/// session, not `main`.
#[tokio::test(flavor = "multi_thread")]
async fn the_heartbeat_calls_no_model_for_an_empty_file_and_delivers_only_a_report() {
    use crate::telegram::{OWNER, rig, text};
    use crate::telegram_approvals::until as chat_until;
    use pincer_testkit::scripted::Step;

    let r = rig(
        "",
        "\n[heartbeat.main]\nevery = \"2s\"\ndeliver = \"telegram:owner\"\n",
    )
    .await;
    r.llm.set_journal(true);
    let file = r.home.workspace().join("HEARTBEAT.md");
    std::fs::write(&file, "# HEARTBEAT.md\n\n<!-- Nothing to check yet. -->\n").unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(r.llm.journal().is_empty(), "a beat called the model");
    let beats = |home: &TestHome| {
        let db = rusqlite::Connection::open(home.path().join("state/schedules.db")).unwrap();
        let mut st = db
            .prepare(
                "SELECT state, output FROM fires WHERE schedule = 'heartbeat:main' ORDER BY id",
            )
            .unwrap();
        st.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
    };
    assert!(beats(&r.home).is_empty());

    r.llm.script(
        "[hb-check]",
        vec![
            Step::text("HEARTBEAT_OK"),
            Step::text("The build is red: 3 tests fail."),
        ],
    );
    std::fs::write(&file, "# Checks\n- [hb-check] Is the build green?\n").unwrap();
    chat_until(&r, OWNER, "the report", |s| {
        s.iter()
            .any(|m| text(m) == "The build is red: 3 tests fail.")
    })
    .await;
    let sent = r.tg.bot_messages(OWNER).await;
    assert!(
        sent.iter().all(|m| !text(m).contains("HEARTBEAT_OK")),
        "the token was delivered"
    );
    let rows = beats(&r.home);
    assert_eq!(
        rows[0],
        ("succeeded".into(), Some("HEARTBEAT_OK".into())),
        "{rows:?}"
    );
    let sessions = r.home.cli(&["--json", "sessions", "list"]).await;
    assert!(
        sessions.ok().contains("agent:main:heartbeat:main:beats"),
        "{}",
        sessions.stdout
    );
}

/// Checked before dispatch: a prompt schedule whose model has no key
/// fails at its first fire without calling the model, and is disabled
/// saying why (no retry ladder, no back-off).
#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_the_config_cannot_serve_is_disabled_without_calling_the_model() {
    use pincer_testkit::harness::provider_config;
    use pincer_testkit::scripted::ScriptedLlm;

    let llm = ScriptedLlm::start().await.expect("scripted llm");
    llm.set_journal(true);
    let home = TestHome::new();
    home.write_config(
        &provider_config(
            "openai",
            &format!("{}/v1", llm.base_url()),
            "\n[schedules.summary]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\nprompt = \"Summarise\"\n",
        )
        .replacen(
            "kind = \"openai\"\n",
            "kind = \"openai\"\napi_key_env = \"PINCER_E2E_NO_SUCH_KEY\"\n",
            1,
        ),
    );
    let clock = home.path().join("clock");
    set_clock(&clock, "2026-11-27T07:59:59Z");
    let _daemon = home.start_with_env(&[("PINCER_TEST_CLOCK", clock.to_str().unwrap())]);
    let start = Instant::now();
    while cli_json(&home, &["schedules", "list"]).await["schedules"][0]["next_at_ms"]
        != ms("2026-11-27T08:00:00Z")
    {
        assert!(start.elapsed() < Duration::from_secs(20), "never scheduled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    set_clock(&clock, "2026-11-27T08:00:00Z");
    until(&home, "the fire refused", |rows| {
        rows.len() == 1 && rows[0].1 == "failed"
    });
    let shown = cli_json(&home, &["schedules", "show", "summary"]).await;
    assert_eq!(shown["state"], "disabled", "{shown}");
    let why = shown["disabled"].as_str().unwrap();
    assert!(why.contains("PINCER_E2E_NO_SUCH_KEY"), "{why}");
    assert!(llm.journal().is_empty(), "the model was called");
    // Nothing is tried again.
    set_clock(&clock, "2026-11-27T09:00:00Z");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(fires(&home).len(), 1);
}

/// Every row of the ledger, skipped stretches too: (schedule, due_at ms,
/// attempt, state, missed).
pub(crate) fn ledger(home: &TestHome) -> Vec<(String, i64, u32, String, Option<i64>)> {
    let db = rusqlite::Connection::open(home.path().join("state/schedules.db")).unwrap();
    let mut st = db
        .prepare("SELECT schedule, due_at, attempt, state, missed FROM fires ORDER BY id")
        .unwrap();
    st.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Waits until every schedule's next fire is `at` (the scheduler has
/// brought the file's schedules in on the tests' clock).
pub(crate) async fn scheduled_at(home: &TestHome, at: &str) {
    let start = Instant::now();
    loop {
        let list = cli_json(home, &["schedules", "list"]).await;
        let all = list["schedules"].as_array().unwrap();
        if !all.is_empty() && all.iter().all(|s| s["next_at_ms"] == ms(at)) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Two daily 08:00 schedules, `misfire = "once"` (the default) and
/// `"skip"`.
pub(crate) const DAILY_ONCE_AND_SKIP: &str = "[schedules.daily-once]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\ncommand = \"echo once\"\n\
     [schedules.daily-skip]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\ncommand = \"echo skip\"\nmisfire = \"skip\"\n";

/// pincerd down over six daily fires (through the real binaries, on the
/// tests' clock): with `once` the latest runs once and the five before it
/// are one `skipped` record; with `skip` none runs and all six are one
/// record. Nothing runs once per missed slot.
#[tokio::test(flavor = "multi_thread")]
async fn downtime_over_missed_fires_runs_the_latest_once_with_once_and_none_with_skip() {
    let home = TestHome::new();
    home.write_config(DAILY_ONCE_AND_SKIP);
    let clock = home.path().join("clock");
    set_clock(&clock, "2026-11-27T07:00:00Z");
    let env = [("PINCER_TEST_CLOCK", clock.to_str().unwrap())];
    let daemon = home.start_with_env(&env);
    scheduled_at(&home, "2026-11-27T08:00:00Z").await;
    let _ = daemon.stop();
    // Down from Friday 07:00 to Wednesday 09:00: six 08:00s missed.
    set_clock(&clock, "2026-12-02T09:00:00Z");
    let _daemon = home.start_with_env(&env);
    let start = Instant::now();
    let rows = loop {
        let rows = ledger(&home);
        let once_done = rows
            .iter()
            .any(|r| r.0 == "daily-once" && r.3 == "succeeded");
        let skip_done = rows.iter().any(|r| r.0 == "daily-skip" && r.3 == "skipped");
        if once_done && skip_done {
            break rows;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{rows:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ledger(&home), rows, "something more ran");
    let of = |name: &str| -> Vec<_> { rows.iter().filter(|r| r.0 == name).cloned().collect() };
    let once = of("daily-once");
    assert_eq!(once.len(), 2, "{once:?}");
    assert_eq!(once[0].3, "skipped");
    assert_eq!(
        once[0].4,
        Some(5),
        "five missed before the latest: {once:?}"
    );
    assert_eq!(
        (once[1].1, once[1].3.as_str()),
        (ms("2026-12-02T08:00:00Z"), "succeeded")
    );
    let skip = of("daily-skip");
    assert_eq!(skip.len(), 1, "{skip:?}");
    assert_eq!((skip[0].3.as_str(), skip[0].4), ("skipped", Some(6)));
}

/// A prompt schedule whose provider cannot be reached (the network is
/// down after a wake) is tried again after 5, 15 and 30 minutes; only
/// then does the failure count, and the schedule waits for its next fire.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_cannot_reach_the_model_is_retried_after_5_15_and_30_minutes() {
    use pincer_testkit::harness::provider_config;

    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        // Nothing listens on the discard port.
        "http://127.0.0.1:9/v1",
        "\n[schedules.morning]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\nprompt = \"Summarise\"\n",
    ));
    let clock = home.path().join("clock");
    set_clock(&clock, "2026-11-27T07:59:00Z");
    let _daemon = home.start_with_env(&[("PINCER_TEST_CLOCK", clock.to_str().unwrap())]);
    scheduled_at(&home, "2026-11-27T08:00:00Z").await;
    let attempts = |home: &TestHome| -> Vec<(u32, String)> {
        ledger(home)
            .into_iter()
            .filter(|r| r.2 > 0)
            .map(|r| (r.2, r.3))
            .collect()
    };
    for (n, (at, next)) in [
        ("2026-11-27T08:00:00Z", "2026-11-27T08:05:00Z"),
        ("2026-11-27T08:05:00Z", "2026-11-27T08:20:00Z"),
        ("2026-11-27T08:20:00Z", "2026-11-27T08:50:00Z"),
    ]
    .into_iter()
    .enumerate()
    {
        set_clock(&clock, at);
        until(&home, &format!("attempt {}", n + 1), |_| {
            attempts(&home).len() == n + 1 && attempts(&home)[n].1 == "failed"
        });
        let shown = cli_json(&home, &["schedules", "show", "morning"]).await;
        assert_eq!(
            shown["next_at_ms"],
            ms(next),
            "after attempt {}: {shown}",
            n + 1
        );
        assert_eq!(
            shown["failures"], 0,
            "a failure before the model does not count"
        );
    }
    set_clock(&clock, "2026-11-27T08:50:00Z");
    until(&home, "attempt 4", |_| {
        attempts(&home).len() == 4 && attempts(&home)[3].1 == "failed"
    });
    let shown = cli_json(&home, &["schedules", "show", "morning"]).await;
    assert_eq!(shown["failures"], 1, "{shown}");
    assert_eq!(shown["next_at_ms"], ms("2026-11-28T08:00:00Z"), "{shown}");
    assert_eq!(
        attempts(&home).iter().map(|a| a.0).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

/// The guide's examples of schedules, triggers and the heartbeat
/// (`docs/src/schedules.md`, `docs/src/triggers.md`) are a config pincerd
/// accepts, all together.
#[test]
fn the_guides_schedule_trigger_and_heartbeat_examples_are_valid_config() {
    let mut config = String::from("[channels.telegram]\nowner = \"1\"\n");
    for chapter in ["schedules.md", "triggers.md"] {
        let path = format!("{}/../docs/src/{chapter}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut blocks = 0;
        for block in text.split("```toml\n").skip(1) {
            config.push_str(block.split("```").next().unwrap());
            blocks += 1;
        }
        assert!(blocks > 0, "{chapter} has no toml example");
    }
    assert!(
        config.contains("[heartbeat."),
        "no heartbeat example: {config}"
    );
    let home = TestHome::new();
    home.write_config(&config);
    let workflows = home.workspace().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    // The workflow the schedules' example names.
    std::fs::write(
        workflows.join("remind.toml"),
        "[inputs.text]\ntype = \"string\"\n\n[[steps]]\nid = \"say\"\nkind = \"command\"\ncommand = \"echo hi\"\n",
    )
    .unwrap();
    let out = home.pincerd().arg("check-config").output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}\n{config}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `[schedules.*]` follow the file on a reload: a table removed goes, a
/// changed one takes its new fields, a new one comes in; a reload of
/// the same file changes nothing (the config in force keeps no copy of
/// the tables: the scheduler tells by a digest of what it brought in).
#[tokio::test(flavor = "multi_thread")]
async fn the_files_schedules_follow_a_live_reload() {
    let home = TestHome::new();
    home.write_config(
        "[schedules.a]\ncron = \"0 7 * * *\"\ntz = \"UTC\"\ncommand = \"true\"\n\
         \n[schedules.b]\nevery = \"1h\"\ncommand = \"true\"\n",
    );
    let clock = home.path().join("clock");
    set_clock(&clock, "2026-11-27T15:00:00Z");
    let _daemon = home.start_with_env(&[("PINCER_TEST_CLOCK", clock.to_str().unwrap())]);
    let said = |r: &serde_json::Value| -> Vec<String> {
        r["applied"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .filter(|a| a.contains("schedules"))
            .collect()
    };

    let same = cli_json(&home, &["config", "reload"]).await;
    assert!(said(&same).is_empty(), "{same}");

    home.write_config(
        "[schedules.a]\ncron = \"0 8 * * *\"\ntz = \"UTC\"\ncommand = \"true\"\n\
         \n[schedules.c]\nat = \"2099-01-01 00:00\"\ntz = \"UTC\"\ncommand = \"true\"\n",
    );
    let changed = cli_json(&home, &["config", "reload"]).await;
    assert_eq!(said(&changed), ["schedules: 2 from the file"], "{changed}");
    let start = Instant::now();
    loop {
        let list = cli_json(&home, &["schedules", "list"]).await;
        let rows: Vec<(String, serde_json::Value)> = list["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_string(),
                    s["next_at_ms"].clone(),
                )
            })
            .collect();
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        if names == ["a", "c"] {
            // The changed cron's next fire: 08:00 the next day.
            assert_eq!(rows[0].1, ms("2026-11-28T08:00:00Z"), "{list}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = cli_json(&home, &["config", "reload"]).await;
    assert!(said(&again).is_empty(), "{again}");
}
