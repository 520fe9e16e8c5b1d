//! A SQLite database owned by one thread (WAL, `synchronous = NORMAL`):
//! it holds the only connection and runs every job in order, so there is
//! exactly one writer and async tasks never block on SQLite — they send a
//! closure and await its answer (the thread is a [`pincer_worker::Worker`]).
//! Schemas grow by numbered migrations kept in `user_version`
//! (`pincer_migrate`; a file of a newer schema is refused). The session
//! registry, the workflow runs, schedules and approvals each own one.

use std::path::Path;

use pincer_migrate::MigrateError;
use pincer_worker::{Unfinished, Worker};
use rusqlite::Connection;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The job panicked, or the database thread is gone.
    #[error("the database call did not finish (it panicked, or the database thread has stopped)")]
    Unfinished,
    /// The schema could not be brought up to date, or is newer than this
    /// build knows.
    #[error("{0}")]
    Migrate(#[from] MigrateError),
    #[error("could not start the database thread: {0}")]
    Thread(std::io::Error),
}

impl From<Unfinished> for DbError {
    fn from(_: Unfinished) -> Self {
        Self::Unfinished
    }
}

/// The page cache of each such database, in KiB. SQLite's default (2 MB
/// a connection) fills as a database grows — several megabytes of a
/// daemon's memory for pages the OS caches anyway; these databases are
/// read through their indexes a few pages at a time. The soak measured
/// it: with the default, anonymous RSS rose by about the databases'
/// growth for minutes before levelling off.
pub const CACHE_KB: i64 = 256;

/// A cloneable handle to the database thread.
#[derive(Clone)]
pub struct Db {
    worker: Worker<Connection>,
}

impl Db {
    /// Opens (creating and migrating) the database at `path` and starts
    /// its thread, named `thread`.
    pub fn open(path: &Path, thread: &str, migrations: &[&str]) -> Result<Self, DbError> {
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "cache_size", -CACHE_KB)?;
        pincer_migrate::migrate(&mut conn, migrations)?;
        let worker = Worker::start(thread, conn).map_err(DbError::Thread)?;
        Ok(Self { worker })
    }

    /// Runs `f` on the database thread and returns its result.
    pub async fn call<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        Ok(self.worker.run(f).await??)
    }

    /// Sends `f` to the database thread now and answers a future of its
    /// result: the caller can do other work while the job runs (jobs still
    /// run in order). [`Db::call`] sends only when first polled.
    pub fn send<R, F>(&self, f: F) -> impl Future<Output = Result<R, DbError>> + use<R, F>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let answer = self.worker.send(f);
        async move { Ok(answer.await??) }
    }

    /// Queues `f` without waiting for it; jobs still run in order. `Err`
    /// when the thread has stopped.
    pub fn queue(&self, f: impl FnOnce(&mut Connection) + Send + 'static) -> Result<(), DbError> {
        Ok(self.worker.queue(f)?)
    }
}
