//! The approvals as written to `state/approvals.db`: every request, the
//! tool calls' and the workflow halts', in one table and one id space,
//! with how it ended once it did. A halt outlives a restart (its run
//! resumes and waits on it again); a tool call's request cannot (its turn
//! died with the process), so opening the store ends those as aborted.
//! Ended requests are kept [`KEPT_DAYS`] days, so a late answer to one is
//! told how it ended.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use super::request::{Ending, PendingApproval, Subject};
use crate::sqlite::{Db, DbError};

/// Days an ended request is kept.
const KEPT_DAYS: u64 = 30;

const MIGRATIONS: &[&str] = &["CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        session_key TEXT NOT NULL,
        -- A workflow halt's run and step path; NULL for a tool call.
        run TEXT,
        step TEXT,
        subject TEXT NOT NULL,
        requester TEXT,
        requested_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        -- NULL while it waits.
        ending TEXT,
        ended_at INTEGER
    );
    CREATE INDEX approvals_halt ON approvals(run, step);"];

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// The handle to the database thread.
#[derive(Clone)]
pub struct ApprovalDb {
    db: Db,
}

const COLUMNS: &str =
    "id, agent, session_key, subject, requester, requested_at, expires_at, ending";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(PendingApproval, Option<Ending>)> {
    let json_err = |i: usize, e: serde_json::Error| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    };
    let subject: String = r.get(3)?;
    let subject: Subject = serde_json::from_str(&subject).map_err(|e| json_err(3, e))?;
    let requester: Option<String> = r.get(4)?;
    let requester = match requester {
        Some(t) => Some(serde_json::from_str(&t).map_err(|e| json_err(4, e))?),
        None => None,
    };
    let ending: Option<String> = r.get(7)?;
    let ending = match ending {
        Some(t) => Some(serde_json::from_str(&t).map_err(|e| json_err(7, e))?),
        None => None,
    };
    Ok((
        PendingApproval {
            id: r.get(0)?,
            agent: r.get(1)?,
            session_key: r.get(2)?,
            requested_at: time(r.get(5)?),
            expires_at: time(r.get(6)?),
            requester,
            subject,
        },
        ending,
    ))
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // The types are plain data: serialising them cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

impl ApprovalDb {
    /// Opens the store at `path`: the tool calls' requests left waiting
    /// by the last process end as aborted, the long-ended are forgotten.
    /// The halts still waiting are returned.
    pub async fn open(path: &Path) -> Result<(Self, Vec<PendingApproval>), DbError> {
        let db = Db::open(path, "pincer-approvals", MIGRATIONS)?;
        let now = SystemTime::now();
        let forget_before = ms(now) - (KEPT_DAYS * 86_400_000) as i64;
        let aborted = to_json(&Ending::Aborted);
        let waiting = db
            .call(move |c| {
                c.execute(
                    "UPDATE approvals SET ending = ?1, ended_at = ?2 WHERE ending IS NULL AND run IS NULL",
                    params![aborted, ms(now)],
                )?;
                c.execute(
                    "DELETE FROM approvals WHERE ending IS NOT NULL AND ended_at < ?1",
                    params![forget_before],
                )?;
                let mut s = c.prepare(&format!(
                    "SELECT {COLUMNS} FROM approvals WHERE ending IS NULL ORDER BY requested_at"
                ))?;
                let rows = s.query_map([], row)?;
                rows.map(|r| r.map(|(p, _)| p)).collect()
            })
            .await?;
        Ok((Self { db }, waiting))
    }

    /// Writes a new request; false when its id is taken (by a request of
    /// the last [`KEPT_DAYS`] days).
    pub async fn insert(&self, p: &PendingApproval) -> Result<bool, DbError> {
        let (run, step) = match &p.subject {
            Subject::Step(h) => (Some(h.run.clone()), Some(h.step.clone())),
            Subject::Call { .. } => (None, None),
        };
        let values = (
            p.id.clone(),
            p.agent.clone(),
            p.session_key.clone(),
            run,
            step,
            to_json(&p.subject),
            p.requester.as_ref().map(to_json),
            ms(p.requested_at),
            ms(p.expires_at),
        );
        self.db
            .call(move |c| {
                let n = c.execute(
                    "INSERT OR IGNORE INTO approvals (id, agent, session_key, run, step, subject, requester, requested_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        values.0, values.1, values.2, values.3, values.4, values.5, values.6,
                        values.7, values.8
                    ],
                )?;
                Ok(n == 1)
            })
            .await
    }

    /// Writes a request's subject again (a vote was counted).
    pub async fn set_subject(&self, id: &str, subject: &Subject) -> Result<(), DbError> {
        let (id, subject) = (id.to_string(), to_json(subject));
        self.db
            .call(move |c| {
                c.execute(
                    "UPDATE approvals SET subject = ?2 WHERE id = ?1",
                    params![id, subject],
                )
                .map(|_| ())
            })
            .await
    }

    /// Records how a request ended.
    pub async fn end(&self, id: &str, ending: &Ending) -> Result<(), DbError> {
        let job = end_job(id, ending);
        self.db.call(job).await
    }

    /// Records how a request ended without waiting for the write (from a
    /// `Drop`).
    pub fn end_soon(&self, id: &str, ending: &Ending) {
        let job = end_job(id, ending);
        let _ = self.db.queue(move |c| {
            if let Err(e) = job(c) {
                tracing::warn!("cannot record the end of an approval request: {e}");
            }
        });
    }

    /// A request and how it ended (`None`: it waits).
    pub async fn get(
        &self,
        id: &str,
    ) -> Result<Option<(PendingApproval, Option<Ending>)>, DbError> {
        let id = id.to_string();
        self.db
            .call(move |c| {
                c.query_row(
                    &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
                    params![id],
                    row,
                )
                .optional()
            })
            .await
    }

    /// The newest request of the halt at `step` of `run`.
    pub async fn latest_halt(
        &self,
        run: &str,
        step: &str,
    ) -> Result<Option<(PendingApproval, Option<Ending>)>, DbError> {
        let (run, step) = (run.to_string(), step.to_string());
        self.db
            .call(move |c| {
                c.query_row(
                    &format!(
                        "SELECT {COLUMNS} FROM approvals WHERE run = ?1 AND step = ?2
                         ORDER BY requested_at DESC, rowid DESC LIMIT 1"
                    ),
                    params![run, step],
                    row,
                )
                .optional()
            })
            .await
    }
}

fn end_job(
    id: &str,
    ending: &Ending,
) -> impl FnOnce(&mut Connection) -> rusqlite::Result<()> + Send + 'static {
    let (id, ending, now) = (id.to_string(), to_json(ending), ms(SystemTime::now()));
    move |c: &mut Connection| {
        c.execute(
            "UPDATE approvals SET ending = ?2, ended_at = ?3 WHERE id = ?1 AND ending IS NULL",
            params![id, ending, now],
        )
        .map(|_| ())
    }
}
