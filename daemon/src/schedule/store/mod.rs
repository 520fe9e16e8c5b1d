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
//!
//! This file opens the database; `schedules.rs` holds the schedules'
//! rows, `fires.rs` the ledger of fires (a claim and a failure move the
//! schedule's deadline in the same transaction), `deliveries.rs` the
//! answers waiting to be delivered.

use jiff::Timestamp;

use crate::sqlite::{Db, DbError};

mod deliveries;
mod fires;
mod schedules;

pub use deliveries::DeliveryRow;
pub use fires::{FireRow, FireState};
pub use schedules::{ScheduleRow, Source};

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

/// The page cache of the schedules' connection, in KB.
const CACHE_KB: i64 = 64;
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
}

/// What the tests of the store's parts make their schedules of.
#[cfg(test)]
mod fixtures {
    use jiff::Timestamp;

    use super::{ScheduleRow, Source};
    use crate::config::schedules::ScheduleFields;

    pub(super) fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    pub(super) fn row(name: &str) -> ScheduleRow {
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
}
