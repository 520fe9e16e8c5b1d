//! The session registry in `state/pincer.db` (SQLite, WAL).
//!
//! One thread owns the only connection and runs every query in order, so
//! there is exactly one writer and async tasks never block on SQLite: they
//! send a closure and await its answer.

use std::path::Path;
use std::thread;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{mpsc, oneshot};

use crate::util::now_rfc3339;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("session registry: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("session registry: the database thread has stopped")]
    Closed,
}

/// One row of the `sessions` table.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub key: String,
    pub id: String,
    pub agent: String,
    pub channel: String,
    pub created_at: String,
    pub updated_at: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub compactions: u32,
    pub last_error: Option<String>,
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A cloneable handle to the registry thread.
#[derive(Clone)]
pub struct Registry {
    jobs: mpsc::UnboundedSender<Job>,
}

const SCHEMA_VERSION: i64 = 1;

impl Registry {
    /// Opens (creating and migrating) the database and starts its thread.
    pub fn open(path: &Path) -> Result<Self, RegistryError> {
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&mut conn)?;
        let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
        thread::Builder::new()
            .name("pincer-registry".into())
            .spawn(move || {
                while let Some(job) = rx.blocking_recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| {
                RegistryError::Sqlite(rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
            })?;
        Ok(Self { jobs })
    }

    /// Runs `f` on the registry thread and returns its result.
    pub async fn call<R, F>(&self, f: F) -> Result<R, RegistryError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Box::new(move |conn| {
                let _ = tx.send(f(conn));
            }))
            .map_err(|_| RegistryError::Closed)?;
        Ok(rx.await.map_err(|_| RegistryError::Closed)??)
    }

    /// The session for `key`, created with a fresh id if new.
    pub async fn get_or_create(
        &self,
        key: &str,
        agent: &str,
        channel: &str,
    ) -> Result<SessionRow, RegistryError> {
        let (key, agent, channel) = (key.to_string(), agent.to_string(), channel.to_string());
        self.call(move |conn| {
            if let Some(row) = by_key(conn, &key)? {
                return Ok(row);
            }
            let now = now_rfc3339();
            conn.execute(
                "INSERT INTO sessions (key, id, agent, channel, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![key, uuid::Uuid::now_v7().to_string(), agent, channel, now],
            )?;
            by_key(conn, &key)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
        })
        .await
    }

    /// Looks a session up by key or by id.
    pub async fn find(&self, key_or_id: &str) -> Result<Option<SessionRow>, RegistryError> {
        let ident = key_or_id.to_string();
        self.call(move |conn| {
            conn.query_row(
                &format!("SELECT {COLUMNS} FROM sessions WHERE key = ?1 OR id = ?1"),
                [ident],
                row,
            )
            .optional()
        })
        .await
    }

    /// All sessions (of one agent), most recently updated first.
    pub async fn list(&self, agent: Option<String>) -> Result<Vec<SessionRow>, RegistryError> {
        self.call(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {COLUMNS} FROM sessions WHERE ?1 IS NULL OR agent = ?1 ORDER BY updated_at DESC, key"
            ))?;
            let rows = stmt.query_map([agent], row)?;
            rows.collect()
        })
        .await
    }

    pub async fn count(&self) -> Result<u64, RegistryError> {
        self.call(|conn| {
            conn.query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get::<_, i64>(0))
        })
        .await
        .map(|n| n.max(0) as u64)
    }

    /// Adds a model call's usage and marks the session updated.
    pub async fn add_usage(&self, id: &str, input: u64, output: u64) -> Result<(), RegistryError> {
        let id = id.to_string();
        self.call(move |conn| {
            conn.execute(
                "UPDATE sessions SET input_tokens = input_tokens + ?2, output_tokens = output_tokens + ?3, updated_at = ?4 WHERE id = ?1",
                params![id, input as i64, output as i64, now_rfc3339()],
            )
            .map(drop)
        })
        .await
    }

    /// Records the outcome of a turn: `None` clears the last error.
    pub async fn finish_turn(&self, id: &str, error: Option<String>) -> Result<(), RegistryError> {
        let id = id.to_string();
        self.call(move |conn| {
            conn.execute(
                "UPDATE sessions SET last_error = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, error, now_rfc3339()],
            )
            .map(drop)
        })
        .await
    }

    /// Gives the key a fresh session id; the old transcript stays on disk.
    /// Returns (old id, new id), or `None` if the key is unknown.
    pub async fn reset(&self, key: &str) -> Result<Option<(String, String)>, RegistryError> {
        let key = key.to_string();
        self.call(move |conn| {
            let Some(old) = by_key(conn, &key)? else {
                return Ok(None);
            };
            let new_id = uuid::Uuid::now_v7().to_string();
            let now = now_rfc3339();
            conn.execute(
                "UPDATE sessions SET id = ?2, created_at = ?3, updated_at = ?3, input_tokens = 0, output_tokens = 0, compactions = 0, last_error = NULL WHERE key = ?1",
                params![key, new_id, now],
            )?;
            Ok(Some((old.id, new_id)))
        })
        .await
    }

    /// Removes a session's row; returns it if it existed.
    pub async fn delete(&self, key: &str) -> Result<Option<SessionRow>, RegistryError> {
        let key = key.to_string();
        self.call(move |conn| {
            let row = by_key(conn, &key)?;
            conn.execute("DELETE FROM sessions WHERE key = ?1", [key])?;
            Ok(row)
        })
        .await
    }
}

const COLUMNS: &str = "key, id, agent, channel, created_at, updated_at, input_tokens, output_tokens, compactions, last_error";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        key: r.get(0)?,
        id: r.get(1)?,
        agent: r.get(2)?,
        channel: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        input_tokens: r.get::<_, i64>(6)?.max(0) as u64,
        output_tokens: r.get::<_, i64>(7)?.max(0) as u64,
        compactions: r.get::<_, i64>(8)?.clamp(0, u32::MAX as i64) as u32,
        last_error: r.get(9)?,
    })
}

fn by_key(conn: &Connection, key: &str) -> rusqlite::Result<Option<SessionRow>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM sessions WHERE key = ?1"),
        [key],
        row,
    )
    .optional()
}

fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction()?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS sessions (
            key TEXT PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            agent TEXT NOT NULL,
            channel TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            compactions INTEGER NOT NULL DEFAULT 0,
            last_error TEXT
        );
        CREATE INDEX IF NOT EXISTS sessions_agent ON sessions(agent, updated_at);",
    )?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn create_find_usage_reset_delete() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join("p.db")).unwrap();
        let a = reg
            .get_or_create("agent:main:main", "main", "cli")
            .await
            .unwrap();
        let again = reg
            .get_or_create("agent:main:main", "main", "cli")
            .await
            .unwrap();
        assert_eq!(a.id, again.id);
        reg.add_usage(&a.id, 10, 3).await.unwrap();
        reg.add_usage(&a.id, 5, 2).await.unwrap();
        let found = reg.find(&a.id).await.unwrap().unwrap();
        assert_eq!((found.input_tokens, found.output_tokens), (15, 5));
        reg.finish_turn(&a.id, Some("boom".into())).await.unwrap();
        assert_eq!(
            reg.find("agent:main:main")
                .await
                .unwrap()
                .unwrap()
                .last_error
                .as_deref(),
            Some("boom")
        );
        let (old, new) = reg.reset("agent:main:main").await.unwrap().unwrap();
        assert_eq!(old, a.id);
        assert_ne!(new, a.id);
        assert_eq!(reg.count().await.unwrap(), 1);
        assert!(reg.delete("agent:main:main").await.unwrap().is_some());
        assert!(reg.find("agent:main:main").await.unwrap().is_none());
        assert!(reg.reset("agent:main:main").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn reopen_keeps_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let id = {
            let reg = Registry::open(&path).unwrap();
            reg.get_or_create("agent:a:x", "a", "cli").await.unwrap().id
        };
        let reg = Registry::open(&path).unwrap();
        assert_eq!(reg.list(Some("a".into())).await.unwrap()[0].id, id);
        assert!(reg.list(Some("b".into())).await.unwrap().is_empty());
    }
}
