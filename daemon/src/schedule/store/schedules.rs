//! The schedules' rows: each schedule's fields as written, who made it,
//! its deadline (read through the deadlines' indexes, so a pass reads the
//! due rows only), paused, its failures in a row and why it was disabled.

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::{ScheduleStore, StoreError, ms, ts};
use crate::config::schedules::ScheduleFields;
use crate::tools::origin::Inbound;

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

impl ScheduleStore {
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::store::fixtures::row;

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
}
