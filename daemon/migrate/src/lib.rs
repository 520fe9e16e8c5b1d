//! Numbered schema migrations of a SQLite database, shared by every
//! database pincer keeps (the channel layer's delivery ledger; pincerd's
//! session registry, workflow runs, schedules, approvals).
//!
//! A schema is a list of SQL steps: step N brings `PRAGMA user_version`
//! from N-1 to N. [`migrate`] runs the steps after the file's version,
//! each in its own transaction that also moves the version, so a crash
//! leaves the file at a whole step. A file whose version is past the last
//! step was written by a newer build: it is refused rather than read with
//! a schema this build does not know.

use rusqlite::Connection;

/// Why a database's schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file's `user_version` is past the last step this build has.
    #[error("the file's schema is version {found}, newer than this build knows ({known})")]
    NewerSchema { found: i64, known: i64 },
}

/// Runs the steps of `migrations` after the database's `user_version`.
pub fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<(), MigrateError> {
    let known = migrations.len() as i64;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > known {
        return Err(MigrateError::NewerSchema {
            found: version,
            known,
        });
    }
    for (step, sql) in migrations.iter().enumerate() {
        let target = step as i64 + 1;
        if version >= target {
            continue;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", target)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEPS: &[&str] = &[
        "CREATE TABLE a (x INTEGER);",
        "ALTER TABLE a ADD COLUMN y TEXT;",
    ];

    fn version(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_new_database_gets_every_step_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, STEPS).unwrap();
        assert_eq!(version(&conn), 2);
        conn.execute("INSERT INTO a (x, y) VALUES (1, 'one')", [])
            .unwrap();
        // Run again: nothing left to do, the data stays.
        migrate(&mut conn, STEPS).unwrap();
        assert_eq!(version(&conn), 2);
        let n: i64 = conn
            .query_row("SELECT count(*) FROM a", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn an_older_database_gets_only_the_steps_after_its_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, &STEPS[..1]).unwrap();
        assert_eq!(version(&conn), 1);
        migrate(&mut conn, STEPS).unwrap();
        assert_eq!(version(&conn), 2);
        conn.execute("INSERT INTO a (x, y) VALUES (1, 'one')", [])
            .unwrap();
    }

    #[test]
    fn a_failed_step_leaves_the_file_at_the_step_before() {
        let mut conn = Connection::open_in_memory().unwrap();
        let steps = [STEPS[0], "CREATE TABLE b (z); THIS IS NOT SQL;"];
        assert!(matches!(
            migrate(&mut conn, &steps),
            Err(MigrateError::Sqlite(_))
        ));
        assert_eq!(version(&conn), 1);
        let b: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'b'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(b, 0, "the failed step's transaction was rolled back");
    }

    #[test]
    fn a_newer_schema_is_refused_untouched() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", 7).unwrap();
        let err = migrate(&mut conn, STEPS).unwrap_err();
        assert!(matches!(
            err,
            MigrateError::NewerSchema { found: 7, known: 2 }
        ));
        assert_eq!(
            err.to_string(),
            "the file's schema is version 7, newer than this build knows (2)"
        );
        assert_eq!(version(&conn), 7);
    }
}
