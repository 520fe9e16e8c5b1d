//! What a schedule does when its deadline has come: the pure decisions
//! behind "never twice, never silently skipped", kept apart from storage
//! and the clock so that each rule is tested on its own.
//!
//! - A fire on time (or late by less than [`GRACE`]) runs.
//! - After downtime or sleep, the fires missed are never run one by one:
//!   under `once` the most recent runs once if it is within the lookback,
//!   under `skip` none runs; either way the missed ones are recorded.
//! - A run that fails backs the schedule off (30 s, 1 min, 5 min, 15 min,
//!   1 h) and the tenth failure in a row disables it.
//! - A run that failed before reaching the model (the network is not up
//!   yet after a wake) is tried again after 5, 15 and 30 minutes.

use jiff::{SignedDuration, Timestamp};

use crate::config::schedules::Misfire;
use crate::config::when::When;

/// How late a fire may be and still count as on time: the daemon was
/// busy, not down.
pub const GRACE: SignedDuration = SignedDuration::from_secs(60);

/// The pause after the n-th failed run in a row (the last repeats).
pub const BACKOFF: [SignedDuration; 5] = [
    SignedDuration::from_secs(30),
    SignedDuration::from_secs(60),
    SignedDuration::from_mins(5),
    SignedDuration::from_mins(15),
    SignedDuration::from_hours(1),
];

/// Failed runs in a row that disable a schedule.
pub const DISABLE_AFTER: u32 = 10;

/// When a run that failed before the model is tried again, after its
/// first, second and third such failure.
pub const RETRY_LADDER: [SignedDuration; 3] = [
    SignedDuration::from_mins(5),
    SignedDuration::from_mins(15),
    SignedDuration::from_mins(30),
];

/// Fires that passed without a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missed {
    pub count: u64,
    pub first: Timestamp,
    pub last: Timestamp,
    /// Why they did not run, a sentence.
    pub why: String,
}

/// What to do with a schedule whose deadline is `next_at`, at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Not yet.
    Wait(Timestamp),
    /// Run the fire due at `at`; record `missed` first. The schedule's
    /// next deadline becomes `next` (none: it is over) before the run.
    Fire {
        at: Timestamp,
        missed: Option<Missed>,
        next: Option<Timestamp>,
    },
    /// Run nothing: record `missed`; the next deadline becomes `next`.
    Skip {
        missed: Missed,
        next: Option<Timestamp>,
    },
}

/// The most fires of a missed stretch that are counted one by one: past
/// it the count says "at least".
const COUNT_CAP: u64 = 100_000;

/// Decides what the deadline `next_at` of a schedule firing `when` means
/// at `now`.
pub fn due(
    when: &When,
    next_at: Timestamp,
    now: Timestamp,
    misfire: Misfire,
    lookback: SignedDuration,
) -> Due {
    if next_at > now {
        return Due::Wait(next_at);
    }
    // The fires from `next_at` (itself one) to `now`: counted for the
    // record, found without walking them.
    let latest = when.last_in(next_at, now).unwrap_or(next_at);
    let mut count = 1;
    let mut at = next_at;
    while at < latest && count < COUNT_CAP {
        match when.next_after(at) {
            Some(t) if t <= latest => {
                at = t;
                count += 1;
            }
            _ => break,
        }
    }
    let before = when
        .last_in(next_at, latest - SignedDuration::from_nanos(1))
        .unwrap_or(next_at);
    let next = when.next_after(now);
    let late = now.duration_since(latest);
    let earlier = |why: &str| {
        (count > 1).then(|| Missed {
            count: count - 1,
            first: next_at,
            last: before,
            why: why.to_string(),
        })
    };
    if late <= GRACE {
        return Due::Fire {
            at: latest,
            missed: earlier("pincerd was not running (or the machine slept); a later fire ran"),
            next,
        };
    }
    let missed = |why: String| Missed {
        count,
        first: next_at,
        last: latest,
        why,
    };
    match misfire {
        Misfire::Once if late <= lookback => Due::Fire {
            at: latest,
            missed: earlier(
                "missed while pincerd was not running (or the machine slept); only the most recent runs (`misfire = \"once\"`)",
            ),
            next,
        },
        Misfire::Once => Due::Skip {
            missed: missed(format!(
                "missed while pincerd was not running (or the machine slept), longer ago than the lookback ({lookback:#})"
            )),
            next,
        },
        Misfire::Skip => Due::Skip {
            missed: missed(
                "missed while pincerd was not running (or the machine slept); `misfire = \"skip\"`"
                    .into(),
            ),
            next,
        },
    }
}

/// The next deadline after a run that failed, the `failures`-th in a row
/// (1 for the first): the first fire after the back-off pause.
pub fn after_failure(when: &When, now: Timestamp, failures: u32) -> Option<Timestamp> {
    let step = (failures.max(1) as usize - 1).min(BACKOFF.len() - 1);
    let pause = now.checked_add(BACKOFF[step]).unwrap_or(now);
    when.next_after(pause - SignedDuration::from_nanos(1))
}

/// When a run that failed before reaching the model, for the `tries`-th
/// time (1 for the first), runs again; `None` once the ladder is done.
pub fn retry_at(now: Timestamp, tries: u32) -> Option<Timestamp> {
    let step = RETRY_LADDER.get(tries.checked_sub(1)? as usize)?;
    now.checked_add(*step).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn daily() -> When {
        When::cron("0 8 * * *", Some("UTC")).unwrap()
    }

    const DAY: SignedDuration = SignedDuration::from_hours(24);

    #[test]
    fn a_deadline_not_reached_waits() {
        let d = due(
            &daily(),
            at("2026-11-27T08:00:00Z"),
            at("2026-11-27T07:59:59Z"),
            Misfire::Once,
            DAY,
        );
        assert_eq!(d, Due::Wait(at("2026-11-27T08:00:00Z")));
    }

    #[test]
    fn a_fire_on_time_runs_and_moves_the_deadline_to_the_next() {
        let d = due(
            &daily(),
            at("2026-11-27T08:00:00Z"),
            at("2026-11-27T08:00:30Z"),
            Misfire::Skip,
            DAY,
        );
        assert_eq!(
            d,
            Due::Fire {
                at: at("2026-11-27T08:00:00Z"),
                missed: None,
                next: Some(at("2026-11-28T08:00:00Z")),
            }
        );
    }

    #[test]
    fn five_missed_fires_run_once_under_once_and_never_under_skip() {
        // Down from before the 22nd's fire until the 26th at 10:00.
        let from = at("2026-11-22T08:00:00Z");
        let now = at("2026-11-26T10:00:00Z");
        let d = due(&daily(), from, now, Misfire::Once, DAY);
        assert_eq!(
            d,
            Due::Fire {
                at: at("2026-11-26T08:00:00Z"),
                missed: Some(Missed {
                    count: 4,
                    first: from,
                    last: at("2026-11-25T08:00:00Z"),
                    why: "missed while pincerd was not running (or the machine slept); only the most recent runs (`misfire = \"once\"`)".into(),
                }),
                next: Some(at("2026-11-27T08:00:00Z")),
            }
        );
        let Due::Skip { missed, next } = due(&daily(), from, now, Misfire::Skip, DAY) else {
            panic!("skip runs nothing");
        };
        assert_eq!(
            (missed.count, missed.first, missed.last),
            (5, from, at("2026-11-26T08:00:00Z"))
        );
        assert_eq!(next, Some(at("2026-11-27T08:00:00Z")));
    }

    #[test]
    fn a_missed_fire_older_than_the_lookback_is_skipped_and_recorded() {
        let d = due(
            &daily(),
            at("2026-11-26T08:00:00Z"),
            at("2026-11-26T20:00:00Z"),
            Misfire::Once,
            SignedDuration::from_hours(6),
        );
        let Due::Skip { missed, .. } = d else {
            panic!("{d:?}");
        };
        assert_eq!(missed.count, 1);
        assert!(missed.why.contains("lookback (6h)"), "{}", missed.why);
    }

    #[test]
    fn a_one_shot_fires_once_and_is_over() {
        let once = When::at("2026-11-27T08:00:00Z", None).unwrap();
        let d = due(
            &once,
            at("2026-11-27T08:00:00Z"),
            at("2026-11-27T08:00:01Z"),
            Misfire::Once,
            DAY,
        );
        assert_eq!(
            d,
            Due::Fire {
                at: at("2026-11-27T08:00:00Z"),
                missed: None,
                next: None
            }
        );
    }

    #[test]
    fn a_fast_interval_down_for_a_month_is_counted_without_running_each() {
        let every = When::every("10s", at("2026-10-01T00:00:00Z")).unwrap();
        let from = at("2026-10-01T00:00:00Z");
        // Back a few seconds after a fire: that one runs, the rest are
        // one record (counted up to the cap).
        let d = due(&every, from, at("2026-11-01T00:00:05Z"), Misfire::Skip, DAY);
        let Due::Fire {
            at: fire,
            missed: Some(missed),
            next,
        } = d
        else {
            panic!("{d:?}")
        };
        assert_eq!(fire, at("2026-11-01T00:00:00Z"));
        assert_eq!(missed.count, COUNT_CAP - 1);
        assert_eq!(missed.last, at("2026-10-31T23:59:50Z"));
        assert_eq!(next, Some(at("2026-11-01T00:00:10Z")));
        // Back long after the last fire: under `skip` nothing runs.
        let every = When::every("1h", from).unwrap();
        let d = due(&every, from, at("2026-11-01T00:30:00Z"), Misfire::Skip, DAY);
        let Due::Skip { missed, next } = d else {
            panic!("{d:?}")
        };
        assert_eq!(missed.count, 31 * 24 + 1);
        assert_eq!(missed.last, at("2026-11-01T00:00:00Z"));
        assert_eq!(next, Some(at("2026-11-01T01:00:00Z")));
    }

    #[test]
    fn failures_back_off_then_the_ladder_retries_thrice() {
        let now = at("2026-11-27T08:00:00Z");
        let every_minute = When::cron("* * * * *", Some("UTC")).unwrap();
        assert_eq!(
            after_failure(&every_minute, now, 1),
            Some(at("2026-11-27T08:01:00Z"))
        );
        assert_eq!(
            after_failure(&every_minute, now, 3),
            Some(at("2026-11-27T08:05:00Z"))
        );
        assert_eq!(
            after_failure(&every_minute, now, 9),
            Some(at("2026-11-27T09:00:00Z"))
        );
        // A daily fire is further away than any pause.
        assert_eq!(
            after_failure(&daily(), now, 5),
            Some(at("2026-11-28T08:00:00Z"))
        );
        let once = When::at("2026-11-27T08:00:00Z", None).unwrap();
        assert_eq!(after_failure(&once, now, 2), None);
        assert_eq!(retry_at(now, 1), Some(at("2026-11-27T08:05:00Z")));
        assert_eq!(retry_at(now, 2), Some(at("2026-11-27T08:15:00Z")));
        assert_eq!(retry_at(now, 3), Some(at("2026-11-27T08:30:00Z")));
        assert_eq!(retry_at(now, 4), None);
        assert_eq!(retry_at(now, 0), None);
    }
}
