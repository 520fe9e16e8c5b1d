//! The delivery ledger: exactly-once answers across restarts (SPEC §11).
//!
//! One SQLite file records, per bridge account, where to resume reading
//! the platform (the *cursor*), every inbound message it took on (the
//! *claim*) and every chunk of every answer with the platform's id for it
//! once the platform confirmed it. The API is synchronous and small; the
//! daemon calls it through [`SharedLedger`], on a thread of the ledger's
//! own, one call at a time (one [`Ledger`] per file, one writer).
//!
//! # The protocol
//!
//! For every inbound message, in this order:
//!
//! 1. **Claim before the turn.** [`Ledger::claim`] (or
//!    [`Ledger::claim_and_advance`], which also moves the cursor in the same
//!    transaction) records the message, its full [`Inbound`] included, and
//!    answers [`Claim::New`] the first time and [`Claim::Duplicate`] ever
//!    after. Only `New` starts a turn; a duplicate is dropped. The claim is
//!    committed (and, with `synchronous = FULL`, on disk) before the
//!    platform is told the update was handled: for Telegram, before the
//!    next `getUpdates` carries the higher `offset`; for Discord, before the
//!    channel's last-seen message id moves past it.
//! 2. **Plan the answer.** When the turn has produced its reply and it has
//!    been cut into chunks, [`Ledger::planned`] stores the chunks under the
//!    inbound message's key: each a message's text, or a file (its name and
//!    content: the rest of an answer longer than the chat's bound on
//!    messages, [`Chunk::File`]). From then on the answer is fixed: a
//!    restart sends these chunks, it does not run the turn again.
//! 3. **Confirm each chunk** when the platform confirms it
//!    ([`Ledger::confirmed`], with the platform's message id). Chunks go out
//!    in index order; [`Ledger::pending_chunks`] lists the ones still owed.
//! 4. **Answered** follows by itself, in the same transaction as the last
//!    confirmation. A message that needs no reply (a group message that only
//!    feeds the context buffer, a turn that decided to stay silent) is
//!    settled with [`Ledger::answered`], or by planning zero chunks.
//!
//! On start, the bridge asks [`Ledger::unanswered`] and finishes each
//! message listed there before reading new ones: a message with a plan has
//! its pending chunks sent, one without has its turn run (once more) after
//! [`Ledger::retrying`] counts the attempt. A message whose turn crashes the
//! daemon every time would otherwise be retried forever: past a limit of
//! its choosing the bridge settles it with [`Ledger::answered`] instead
//! (telling the user, if it likes, that the message could not be handled).
//!
//! # What happens at each crash point
//!
//! - *Before the claim commits* (while fetching or inside `claim`): nothing
//!   is recorded and the cursor has not moved, so the platform hands the
//!   message over again after the restart; it is claimed `New` then and
//!   answered once. A claim is one transaction: a crash inside it leaves no
//!   half-recorded message and no cursor that moved without its claim.
//!   The same path answers a message that arrived while the daemon was
//!   down: the cursor is still before it.
//! - *After the claim, before the plan* (mid-turn): the message is in
//!   `unanswered` without a plan; the turn runs again after the restart.
//!   Nothing of the first attempt reached the chat, so the user sees one
//!   answer. (Tools the interrupted turn already ran may run again; that is
//!   the turn's business, not the ledger's.)
//! - *After the plan, between chunks*: `unanswered` lists it with a plan;
//!   `pending_chunks` gives exactly the unconfirmed chunks, in order, and
//!   only those are sent.
//! - *Between the platform accepting a chunk and `confirmed` committing*:
//!   that one chunk is sent again (a file chunk too: the file is written
//!   anew from the ledger's copy and uploaded again). This window is the
//!   only one the ledger cannot close alone — Telegram's `sendMessage` has
//!   no idempotency key; on Discord the bridge sends each text chunk with
//!   a nonce of (message id, chunk index) and `enforce_nonce`, which
//!   closes it (`Platform::send`'s `once`).
//! - *After the last confirmation*: the answer is complete and marked
//!   answered in the same transaction; nothing is resent.
//! - *A repeated update* (a server that ignores `offset`, a redelivery after
//!   a crash between the claim and the platform's acknowledgement): the
//!   claim says `Duplicate` and the message is not answered twice.
//!
//! # Durability
//!
//! The file runs in WAL mode with `synchronous = FULL`: with `NORMAL` a
//! committed transaction survives a process crash but may be rolled back by
//! a power loss or kernel crash, and here a lost commit is exactly the
//! failure the ledger exists to prevent — a claim whose cursor the platform
//! already dropped (a message never answered) or a confirmation lost (a
//! chunk sent twice). One fsync of the WAL per commit, a few per chat
//! message, costs nothing at chat rates.
//!
//! Confirmations are the exception: they commit with `NORMAL` (no fsync;
//! the next `FULL` commit carries them to disk). A confirmation is what
//! closes the one window the ledger cannot close alone (a chunk the
//! platform accepted but the ledger does not know of yet is sent again
//! after a crash), and an fsync there widens that window for every process
//! crash to narrow it only for a power loss. A process crash loses no
//! committed confirmation either way (WAL); a power loss may lose the last
//! few, each of which then costs one repeated chunk.
//!
//! # Pruning
//!
//! [`Ledger::prune`] deletes settled messages (and their chunks) received
//! before a cutoff; messages still owed an answer are kept. The window must
//! be longer than the platform redelivers (Telegram keeps updates for 24
//! hours; Discord is read from the per-channel cursor onward), so seven days
//! ([`RETENTION_SECS`]) is ample.
//!
//! Times are Unix seconds, passed in by the caller.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pincer_migrate::MigrateError;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::message::Inbound;

pub use pincer_worker::Unfinished;

/// The ledger on a thread of its own ([`Ledger::share`]): bridges under load
/// make a call per message and per chunk, each commit an fsync, and they
/// wait for the answers as tasks rather than on a lock.
pub type SharedLedger = pincer_worker::Worker<Ledger>;

/// How long settled messages are kept by default: [`Ledger::prune`] with
/// `now - RETENTION_SECS`. Far longer than any platform redelivers.
pub const RETENTION_SECS: i64 = 7 * 24 * 60 * 60;

/// What can go wrong with the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("delivery ledger {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("delivery ledger: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "delivery ledger: the file's schema is version {found}, newer than this build knows ({known})"
    )]
    NewerSchema { found: i64, known: i64 },
    #[error(
        "delivery ledger: a cursor is a platform's number (an update offset, a message id), not `{value}`"
    )]
    BadCursor { value: String },
    #[error("delivery ledger: {channel}/{account} message {message_id} was never claimed")]
    NotClaimed {
        channel: String,
        account: String,
        message_id: String,
    },
    #[error(
        "delivery ledger: the answer to {channel}/{account} message {message_id} has no chunk {index}"
    )]
    UnknownChunk {
        channel: String,
        account: String,
        message_id: String,
        index: u32,
    },
    #[error("delivery ledger: an answer cannot have more than {} chunks", u32::MAX)]
    TooManyChunks,
    #[error("delivery ledger: a stored message could not be read back: {0}")]
    Payload(#[from] serde_json::Error),
}

/// Which inbound message: the dedupe key, and the key of the reply to it.
///
/// `message_id` must be unique within its channel and account (a bridge
/// whose platform numbers messages per chat puts the chat in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key<'a> {
    pub channel: &'a str,
    pub account: &'a str,
    pub message_id: &'a str,
}

impl<'a> Key<'a> {
    pub fn new(channel: &'a str, account: &'a str, message_id: &'a str) -> Self {
        Self {
            channel,
            account,
            message_id,
        }
    }

    /// The key of an inbound message.
    pub fn of(inbound: &'a Inbound) -> Self {
        Self::new(&inbound.channel, &inbound.account, &inbound.message_id)
    }

    fn not_claimed(&self) -> LedgerError {
        LedgerError::NotClaimed {
            channel: self.channel.to_string(),
            account: self.account.to_string(),
            message_id: self.message_id.to_string(),
        }
    }
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// First time seen: run the turn.
    New,
    /// Already claimed (answered or still in hand): do not answer again.
    Duplicate,
}

/// A message claimed but not yet answered, as [`Ledger::unanswered`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswered {
    pub inbound: Inbound,
    pub received_at: i64,
    /// Turns started for it: 1 for the turn after the claim, one more for
    /// each [`Ledger::retrying`].
    pub attempts: u32,
    /// An answer was planned: send [`Ledger::pending_chunks`], do not run
    /// the turn again.
    pub planned: bool,
}

/// One part of a planned answer, sent in index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// One message: Markdown, rendered for the platform when sent.
    Text(String),
    /// One file, sent as a document: its name and its whole content (the
    /// ledger keeps the content, so a restart can send it again).
    File { name: String, content: String },
}

impl From<&str> for Chunk {
    fn from(text: &str) -> Self {
        Self::Text(text.to_string())
    }
}

impl From<String> for Chunk {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

/// Schema steps; step N brings `user_version` from N-1 to N.
const MIGRATIONS: &[&str] = &[
    // Cursors: where to resume reading a platform, per (channel, account,
    // scope): Telegram's update offset (one scope), Discord's last message
    // id (one scope per channel).
    "CREATE TABLE cursors (
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        scope TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (channel, account, scope)
    ) WITHOUT ROWID;
    CREATE TABLE inbound (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        message_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        answered_at INTEGER,
        attempts INTEGER NOT NULL DEFAULT 1,
        UNIQUE (channel, account, message_id)
    );
    CREATE INDEX inbound_unanswered ON inbound (channel, account, seq)
        WHERE answered_at IS NULL;
    CREATE INDEX inbound_received ON inbound (received_at);
    CREATE TABLE chunks (
        inbound INTEGER NOT NULL REFERENCES inbound (seq) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        text TEXT NOT NULL,
        platform_id TEXT,
        confirmed_at INTEGER,
        PRIMARY KEY (inbound, idx)
    ) WITHOUT ROWID;",
    // A chunk may be a file: its name here, its content in `text`; NULL
    // for a message (every chunk planned before this step).
    "ALTER TABLE chunks ADD COLUMN file_name TEXT;",
];

/// The ledger over one SQLite file.
pub struct Ledger {
    conn: Connection,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.conn.path())
            .finish()
    }
}

impl Ledger {
    /// Opens the ledger at `path`, creating and migrating it.
    pub fn open(path: &Path) -> Result<Self, LedgerError> {
        let open_err = |source| LedgerError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        // FULL, not NORMAL: see "Durability" in the module doc.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_err)?;
        // 256 KiB, not SQLite's 2 MB: the ledger grows with every message
        // and is read a few index pages at a time; the default cache
        // filled with its pages for minutes (pincerd's `sqlite::CACHE_KB`).
        conn.pragma_update(None, "cache_size", -256)
            .map_err(open_err)?;
        migrate(&mut conn)?;
        Ok(Self { conn })
    }

    /// Moves the ledger onto a thread of its own, which runs every call in
    /// the order the calls came (see [`pincer_worker`]). Fails only when
    /// the system will not start a thread.
    pub fn share(self) -> std::io::Result<SharedLedger> {
        pincer_worker::Worker::start("pincer-ledger", self)
    }

    /// The resume point stored for `(channel, account, scope)`.
    pub fn cursor(
        &self,
        channel: &str,
        account: &str,
        scope: &str,
    ) -> Result<Option<String>, LedgerError> {
        Ok(self
            .conn
            .query_row(
                "SELECT value FROM cursors WHERE channel = ?1 AND account = ?2 AND scope = ?3",
                params![channel, account, scope],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Every scope with a resume point for `(channel, account)` and its
    /// value, in scope order: where catch-up after downtime reads from.
    pub fn scopes(
        &self,
        channel: &str,
        account: &str,
    ) -> Result<Vec<(String, String)>, LedgerError> {
        let mut stmt = self.conn.prepare(
            "SELECT scope, value FROM cursors WHERE channel = ?1 AND account = ?2 ORDER BY scope",
        )?;
        let rows = stmt.query_map(params![channel, account], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Stores the resume point for `(channel, account, scope)`. A cursor
    /// only moves forward: a value at or before the stored one (an event
    /// replayed by a resume, a catch-up page read again) leaves it where
    /// it is. Values are compared as numbers, so `10` is after `9`.
    ///
    /// For updates that carry a message, use [`Ledger::claim_and_advance`]
    /// instead: moving the cursor past a message that was not claimed in the
    /// same transaction risks dropping it.
    pub fn set_cursor(
        &mut self,
        channel: &str,
        account: &str,
        scope: &str,
        value: &str,
        now: i64,
    ) -> Result<(), LedgerError> {
        write_cursor(&self.conn, channel, account, scope, value, now)?;
        Ok(())
    }

    /// Records `inbound` as received (one transaction): [`Claim::New`] the
    /// first time, [`Claim::Duplicate`] afterwards.
    pub fn claim(&mut self, inbound: &Inbound, now: i64) -> Result<Claim, LedgerError> {
        let tx = self.conn.transaction()?;
        let claim = insert_claim(&tx, inbound, now)?;
        tx.commit()?;
        Ok(claim)
    }

    /// [`Ledger::claim`] and [`Ledger::set_cursor`] in one transaction: the
    /// cursor never moves past a message that is not recorded, and the
    /// message is not recorded without the cursor moving. The cursor moves
    /// on a duplicate too (the platform is still to be told it was handled).
    pub fn claim_and_advance(
        &mut self,
        inbound: &Inbound,
        scope: &str,
        cursor: &str,
        now: i64,
    ) -> Result<Claim, LedgerError> {
        let tx = self.conn.transaction()?;
        let claim = insert_claim(&tx, inbound, now)?;
        crash_point("claim:inserted");
        write_cursor(&tx, &inbound.channel, &inbound.account, scope, cursor, now)?;
        tx.commit()?;
        Ok(claim)
    }

    /// [`Ledger::claim_and_advance`] for a whole batch read from one
    /// `scope` (Telegram's `getUpdates`), in one transaction: every
    /// message claimed, then the cursor moved once, to `cursor`, the
    /// position past the batch. One commit for the batch instead of one a
    /// message; a crash before it leaves nothing, so the batch is read
    /// again. The claims are in the order of `inbound`.
    pub fn claim_batch(
        &mut self,
        channel: &str,
        account: &str,
        inbound: &[Inbound],
        scope: &str,
        cursor: &str,
        now: i64,
    ) -> Result<Vec<Claim>, LedgerError> {
        let tx = self.conn.transaction()?;
        let claims = inbound
            .iter()
            .map(|msg| insert_claim(&tx, msg, now))
            .collect::<Result<Vec<_>, _>>()?;
        crash_point("batch:inserted");
        write_cursor(&tx, channel, account, scope, cursor, now)?;
        tx.commit()?;
        Ok(claims)
    }

    /// Marks a claimed message settled: answered, or needing no answer. Its
    /// unconfirmed chunks, if any, will not be sent.
    pub fn answered(&mut self, key: Key<'_>, now: i64) -> Result<(), LedgerError> {
        let n = self.conn.execute(
            "UPDATE inbound SET answered_at = COALESCE(answered_at, ?4)
             WHERE channel = ?1 AND account = ?2 AND message_id = ?3",
            params![key.channel, key.account, key.message_id, now],
        )?;
        if n == 0 {
            return Err(key.not_claimed());
        }
        Ok(())
    }

    /// Whether a claimed message is settled.
    pub fn is_answered(&self, key: Key<'_>) -> Result<bool, LedgerError> {
        let answered: Option<Option<i64>> = self
            .conn
            .query_row(
                "SELECT answered_at FROM inbound
                 WHERE channel = ?1 AND account = ?2 AND message_id = ?3",
                params![key.channel, key.account, key.message_id],
                |r| r.get(0),
            )
            .optional()?;
        match answered {
            Some(at) => Ok(at.is_some()),
            None => Err(key.not_claimed()),
        }
    }

    /// Messages of `(channel, account)` claimed but not settled, oldest
    /// first: the work a restart owes.
    pub fn unanswered(&self, channel: &str, account: &str) -> Result<Vec<Unanswered>, LedgerError> {
        let mut stmt = self.conn.prepare(
            "SELECT payload, received_at, attempts,
                    EXISTS (SELECT 1 FROM chunks WHERE chunks.inbound = inbound.seq)
             FROM inbound
             WHERE channel = ?1 AND account = ?2 AND answered_at IS NULL
             ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![channel, account], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, u32>(2)?,
                r.get::<_, bool>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (payload, received_at, attempts, planned) = row?;
            out.push(Unanswered {
                inbound: serde_json::from_str(&payload)?,
                received_at,
                attempts,
                planned,
            });
        }
        Ok(out)
    }

    /// Counts one more turn started for an unanswered message (after a
    /// restart) and returns the attempts so far, this one included.
    pub fn retrying(&mut self, key: Key<'_>) -> Result<u32, LedgerError> {
        self.conn
            .query_row(
                "UPDATE inbound SET attempts = attempts + 1
                 WHERE channel = ?1 AND account = ?2 AND message_id = ?3
                 RETURNING attempts",
                params![key.channel, key.account, key.message_id],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(|| key.not_claimed())
    }

    /// Stores the chunks of the answer to `key`, in sending order.
    ///
    /// Returns `true` if this call planned it; `false` if an answer was
    /// planned already, which then stands unchanged (some of it may have
    /// been sent). Zero chunks settle the message at once.
    pub fn planned(
        &mut self,
        key: Key<'_>,
        chunks: &[Chunk],
        now: i64,
    ) -> Result<bool, LedgerError> {
        let tx = self.conn.transaction()?;
        let seq = seq_of(&tx, key)?.ok_or_else(|| key.not_claimed())?;
        let existing: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM chunks WHERE inbound = ?1)",
            [seq],
            |r| r.get(0),
        )?;
        if existing {
            return Ok(false);
        }
        {
            let mut insert = tx.prepare(
                "INSERT INTO chunks (inbound, idx, text, file_name) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (i, chunk) in chunks.iter().enumerate() {
                let index = u32::try_from(i).map_err(|_| LedgerError::TooManyChunks)?;
                let (text, file_name) = match chunk {
                    Chunk::Text(text) => (text, None),
                    Chunk::File { name, content } => (content, Some(name)),
                };
                insert.execute(params![seq, index, text, file_name])?;
            }
        }
        if chunks.is_empty() {
            tx.execute(
                "UPDATE inbound SET answered_at = COALESCE(answered_at, ?2) WHERE seq = ?1",
                params![seq, now],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Records that the platform confirmed chunk `index` of the answer to
    /// `key` as its message `platform_message_id`. Confirming a chunk again
    /// changes nothing (the first id stays). Returns whether the whole
    /// answer is now confirmed; the message is then marked answered in the
    /// same transaction.
    pub fn confirmed(
        &mut self,
        key: Key<'_>,
        index: u32,
        platform_message_id: &str,
        now: i64,
    ) -> Result<bool, LedgerError> {
        // Without the fsync (see "Durability"): the window in which a kill
        // resends this chunk is as short as the commit.
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        let result = self.confirm(key, index, platform_message_id, now);
        self.conn.pragma_update(None, "synchronous", "FULL")?;
        result
    }

    fn confirm(
        &mut self,
        key: Key<'_>,
        index: u32,
        platform_message_id: &str,
        now: i64,
    ) -> Result<bool, LedgerError> {
        let tx = self.conn.transaction()?;
        let seq = seq_of(&tx, key)?.ok_or_else(|| key.not_claimed())?;
        let known: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM chunks WHERE inbound = ?1 AND idx = ?2)",
            params![seq, index],
            |r| r.get(0),
        )?;
        if !known {
            return Err(LedgerError::UnknownChunk {
                channel: key.channel.to_string(),
                account: key.account.to_string(),
                message_id: key.message_id.to_string(),
                index,
            });
        }
        tx.execute(
            "UPDATE chunks SET platform_id = ?3, confirmed_at = ?4
             WHERE inbound = ?1 AND idx = ?2 AND platform_id IS NULL",
            params![seq, index, platform_message_id, now],
        )?;
        crash_point("confirmed:updated");
        let remaining: i64 = tx.query_row(
            "SELECT COUNT(*) FROM chunks WHERE inbound = ?1 AND platform_id IS NULL",
            [seq],
            |r| r.get(0),
        )?;
        let complete = remaining == 0;
        if complete {
            tx.execute(
                "UPDATE inbound SET answered_at = COALESCE(answered_at, ?2) WHERE seq = ?1",
                params![seq, now],
            )?;
        }
        tx.commit()?;
        Ok(complete)
    }

    /// The chunks of the answer to `key` not yet confirmed, in order, as
    /// `(index, chunk)`. Empty when nothing was planned or all went out.
    pub fn pending_chunks(&self, key: Key<'_>) -> Result<Vec<(u32, Chunk)>, LedgerError> {
        let seq = seq_of(&self.conn, key)?.ok_or_else(|| key.not_claimed())?;
        let mut stmt = self.conn.prepare(
            "SELECT idx, text, file_name FROM chunks
             WHERE inbound = ?1 AND platform_id IS NULL ORDER BY idx",
        )?;
        let rows = stmt.query_map([seq], |r| {
            let text: String = r.get(1)?;
            let chunk = match r.get::<_, Option<String>>(2)? {
                Some(name) => Chunk::File {
                    name,
                    content: text,
                },
                None => Chunk::Text(text),
            };
            Ok((r.get(0)?, chunk))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The platform's message ids of the confirmed chunks of the answer to
    /// `key`, in order (to edit or reply to them).
    pub fn sent_chunks(&self, key: Key<'_>) -> Result<Vec<(u32, String)>, LedgerError> {
        let seq = seq_of(&self.conn, key)?.ok_or_else(|| key.not_claimed())?;
        let mut stmt = self.conn.prepare(
            "SELECT idx, platform_id FROM chunks
             WHERE inbound = ?1 AND platform_id IS NOT NULL ORDER BY idx",
        )?;
        let rows = stmt.query_map([seq], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Deletes settled messages received before `before`, with their
    /// chunks; unanswered ones are kept. Returns how many messages went.
    pub fn prune(&mut self, before: i64) -> Result<u64, LedgerError> {
        let n = self.conn.execute(
            "DELETE FROM inbound WHERE received_at < ?1 AND answered_at IS NOT NULL",
            [before],
        )?;
        Ok(n as u64)
    }
}

fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    pincer_migrate::migrate(conn, MIGRATIONS).map_err(|e| match e {
        MigrateError::Sqlite(e) => LedgerError::Sqlite(e),
        MigrateError::NewerSchema { found, known } => LedgerError::NewerSchema { found, known },
    })
}

fn insert_claim(tx: &Transaction<'_>, inbound: &Inbound, now: i64) -> Result<Claim, LedgerError> {
    let payload = serde_json::to_string(inbound)?;
    let n = tx.execute(
        "INSERT INTO inbound (channel, account, message_id, payload, received_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (channel, account, message_id) DO NOTHING",
        params![
            inbound.channel,
            inbound.account,
            inbound.message_id,
            payload,
            now
        ],
    )?;
    Ok(if n == 1 { Claim::New } else { Claim::Duplicate })
}

/// A cursor as the number it is: Telegram's update offsets and Discord's
/// snowflakes are unsigned 64-bit integers.
fn cursor_number(value: &str) -> Result<u64, LedgerError> {
    value.parse().map_err(|_| LedgerError::BadCursor {
        value: value.chars().take(40).collect(),
    })
}

/// Writes the cursor unless the stored one is already at or past `value`.
fn write_cursor(
    conn: &Connection,
    channel: &str,
    account: &str,
    scope: &str,
    value: &str,
    now: i64,
) -> Result<(), LedgerError> {
    let new = cursor_number(value)?;
    let stored: Option<String> = conn
        .query_row(
            "SELECT value FROM cursors WHERE channel = ?1 AND account = ?2 AND scope = ?3",
            params![channel, account, scope],
            |r| r.get(0),
        )
        .optional()?;
    // A stored value that is not a number (none is written any more) is
    // replaced rather than kept forever.
    if stored.is_some_and(|old| cursor_number(&old).is_ok_and(|old| old >= new)) {
        return Ok(());
    }
    conn.execute(
        "INSERT INTO cursors (channel, account, scope, value, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (channel, account, scope)
         DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![channel, account, scope, value, now],
    )?;
    Ok(())
}

fn seq_of(conn: &Connection, key: Key<'_>) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT seq FROM inbound WHERE channel = ?1 AND account = ?2 AND message_id = ?3",
        params![key.channel, key.account, key.message_id],
        |r| r.get(0),
    )
    .optional()
}

/// Tests kill the process here (no unwinding, no rollback) to show a
/// transaction interrupted at this point leaves nothing behind.
#[cfg(test)]
fn crash_point(name: &str) {
    if std::env::var(tests::CRASH_AT).is_ok_and(|at| at == name) {
        std::process::abort();
    }
}

#[cfg(not(test))]
fn crash_point(_name: &str) {}

#[cfg(test)]
mod tests;
