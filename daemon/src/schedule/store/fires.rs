//! The ledger of fires. A fire's identity is its schedule, its due
//! instant and its attempt; it is written `claimed` in the transaction
//! that moves the schedule's deadline past it, then `running`, and ends
//! `succeeded`, `failed` (counted, backed off, or retried before the
//! model), `skipped`, or `unknown` when a crash left it. Missed fires are
//! one `skipped` row.

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::{ScheduleStore, StoreError, ms, ts};
use crate::schedule::plan::Missed;

/// A fire's state in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireState {
    Claimed,
    Running,
    Succeeded,
    Failed,
    /// Found `claimed` or `running` after a restart: it may or may not
    /// have run, and is not run again.
    Unknown,
    /// Missed fires that did not run.
    Skipped,
}

impl FireState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::Skipped => "skipped",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed,
            "unknown" => Self::Unknown,
            "skipped" => Self::Skipped,
            _ => Self::Claimed,
        }
    }
}

/// One row of a schedule's ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct FireRow {
    pub id: i64,
    pub schedule: String,
    pub due_at: Timestamp,
    pub attempt: u32,
    pub state: FireState,
    pub claimed_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// For a `skipped` row: how many fires, up to which.
    pub missed: Option<(u64, Timestamp)>,
    /// Why it failed or was skipped, or what it started (a run id).
    pub detail: Option<String>,
    pub output: Option<String>,
}

impl ScheduleStore {
    /// Claims the fire of `name` due at `due` (attempt `attempt`): records
    /// `missed` first, and moves the deadline to `next`, all in one
    /// transaction, before anything runs. The fire's id.
    pub async fn claim(
        &self,
        name: &str,
        due: Timestamp,
        attempt: u32,
        missed: Option<Missed>,
        next: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<i64, StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let tx = c.transaction()?;
                if let Some(m) = &missed {
                    insert_missed(&tx, &name, m, now)?;
                }
                tx.execute(
                    "INSERT INTO fires (schedule, due_at, attempt, state, claimed_at) VALUES (?1, ?2, ?3, 'claimed', ?4)",
                    params![name, ms(due), attempt, ms(now)],
                )?;
                let id = tx.last_insert_rowid();
                if attempt > 1 {
                    // A retry: the regular deadline stays as it is.
                    tx.execute(
                        "UPDATE schedules SET retry_of = NULL, retry_at = NULL WHERE name = ?1",
                        [&name],
                    )?;
                } else {
                    tx.execute(
                        "UPDATE schedules SET next_at = ?2 WHERE name = ?1",
                        params![name, next.map(ms)],
                    )?;
                }
                tx.commit()?;
                Ok(id)
            })
            .await?)
    }

    /// Claims a fire of `name` due `now` apart from its times — asked for
    /// by hand (`run-now`), or a trigger's event — with `detail` saying
    /// which: a schedule's deadline stays as it is. The fire's id.
    pub async fn claim_now(
        &self,
        name: &str,
        now: Timestamp,
        detail: &str,
    ) -> Result<i64, StoreError> {
        let (name, detail) = (name.to_string(), detail.to_string());
        Ok(self
            .db
            .call(move |c| {
                // A second fire in the same millisecond is its next attempt.
                c.execute(
                    "INSERT INTO fires (schedule, due_at, attempt, state, claimed_at, detail)
                     VALUES (?1, ?2, 1 + (SELECT COUNT(*) FROM fires WHERE schedule = ?1 AND due_at = ?2),
                             'claimed', ?2, ?3)",
                    params![name, ms(now), detail],
                )?;
                Ok(c.last_insert_rowid())
            })
            .await?)
    }

    /// The fire of each schedule that is newest in the ledger.
    pub async fn last_fires(&self) -> Result<Vec<FireRow>, StoreError> {
        Ok(self
            .db
            .call(|c| {
                let mut st = c.prepare(&format!(
                    "SELECT {FIRE_COLUMNS} FROM fires WHERE id IN (SELECT MAX(id) FROM fires GROUP BY schedule)"
                ))?;
                st.query_map([], fire_row)?.collect()
            })
            .await?)
    }

    /// Records missed fires that do not run and moves the deadline.
    pub async fn skip(
        &self,
        name: &str,
        missed: Missed,
        next: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let tx = c.transaction()?;
                insert_missed(&tx, &name, &missed, now)?;
                tx.execute(
                    "UPDATE schedules SET next_at = ?2 WHERE name = ?1",
                    params![name, next.map(ms)],
                )?;
                tx.commit()
            })
            .await?)
    }

    /// Fire `id` has started; `detail` says what (a run id, a session).
    pub async fn running(&self, id: i64, detail: Option<String>) -> Result<(), StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE fires SET state = 'running', detail = COALESCE(?2, detail) WHERE id = ?1",
                    params![id, detail],
                )?;
                Ok(())
            })
            .await?)
    }

    /// Fire `id` of `name` succeeded: its failures in a row are cleared.
    pub async fn succeeded(
        &self,
        name: &str,
        id: i64,
        output: Option<String>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let tx = c.transaction()?;
                tx.execute(
                    "UPDATE fires SET state = 'succeeded', ended_at = ?2, output = ?3 WHERE id = ?1",
                    params![id, ms(now), output],
                )?;
                tx.execute(
                    "UPDATE schedules SET failures = 0, retries = 0 WHERE name = ?1",
                    [&name],
                )?;
                tx.commit()
            })
            .await?)
    }

    /// Fire `id` of `name` failed with `why`. A failure before the model
    /// with `retry_at` set is tried again then (and not counted); any
    /// other counts, moves the deadline to `next` (backed off), and when
    /// `disable` says why, disables the schedule. The failures in a row
    /// now.
    #[allow(clippy::too_many_arguments)]
    pub async fn failed(
        &self,
        name: &str,
        id: i64,
        why: String,
        retry_at: Option<Timestamp>,
        next: impl FnOnce(u32) -> (Option<Timestamp>, Option<String>) + Send + 'static,
        now: Timestamp,
    ) -> Result<u32, StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let tx = c.transaction()?;
                tx.execute(
                    "UPDATE fires SET state = 'failed', ended_at = ?2, detail = ?3 WHERE id = ?1",
                    params![id, ms(now), why],
                )?;
                let failures: u32 = if let Some(at) = retry_at {
                    tx.execute(
                        "UPDATE schedules SET retry_of = ?2, retry_at = ?3, retries = retries + 1 WHERE name = ?1",
                        params![name, id, ms(at)],
                    )?;
                    tx.query_row("SELECT failures FROM schedules WHERE name = ?1", [&name], |r| r.get(0))
                        .optional()?
                        .unwrap_or(0)
                } else {
                    let failures: u32 = tx
                        .query_row(
                            "UPDATE schedules SET failures = failures + 1, retries = 0 WHERE name = ?1 RETURNING failures",
                            [&name],
                            |r| r.get(0),
                        )
                        .optional()?
                        .unwrap_or(0);
                    let (next_at, disabled) = next(failures);
                    tx.execute(
                        "UPDATE schedules SET next_at = ?2, disabled = ?3 WHERE name = ?1",
                        params![name, next_at.map(ms), disabled],
                    )?;
                    failures
                };
                tx.commit()?;
                Ok(failures)
            })
            .await?)
    }

    /// Fire `id` ended without an answer: `Skipped` (it did not start: a
    /// workflow's admission turned it away) or `Failed` (a trigger's or a
    /// heartbeat's run), with why. A schedule's failures in a row are
    /// [`ScheduleStore::failed`]'s, not touched here.
    pub async fn ended(
        &self,
        id: i64,
        state: FireState,
        why: String,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE fires SET state = ?2, ended_at = ?3, detail = ?4 WHERE id = ?1",
                    params![id, state.as_str(), ms(now), why],
                )?;
                Ok(())
            })
            .await?)
    }

    /// After a start: every fire a crash left `claimed` or `running`
    /// becomes `unknown` (never run again by itself). Those fires.
    pub async fn settle_crashed(&self, now: Timestamp) -> Result<Vec<FireRow>, StoreError> {
        Ok(self
            .db
            .call(move |c| {
                let tx = c.transaction()?;
                let rows = {
                    let mut st = tx.prepare(&format!(
                        "UPDATE fires SET state = 'unknown', ended_at = ?1,
                         detail = COALESCE(detail || ': ', '') || 'pincerd stopped while it ran; whether it finished is unknown, so it is not run again'
                         WHERE state IN ('claimed', 'running') RETURNING {FIRE_COLUMNS}"
                    ))?;
                    st.query_map([ms(now)], fire_row)?.collect::<Result<Vec<_>, _>>()?
                };
                tx.commit()?;
                Ok(rows)
            })
            .await?)
    }

    /// The latest `limit` rows of the ledger of `name`, newest first.
    pub async fn history(&self, name: &str, limit: u32) -> Result<Vec<FireRow>, StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let mut st = c.prepare(&format!(
                    "SELECT {FIRE_COLUMNS} FROM fires WHERE schedule = ?1 ORDER BY id DESC LIMIT ?2"
                ))?;
                st.query_map(params![name, limit], fire_row)?.collect()
            })
            .await?)
    }

    /// Fire `id`, if there is one.
    pub async fn fire(&self, id: i64) -> Result<Option<FireRow>, StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.query_row(
                    &format!("SELECT {FIRE_COLUMNS} FROM fires WHERE id = ?1"),
                    [id],
                    fire_row,
                )
                .optional()
            })
            .await?)
    }
}

fn insert_missed(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    m: &Missed,
    now: Timestamp,
) -> rusqlite::Result<()> {
    // A skipped stretch is identified by its first fire; attempt 0 keeps
    // it apart from a fire of that instant that did run.
    tx.execute(
        "INSERT OR IGNORE INTO fires (schedule, due_at, attempt, state, claimed_at, ended_at, missed, missed_last, detail)
         VALUES (?1, ?2, 0, 'skipped', ?3, ?3, ?4, ?5, ?6)",
        params![
            name,
            ms(m.first),
            ms(now),
            m.count as i64,
            ms(m.last),
            m.why
        ],
    )?;
    Ok(())
}
const FIRE_COLUMNS: &str = "id, schedule, due_at, attempt, state, claimed_at, ended_at, missed, missed_last, detail, output";

fn fire_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FireRow> {
    let missed: Option<i64> = r.get(7)?;
    let missed_last: Option<i64> = r.get(8)?;
    Ok(FireRow {
        id: r.get(0)?,
        schedule: r.get(1)?,
        due_at: ts(r.get(2)?),
        attempt: r.get(3)?,
        state: FireState::parse(&r.get::<_, String>(4)?),
        claimed_at: ts(r.get(5)?),
        ended_at: r.get::<_, Option<i64>>(6)?.map(ts),
        missed: missed
            .zip(missed_last)
            .map(|(n, l)| (n.max(0) as u64, ts(l))),
        detail: r.get(9)?,
        output: r.get(10)?,
    })
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::store::fixtures::{at, row};

    #[tokio::test]
    async fn a_claim_moves_the_deadline_and_a_crash_leaves_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schedules.db");
        let store = ScheduleStore::open(&path).unwrap();
        assert!(store.add(row("morning")).await.unwrap());
        assert!(
            !store.add(row("morning")).await.unwrap(),
            "names are unique"
        );
        let now = at("2026-11-27T08:00:01Z");
        let id = store
            .claim(
                "morning",
                at("2026-11-27T08:00:00Z"),
                1,
                None,
                Some(at("2026-11-28T08:00:00Z")),
                now,
            )
            .await
            .unwrap();
        store.running(id, Some("session x".into())).await.unwrap();
        let got = store.get("morning").await.unwrap().unwrap();
        assert_eq!(got.next_at, Some(at("2026-11-28T08:00:00Z")));
        // The same fire cannot be claimed twice.
        assert!(
            store
                .claim("morning", at("2026-11-27T08:00:00Z"), 1, None, None, now)
                .await
                .is_err()
        );
        drop(store);
        let store = ScheduleStore::open(&path).unwrap();
        let crashed = store.settle_crashed(now).await.unwrap();
        assert_eq!(crashed.len(), 1);
        assert_eq!(crashed[0].state, FireState::Unknown);
        assert!(
            crashed[0]
                .detail
                .as_deref()
                .unwrap()
                .starts_with("session x: pincerd stopped")
        );
        assert!(store.settle_crashed(now).await.unwrap().is_empty());
        let history = store.history("morning", 10).await.unwrap();
        assert_eq!(history[0].state, FireState::Unknown);
    }

    #[tokio::test]
    async fn failures_count_back_off_and_disable_and_a_success_clears_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = ScheduleStore::open(&dir.path().join("s.db")).unwrap();
        store.add(row("m")).await.unwrap();
        let now = at("2026-11-27T08:00:01Z");
        for n in 1..=3u32 {
            let id = store
                .claim(
                    "m",
                    at("2026-11-27T08:00:00Z") + jiff::SignedDuration::from_secs(n as i64),
                    1,
                    None,
                    None,
                    now,
                )
                .await
                .unwrap();
            let failures = store
                .failed(
                    "m",
                    id,
                    "boom".into(),
                    None,
                    move |f| (None, (f >= 3).then(|| format!("failed {f} times in a row"))),
                    now,
                )
                .await
                .unwrap();
            assert_eq!(failures, n);
        }
        let got = store.get("m").await.unwrap().unwrap();
        assert_eq!(got.disabled.as_deref(), Some("failed 3 times in a row"));
        // A failure before the model is retried, not counted.
        let id = store
            .claim("m", at("2026-11-29T08:00:00Z"), 1, None, None, now)
            .await
            .unwrap();
        let retry = at("2026-11-29T08:05:00Z");
        let failures = store
            .failed(
                "m",
                id,
                "network".into(),
                Some(retry),
                |_| (None, None),
                now,
            )
            .await
            .unwrap();
        assert_eq!(failures, 3);
        let got = store.get("m").await.unwrap().unwrap();
        assert_eq!((got.retry, got.retries), (Some((id, retry)), 1));
        let again = store
            .claim("m", at("2026-11-29T08:00:00Z"), 2, None, None, now)
            .await
            .unwrap();
        store
            .succeeded("m", again, Some("ok".into()), now)
            .await
            .unwrap();
        let got = store.get("m").await.unwrap().unwrap();
        assert_eq!((got.failures, got.retries, got.retry), (0, 0, None));
    }
}
