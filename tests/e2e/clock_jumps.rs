//! Faults (issue 29; docs/src/hardening.md): the wall clock jumps while
//! pincerd runs, on the tests' clock (`PINCER_TEST_CLOCK`, a file the
//! test rewrites and the scheduler wakes on; on the machine's clock the
//! scheduler wakes on a change through `TFD_TIMER_CANCEL_ON_SET`, which a
//! test cannot use without setting the machine's time). An NTP step back over a fire that
//! already ran does not run it again; a suspend of days runs what the
//! schedule's `misfire` rule says (the latest once, or none) and not one
//! fire per missed day; afterwards the schedules fire on time as before.

use std::time::{Duration, Instant};

use pincer_testkit::harness::TestHome;

use crate::schedules::{DAILY_ONCE_AND_SKIP, ledger, ms, scheduled_at, set_clock};

type Rows = Vec<(String, i64, u32, String, Option<i64>)>;

/// Waits until the ledger satisfies `done`, then a quiet 2 s in which
/// nothing more may be recorded.
async fn settled(home: &TestHome, what: &str, done: impl Fn(&Rows) -> bool) -> Rows {
    let start = Instant::now();
    let rows = loop {
        let rows = ledger(home);
        if done(&rows) {
            break rows;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: {rows:?}\n{}",
            std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ledger(home), rows, "{what}: something more ran");
    rows
}

fn of<'a>(rows: &'a Rows, name: &str) -> Vec<&'a (String, i64, u32, String, Option<i64>)> {
    rows.iter().filter(|r| r.0 == name).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_jumps_back_and_forward_neither_double_nor_skip_a_fire() {
    let home = TestHome::new();
    home.write_config(DAILY_ONCE_AND_SKIP);
    let clock = home.path().join("clock");
    set_clock(&clock, "2026-11-27T07:59:50Z");
    let env = [("PINCER_TEST_CLOCK", clock.to_str().unwrap())];
    let _daemon = home.start_with_env(&env);
    scheduled_at(&home, "2026-11-27T08:00:00Z").await;

    // 08:00: both fire once.
    set_clock(&clock, "2026-11-27T08:00:00Z");
    let rows = settled(&home, "the first fires", |rows| {
        rows.len() == 2 && rows.iter().all(|r| r.3 == "succeeded")
    })
    .await;
    assert!(rows.iter().all(|r| r.1 == ms("2026-11-27T08:00:00Z")));

    // An NTP step back a minute, then 08:00 again: it already ran.
    set_clock(&clock, "2026-11-27T07:59:00Z");
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_clock(&clock, "2026-11-27T08:00:30Z");
    let after_step = settled(&home, "after the step back", |r| r.len() == 2).await;
    assert_eq!(after_step, rows, "the step back ran a fire again");
    scheduled_at(&home, "2026-11-28T08:00:00Z").await;

    // A suspend from Friday 08:00 to Monday 09:00: three 08:00s missed.
    set_clock(&clock, "2026-11-30T09:00:00Z");
    let rows = settled(&home, "after the suspend", |rows| {
        let once = of(rows, "daily-once");
        let skip = of(rows, "daily-skip");
        once.iter()
            .any(|r| r.3 == "succeeded" && r.1 == ms("2026-11-30T08:00:00Z"))
            && skip.iter().any(|r| r.3 == "skipped")
    })
    .await;
    let once = of(&rows, "daily-once");
    assert_eq!(
        once.len(),
        3,
        "the first, the skipped stretch, the latest: {once:?}"
    );
    assert_eq!((once[1].3.as_str(), once[1].4), ("skipped", Some(2)));
    let skip = of(&rows, "daily-skip");
    assert_eq!(skip.len(), 2, "{skip:?}");
    assert_eq!((skip[1].3.as_str(), skip[1].4), ("skipped", Some(3)));
    scheduled_at(&home, "2026-12-01T08:00:00Z").await;

    // And the next morning both fire as usual, once.
    set_clock(&clock, "2026-12-01T08:00:00Z");
    let rows = settled(&home, "the next morning", |rows| {
        rows.iter()
            .filter(|r| r.1 == ms("2026-12-01T08:00:00Z") && r.3 == "succeeded")
            .count()
            == 2
    })
    .await;
    assert_eq!(rows.len(), 7, "{rows:?}");
}
