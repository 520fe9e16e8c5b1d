//! The session registry in `state/pincer.db` (SQLite, WAL).
//!
//! One thread owns the only connection and runs every query in order, so
//! there is exactly one writer and async tasks never block on SQLite: they
//! send a closure and await its answer.

use std::path::Path;
use std::sync::LazyLock;

use rusqlite::{Connection, OptionalExtension, params};

use super::principal::Principal;
use crate::config::ToolLayer;
use crate::sqlite::{Db, DbError};
use crate::util::now_rfc3339;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("session registry: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("session registry: {0}")]
    Db(DbError),
    #[error("session registry: {0}")]
    Migrate(pincer_migrate::MigrateError),
}

impl From<DbError> for RegistryError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Sqlite(e) => Self::Sqlite(e),
            DbError::Migrate(e) => Self::Migrate(e),
            other => Self::Db(other),
        }
    }
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
    /// What the last failed turn tried and where it stopped.
    pub failure_summary: Option<String>,
    /// Whose session it is, recorded when it was created (the data
    /// boundary: another principal's turns never write into it).
    pub principal: Principal,
    /// For a sub-agent's session: the key of the session that spawned it.
    pub parent: Option<String>,
    /// For a sub-agent's session: the spawn's own narrowing of its tools.
    pub spawn_layer: Option<ToolLayer>,
}

/// What a session is created with: whose it is and, for a sub-agent's,
/// where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    pub principal: Principal,
    /// The spawning session's key and the spawn's tool layer.
    pub parent: Option<(String, ToolLayer)>,
}

impl NewSession {
    /// A top-level session of `principal`.
    pub fn of(principal: Principal) -> Self {
        Self {
            principal,
            parent: None,
        }
    }
}

/// A cloneable handle to the registry's database thread.
#[derive(Clone)]
pub struct Registry {
    db: Db,
}

impl Registry {
    /// Opens (creating and migrating) the database and starts its thread.
    pub fn open(path: &Path) -> Result<Self, RegistryError> {
        Ok(Self {
            db: Db::open(path, "pincer-registry", MIGRATIONS)?,
        })
    }

    /// Runs `f` on the registry thread and returns its result.
    pub async fn call<R, F>(&self, f: F) -> Result<R, RegistryError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        Ok(self.db.call(f).await?)
    }

    /// The session for `key`, created with a fresh id if new (recording
    /// `new`'s principal and parent; an existing session keeps its own).
    pub async fn get_or_create(
        &self,
        key: &str,
        agent: &str,
        channel: &str,
        new: NewSession,
    ) -> Result<SessionRow, RegistryError> {
        let (key, agent, channel) = (key.to_string(), agent.to_string(), channel.to_string());
        self.call(move |conn| {
            if let Some(row) = by_key(conn, &key)? {
                return Ok(row);
            }
            let now = now_rfc3339();
            let (parent, layer) = new.parent.unzip();
            conn.prepare_cached(
                "INSERT INTO sessions (key, id, agent, channel, created_at, updated_at, principal, parent, spawn_layer) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                    key,
                    uuid::Uuid::now_v7().to_string(),
                    agent,
                    channel,
                    now,
                    new.principal.to_string(),
                    parent,
                    layer.as_ref().map(layer_to_json)
                ],
            )?;
            by_key(conn, &key)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
        })
        .await
    }

    /// Records a principal for every session that has none (sessions made
    /// before principals were recorded), as `principal_of` derives it
    /// from the key; answers how many were filled.
    pub async fn fill_principals(
        &self,
        principal_of: impl Fn(&str) -> Principal + Send + 'static,
    ) -> Result<usize, RegistryError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let keys: Vec<String> = {
                let mut stmt = tx.prepare("SELECT key FROM sessions WHERE principal IS NULL")?;
                let rows = stmt.query_map([], |r| r.get(0))?;
                rows.collect::<Result<_, _>>()?
            };
            for key in &keys {
                tx.execute(
                    "UPDATE sessions SET principal = ?2 WHERE key = ?1",
                    params![key, principal_of(key).to_string()],
                )?;
            }
            tx.commit()?;
            Ok(keys.len())
        })
        .await
    }

    /// The sessions `key` spawned, and theirs, all the way down (a
    /// sub-agent's tree), most recently updated first.
    pub async fn descendants(&self, key: &str) -> Result<Vec<SessionRow>, RegistryError> {
        let key = key.to_string();
        self.call(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "WITH RECURSIVE tree(key) AS (
                     SELECT key FROM sessions WHERE parent = ?1
                     UNION SELECT s.key FROM sessions s JOIN tree t ON s.parent = t.key
                 )
                 SELECT {COLUMNS} FROM sessions WHERE key IN (SELECT key FROM tree)
                 ORDER BY updated_at DESC, key"
            ))?;
            let rows = stmt.query_map([key], row)?;
            rows.collect()
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

    /// Adds a model call's usage and marks the session updated. Queued
    /// without waiting, like [`Registry::start_turn`]: a turn's calls do
    /// not each pay the registry's round trip, and jobs run in order, so
    /// anything asked after it (the turn's `finish_turn`, a listing) sees
    /// the usage. `Err` only when the registry has stopped; a failed
    /// write is logged.
    pub fn add_usage(&self, id: &str, input: u64, output: u64) -> Result<(), RegistryError> {
        let id = id.to_string();
        self.db
            .queue(move |conn| {
                let written = conn
                    .prepare_cached(
                        "UPDATE sessions SET input_tokens = input_tokens + ?2, output_tokens = output_tokens + ?3, updated_at = ?4, turn_running = COALESCE(turn_running, ?4) WHERE id = ?1",
                    )
                    .and_then(|mut stmt| {
                        stmt.execute(params![id, input as i64, output as i64, now_rfc3339()])
                    });
                if let Err(e) = written {
                    tracing::warn!(error = %e, "cannot record usage");
                }
            })
            .map_err(RegistryError::from)
    }

    /// Records how a turn ended: its error and failure summary, or
    /// neither when it succeeded (`None` clears the last error). Sent to
    /// the registry thread at once; the answer's future says whether it
    /// was written, so the caller may do other work meanwhile (the hub
    /// fsyncs the transcript) and anything asked after it sees it.
    pub fn finish_turn(
        &self,
        id: &str,
        failure: Option<(String, String)>,
    ) -> impl Future<Output = Result<(), RegistryError>> + use<> {
        let id = id.to_string();
        let (error, summary) = failure.unzip();
        let written = self.db.send(move |conn| {
            conn.prepare_cached(
                "UPDATE sessions SET last_error = ?2, failure_summary = ?3, updated_at = ?4, turn_running = NULL WHERE id = ?1",
            )?
            .execute(params![id, error, summary, now_rfc3339()])
            .map(drop)
        });
        async move { Ok(written.await?) }
    }

    /// Marks a turn of the session as running (cleared by `finish_turn`),
    /// so a start after a crash knows where to look (`turns_in_progress`).
    /// The hub calls it as each turn starts, queued ones included. Queued
    /// without waiting: the turn does not pay the registry's round trip,
    /// and the registry thread runs jobs in order, so `finish_turn` still
    /// comes after it.
    pub fn start_turn(&self, id: &str) {
        let id = id.to_string();
        let queued = self.db.queue(move |conn| {
            let marked = conn
                .prepare_cached("UPDATE sessions SET turn_running = ?2 WHERE id = ?1")
                .and_then(|mut stmt| stmt.execute(params![id, now_rfc3339()]));
            if let Err(e) = marked {
                tracing::warn!(error = %e, "cannot mark the turn as running");
            }
        });
        if queued.is_err() {
            tracing::warn!("the session registry is closed; the turn is not marked as running");
        }
    }

    /// Sessions marked as running a turn: after a crash, those a turn may
    /// have been interrupted in (the transcript says whether it was).
    pub async fn turns_in_progress(&self) -> Result<Vec<SessionRow>, RegistryError> {
        self.call(|conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {COLUMNS} FROM sessions WHERE turn_running IS NOT NULL ORDER BY key"
            ))?;
            let rows = stmt.query_map([], row)?;
            rows.collect()
        })
        .await
    }

    /// Clears the running mark; with `error`, records it as the session's
    /// last error (an interrupted turn).
    pub async fn end_interrupted(
        &self,
        id: &str,
        error: Option<String>,
    ) -> Result<(), RegistryError> {
        let id = id.to_string();
        self.call(move |conn| {
            conn.execute(
                "UPDATE sessions SET turn_running = NULL, last_error = COALESCE(?2, last_error) WHERE id = ?1",
                params![id, error],
            )
            .map(drop)
        })
        .await
    }

    /// Counts one compaction of a session.
    pub async fn add_compaction(&self, id: &str) -> Result<(), RegistryError> {
        let id = id.to_string();
        self.call(move |conn| {
            conn.execute(
                "UPDATE sessions SET compactions = compactions + 1, updated_at = ?2 WHERE id = ?1",
                params![id, now_rfc3339()],
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
                "UPDATE sessions SET id = ?2, created_at = ?3, updated_at = ?3, input_tokens = 0, output_tokens = 0, compactions = 0, last_error = NULL, failure_summary = NULL WHERE key = ?1",
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

const COLUMNS: &str = "key, id, agent, channel, created_at, updated_at, input_tokens, output_tokens, compactions, last_error, failure_summary, principal, parent, spawn_layer";

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
        failure_summary: r.get(10)?,
        // A row the start-up fill has not reached yet, or one written by
        // hand: nobody's, so no one but the owner's own turns reach it.
        principal: r
            .get::<_, Option<String>>(11)?
            .as_deref()
            .and_then(Principal::parse)
            .unwrap_or(Principal::Owner),
        parent: r.get(12)?,
        spawn_layer: r
            .get::<_, Option<String>>(13)?
            .as_deref()
            .map(layer_from_json),
    })
}

/// A spawn's tool layer as the registry stores it.
fn layer_to_json(layer: &ToolLayer) -> String {
    serde_json::json!({"allow": layer.allow, "deny": layer.deny}).to_string()
}

/// The stored layer; a damaged one denies every tool, so a sub-agent
/// never gains tools from a broken row.
fn layer_from_json(text: &str) -> ToolLayer {
    let list = |v: &serde_json::Value, k: &str| -> Option<Vec<String>> {
        v.get(k)?
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let parsed = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| Some((list(&v, "allow")?, list(&v, "deny")?)));
    match parsed {
        Some((allow, deny)) => ToolLayer {
            profile: None,
            allow,
            deny,
        },
        None => ToolLayer {
            profile: None,
            allow: Vec::new(),
            deny: vec!["*".into()],
        },
    }
}

fn by_key(conn: &Connection, key: &str) -> rusqlite::Result<Option<SessionRow>> {
    // Every message asks it (a turn's session): kept prepared.
    static BY_KEY: LazyLock<String> =
        LazyLock::new(|| format!("SELECT {COLUMNS} FROM sessions WHERE key = ?1"));
    conn.prepare_cached(&BY_KEY)?
        .query_row([key], row)
        .optional()
}

/// Schema steps; step N brings `user_version` from N-1 to N.
const MIGRATIONS: &[&str] = &[
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
    // SPEC §8.4: every tool call, whatever happened to it.
    "CREATE TABLE IF NOT EXISTS tool_audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        session_key TEXT NOT NULL,
        agent TEXT NOT NULL,
        sender TEXT NOT NULL,
        tool TEXT NOT NULL,
        call_id TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        outcome TEXT NOT NULL,
        duration_ms INTEGER NOT NULL,
        decided_by TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS tool_audit_session ON tool_audit(session_key, seq);",
    // A short account of the last failed turn (MiroThinker's failure summary).
    "ALTER TABLE sessions ADD COLUMN failure_summary TEXT;",
    // When a turn started that has not finished (NULL: none running); only
    // these sessions are read at start to report interrupted turns.
    "ALTER TABLE sessions ADD COLUMN turn_running TEXT;
    CREATE INDEX IF NOT EXISTS sessions_turn_running ON sessions(turn_running) WHERE turn_running IS NOT NULL;",
    // The data boundary (SPEC §8.3): whose each session is, and a
    // sub-agent's parent and spawn layer (a restart used to forget them).
    "ALTER TABLE sessions ADD COLUMN principal TEXT;
    ALTER TABLE sessions ADD COLUMN parent TEXT;
    ALTER TABLE sessions ADD COLUMN spawn_layer TEXT;
    CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent) WHERE parent IS NOT NULL;",
    // A call's arguments as the audit keeps them: secrets masked, capped
    // (`tools::arguments::for_audit`); empty for calls from before.
    "ALTER TABLE tool_audit ADD COLUMN arguments TEXT NOT NULL DEFAULT '';",
];

/// One row of the audit table.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub session_key: String,
    pub agent: String,
    pub sender: String,
    pub tool: String,
    pub call_id: String,
    pub args_hash: String,
    /// ok | error | blocked | denied | aborted | timeout
    pub outcome: String,
    pub duration_ms: u64,
    /// What decided: `policy`, `loop:<detector>`, `hook:<name>`,
    /// `approval`, `validation` or `tool`.
    pub decided_by: String,
    pub detail: String,
    /// The arguments, secrets masked and capped (empty in rows written
    /// before they were kept).
    pub arguments: String,
}

impl Registry {
    /// Adds a call's audit row. Queued without waiting, like
    /// [`Registry::add_usage`]: a tool call does not pay the registry's
    /// round trip before the model is called again, and jobs run in order,
    /// so `pincer audit` asked after the call sees the row. The time is
    /// taken now. `Err` only when the registry has stopped; a failed write
    /// is logged.
    pub fn audit(&self, r: AuditRecord) -> Result<(), RegistryError> {
        let at = now_rfc3339();
        self.db
            .queue(move |conn| {
                let written = conn
                    .prepare_cached(
                        "INSERT INTO tool_audit (at, session_key, agent, sender, tool, call_id, args_hash, outcome, duration_ms, decided_by, detail, arguments)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                    )
                    .and_then(|mut stmt| {
                        stmt.execute(params![at, r.session_key, r.agent, r.sender, r.tool, r.call_id, r.args_hash, r.outcome, r.duration_ms as i64, r.decided_by, r.detail, r.arguments])
                    });
                if let Err(e) = written {
                    tracing::warn!(error = %e, tool = %r.tool, "cannot write the tool audit row");
                }
            })
            .map_err(RegistryError::from)
    }

    /// Lets go of the audit rows of calls made before `before` (the
    /// table's retention: `[tools] audit_days`); how many went.
    pub async fn prune_audit(&self, before: time::OffsetDateTime) -> Result<usize, RegistryError> {
        let before = before
            .to_offset(time::UtcOffset::UTC)
            .format(&time::format_description::well_known::Rfc3339)
            // A time RFC 3339 cannot write (before year 0): nothing is older.
            .unwrap_or_default();
        // Stamps are RFC 3339 in UTC (`now_rfc3339`), so text order is
        // time order to the second.
        self.call(move |conn| conn.execute("DELETE FROM tool_audit WHERE at < ?1", [before]))
            .await
    }

    /// The newest `limit` audit rows of a session (all sessions if empty),
    /// oldest first, each with the time of the call (RFC 3339).
    pub async fn audit_rows(
        &self,
        session_key: Option<String>,
        limit: u32,
    ) -> Result<Vec<(String, AuditRecord)>, RegistryError> {
        self.call(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT session_key, agent, sender, tool, call_id, args_hash, outcome, duration_ms, decided_by, detail, at, arguments
                 FROM tool_audit WHERE (?1 IS NULL OR session_key = ?1) ORDER BY seq DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![session_key, limit as i64], |r| {
                Ok((r.get::<_, String>(10)?, AuditRecord {
                    session_key: r.get(0)?,
                    agent: r.get(1)?,
                    sender: r.get(2)?,
                    tool: r.get(3)?,
                    call_id: r.get(4)?,
                    args_hash: r.get(5)?,
                    outcome: r.get(6)?,
                    duration_ms: r.get::<_, i64>(7)? as u64,
                    decided_by: r.get(8)?,
                    detail: r.get(9)?,
                    arguments: r.get(11)?,
                }))
            })?;
            let mut out: Vec<(String, AuditRecord)> = rows.collect::<Result<_, _>>()?;
            out.reverse();
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> NewSession {
        NewSession::of(Principal::Owner)
    }

    #[tokio::test]
    async fn principals_parents_and_spawn_layers_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let group = Principal::Group {
            channel: "telegram".into(),
            chat: "-100".into(),
        };
        let layer = ToolLayer {
            profile: None,
            allow: vec!["read".into()],
            deny: vec!["exec".into()],
        };
        {
            let reg = Registry::open(&path).unwrap();
            let g = "agent:main:telegram:group:-100";
            reg.get_or_create(g, "main", "telegram", NewSession::of(group.clone()))
                .await
                .unwrap();
            let child = NewSession {
                principal: group.clone(),
                parent: Some((g.into(), layer.clone())),
            };
            reg.get_or_create("agent:main:sub:1", "main", "sub", child.clone())
                .await
                .unwrap();
            let grandchild = NewSession {
                parent: Some(("agent:main:sub:1".into(), ToolLayer::default())),
                ..child
            };
            reg.get_or_create("agent:main:sub:2", "main", "sub", grandchild)
                .await
                .unwrap();
            // An existing session keeps what it was created with.
            let again = reg
                .get_or_create(g, "main", "telegram", owner())
                .await
                .unwrap();
            assert_eq!(again.principal, group);
        }
        let reg = Registry::open(&path).unwrap();
        let sub = reg.find("agent:main:sub:1").await.unwrap().unwrap();
        assert_eq!(sub.principal, group);
        assert_eq!(
            sub.parent.as_deref(),
            Some("agent:main:telegram:group:-100")
        );
        assert_eq!(sub.spawn_layer, Some(layer));
        let tree: Vec<String> = reg
            .descendants("agent:main:telegram:group:-100")
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.key)
            .collect();
        assert_eq!(tree.len(), 2);
        assert!(tree.contains(&"agent:main:sub:2".to_string()), "{tree:?}");
        assert!(
            reg.descendants("agent:main:sub:2")
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn sessions_from_before_principals_get_one_from_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        {
            let conn = Connection::open(&path).unwrap();
            // The schema as it was before principals (four steps).
            for (step, sql) in MIGRATIONS.iter().take(4).enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.pragma_update(None, "user_version", step as i64 + 1)
                    .unwrap();
            }
            conn.execute(
                "INSERT INTO sessions (key, id, agent, channel, created_at, updated_at) VALUES ('agent:main:telegram:dm:7', 'id1', 'main', 'telegram', 't', 't')",
                [],
            )
            .unwrap();
        }
        let reg = Registry::open(&path).unwrap();
        let filled = reg
            .fill_principals(|key| {
                assert_eq!(key, "agent:main:telegram:dm:7");
                Principal::Person {
                    channel: "telegram".into(),
                    user: "7".into(),
                }
            })
            .await
            .unwrap();
        assert_eq!(filled, 1);
        let row = reg.find("id1").await.unwrap().unwrap();
        assert_eq!(row.principal.to_string(), "telegram:dm:7");
        assert_eq!(reg.fill_principals(|_| Principal::Owner).await.unwrap(), 0);
    }

    #[test]
    fn a_damaged_spawn_layer_denies_everything() {
        assert_eq!(layer_from_json("{nonsense").deny, ["*"]);
        let layer = ToolLayer {
            profile: None,
            allow: vec![],
            deny: vec!["exec".into()],
        };
        assert_eq!(layer_from_json(&layer_to_json(&layer)), layer);
    }

    #[tokio::test]
    async fn create_find_usage_reset_delete() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join("p.db")).unwrap();
        let a = reg
            .get_or_create("agent:main:main", "main", "cli", owner())
            .await
            .unwrap();
        let again = reg
            .get_or_create("agent:main:main", "main", "cli", owner())
            .await
            .unwrap();
        assert_eq!(a.id, again.id);
        reg.add_usage(&a.id, 10, 3).unwrap();
        reg.add_usage(&a.id, 5, 2).unwrap();
        let found = reg.find(&a.id).await.unwrap().unwrap();
        assert_eq!((found.input_tokens, found.output_tokens), (15, 5));
        reg.finish_turn(&a.id, Some(("boom".into(), "tried x".into())))
            .await
            .unwrap();
        reg.add_compaction(&a.id).await.unwrap();
        let row = reg.find("agent:main:main").await.unwrap().unwrap();
        assert_eq!(row.last_error.as_deref(), Some("boom"));
        assert_eq!(row.failure_summary.as_deref(), Some("tried x"));
        assert_eq!(row.compactions, 1);
        let (old, new) = reg.reset("agent:main:main").await.unwrap().unwrap();
        let row = reg.find("agent:main:main").await.unwrap().unwrap();
        assert_eq!((row.compactions, row.failure_summary), (0, None));
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
            reg.get_or_create("agent:a:x", "a", "cli", owner())
                .await
                .unwrap()
                .id
        };
        let reg = Registry::open(&path).unwrap();
        assert_eq!(reg.list(Some("a".into())).await.unwrap()[0].id, id);
        assert!(reg.list(Some("b".into())).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn audit_rows_keep_their_arguments_and_older_rows_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        {
            let conn = Connection::open(&path).unwrap();
            // The schema before the arguments were kept (five steps).
            for (step, sql) in MIGRATIONS.iter().take(5).enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.pragma_update(None, "user_version", step as i64 + 1)
                    .unwrap();
            }
            conn.execute(
                "INSERT INTO tool_audit (at, session_key, agent, sender, tool, call_id, args_hash, outcome, duration_ms, decided_by, detail) VALUES ('t', 'agent:main:main', 'main', 'owner', 'exec', 'c1', 'h', 'ok', 1, 'tool', '')",
                [],
            )
            .unwrap();
        }
        let reg = Registry::open(&path).unwrap();
        let row = |arguments: &str| AuditRecord {
            session_key: "agent:main:main".into(),
            agent: "main".into(),
            sender: "owner".into(),
            tool: "exec".into(),
            call_id: "c2".into(),
            args_hash: "h".into(),
            outcome: "ok".into(),
            duration_ms: 2,
            decided_by: "tool".into(),
            detail: String::new(),
            arguments: arguments.into(),
        };
        reg.audit(row(r#"{"command":"ls"}"#)).unwrap();
        let rows = reg.audit_rows(None, 10).await.unwrap();
        let arguments: Vec<&str> = rows.iter().map(|(_, r)| r.arguments.as_str()).collect();
        assert_eq!(arguments, ["", r#"{"command":"ls"}"#]);
    }

    #[tokio::test]
    async fn audit_rows_older_than_the_cutoff_go_and_newer_stay() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join("p.db")).unwrap();
        let row = |call_id: &str| AuditRecord {
            session_key: "agent:main:main".into(),
            agent: "main".into(),
            sender: "owner".into(),
            tool: "read".into(),
            call_id: call_id.into(),
            args_hash: "h".into(),
            outcome: "ok".into(),
            duration_ms: 1,
            decided_by: "tool".into(),
            detail: String::new(),
            arguments: String::new(),
        };
        reg.audit(row("new")).unwrap();
        // Two rows from months ago, as an older pincerd wrote them.
        reg.call(|conn| {
            for (at, id) in [("2026-01-02T03:04:05Z", "old"), ("2026-01-02T03:04:05.5Z", "old2")] {
                conn.execute(
                    "INSERT INTO tool_audit (at, session_key, agent, sender, tool, call_id, args_hash, outcome, duration_ms, decided_by, detail) VALUES (?1, 'agent:main:main', 'main', 'owner', 'read', ?2, 'h', 'ok', 1, 'tool', '')",
                    [at, id],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
        let week_ago = time::OffsetDateTime::now_utc() - time::Duration::days(7);
        assert_eq!(reg.prune_audit(week_ago).await.unwrap(), 2);
        let left: Vec<String> = reg
            .audit_rows(None, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.call_id)
            .collect();
        assert_eq!(left, ["new"]);
        assert_eq!(reg.prune_audit(week_ago).await.unwrap(), 0);
    }
}
