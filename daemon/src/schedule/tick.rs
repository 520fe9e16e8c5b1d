//! One pass of the scheduler at an instant: config schedules brought in
//! line with the file ([`sync_config`]), then every schedule whose
//! deadline has come claimed or skipped in the store ([`tick`]) — the
//! deadline moved past the fire in the same transaction, before the
//! caller runs anything. The pass answers what to run and when to look
//! again; it reads no clock (the caller passes the instant), so the tests
//! drive it through days, restarts and DST changes directly.

use jiff::Timestamp;

use crate::config::schedules::{FieldError, ScheduleFields, ScheduleSpec};

use super::plan::{self, Due};
use super::store::{ScheduleRow, ScheduleStore, Source, StoreError};

/// A fire claimed in the ledger: the caller runs it.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The fire's row in the ledger.
    pub fire: i64,
    pub schedule: ScheduleRow,
    pub spec: ScheduleSpec,
    /// The instant it was due.
    pub due: Timestamp,
    /// 1, or more for a retry of a run that failed before the model.
    pub attempt: u32,
}

/// What a pass found.
#[derive(Debug, Default)]
pub struct Tick {
    pub claimed: Vec<Claimed>,
    /// The earliest deadline still ahead: when to look again.
    pub wake: Option<Timestamp>,
    /// Schedules whose fields no longer check (an agent removed, a zone
    /// unknown): disabled, the owner to be told why.
    pub disabled: Vec<(String, String)>,
}

/// Who the agents are: the config's ids and its default agent.
pub struct Agents<'a> {
    pub ids: &'a [&'a str],
    pub default: &'a str,
}

impl Agents<'_> {
    fn check(&self, row: &ScheduleRow) -> Result<ScheduleSpec, FieldError> {
        row.fields
            .check(&row.name, self.ids, self.default, row.created_at)
    }
}

/// Brings the config's schedules into the store: a new one is added with
/// its first deadline after `now`; a changed one takes its new fields and
/// a deadline after `now` (its failures cleared); one no longer in the
/// file is removed. A schedule made at run time with the same name as one
/// in the file keeps its place: the file's is reported and left out.
pub async fn sync_config(
    store: &ScheduleStore,
    schedules: &[(String, ScheduleFields)],
    agents: &Agents<'_>,
    now: Timestamp,
) -> Result<Vec<String>, StoreError> {
    let mut problems = Vec::new();
    let stored = store.list().await?;
    for (name, fields) in schedules {
        let row = ScheduleRow {
            name: name.clone(),
            source: Source::Config,
            fields: fields.clone(),
            principal: "owner".into(),
            chat: None,
            created_at: now,
            next_at: None,
            paused: false,
            failures: 0,
            disabled: None,
            retry: None,
            retries: 0,
        };
        let spec = match agents.check(&row) {
            Ok(spec) => spec,
            Err(e) => {
                problems.push(format!("[schedules.{name}]: {e}"));
                continue;
            }
        };
        match stored.iter().find(|r| r.name == *name) {
            None => {
                store
                    .add(ScheduleRow {
                        next_at: spec.when.next_after(now),
                        ..row
                    })
                    .await?;
            }
            Some(old) if old.source == Source::Made => problems.push(format!(
                "[schedules.{name}] is left out: a schedule made at run time has that name (`pincer schedules remove {name}` frees it)"
            )),
            Some(old) if old.fields != *fields => {
                // An `every` keeps counting from when it was first made.
                let spec = agents.check(&ScheduleRow {
                    created_at: old.created_at,
                    ..row
                });
                let next = spec.ok().and_then(|s| s.when.next_after(now));
                store.edit(name, fields, next).await?;
            }
            Some(_) => {}
        }
    }
    for old in stored.iter().filter(|r| r.source == Source::Config) {
        if !schedules.iter().any(|(name, _)| *name == old.name) {
            store.remove(&old.name).await?;
        }
    }
    Ok(problems)
}

/// Claims or skips, at `now`, every schedule whose deadline has come
/// (only those are read: a thousand schedules cost a pass no more than
/// the few due), then finds the earliest deadline left.
pub async fn tick(
    store: &ScheduleStore,
    agents: &Agents<'_>,
    now: Timestamp,
) -> Result<Tick, StoreError> {
    let mut out = Tick::default();
    for row in store.due(now).await? {
        let spec = match agents.check(&row) {
            Ok(spec) => spec,
            Err(e) => {
                let why = format!("its settings no longer hold: {e}");
                store.disable(&row.name, why.clone()).await?;
                out.disabled.push((row.name.clone(), why));
                continue;
            }
        };
        // A run that failed before the model, tried again.
        if let Some((of, at)) = row.retry
            && at <= now
        {
            match store.fire(of).await? {
                Some(first) => {
                    let attempt = first.attempt + 1;
                    let fire = store
                        .claim(&row.name, first.due_at, attempt, None, None, now)
                        .await?;
                    out.claimed.push(Claimed {
                        fire,
                        schedule: row.clone(),
                        spec: spec.clone(),
                        due: first.due_at,
                        attempt,
                    });
                }
                // Left due, it would wake the scheduler at once forever.
                None => store.forget_retry(&row.name).await?,
            }
        }
        let Some(next_at) = row.next_at else {
            continue;
        };
        match plan::due(&spec.when, next_at, now, spec.misfire, spec.lookback) {
            // Only its retry was due.
            Due::Wait(_) => {}
            Due::Fire { at, missed, next } => {
                let fire = store.claim(&row.name, at, 1, missed, next, now).await?;
                out.claimed.push(Claimed {
                    fire,
                    schedule: row,
                    spec,
                    due: at,
                    attempt: 1,
                });
            }
            Due::Skip { missed, next } => {
                store.skip(&row.name, missed, next, now).await?;
            }
        }
    }
    // The claims and skips moved their deadlines: the earliest is read
    // after them.
    out.wake = store.next_deadline().await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::store::FireState;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const AGENTS: Agents<'static> = Agents {
        ids: &["main"],
        default: "main",
    };

    fn daily(misfire: &str) -> Vec<(String, ScheduleFields)> {
        vec![(
            "morning".into(),
            ScheduleFields {
                cron: Some("0 8 * * *".into()),
                tz: Some("UTC".into()),
                command: Some("echo hi".into()),
                misfire: Some(misfire.into()),
                ..ScheduleFields::default()
            },
        )]
    }

    async fn store() -> (tempfile::TempDir, ScheduleStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = ScheduleStore::open(&dir.path().join("schedules.db")).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn a_due_fire_runs_once_however_often_the_scheduler_looks() {
        let (_d, store) = store().await;
        sync_config(&store, &daily("once"), &AGENTS, at("2026-11-27T07:00:00Z"))
            .await
            .unwrap();
        let t = tick(&store, &AGENTS, at("2026-11-27T07:59:59Z"))
            .await
            .unwrap();
        assert!(t.claimed.is_empty());
        assert_eq!(t.wake, Some(at("2026-11-27T08:00:00Z")));
        let t = tick(&store, &AGENTS, at("2026-11-27T08:00:00Z"))
            .await
            .unwrap();
        assert_eq!(t.claimed.len(), 1);
        assert_eq!(t.claimed[0].due, at("2026-11-27T08:00:00Z"));
        assert_eq!(t.wake, Some(at("2026-11-28T08:00:00Z")));
        for _ in 0..3 {
            let again = tick(&store, &AGENTS, at("2026-11-27T08:00:01Z"))
                .await
                .unwrap();
            assert!(again.claimed.is_empty(), "claimed twice");
        }
    }

    #[tokio::test]
    async fn a_crash_after_the_claim_leaves_unknown_and_no_second_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schedules.db");
        let store = ScheduleStore::open(&path).unwrap();
        sync_config(&store, &daily("once"), &AGENTS, at("2026-11-27T07:00:00Z"))
            .await
            .unwrap();
        let t = tick(&store, &AGENTS, at("2026-11-27T08:00:00Z"))
            .await
            .unwrap();
        store.running(t.claimed[0].fire, None).await.unwrap();
        // kill -9: the store is opened again, as at a start.
        drop(store);
        let store = ScheduleStore::open(&path).unwrap();
        let crashed = store
            .settle_crashed(at("2026-11-27T08:00:30Z"))
            .await
            .unwrap();
        assert_eq!(crashed.len(), 1);
        let t = tick(&store, &AGENTS, at("2026-11-27T08:00:30Z"))
            .await
            .unwrap();
        assert!(t.claimed.is_empty(), "an unknown fire ran again");
        let h = store.history("morning", 5).await.unwrap();
        assert_eq!(h[0].state, FireState::Unknown);
    }

    #[tokio::test]
    async fn five_missed_days_run_once_with_once_and_never_with_skip() {
        for (misfire, runs) in [("once", 1), ("skip", 0)] {
            let (_d, store) = store().await;
            sync_config(&store, &daily(misfire), &AGENTS, at("2026-11-21T12:00:00Z"))
                .await
                .unwrap();
            // pincerd down from the 21st at noon to the 26th at 10:00.
            let t = tick(&store, &AGENTS, at("2026-11-26T10:00:00Z"))
                .await
                .unwrap();
            assert_eq!(t.claimed.len(), runs, "{misfire}");
            if runs == 1 {
                assert_eq!(t.claimed[0].due, at("2026-11-26T08:00:00Z"));
            }
            let h = store.history("morning", 5).await.unwrap();
            let skipped: Vec<_> = h.iter().filter(|f| f.state == FireState::Skipped).collect();
            assert_eq!(
                skipped.len(),
                1,
                "{misfire}: one record of the missed fires"
            );
            assert_eq!(skipped[0].missed.unwrap().0, 5 - runs as u64, "{misfire}");
            assert_eq!(t.wake, Some(at("2026-11-27T08:00:00Z")));
        }
    }

    #[tokio::test]
    async fn the_file_adds_edits_and_removes_its_schedules_and_runtime_ones_stay() {
        let (_d, store) = store().await;
        let now = at("2026-11-27T07:00:00Z");
        sync_config(&store, &daily("once"), &AGENTS, now)
            .await
            .unwrap();
        let mut edited = daily("skip");
        edited[0].1.cron = Some("0 9 * * *".into());
        sync_config(&store, &edited, &AGENTS, now).await.unwrap();
        let row = store.get("morning").await.unwrap().unwrap();
        assert_eq!(row.next_at, Some(at("2026-11-27T09:00:00Z")));
        assert_eq!(row.fields.misfire.as_deref(), Some("skip"));
        store
            .add(ScheduleRow {
                name: "mine".into(),
                source: Source::Made,
                ..row.clone()
            })
            .await
            .unwrap();
        let problems = sync_config(&store, &[], &AGENTS, now).await.unwrap();
        assert!(problems.is_empty());
        let names: Vec<String> = store
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["mine"]);
        let mut clash = daily("once");
        clash[0].0 = "mine".into();
        let problems = sync_config(&store, &clash, &AGENTS, now).await.unwrap();
        assert!(
            problems[0].contains("made at run time has that name"),
            "{problems:?}"
        );
    }

    #[tokio::test]
    async fn a_schedule_whose_agent_is_gone_is_disabled_once_with_the_reason() {
        let (_d, store) = store().await;
        let mut fields = daily("once");
        fields[0].1.agent = Some("helper".into());
        let both = Agents {
            ids: &["main", "helper"],
            default: "main",
        };
        sync_config(&store, &fields, &both, at("2026-11-27T07:00:00Z"))
            .await
            .unwrap();
        let t = tick(&store, &AGENTS, at("2026-11-27T08:00:00Z"))
            .await
            .unwrap();
        assert!(t.claimed.is_empty());
        assert_eq!(t.disabled.len(), 1);
        assert!(
            t.disabled[0].1.contains("no agent `helper`"),
            "{:?}",
            t.disabled
        );
        let t = tick(&store, &AGENTS, at("2026-11-28T08:00:00Z"))
            .await
            .unwrap();
        assert!(t.disabled.is_empty(), "told once");
        assert_eq!(t.wake, None);
    }

    /// A clock driven a minute at a time through both DST nights of New
    /// York: a job in the doubled hour and one in the skipped hour each
    /// run once a night; an hourly one runs every real hour.
    #[tokio::test]
    async fn dst_nights_neither_double_nor_drop_a_run() {
        let make = |name: &str, cron: &str| {
            (
                name.to_string(),
                ScheduleFields {
                    cron: Some(cron.into()),
                    tz: Some("America/New_York".into()),
                    command: Some("true".into()),
                    ..ScheduleFields::default()
                },
            )
        };
        let schedules = [
            make("fold", "30 1 * * *"),
            make("gap", "30 2 * * *"),
            make("hourly", "0 * * * *"),
        ];
        for night in ["2026-11-01T03:00:00Z", "2026-03-08T04:00:00Z"] {
            let (_d, store) = store().await;
            let start: Timestamp = night.parse().unwrap();
            sync_config(&store, &schedules, &AGENTS, start)
                .await
                .unwrap();
            let mut runs = std::collections::BTreeMap::<String, Vec<Timestamp>>::new();
            for minute in 0..(24 * 60) {
                let now = start + jiff::SignedDuration::from_mins(minute);
                for c in tick(&store, &AGENTS, now).await.unwrap().claimed {
                    runs.entry(c.schedule.name).or_default().push(c.due);
                }
            }
            assert_eq!(runs["fold"].len(), 1, "{night}: {:?}", runs["fold"]);
            assert_eq!(runs["gap"].len(), 1, "{night}: {:?}", runs["gap"]);
            // The hours after the start, in real time, whatever the wall
            // clock shows.
            assert_eq!(runs["hourly"].len(), 23, "{night}: every real hour");
        }
    }

    #[tokio::test]
    async fn a_run_that_failed_before_the_model_is_tried_again_on_the_ladder() {
        let (_d, store) = store().await;
        sync_config(&store, &daily("once"), &AGENTS, at("2026-11-27T07:00:00Z"))
            .await
            .unwrap();
        let now = at("2026-11-27T08:00:00Z");
        let t = tick(&store, &AGENTS, now).await.unwrap();
        let fire = t.claimed[0].fire;
        let retry = plan::retry_at(now, 1).unwrap();
        store
            .failed(
                "morning",
                fire,
                "network down".into(),
                Some(retry),
                |_| (None, None),
                now,
            )
            .await
            .unwrap();
        let t = tick(&store, &AGENTS, at("2026-11-27T08:04:59Z"))
            .await
            .unwrap();
        assert!(t.claimed.is_empty());
        assert_eq!(t.wake, Some(retry));
        let t = tick(&store, &AGENTS, retry).await.unwrap();
        assert_eq!(t.claimed.len(), 1);
        assert_eq!(
            (t.claimed[0].due, t.claimed[0].attempt),
            (at("2026-11-27T08:00:00Z"), 2)
        );
        // The regular deadline did not move.
        assert_eq!(t.wake, Some(at("2026-11-28T08:00:00Z")));
    }

    /// A retry whose first fire is no longer in the ledger is dropped: it
    /// would otherwise be due at every pass and wake the scheduler at once
    /// forever.
    #[tokio::test]
    async fn a_retry_of_a_fire_gone_from_the_ledger_is_dropped() {
        let (_d, store) = store().await;
        sync_config(&store, &daily("once"), &AGENTS, at("2026-11-27T07:00:00Z"))
            .await
            .unwrap();
        let retry = at("2026-11-27T07:30:00Z");
        store
            .failed(
                "morning",
                9_999,
                "network down".into(),
                Some(retry),
                |_| (None, None),
                at("2026-11-27T07:25:00Z"),
            )
            .await
            .unwrap();
        assert_eq!(store.next_deadline().await.unwrap(), Some(retry));
        let t = tick(&store, &AGENTS, retry).await.unwrap();
        assert!(t.claimed.is_empty());
        assert_eq!(t.wake, Some(at("2026-11-27T08:00:00Z")));
    }

    /// Only schedules in force count for the next wake-up: a paused one's
    /// deadline does not.
    #[tokio::test]
    async fn a_paused_schedule_sets_no_wake_up() {
        let (_d, store) = store().await;
        sync_config(&store, &daily("once"), &AGENTS, at("2026-11-27T07:00:00Z"))
            .await
            .unwrap();
        let t = tick(&store, &AGENTS, at("2026-11-27T07:10:00Z"))
            .await
            .unwrap();
        assert_eq!(t.wake, Some(at("2026-11-27T08:00:00Z")));
        store
            .set_paused("morning", true, Some(at("2026-11-27T08:00:00Z")))
            .await
            .unwrap();
        let t = tick(&store, &AGENTS, at("2026-11-27T07:12:00Z"))
            .await
            .unwrap();
        assert_eq!(t.wake, None);
    }
}
