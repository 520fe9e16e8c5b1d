//! Schedules in `state/schedules.db`: each schedule (its fields as
//! written, who made it, its next deadline, its failures in a row and why
//! it was disabled), the ledger of its fires, and the deliveries of their
//! answers.
//!
//! A fire's identity is its schedule, its due instant and its attempt. It
//! is written `claimed` in the same transaction that moves the schedule's
//! deadline past it, so a crash can never make it fire again: a row left
//! `claimed` or `running` by a crash becomes `unknown` at the next start
//! and is never run again by itself. Missed fires are a row of their own
//! (`skipped`, with how many and why). Deliveries are kept apart: a failed
//! one is retried from its row, without running the fire again.

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};

use crate::config::schedules::ScheduleFields;
use crate::sqlite::{Db, DbError};
use crate::tools::origin::Inbound;

use super::plan::Missed;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("schedules: {0}")]
    Db(#[from] DbError),
    #[error("schedules: a stored schedule's fields do not read: {0}")]
    Fields(#[from] serde_json::Error),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Db(DbError::Sqlite(e))
    }
}

const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    fields TEXT NOT NULL,
    principal TEXT NOT NULL,
    chat TEXT,
    created_at INTEGER NOT NULL,
    next_at INTEGER,
    paused INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    disabled TEXT,
    retry_of INTEGER,
    retry_at INTEGER,
    retries INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE fires (
    id INTEGER PRIMARY KEY,
    schedule TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    state TEXT NOT NULL,
    claimed_at INTEGER NOT NULL,
    ended_at INTEGER,
    missed INTEGER,
    missed_last INTEGER,
    detail TEXT,
    output TEXT,
    UNIQUE (schedule, due_at, attempt)
);
CREATE INDEX fires_by_schedule ON fires (schedule, id);
CREATE TABLE deliveries (
    id INTEGER PRIMARY KEY,
    fire INTEGER NOT NULL,
    schedule TEXT NOT NULL,
    to_addr TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    next_try_at INTEGER,
    error TEXT
);
",
    "
CREATE INDEX schedules_by_next ON schedules (next_at) WHERE next_at IS NOT NULL;
CREATE INDEX schedules_by_retry ON schedules (retry_at) WHERE retry_at IS NOT NULL;
",
];

/// The schedules in force due by `?1`: read through the deadlines'
/// indexes (an `ORDER BY name` would walk every row by the names').
const DUE: &str = "paused = 0 AND disabled IS NULL AND (next_at <= ?1 OR retry_at <= ?1)";

/// The earliest deadline in force: each read from its index, the first
/// row in force (MIN skips a NULL).
const NEXT_DEADLINE: &str = "SELECT MIN(t) FROM (
    SELECT (SELECT next_at FROM schedules
             WHERE next_at IS NOT NULL AND paused = 0 AND disabled IS NULL
             ORDER BY next_at LIMIT 1) AS t
    UNION ALL
    SELECT (SELECT retry_at FROM schedules
             WHERE retry_at IS NOT NULL AND paused = 0 AND disabled IS NULL
             ORDER BY retry_at LIMIT 1))";

/// The page cache of the schedules' connection, in KB.
const CACHE_KB: i64 = 64;

/// Who made a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `[schedules.*]` in config.toml: replaced on every reload.
    Config,
    /// Made at run time (CLI, gRPC, the `schedule` tool, a chat).
    Made,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Made => "made",
        }
    }
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub name: String,
    pub source: Source,
    pub fields: ScheduleFields,
    /// `owner`, or the principal of the chat that made it.
    pub principal: String,
    /// The chat message that made it, when a chat did: routed again to
    /// run as that chat.
    pub chat: Option<Inbound>,
    /// When it was made: where an `every` interval counts from.
    pub created_at: Timestamp,
    /// Its deadline: the next fire, or later to back off; `None` once a
    /// one-shot has fired or while it is disabled.
    pub next_at: Option<Timestamp>,
    pub paused: bool,
    /// Failed runs in a row.
    pub failures: u32,
    /// Why it was disabled, if it was.
    pub disabled: Option<String>,
    /// A fire that failed before reaching the model, to run again at
    /// `retry_at`; `retries` such failures so far.
    pub retry: Option<(i64, Timestamp)>,
    pub retries: u32,
}

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

/// An answer waiting to be delivered (or given up on).
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRow {
    pub id: i64,
    pub fire: i64,
    pub schedule: String,
    pub to: String,
    pub text: String,
    pub tries: u32,
    pub next_try_at: Option<Timestamp>,
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The schedules database.
#[derive(Clone)]
pub struct ScheduleStore {
    db: Db,
}

impl ScheduleStore {
    pub fn open(path: &std::path::Path) -> Result<Self, StoreError> {
        let db = Db::open(path, "pincer-schedules-db", MIGRATIONS)?;
        // A pass reads the due rows through the deadline indexes, a few
        // pages; SQLite's default cache (2 MB) would keep every page the
        // start-up sync read, a thousand schedules' worth, for nothing.
        db.queue(|c| {
            let _ = c.pragma_update(None, "cache_size", -CACHE_KB);
        })?;
        Ok(Self { db })
    }

    /// Every schedule, by name.
    pub async fn list(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        let rows = self
            .db
            .call(|c| {
                let mut st = c.prepare(&format!(
                    "SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name"
                ))?;
                let rows = st
                    .query_map([], raw_schedule)?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .await?;
        rows.into_iter().map(RawSchedule::read).collect()
    }

    /// The schedules in force (neither paused nor disabled) whose next
    /// fire or retry is due by `now`, by name: a pass reads these, not
    /// all of them.
    pub async fn due(&self, now: Timestamp) -> Result<Vec<ScheduleRow>, StoreError> {
        let rows = self
            .db
            .call(move |c| {
                let mut st = c.prepare(&format!(
                    "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE {DUE}"
                ))?;
                let rows = st
                    .query_map([ms(now)], raw_schedule)?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .await?;
        // Sorted here, not by the query (see [`DUE`]).
        let mut rows = rows
            .into_iter()
            .map(RawSchedule::read)
            .collect::<Result<Vec<_>, _>>()?;
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }

    /// The earliest next fire or retry of the schedules in force.
    pub async fn next_deadline(&self) -> Result<Option<Timestamp>, StoreError> {
        let t: Option<i64> = self
            .db
            .call(|c| c.query_row(NEXT_DEADLINE, [], |r| r.get(0)))
            .await?;
        Ok(t.map(ts))
    }

    pub async fn get(&self, name: &str) -> Result<Option<ScheduleRow>, StoreError> {
        let name = name.to_string();
        let row = self
            .db
            .call(move |c| {
                c.query_row(
                    &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?1"),
                    [&name],
                    raw_schedule,
                )
                .optional()
            })
            .await?;
        row.map(RawSchedule::read).transpose()
    }

    /// Adds a schedule; `false` when one has that name already.
    pub async fn add(&self, row: ScheduleRow) -> Result<bool, StoreError> {
        let fields = serde_json::to_string(&row.fields)?;
        let chat = row.chat.as_ref().map(serde_json::to_string).transpose()?;
        Ok(self
            .db
            .call(move |c| {
                let n = c.execute(
                    "INSERT OR IGNORE INTO schedules (name, source, fields, principal, chat, created_at, next_at, paused)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        row.name,
                        row.source.as_str(),
                        fields,
                        row.principal,
                        chat,
                        ms(row.created_at),
                        row.next_at.map(ms),
                        row.paused
                    ],
                )?;
                Ok(n == 1)
            })
            .await?)
    }

    /// Replaces the fields of schedule `name` and its deadline, clearing
    /// its failures and why it was disabled; `false` when there is none.
    pub async fn edit(
        &self,
        name: &str,
        fields: &ScheduleFields,
        next_at: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        let fields = serde_json::to_string(fields)?;
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let n = c.execute(
                    "UPDATE schedules SET fields = ?2, next_at = ?3, failures = 0, disabled = NULL,
                     retry_of = NULL, retry_at = NULL, retries = 0 WHERE name = ?1",
                    params![name, fields, next_at.map(ms)],
                )?;
                Ok(n == 1)
            })
            .await?)
    }

    /// Removes schedule `name` (its ledger stays for `history`); `false`
    /// when there is none.
    pub async fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let tx = c.transaction()?;
                let n = tx.execute("DELETE FROM schedules WHERE name = ?1", [&name])?;
                tx.execute(
                    "UPDATE deliveries SET state = 'dropped' WHERE schedule = ?1 AND state = 'pending'",
                    [&name],
                )?;
                tx.commit()?;
                Ok(n == 1)
            })
            .await?)
    }

    /// Pauses or resumes schedule `name`; resuming sets its deadline to
    /// `next_at` and clears why it was disabled. `false` when there is
    /// none.
    pub async fn set_paused(
        &self,
        name: &str,
        paused: bool,
        next_at: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                let n = if paused {
                    c.execute("UPDATE schedules SET paused = 1 WHERE name = ?1", [&name])?
                } else {
                    c.execute(
                        "UPDATE schedules SET paused = 0, disabled = NULL, failures = 0, next_at = ?2 WHERE name = ?1",
                        params![name, next_at.map(ms)],
                    )?
                };
                Ok(n == 1)
            })
            .await?)
    }

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

    /// Disables schedule `name` for `why` (its deadline cleared).
    pub async fn disable(&self, name: &str, why: String) -> Result<(), StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE schedules SET disabled = ?2, next_at = NULL WHERE name = ?1",
                    params![name, why],
                )?;
                Ok(())
            })
            .await?)
    }

    /// Drops schedule `name`'s pending retry (its first fire is no longer
    /// in the ledger, so there is nothing to try again).
    pub async fn forget_retry(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_string();
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE schedules SET retry_of = NULL, retry_at = NULL WHERE name = ?1",
                    [name],
                )?;
                Ok(())
            })
            .await?)
    }

    /// Queues the answer of fire `id` for `to`. The caller sends it now;
    /// the scheduler's retries look at it from `retry_from` on (when the
    /// caller's attempt recorded no outcome: a crash).
    pub async fn queue_delivery(
        &self,
        fire: i64,
        schedule: &str,
        to: &str,
        text: &str,
        retry_from: Timestamp,
    ) -> Result<i64, StoreError> {
        let (schedule, to, text) = (schedule.to_string(), to.to_string(), text.to_string());
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "INSERT INTO deliveries (fire, schedule, to_addr, text, state, next_try_at) VALUES (?1, ?2, ?3, ?4, 'pending', ?5)",
                    params![fire, schedule, to, text, ms(retry_from)],
                )?;
                Ok(c.last_insert_rowid())
            })
            .await?)
    }

    /// Delivery `id` arrived.
    pub async fn delivered(&self, id: i64) -> Result<(), StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE deliveries SET state = 'sent', tries = tries + 1, error = NULL WHERE id = ?1",
                    [id],
                )?;
                Ok(())
            })
            .await?)
    }

    /// Delivery `id` failed with `why`: tried again at `next_try` or, with
    /// none, given up.
    pub async fn delivery_failed(
        &self,
        id: i64,
        why: String,
        next_try: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE deliveries SET tries = tries + 1, error = ?2, next_try_at = ?3,
                     state = CASE WHEN ?3 IS NULL THEN 'failed' ELSE 'pending' END WHERE id = ?1",
                    params![id, why, next_try.map(ms)],
                )?;
                Ok(())
            })
            .await?)
    }

    /// The deliveries still pending, soonest first.
    pub async fn pending_deliveries(&self) -> Result<Vec<DeliveryRow>, StoreError> {
        Ok(self
            .db
            .call(|c| {
                let mut st = c.prepare(
                    "SELECT id, fire, schedule, to_addr, text, tries, next_try_at FROM deliveries
                     WHERE state = 'pending' ORDER BY COALESCE(next_try_at, 0), id",
                )?;
                st.query_map([], |r| {
                    Ok(DeliveryRow {
                        id: r.get(0)?,
                        fire: r.get(1)?,
                        schedule: r.get(2)?,
                        to: r.get(3)?,
                        text: r.get(4)?,
                        tries: r.get(5)?,
                        next_try_at: r.get::<_, Option<i64>>(6)?.map(ts),
                    })
                })?
                .collect()
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

const SCHEDULE_COLUMNS: &str = "name, source, fields, principal, chat, created_at, next_at, paused, failures, disabled, retry_of, retry_at, retries";

/// A schedule's row before its JSON is read.
struct RawSchedule {
    name: String,
    source: String,
    fields: String,
    principal: String,
    chat: Option<String>,
    created_at: i64,
    next_at: Option<i64>,
    paused: bool,
    failures: u32,
    disabled: Option<String>,
    retry_of: Option<i64>,
    retry_at: Option<i64>,
    retries: u32,
}

fn raw_schedule(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawSchedule> {
    Ok(RawSchedule {
        name: r.get(0)?,
        source: r.get(1)?,
        fields: r.get(2)?,
        principal: r.get(3)?,
        chat: r.get(4)?,
        created_at: r.get(5)?,
        next_at: r.get(6)?,
        paused: r.get(7)?,
        failures: r.get(8)?,
        disabled: r.get(9)?,
        retry_of: r.get(10)?,
        retry_at: r.get(11)?,
        retries: r.get(12)?,
    })
}

impl RawSchedule {
    fn read(self) -> Result<ScheduleRow, StoreError> {
        Ok(ScheduleRow {
            name: self.name,
            source: if self.source == "config" {
                Source::Config
            } else {
                Source::Made
            },
            fields: serde_json::from_str(&self.fields)?,
            principal: self.principal,
            chat: self.chat.as_deref().map(serde_json::from_str).transpose()?,
            created_at: ts(self.created_at),
            next_at: self.next_at.map(ts),
            paused: self.paused,
            failures: self.failures,
            disabled: self.disabled,
            retry: self.retry_of.zip(self.retry_at.map(ts)),
            retries: self.retries,
        })
    }
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

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn row(name: &str) -> ScheduleRow {
        ScheduleRow {
            name: name.into(),
            source: Source::Made,
            fields: ScheduleFields {
                cron: Some("0 8 * * *".into()),
                command: Some("echo hi".into()),
                ..ScheduleFields::default()
            },
            principal: "owner".into(),
            chat: None,
            created_at: at("2026-11-01T00:00:00Z"),
            next_at: Some(at("2026-11-27T08:00:00Z")),
            paused: false,
            failures: 0,
            disabled: None,
            retry: None,
            retries: 0,
        }
    }

    /// A pass reads the due rows and the earliest deadline through the
    /// deadlines' indexes: with a thousand schedules, never every row.
    #[tokio::test]
    async fn a_pass_reads_the_deadline_indexes_not_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = ScheduleStore::open(&dir.path().join("schedules.db")).unwrap();
        for i in 0..50 {
            store.add(row(&format!("s{i}"))).await.unwrap();
        }
        let plans = store
            .db
            .call(|c| {
                let mut plans = Vec::new();
                for sql in [
                    format!("SELECT name FROM schedules WHERE {DUE}"),
                    NEXT_DEADLINE.to_string(),
                ] {
                    let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    // Unbound parameters are NULL: the plan is the same.
                    let mut rows = st.raw_query();
                    let mut plan = Vec::new();
                    while let Some(r) = rows.next()? {
                        plan.push(r.get::<_, String>(3)?);
                    }
                    plans.push(plan.join("; "));
                }
                Ok(plans)
            })
            .await
            .unwrap();
        for plan in &plans {
            assert!(!plan.contains("SCAN schedules"), "{plan}");
            assert!(plan.contains("schedules_by_next"), "{plan}");
            assert!(plan.contains("schedules_by_retry"), "{plan}");
        }
    }

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

    #[tokio::test]
    async fn missed_fires_are_one_row_and_deliveries_retry_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = ScheduleStore::open(&dir.path().join("s.db")).unwrap();
        store.add(row("m")).await.unwrap();
        let now = at("2026-11-27T10:00:00Z");
        let missed = Missed {
            count: 5,
            first: at("2026-11-22T08:00:00Z"),
            last: at("2026-11-26T08:00:00Z"),
            why: "asleep".into(),
        };
        store
            .skip("m", missed, Some(at("2026-11-28T08:00:00Z")), now)
            .await
            .unwrap();
        let h = store.history("m", 10).await.unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].state, FireState::Skipped);
        assert_eq!(h[0].missed, Some((5, at("2026-11-26T08:00:00Z"))));
        let d = store
            .queue_delivery(7, "m", "telegram:owner", "hi", at("2026-11-27T10:00:30Z"))
            .await
            .unwrap();
        // While its first attempt is made it is not the retries' yet.
        assert_eq!(
            store.pending_deliveries().await.unwrap()[0].next_try_at,
            Some(at("2026-11-27T10:00:30Z"))
        );
        store
            .delivery_failed(
                d,
                "telegram is down".into(),
                Some(at("2026-11-27T10:01:00Z")),
            )
            .await
            .unwrap();
        let pending = store.pending_deliveries().await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(
            (pending[0].tries, pending[0].next_try_at),
            (1, Some(at("2026-11-27T10:01:00Z")))
        );
        store.delivered(d).await.unwrap();
        assert!(store.pending_deliveries().await.unwrap().is_empty());
    }
}
