//! Schedules through the real pincerd (SPEC §13a): a `command` schedule
//! from config.toml fires on the machine's clock, runs through the `exec`
//! pipeline and leaves its ledger in `state/schedules.db`; a restart
//! neither runs a finished fire again nor loses the deadline. A prompt
//! schedule's answer reaches the owner's DM on the Telegram emulator.

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
            "{what}: the ledger is {rows:?}"
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
fn set_clock(file: &std::path::Path, at: &str) {
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
