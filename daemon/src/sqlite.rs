//! A SQLite database owned by one thread (WAL, `synchronous = NORMAL`):
//! it holds the only connection and runs every job in order, so there is
//! exactly one writer and async tasks never block on SQLite — they send a
//! closure and await its answer. Schemas grow by numbered migrations kept
//! in `user_version` (`pincer_migrate`; a file of a newer schema is
//! refused). The session registry and the workflow runs each own
//! one.

use std::path::Path;
use std::thread;

use pincer_migrate::MigrateError;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the database thread has stopped")]
    Closed,
    /// The schema could not be brought up to date, or is newer than this
    /// build knows.
    #[error("{0}")]
    Migrate(#[from] MigrateError),
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A cloneable handle to the database thread.
#[derive(Clone)]
pub struct Db {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Db {
    /// Opens (creating and migrating) the database at `path` and starts
    /// its thread, named `thread`.
    pub fn open(path: &Path, thread: &str, migrations: &[&str]) -> Result<Self, DbError> {
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        pincer_migrate::migrate(&mut conn, migrations)?;
        let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
        thread::Builder::new()
            .name(thread.into())
            .spawn(move || {
                while let Some(job) = rx.blocking_recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| DbError::Sqlite(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        Ok(Self { jobs })
    }

    /// Runs `f` on the database thread and returns its result.
    pub async fn call<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Box::new(move |conn| {
                let _ = tx.send(f(conn));
            }))
            .map_err(|_| DbError::Closed)?;
        Ok(rx.await.map_err(|_| DbError::Closed)??)
    }

    /// Sends `f` to the database thread now and answers a future of its
    /// result: the caller can do other work while the job runs (jobs still
    /// run in order). [`Db::call`] sends only when first polled.
    pub fn send<R, F>(&self, f: F) -> impl Future<Output = Result<R, DbError>> + use<R, F>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let sent = self
            .jobs
            .send(Box::new(move |conn| {
                let _ = tx.send(f(conn));
            }))
            .map_err(|_| DbError::Closed);
        async move {
            sent?;
            rx.await
                .map_err(|_| DbError::Closed)?
                .map_err(DbError::from)
        }
    }

    /// Queues `f` without waiting for it; jobs still run in order. `Err`
    /// when the thread has stopped.
    pub fn queue(&self, f: impl FnOnce(&mut Connection) + Send + 'static) -> Result<(), DbError> {
        self.jobs.send(Box::new(f)).map_err(|_| DbError::Closed)
    }
}
