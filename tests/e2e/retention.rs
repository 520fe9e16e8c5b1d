//! What pincerd keeps no longer than it must: the delivery ledger lets go
//! of settled chat messages a week old (SPEC §11's retention), keeping the
//! unanswered ones for the replay and the recent ones for recognising a
//! platform's late duplicate; the tool audit lets go of rows older than
//! `[tools] audit_days`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pincer_testkit::harness::TestHome;

/// The ledger's retention (`pincer_channel::RETENTION_SECS`).
const WEEK: i64 = 7 * 24 * 60 * 60;

fn message_ids(db: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT message_id FROM inbound ORDER BY message_id")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn settled_messages_a_week_old_leave_the_ledger_and_the_others_stay() {
    let home = TestHome::new();
    // The first start creates the ledger with its schema.
    home.start().stop();
    let db = home.path().join("state").join("channels.db");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let mut add = conn
            .prepare(
                "INSERT INTO inbound (channel, account, message_id, payload, received_at, answered_at)
                 VALUES ('telegram', 'bot', ?1, '{}', ?2, ?3)",
            )
            .unwrap();
        add.execute(rusqlite::params![
            "old-answered",
            now - WEEK - 120,
            now - WEEK - 60
        ])
        .unwrap();
        add.execute(rusqlite::params![
            "old-unanswered",
            now - WEEK - 120,
            None::<i64>
        ])
        .unwrap();
        add.execute(rusqlite::params!["recent-answered", now - 120, now - 60])
            .unwrap();
    }
    assert_eq!(message_ids(&db).len(), 3);

    let daemon = home.start();
    let want = ["old-unanswered", "recent-answered"];
    let deadline = Instant::now() + Duration::from_secs(10);
    while message_ids(&db) != want {
        assert!(
            Instant::now() < deadline,
            "the ledger still holds {:?} 10 s after start",
            message_ids(&db)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon.stop();
    assert_eq!(message_ids(&db), want, "nothing else went at the stop");
}

fn audit_calls(db: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT call_id FROM tool_audit ORDER BY call_id")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Audit rows stamped `at`, as pincerd writes them.
fn add_audit(db: &std::path::Path, rows: &[(&str, &str)]) {
    let conn = rusqlite::Connection::open(db).unwrap();
    for (at, call_id) in rows {
        conn.execute(
            "INSERT INTO tool_audit (at, session_key, agent, sender, tool, call_id, args_hash, outcome, duration_ms, decided_by, detail)
             VALUES (?1, 'agent:main:main', 'main', 'owner', 'read', ?2, 'h', 'ok', 1, 'tool', '')",
            rusqlite::params![at, call_id],
        )
        .unwrap();
    }
}

#[test]
fn audit_rows_older_than_audit_days_leave_and_zero_keeps_them_all() {
    let home = TestHome::new();
    home.write_config("[tools]\naudit_days = 0\n");
    home.start().stop();
    let db = home.path().join("state").join("pincer.db");
    let rfc3339 = |days_ago: i64| {
        let t = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * days_ago);
        t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    };
    add_audit(
        &db,
        &[(&rfc3339(40), "forty-days"), (&rfc3339(2), "two-days")],
    );

    // 0 keeps every row (pruning, where it happens, is done within
    // milliseconds of the start; see below).
    let daemon = home.start();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(audit_calls(&db), ["forty-days", "two-days"]);
    daemon.stop();

    home.write_config("[tools]\naudit_days = 30\n");
    let daemon = home.start();
    let deadline = Instant::now() + Duration::from_secs(10);
    while audit_calls(&db) != ["two-days"] {
        assert!(
            Instant::now() < deadline,
            "the audit still holds {:?} 10 s after start",
            audit_calls(&db)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon.stop();
}
