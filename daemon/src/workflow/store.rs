//! Workflow runs in `state/workflows.db`: each run (the file's text and
//! hash as it ran, its inputs, who started it, its seed, status, where it
//! goes next and its result) and its step attempt ledger — a row written
//! `started` before a step runs and `finished` / `failed` / `skipped`
//! after it, in the same transaction as the run's next step. A row left
//! `started` by a crash is a step whose outcome is unknown.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use crate::tools::origin::Inbound;

use crate::sqlite::{Db, DbError};
use crate::util::now_rfc3339;

#[derive(Debug, thiserror::Error)]
#[error("workflow runs: {0}")]
pub struct StoreError(#[from] DbError);

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self(DbError::Sqlite(e))
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    /// Halted for a person, or for the owner to settle a step whose
    /// outcome is unknown.
    Waiting,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "waiting" => Self::Waiting,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => Self::Running,
        }
    }

    pub fn is_over(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// A step attempt's state in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepState {
    Started,
    Finished,
    Failed,
    Skipped,
    /// Found `started` after a restart: it may or may not have run.
    Unknown,
}

impl StepState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Unknown => "unknown",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "finished" => Self::Finished,
            "failed" => Self::Failed,
            "skipped" => Self::Skipped,
            "unknown" => Self::Unknown,
            _ => Self::Started,
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: String,
    pub workflow: String,
    pub agent: String,
    /// SHA-256 of `source`.
    pub hash: String,
    /// The workflow file's text as the run started it.
    pub source: String,
    /// The texts of the sub-workflows below it as the run started, by
    /// name: a resumed or replayed run runs these, not today's files.
    pub subs: BTreeMap<String, String>,
    pub inputs: Value,
    /// Who started it (`owner`, or the chat's principal).
    pub principal: String,
    /// The chat message that started it, when a chat did: routed again
    /// when the run resumes after a restart.
    pub chat: Option<Inbound>,
    pub session_key: String,
    pub parent: Option<String>,
    pub seed: u64,
    pub status: RunStatus,
    /// The next top-level step; `None` once the run is past its last.
    pub cursor: Option<String>,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub tokens: u64,
    pub created_at: String,
    pub updated_at: String,
    /// The ledger's last seq when the cursor last moved.
    pub cursor_seq: u64,
    /// Backward jumps taken, per step.
    pub iterations: BTreeMap<String, u32>,
}

/// A new run.
pub struct NewRun {
    pub id: String,
    pub workflow: String,
    pub agent: String,
    pub hash: String,
    pub source: String,
    pub subs: BTreeMap<String, String>,
    pub inputs: Value,
    pub principal: String,
    pub chat: Option<Inbound>,
    pub session_key: String,
    pub parent: Option<String>,
    pub seed: u64,
    pub first: Option<String>,
}

/// One attempt of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub seq: u64,
    /// The step's path: `notes`, `each[2].say`, `both.a`.
    pub path: String,
    pub attempt: u32,
    pub state: StepState,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
}

/// How a step attempt ended.
pub struct StepEnd {
    pub state: StepState,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub tokens: u64,
}

const MIGRATIONS: &[&str] = &[
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        agent TEXT NOT NULL,
        hash TEXT NOT NULL,
        source TEXT NOT NULL,
        inputs TEXT NOT NULL,
        principal TEXT NOT NULL,
        session_key TEXT NOT NULL,
        parent TEXT,
        seed INTEGER NOT NULL,
        status TEXT NOT NULL,
        cursor TEXT,
        output TEXT,
        error TEXT,
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        -- The ledger's last seq when the cursor moved: the rows after it
        -- are the cursor step's, which a restart reads.
        cursor_seq INTEGER NOT NULL DEFAULT 0,
        -- Backward jumps taken per step (JSON), so a loop's bound holds
        -- across a restart.
        iterations TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX runs_agent ON runs(agent, created_at);
    CREATE INDEX runs_open ON runs(status) WHERE status IN ('running', 'waiting');
    CREATE TABLE steps (
        run TEXT NOT NULL,
        seq INTEGER NOT NULL,
        path TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        state TEXT NOT NULL,
        output TEXT,
        error TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        PRIMARY KEY (run, seq)
    );",
    // The sub-workflows' texts (JSON, by name).
    "ALTER TABLE runs ADD COLUMN subs TEXT NOT NULL DEFAULT '{}';",
    // The chat message that started the run (JSON), if a chat did.
    "ALTER TABLE runs ADD COLUMN chat TEXT;",
];

/// The handle to the runs database.
#[derive(Clone)]
pub struct RunStore {
    db: Db,
}

impl RunStore {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            db: Db::open(path, "pincer-workflows", MIGRATIONS)?,
        })
    }

    pub async fn create(&self, new: NewRun) -> Result<RunRow, StoreError> {
        let id = new.id.clone();
        self.db
            .call(move |conn| {
                let now = now_rfc3339();
                conn.execute(
                    "INSERT INTO runs (id, workflow, agent, hash, source, inputs, principal, session_key, parent, seed, status, cursor, created_at, updated_at, subs, chat)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'running', ?11, ?12, ?12, ?13, ?14)",
                    params![
                        new.id,
                        new.workflow,
                        new.agent,
                        new.hash,
                        new.source,
                        new.inputs.to_string(),
                        new.principal,
                        new.session_key,
                        new.parent,
                        new.seed as i64,
                        new.first,
                        now,
                        serde_json::to_string(&new.subs).unwrap_or_else(|_| "{}".into()),
                        new.chat.as_ref().and_then(|c| serde_json::to_string(c).ok()),
                    ],
                )?;
                Ok(())
            })
            .await?;
        self.get(&id)
            .await?
            .ok_or_else(|| StoreError(DbError::Sqlite(rusqlite::Error::QueryReturnedNoRows)))
    }

    pub async fn get(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        let id = id.to_string();
        Ok(self
            .db
            .call(move |conn| {
                conn.query_row(
                    &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
                    [id],
                    run_row,
                )
                .optional()
            })
            .await?)
    }

    /// The newest runs first; of one agent, or all.
    pub async fn list(&self, agent: Option<String>, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        Ok(self
            .db
            .call(move |conn| {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE ?1 IS NULL OR agent = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2"
                ))?;
                let rows = stmt.query_map(params![agent, limit], run_row)?;
                rows.collect()
            })
            .await?)
    }

    /// Runs that were running or waiting: what a start resumes.
    pub async fn open_runs(&self) -> Result<Vec<RunRow>, StoreError> {
        Ok(self
            .db
            .call(move |conn| {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE status IN ('running', 'waiting') ORDER BY created_at, rowid"
                ))?;
                let rows = stmt.query_map([], run_row)?;
                rows.collect()
            })
            .await?)
    }

    /// The run's step attempts in the order they started.
    pub async fn steps(&self, run: &str) -> Result<Vec<StepRow>, StoreError> {
        let run = run.to_string();
        Ok(self
            .db
            .call(move |conn| {
                let mut stmt = conn.prepare(
                    "SELECT seq, path, attempt, state, output, error, started_at, finished_at FROM steps WHERE run = ?1 ORDER BY seq",
                )?;
                let rows = stmt.query_map([run], |r| {
                    Ok(StepRow {
                        seq: r.get::<_, i64>(0)? as u64,
                        path: r.get(1)?,
                        attempt: r.get::<_, i64>(2)? as u32,
                        state: StepState::parse(&r.get::<_, String>(3)?),
                        output: json_column(r.get(4)?),
                        error: r.get(5)?,
                        started_at: r.get(6)?,
                        finished_at: r.get(7)?,
                    })
                })?;
                rows.collect()
            })
            .await?)
    }

    /// Records that a step attempt starts (durably, before it runs); its
    /// sequence number.
    pub async fn start_step(&self, run: &str, path: &str, attempt: u32) -> Result<u64, StoreError> {
        let (run, path) = (run.to_string(), path.to_string());
        Ok(self
            .db
            .call(move |conn| {
                let tx = conn.transaction()?;
                let seq: i64 = tx.query_row(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM steps WHERE run = ?1",
                    [&run],
                    |r| r.get(0),
                )?;
                tx.execute(
                    "INSERT INTO steps (run, seq, path, attempt, state, started_at) VALUES (?1, ?2, ?3, ?4, 'started', ?5)",
                    params![run, seq, path, attempt, now_rfc3339()],
                )?;
                tx.commit()?;
                Ok(seq as u64)
            })
            .await?)
    }

    /// Records how a step attempt ended. With `cursor`, the run's next
    /// step moves in the same transaction (a top-level step done).
    pub async fn end_step(
        &self,
        run: &str,
        seq: u64,
        end: StepEnd,
        cursor: Option<Option<String>>,
    ) -> Result<(), StoreError> {
        let run = run.to_string();
        Ok(self
            .db
            .call(move |conn| {
                let tx = conn.transaction()?;
                let now = now_rfc3339();
                tx.execute(
                    "UPDATE steps SET state = ?3, output = ?4, error = ?5, finished_at = ?6 WHERE run = ?1 AND seq = ?2",
                    params![
                        run,
                        seq as i64,
                        end.state.as_str(),
                        end.output.as_ref().map(Value::to_string),
                        end.error,
                        now
                    ],
                )?;
                tx.execute(
                    "UPDATE runs SET tokens = tokens + ?2, updated_at = ?3 WHERE id = ?1",
                    params![run, end.tokens as i64, now],
                )?;
                if let Some(cursor) = cursor {
                    tx.execute(
                        "UPDATE runs SET cursor = ?2 WHERE id = ?1",
                        params![run, cursor],
                    )?;
                }
                tx.commit()
            })
            .await?)
    }

    /// Moves the run to its next top-level step (`None`: past the last),
    /// with the backward jumps taken so far.
    pub async fn set_cursor(
        &self,
        run: &str,
        cursor: Option<String>,
        iterations: &BTreeMap<String, u32>,
    ) -> Result<(), StoreError> {
        let run = run.to_string();
        let iterations = serde_json::to_string(iterations).unwrap_or_else(|_| "{}".into());
        Ok(self
            .db
            .call(move |conn| {
                conn.execute(
                    "UPDATE runs SET cursor = ?2, updated_at = ?3, iterations = ?4,
                         cursor_seq = (SELECT COALESCE(MAX(seq), 0) FROM steps WHERE run = ?1)
                     WHERE id = ?1",
                    params![run, cursor, now_rfc3339(), iterations],
                )
                .map(|_| ())
            })
            .await?)
    }

    /// Marks attempts a restart found `started` as unknown.
    pub async fn mark_unknown(&self, run: &str, seqs: Vec<u64>) -> Result<(), StoreError> {
        let run = run.to_string();
        Ok(self
            .db
            .call(move |conn| {
                let tx = conn.transaction()?;
                for seq in seqs {
                    tx.execute(
                        "UPDATE steps SET state = 'unknown' WHERE run = ?1 AND seq = ?2 AND state = 'started'",
                        params![run, seq as i64],
                    )?;
                }
                tx.commit()
            })
            .await?)
    }

    /// Ends or halts the run.
    pub async fn set_status(
        &self,
        run: &str,
        status: RunStatus,
        output: Option<Value>,
        error: Option<String>,
    ) -> Result<(), StoreError> {
        let run = run.to_string();
        Ok(self
            .db
            .call(move |conn| {
                conn.execute(
                    "UPDATE runs SET status = ?2, output = COALESCE(?3, output), error = ?4, updated_at = ?5 WHERE id = ?1",
                    params![
                        run,
                        status.as_str(),
                        output.as_ref().map(Value::to_string),
                        error,
                        now_rfc3339()
                    ],
                )
                .map(|_| ())
            })
            .await?)
    }
}

const RUN_COLUMNS: &str = "id, workflow, agent, hash, source, inputs, principal, session_key, parent, seed, status, cursor, output, error, tokens, created_at, updated_at, cursor_seq, iterations, subs, chat";

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        workflow: r.get(1)?,
        agent: r.get(2)?,
        hash: r.get(3)?,
        source: r.get(4)?,
        inputs: json_column(r.get(5)?).unwrap_or(Value::Null),
        principal: r.get(6)?,
        session_key: r.get(7)?,
        parent: r.get(8)?,
        seed: r.get::<_, i64>(9)? as u64,
        status: RunStatus::parse(&r.get::<_, String>(10)?),
        cursor: r.get(11)?,
        output: json_column(r.get(12)?),
        error: r.get(13)?,
        tokens: r.get::<_, i64>(14)? as u64,
        created_at: r.get(15)?,
        updated_at: r.get(16)?,
        cursor_seq: r.get::<_, i64>(17)? as u64,
        iterations: serde_json::from_str(&r.get::<_, String>(18)?).unwrap_or_default(),
        subs: serde_json::from_str(&r.get::<_, String>(19)?).unwrap_or_default(),
        chat: r
            .get::<_, Option<String>>(20)?
            .and_then(|t| serde_json::from_str(&t).ok()),
    })
}

fn json_column(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: id.into(),
            workflow: "w".into(),
            agent: "main".into(),
            hash: "h".into(),
            source: "[[steps]]".into(),
            subs: BTreeMap::new(),
            inputs: json!({"folder": "inbox"}),
            principal: "owner".into(),
            chat: None,
            session_key: format!("agent:main:workflow:{id}"),
            parent: None,
            seed: 7,
            first: Some("a".into()),
        }
    }

    #[tokio::test]
    async fn a_loops_count_is_kept_with_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        {
            let store = RunStore::open(&path).unwrap();
            store.create(new_run("r1")).await.unwrap();
            let seq = store.start_step("r1", "a", 1).await.unwrap();
            let taken = BTreeMap::from([("check".to_string(), 2u32)]);
            store
                .set_cursor("r1", Some("a".into()), &taken)
                .await
                .unwrap();
            assert_eq!(seq, 1);
        }
        let run = RunStore::open(&path)
            .unwrap()
            .get("r1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(run.iterations.get("check"), Some(&2));
        assert_eq!(run.cursor_seq, 1, "the ledger's last row when it moved");
    }

    #[tokio::test]
    async fn a_step_left_started_is_there_after_a_reopen_and_a_finished_one_moved_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        {
            let store = RunStore::open(&path).unwrap();
            let run = store.create(new_run("r1")).await.unwrap();
            assert_eq!(run.status, RunStatus::Running);
            assert_eq!(run.cursor.as_deref(), Some("a"));
            let seq = store.start_step("r1", "a", 1).await.unwrap();
            store
                .end_step(
                    "r1",
                    seq,
                    StepEnd {
                        state: StepState::Finished,
                        output: Some(json!(["x"])),
                        error: None,
                        tokens: 12,
                    },
                    Some(Some("b".into())),
                )
                .await
                .unwrap();
            store.start_step("r1", "b", 1).await.unwrap();
        }
        let store = RunStore::open(&path).unwrap();
        let open = store.open_runs().await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].cursor.as_deref(), Some("b"));
        assert_eq!(open[0].tokens, 12);
        assert_eq!(open[0].inputs, json!({"folder": "inbox"}));
        let steps = store.steps("r1").await.unwrap();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].state, StepState::Finished);
        assert_eq!(steps[0].output, Some(json!(["x"])));
        assert_eq!(steps[1].state, StepState::Started, "the crash's unknown");
        store
            .set_status("r1", RunStatus::Succeeded, Some(json!("done")), None)
            .await
            .unwrap();
        assert!(store.open_runs().await.unwrap().is_empty());
        assert_eq!(
            store.get("r1").await.unwrap().unwrap().output,
            Some(json!("done"))
        );
    }
}
