use std::process::Command;

use super::*;
use crate::message::{ChatKind, Sender};

/// The environment variable naming the [`crash_point`] a child test
/// process aborts at.
pub(super) const CRASH_AT: &str = "PINCER_LEDGER_CRASH_AT";
/// The ledger file a child test process works on.
const CHILD_LEDGER: &str = "PINCER_LEDGER_CHILD_PATH";

fn inbound(message_id: &str) -> Inbound {
    Inbound {
        channel: "telegram".into(),
        account: "main".into(),
        kind: ChatKind::Direct,
        chat_id: "42".into(),
        thread_id: None,
        guild_id: None,
        sender_roles: Vec::new(),
        sender: Sender {
            id: "7".into(),
            name: "Ada".into(),
            is_bot: false,
        },
        text: format!("hello {message_id}"),
        mentions_bot: false,
        reply_to: None,
        attachments: Vec::new(),
        message_id: message_id.into(),
    }
}

fn key(message_id: &str) -> Key<'_> {
    Key::new("telegram", "main", message_id)
}

fn chunks(texts: &[&str]) -> Vec<Chunk> {
    texts.iter().map(|t| Chunk::from(*t)).collect()
}

fn fresh() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    (dir, path)
}

#[test]
fn claim_is_new_once_then_duplicate_also_after_reopen() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.claim(&inbound("1"), 10).unwrap(), Claim::New);
    assert_eq!(ledger.claim(&inbound("1"), 11).unwrap(), Claim::Duplicate);
    assert_eq!(ledger.claim(&inbound("2"), 12).unwrap(), Claim::New);
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.claim(&inbound("1"), 20).unwrap(), Claim::Duplicate);
    assert_eq!(ledger.claim(&inbound("2"), 20).unwrap(), Claim::Duplicate);
    // The same id on another account or channel is another message.
    let mut other = inbound("1");
    other.account = "second".into();
    assert_eq!(ledger.claim(&other, 20).unwrap(), Claim::New);
    other.channel = "discord".into();
    assert_eq!(ledger.claim(&other, 20).unwrap(), Claim::New);
}

#[test]
fn unanswered_survives_reopen_until_answered() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 10).unwrap();
    ledger.claim(&inbound("2"), 11).unwrap();
    ledger.answered(key("2"), 12).unwrap();
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    let owed = ledger.unanswered("telegram", "main").unwrap();
    assert_eq!(
        owed,
        vec![Unanswered {
            inbound: inbound("1"),
            received_at: 10,
            attempts: 1,
            planned: false,
        }]
    );
    assert!(ledger.unanswered("telegram", "other").unwrap().is_empty());
    assert!(!ledger.is_answered(key("1")).unwrap());
    ledger.answered(key("1"), 13).unwrap();
    assert!(ledger.is_answered(key("1")).unwrap());
    drop(ledger);

    let ledger = Ledger::open(&path).unwrap();
    assert!(ledger.unanswered("telegram", "main").unwrap().is_empty());
}

#[test]
fn restart_mid_answer_sends_only_the_missing_chunks() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 10).unwrap();
    assert!(
        ledger
            .planned(key("1"), &chunks(&["a", "b", "c"]), 11)
            .unwrap()
    );
    assert!(!ledger.confirmed(key("1"), 0, "m100", 12).unwrap());
    assert!(!ledger.confirmed(key("1"), 1, "m101", 13).unwrap());
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.pending_chunks(key("1")).unwrap(),
        vec![(2, "c".into())]
    );
    let owed = ledger.unanswered("telegram", "main").unwrap();
    assert_eq!(owed.len(), 1);
    assert!(owed[0].planned, "a planned answer is resent, not re-run");
    // A re-run turn cannot replace an answer already partly sent.
    assert!(!ledger.planned(key("1"), &chunks(&["x"]), 14).unwrap());
    assert_eq!(
        ledger.pending_chunks(key("1")).unwrap(),
        vec![(2, "c".into())]
    );

    assert!(ledger.confirmed(key("1"), 2, "m102", 15).unwrap());
    assert!(ledger.pending_chunks(key("1")).unwrap().is_empty());
    assert!(ledger.is_answered(key("1")).unwrap());
    assert!(ledger.unanswered("telegram", "main").unwrap().is_empty());
    assert_eq!(
        ledger.sent_chunks(key("1")).unwrap(),
        vec![
            (0, "m100".to_string()),
            (1, "m101".to_string()),
            (2, "m102".to_string())
        ]
    );
}

#[test]
fn confirming_a_chunk_twice_is_harmless() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 10).unwrap();
    ledger.planned(key("1"), &chunks(&["a", "b"]), 11).unwrap();
    assert!(!ledger.confirmed(key("1"), 0, "m1", 12).unwrap());
    assert!(!ledger.confirmed(key("1"), 0, "m1-again", 13).unwrap());
    assert_eq!(
        ledger.pending_chunks(key("1")).unwrap(),
        vec![(1, "b".into())]
    );
    assert!(!ledger.is_answered(key("1")).unwrap());
    assert!(ledger.confirmed(key("1"), 1, "m2", 14).unwrap());
    // Again after completion: still complete, the first id stays.
    assert!(ledger.confirmed(key("1"), 1, "m2-again", 15).unwrap());
    assert_eq!(
        ledger.sent_chunks(key("1")).unwrap(),
        vec![(0, "m1".to_string()), (1, "m2".to_string())]
    );
}

#[test]
fn unknown_messages_and_chunks_are_errors() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    assert!(matches!(
        ledger.planned(key("9"), &chunks(&["a"]), 1),
        Err(LedgerError::NotClaimed { .. })
    ));
    assert!(matches!(
        ledger.answered(key("9"), 1),
        Err(LedgerError::NotClaimed { .. })
    ));
    assert!(matches!(
        ledger.pending_chunks(key("9")),
        Err(LedgerError::NotClaimed { .. })
    ));
    ledger.claim(&inbound("1"), 1).unwrap();
    ledger.planned(key("1"), &chunks(&["a"]), 2).unwrap();
    assert!(matches!(
        ledger.confirmed(key("1"), 1, "m", 3),
        Err(LedgerError::UnknownChunk { index: 1, .. })
    ));
    assert!(!ledger.is_answered(key("1")).unwrap());
}

#[test]
fn planning_no_chunks_settles_the_message() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 1).unwrap();
    assert!(ledger.planned(key("1"), &[], 2).unwrap());
    assert!(ledger.is_answered(key("1")).unwrap());
    assert!(ledger.unanswered("telegram", "main").unwrap().is_empty());
}

#[test]
fn cursors_are_kept_per_scope_across_reopen() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.cursor("discord", "main", "chan-1").unwrap(), None);
    ledger
        .set_cursor("discord", "main", "chan-1", "1001", 1)
        .unwrap();
    ledger
        .set_cursor("discord", "main", "chan-2", "2001", 1)
        .unwrap();
    ledger
        .set_cursor("discord", "main", "chan-1", "1002", 2)
        .unwrap();
    ledger.set_cursor("telegram", "main", "", "77", 2).unwrap();
    drop(ledger);

    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger
            .cursor("discord", "main", "chan-1")
            .unwrap()
            .as_deref(),
        Some("1002")
    );
    assert_eq!(
        ledger
            .cursor("discord", "main", "chan-2")
            .unwrap()
            .as_deref(),
        Some("2001")
    );
    assert_eq!(
        ledger.cursor("telegram", "main", "").unwrap().as_deref(),
        Some("77")
    );
    assert_eq!(ledger.cursor("discord", "other", "chan-1").unwrap(), None);
}

#[test]
fn a_cursor_never_moves_back_and_compares_as_a_number() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger
        .set_cursor("discord", "main", "chan-1", "9", 1)
        .unwrap();
    // As text "10" < "9"; as the numbers they are, 10 is later.
    ledger
        .set_cursor("discord", "main", "chan-1", "10", 2)
        .unwrap();
    assert_eq!(
        ledger
            .cursor("discord", "main", "chan-1")
            .unwrap()
            .as_deref(),
        Some("10")
    );
    // A replayed event (a RESUME, a catch-up page read again) is older.
    ledger
        .set_cursor("discord", "main", "chan-1", "9", 3)
        .unwrap();
    let claim = ledger
        .claim_and_advance(&inbound("old"), "", "3", 3)
        .unwrap();
    assert_eq!(claim, Claim::New);
    ledger.set_cursor("telegram", "main", "", "5", 4).unwrap();
    ledger
        .claim_and_advance(&inbound("older"), "", "4", 5)
        .unwrap();
    assert_eq!(
        ledger
            .cursor("discord", "main", "chan-1")
            .unwrap()
            .as_deref(),
        Some("10")
    );
    assert_eq!(
        ledger.cursor("telegram", "main", "").unwrap().as_deref(),
        Some("5")
    );
    // Snowflakes are 64-bit.
    let snowflake = "1300000000000000001";
    ledger
        .set_cursor("discord", "main", "chan-1", snowflake, 6)
        .unwrap();
    assert_eq!(
        ledger
            .cursor("discord", "main", "chan-1")
            .unwrap()
            .as_deref(),
        Some(snowflake)
    );
    let err = ledger
        .set_cursor("discord", "main", "chan-1", "abc", 7)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "delivery ledger: a cursor is a platform's number (an update offset, a message id), not `abc`"
    );
}

#[test]
fn the_ledger_lists_the_scopes_it_holds() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    assert!(ledger.scopes("discord", "main").unwrap().is_empty());
    for (scope, value) in [("chan-2", "20"), ("chan-1", "10"), ("dm-7", "70")] {
        ledger
            .set_cursor("discord", "main", scope, value, 1)
            .unwrap();
    }
    ledger
        .set_cursor("discord", "other", "chan-9", "90", 1)
        .unwrap();
    ledger.set_cursor("telegram", "main", "", "5", 1).unwrap();
    let scopes = ledger.scopes("discord", "main").unwrap();
    let want: Vec<(String, String)> = [("chan-1", "10"), ("chan-2", "20"), ("dm-7", "70")]
        .iter()
        .map(|(s, v)| (s.to_string(), v.to_string()))
        .collect();
    assert_eq!(scopes, want);
}

#[test]
fn claim_and_advance_moves_the_cursor_with_the_claim() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    let claim = ledger.claim_and_advance(&inbound("5"), "", "6", 1).unwrap();
    assert_eq!(claim, Claim::New);
    assert_eq!(
        ledger.cursor("telegram", "main", "").unwrap().as_deref(),
        Some("6")
    );
    // A server that ignores the offset sends update 5 again.
    let claim = ledger.claim_and_advance(&inbound("5"), "", "6", 2).unwrap();
    assert_eq!(claim, Claim::Duplicate);
}

#[test]
fn prune_removes_old_settled_rows_only() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    let day = 86_400;
    let now = 30 * day;
    // Old and answered (with chunks): goes.
    ledger.claim(&inbound("old"), now - 8 * day).unwrap();
    ledger
        .planned(key("old"), &chunks(&["a"]), now - 8 * day)
        .unwrap();
    ledger
        .confirmed(key("old"), 0, "m1", now - 8 * day)
        .unwrap();
    // Old but never answered: still owed, stays.
    ledger.claim(&inbound("owed"), now - 8 * day).unwrap();
    // Recent and answered: stays.
    ledger.claim(&inbound("recent"), now - day).unwrap();
    ledger.answered(key("recent"), now - day).unwrap();

    assert_eq!(ledger.prune(now - 7 * day).unwrap(), 1);
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    assert!(matches!(
        ledger.pending_chunks(key("old")),
        Err(LedgerError::NotClaimed { .. })
    ));
    let chunk_rows: i64 = ledger
        .conn
        .query_row("SELECT COUNT(*) FROM chunks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(chunk_rows, 0, "the pruned answer's chunks went with it");
    assert_eq!(
        ledger.claim(&inbound("recent"), now).unwrap(),
        Claim::Duplicate
    );
    let owed = ledger.unanswered("telegram", "main").unwrap();
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].inbound.message_id, "owed");
    assert_eq!(ledger.prune(now - 7 * day).unwrap(), 0);
}

#[test]
fn a_planned_file_is_owed_as_a_file_across_reopen() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 10).unwrap();
    let file = Chunk::File {
        name: "answer.md".into(),
        content: "the rest\n".repeat(1000),
    };
    let plan = vec![Chunk::from("a"), Chunk::from("b"), file.clone()];
    assert!(ledger.planned(key("1"), &plan, 11).unwrap());
    assert!(!ledger.confirmed(key("1"), 0, "m1", 12).unwrap());
    assert!(!ledger.confirmed(key("1"), 1, "m2", 12).unwrap());
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.pending_chunks(key("1")).unwrap(), vec![(2, file)]);
    assert!(ledger.unanswered("telegram", "main").unwrap()[0].planned);
    assert!(ledger.confirmed(key("1"), 2, "d3", 13).unwrap());
    assert!(
        ledger.is_answered(key("1")).unwrap(),
        "the file was the last"
    );
    assert!(ledger.pending_chunks(key("1")).unwrap().is_empty());
}

#[test]
fn a_ledger_of_the_first_schema_is_migrated_with_its_owed_chunks() {
    let (_dir, path) = fresh();
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let payload = serde_json::to_string(&inbound("1")).unwrap();
        conn.execute(
            "INSERT INTO inbound (channel, account, message_id, payload, received_at)
             VALUES ('telegram', 'main', '1', ?1, 10)",
            [payload],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO chunks (inbound, idx, text) VALUES (1, 0, 'owed text')",
            [],
        )
        .unwrap();
    }
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.pending_chunks(key("1")).unwrap(),
        vec![(0, Chunk::from("owed text"))]
    );
    let version: i64 = ledger
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, MIGRATIONS.len() as i64);
}

#[test]
fn open_creates_the_schema_once_and_refuses_a_newer_one() {
    let (_dir, path) = fresh();
    let ledger = Ledger::open(&path).unwrap();
    let version: i64 = ledger
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, MIGRATIONS.len() as i64);
    let mode: String = ledger
        .conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let sync: i64 = ledger
        .conn
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 2, "synchronous = FULL");
    ledger.conn.pragma_update(None, "user_version", 99).unwrap();
    drop(ledger);
    assert!(matches!(
        Ledger::open(&path),
        Err(LedgerError::NewerSchema { found: 99, .. })
    ));
}

/// Runs `test` (this test binary's test of that name) in a child process
/// that aborts at crash point `at`; asserts it did die.
fn crash_child(test: &str, at: &str, path: &Path) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CRASH_AT, at)
        .env(CHILD_LEDGER, path)
        .status()
        .unwrap();
    assert!(
        !status.success(),
        "the child should have aborted at {at}: {status}"
    );
}

#[test]
fn a_crash_inside_a_claim_leaves_no_half_claim() {
    if let Ok(path) = std::env::var(CHILD_LEDGER) {
        // Child: claim and move the cursor; crash_point aborts between the two.
        let mut ledger = Ledger::open(Path::new(&path)).unwrap();
        let _ = ledger.claim_and_advance(&inbound("5"), "", "6", 2);
        return; // not reached when the crash point fires
    }
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.set_cursor("telegram", "main", "", "5", 1).unwrap();
    drop(ledger);

    crash_child(
        "ledger::tests::a_crash_inside_a_claim_leaves_no_half_claim",
        "claim:inserted",
        &path,
    );

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.cursor("telegram", "main", "").unwrap().as_deref(),
        Some("5"),
        "the cursor did not move without its claim"
    );
    assert!(ledger.unanswered("telegram", "main").unwrap().is_empty());
    // The platform hands the message over again: answered once, now.
    assert_eq!(
        ledger.claim_and_advance(&inbound("5"), "", "6", 3).unwrap(),
        Claim::New
    );
}

#[test]
fn a_batch_is_claimed_in_order_with_one_cursor_move() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("6"), 1).unwrap();
    let batch = [inbound("5"), inbound("6"), inbound("7")];
    let claims = ledger
        .claim_batch("telegram", "main", &batch, "", "8", 2)
        .unwrap();
    assert_eq!(claims, [Claim::New, Claim::Duplicate, Claim::New]);
    assert_eq!(
        ledger.cursor("telegram", "main", "").unwrap().as_deref(),
        Some("8")
    );
    let owed: Vec<String> = ledger
        .unanswered("telegram", "main")
        .unwrap()
        .into_iter()
        .map(|o| o.inbound.message_id)
        .collect();
    assert_eq!(owed, ["6", "5", "7"], "each claimed once, in arrival order");
    // The same batch again (a server that ignores the offset): nothing new.
    let again = ledger
        .claim_batch("telegram", "main", &batch, "", "8", 3)
        .unwrap();
    assert!(again.iter().all(|c| *c == Claim::Duplicate), "{again:?}");
}

#[test]
fn a_crash_inside_a_batch_leaves_none_of_it() {
    if let Ok(path) = std::env::var(CHILD_LEDGER) {
        let mut ledger = Ledger::open(Path::new(&path)).unwrap();
        let batch = [inbound("5"), inbound("6")];
        let _ = ledger.claim_batch("telegram", "main", &batch, "", "7", 2);
        return; // not reached when the crash point fires
    }
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.set_cursor("telegram", "main", "", "5", 1).unwrap();
    drop(ledger);

    crash_child(
        "ledger::tests::a_crash_inside_a_batch_leaves_none_of_it",
        "batch:inserted",
        &path,
    );

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.cursor("telegram", "main", "").unwrap().as_deref(),
        Some("5"),
        "the cursor did not move without its batch"
    );
    assert!(ledger.unanswered("telegram", "main").unwrap().is_empty());
    let batch = [inbound("5"), inbound("6")];
    assert_eq!(
        ledger
            .claim_batch("telegram", "main", &batch, "", "7", 3)
            .unwrap(),
        [Claim::New, Claim::New]
    );
}

#[test]
fn a_crash_inside_a_confirmation_resends_only_that_chunk() {
    if let Ok(path) = std::env::var(CHILD_LEDGER) {
        let mut ledger = Ledger::open(Path::new(&path)).unwrap();
        let _ = ledger.confirmed(key("1"), 1, "m2", 4);
        return;
    }
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 1).unwrap();
    ledger.planned(key("1"), &chunks(&["a", "b"]), 2).unwrap();
    ledger.confirmed(key("1"), 0, "m1", 3).unwrap();
    drop(ledger);

    crash_child(
        "ledger::tests::a_crash_inside_a_confirmation_resends_only_that_chunk",
        "confirmed:updated",
        &path,
    );

    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.pending_chunks(key("1")).unwrap(),
        vec![(1, "b".into())]
    );
    assert!(!ledger.is_answered(key("1")).unwrap());
    let owed = ledger.unanswered("telegram", "main").unwrap();
    assert_eq!(owed.len(), 1);
    assert!(owed[0].planned);
}

#[test]
fn retries_are_counted_across_reopen() {
    let (_dir, path) = fresh();
    let mut ledger = Ledger::open(&path).unwrap();
    ledger.claim(&inbound("1"), 1).unwrap();
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.unanswered("telegram", "main").unwrap()[0].attempts,
        1
    );
    assert_eq!(ledger.retrying(key("1")).unwrap(), 2);
    drop(ledger);

    let mut ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.unanswered("telegram", "main").unwrap()[0].attempts,
        2
    );
    assert_eq!(ledger.retrying(key("1")).unwrap(), 3);
    assert!(matches!(
        ledger.retrying(key("9")),
        Err(LedgerError::NotClaimed { .. })
    ));
    // Giving up settles it: not owed any more, and still a duplicate.
    ledger.answered(key("1"), 2).unwrap();
    assert!(ledger.unanswered("telegram", "main").unwrap().is_empty());
    assert_eq!(ledger.claim(&inbound("1"), 3).unwrap(), Claim::Duplicate);
}

#[test]
fn a_ledger_can_move_to_a_blocking_thread() {
    fn send<T: Send>() {}
    send::<Ledger>();
    send::<LedgerError>();
}
