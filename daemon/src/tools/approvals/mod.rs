//! Approvals (SPEC §8.4, §13): one durable store for everything that waits
//! on a person, in one 8-character id space — a call to a tool the agent
//! set to `ask` (the owner allows or denies it, or it expires, which counts
//! as denied) and a workflow run halted at an `approval` or `input` step
//! (its approvers decide, with a quorum, an edit or a revise; or the owner
//! gives the data it asks for). Answers come from `pincer approvals` and
//! `pincer workflows approve|deny|edit|revise|input`, the buttons and
//! commands in chats, and gRPC; [`rules`] decides who may give which.
//!
//! A tool call's answer may be "always": that call runs, and later calls
//! of the same tool in the same session run without asking. "The same
//! session" is the session's id, not its key: after `/new` or `pincer
//! sessions reset` the chat has a new session that asks again (and the
//! hub forgets the old id's answers, [`Approvals::forget_session`]).
//! "Always" answers live in memory, until pincerd restarts.
//!
//! Every request and every end of one — with who answered and where — is
//! broadcast as an [`ApprovalEvent`]: the bridges show the request to the
//! people who may answer it and edit their message when it ends, whichever
//! way it ends.
//!
//! Requests are written to `state/approvals.db` ([`db`]) before anyone is
//! asked, and their ends before anyone is told: a workflow's halt outlives
//! a restart (the run waits on it again), a tool call's request ends as
//! aborted with the turn that asked.

mod db;
mod request;
mod rules;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::db::ApprovalDb;
pub use self::request::{
    ApprovalEnded, ApprovalEvent, Decided, DecidedBy, Decision, Ending, Halt, HaltAsk,
    PendingApproval, Refusal, Requester, Subject, Voter,
};
use crate::sqlite::DbError;

/// The call an approval is asked for.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub session_key: &'a str,
    pub session_id: &'a str,
    pub agent: &'a str,
    pub tool: &'a str,
    pub arguments: &'a str,
    pub requester: Option<&'a Requester>,
}

/// How a tool call's request ended, for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    Denied,
    Expired,
    /// The turn was aborted while it waited.
    Aborted,
}

/// A request waiting, and the way its end reaches whoever waits on it.
struct Waiting {
    info: PendingApproval,
    ended: watch::Sender<Option<Ending>>,
    /// Its end is being written: nobody else may end it.
    closing: bool,
}

/// The shared store; cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    waiting: Arc<Mutex<BTreeMap<String, Waiting>>>,
    /// (session id, tool) pairs the owner answered "always" for.
    always: Arc<Mutex<BTreeSet<(String, String)>>>,
    /// Every request and every end, for the bridges.
    events: tokio::sync::broadcast::Sender<ApprovalEvent>,
    /// `None`: kept in memory only (tests, benches).
    db: Option<ApprovalDb>,
}

impl Default for Approvals {
    fn default() -> Self {
        Self {
            waiting: Arc::default(),
            always: Arc::default(),
            events: tokio::sync::broadcast::channel(64).0,
            db: None,
        }
    }
}

/// A registered tool call's request: ended as aborted (and its end
/// announced) if the waiting call is dropped before it ends.
struct Registered<'a> {
    store: &'a Approvals,
    id: String,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let w = {
            let mut waiting = self.store.lock();
            match waiting.get(&self.id) {
                Some(w) if !w.closing => waiting.remove(&self.id),
                _ => None,
            }
        };
        let Some(w) = w else {
            return;
        };
        if let Some(db) = &self.store.db {
            db.end_soon(&self.id, &Ending::Aborted);
        }
        self.store.announce_end(w, Ending::Aborted);
    }
}

impl Approvals {
    /// Opens the store at `path` (`state/approvals.db`), with the halts
    /// that still wait.
    pub async fn open(path: &Path) -> Result<Self, DbError> {
        let (db, halts) = ApprovalDb::open(path).await?;
        let store = Self {
            db: Some(db),
            ..Self::default()
        };
        {
            let mut waiting = store.lock();
            for info in halts {
                waiting.insert(
                    info.id.clone(),
                    Waiting {
                        info,
                        ended: watch::channel(None).0,
                        closing: false,
                    },
                );
            }
        }
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn always(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, String)>> {
        self.always.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives `info` a fresh id, writes it and adds it to the waiting
    /// requests; the receiver learns its end.
    async fn register(
        &self,
        mut info: PendingApproval,
    ) -> Result<(PendingApproval, watch::Receiver<Option<Ending>>), DbError> {
        loop {
            // Short ids are easy to type; collisions are checked against
            // the waiting and, through the table's key, the kept ones.
            let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
            if self.lock().contains_key(&id) {
                continue;
            }
            info.id = id;
            match &self.db {
                Some(db) if !db.insert(&info).await? => continue,
                _ => break,
            }
        }
        let (tx, rx) = watch::channel(None);
        self.lock().insert(
            info.id.clone(),
            Waiting {
                info: info.clone(),
                ended: tx,
                closing: false,
            },
        );
        Ok((info, rx))
    }

    /// Asks the owner about a tool call; `announce` is told about the
    /// request (the chat's client shows it) before the wait starts.
    pub async fn request(
        &self,
        call: Ask<'_>,
        timeout: Duration,
        cancel: &CancellationToken,
        announce: impl FnOnce(&PendingApproval),
    ) -> Answer {
        if self.always_allowed(call.session_id, call.tool) {
            return Answer::Allowed;
        }
        let now = SystemTime::now();
        let info = PendingApproval {
            id: String::new(),
            agent: call.agent.to_string(),
            session_key: call.session_key.to_string(),
            requested_at: now,
            expires_at: now + timeout,
            requester: call.requester.cloned(),
            subject: Subject::Call {
                session_id: call.session_id.to_string(),
                tool: call.tool.to_string(),
                arguments: call.arguments.to_string(),
            },
        };
        let (info, mut ended) = match self.register(info).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(
                    tool = call.tool,
                    "cannot record an approval request, so the call is denied: {e}"
                );
                return Answer::Denied;
            }
        };
        let registered = Registered {
            store: self,
            id: info.id.clone(),
        };
        announce(&info);
        // Nobody listening (no bridge with an owner) is fine.
        let _ = self.events.send(ApprovalEvent::Requested(info));
        let ending = tokio::select! {
            r = tokio::time::timeout(timeout, ended.wait_for(Option::is_some)) => match r {
                Ok(Ok(e)) => e.clone(),
                Ok(Err(_)) => None,
                Err(_) => Some(Ending::Expired { after: timeout }),
            },
            _ = cancel.cancelled() => Some(Ending::Aborted),
        };
        // An answer that came with the timeout or the abort wins.
        let ending = match self
            .end(&registered.id, ending.unwrap_or(Ending::Aborted))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("cannot record the end of an approval request: {e}");
                Ending::Aborted
            }
        };
        drop(registered);
        match ending {
            Ending::Allowed { .. } | Ending::Edited { .. } | Ending::Answered { .. } => {
                Answer::Allowed
            }
            Ending::Expired { .. } => Answer::Expired,
            Ending::Aborted => Answer::Aborted,
            Ending::Denied { .. } | Ending::Revised { .. } => Answer::Denied,
        }
    }

    /// Asks for a workflow's halt; the request as registered (and
    /// announced).
    pub async fn ask_halt(
        &self,
        agent: &str,
        session_key: &str,
        halt: Halt,
        expires_at: SystemTime,
        requester: Option<Requester>,
    ) -> Result<PendingApproval, DbError> {
        let info = PendingApproval {
            id: String::new(),
            agent: agent.to_string(),
            session_key: session_key.to_string(),
            requested_at: SystemTime::now(),
            expires_at,
            requester,
            subject: Subject::Step(halt),
        };
        let (info, _) = self.register(info).await?;
        let _ = self.events.send(ApprovalEvent::Requested(info.clone()));
        Ok(info)
    }

    /// The newest request of the halt at `step` of `run`, and how it
    /// ended (`None`: it waits).
    pub async fn latest_halt(
        &self,
        run: &str,
        step: &str,
    ) -> Result<Option<(PendingApproval, Option<Ending>)>, DbError> {
        let waiting = self
            .lock()
            .values()
            .filter(|w| {
                w.info
                    .halt()
                    .is_some_and(|h| h.run == run && h.step == step)
            })
            .map(|w| w.info.clone())
            .max_by_key(|p| p.requested_at);
        if let Some(p) = waiting {
            return Ok(Some((p, None)));
        }
        match &self.db {
            Some(db) => db.latest_halt(run, step).await,
            None => Ok(None),
        }
    }

    /// Waits until request `id` ends; how it did. `None`: no such request.
    pub async fn wait(&self, id: &str) -> Result<Option<Ending>, DbError> {
        let rx = self.lock().get(id).map(|w| w.ended.subscribe());
        if let Some(mut rx) = rx
            && let Ok(e) = rx.wait_for(Option::is_some).await
        {
            return Ok(e.clone());
        }
        match &self.db {
            Some(db) => Ok(db.get(id).await?.and_then(|(_, e)| e)),
            None => Ok(None),
        }
    }

    /// Ends request `id` with `ending` if it still waits; how it ended
    /// (an answer that came first wins).
    pub async fn end(&self, id: &str, ending: Ending) -> Result<Ending, DbError> {
        enum Found {
            Open,
            Closing(watch::Receiver<Option<Ending>>),
            Gone,
        }
        let found = match self.lock().get_mut(id) {
            Some(w) if w.closing => Found::Closing(w.ended.subscribe()),
            Some(w) => {
                w.closing = true;
                Found::Open
            }
            None => Found::Gone,
        };
        match found {
            Found::Open => {
                if let Some(db) = &self.db
                    && let Err(e) = db.end(id, &ending).await
                {
                    if let Some(w) = self.lock().get_mut(id) {
                        w.closing = false;
                    }
                    return Err(e);
                }
                if let Some(w) = self.lock().remove(id) {
                    self.announce_end(w, ending.clone());
                }
                Ok(ending)
            }
            Found::Closing(mut rx) => Ok(rx
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|e| e.clone())
                .unwrap_or(ending)),
            Found::Gone => Ok(self.wait(id).await?.unwrap_or(ending)),
        }
    }

    fn announce_end(&self, w: Waiting, ending: Ending) {
        let _ = w.ended.send(Some(ending.clone()));
        let _ = self.events.send(ApprovalEvent::Ended(ApprovalEnded {
            id: w.info.id,
            session_key: w.info.session_key,
            subject: w.info.subject,
            ending,
        }));
    }

    /// Requests and their ends from now on, as they happen.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ApprovalEvent> {
        self.events.subscribe()
    }

    /// Every request waiting, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let mut all: Vec<_> = self.lock().values().map(|w| w.info.clone()).collect();
        all.sort_by_key(|p| p.requested_at);
        all
    }

    /// One waiting request.
    pub fn get(&self, id: &str) -> Option<PendingApproval> {
        self.lock().get(id.trim()).map(|w| w.info.clone())
    }

    /// Answers request `id` for `voter` ([`rules::judge`] says whether
    /// they may): the request ends, or their approval is counted.
    pub async fn decide(
        &self,
        id: &str,
        decision: Decision,
        voter: &Voter,
    ) -> Result<Decided, Refusal> {
        let id = id.trim();
        let (decided, info) = {
            let mut waiting = self.lock();
            let Some(w) = waiting.get_mut(id).filter(|w| !w.closing) else {
                return Err(Refusal::NotWaiting(id.to_string()));
            };
            let mut info = w.info.clone();
            let decided = rules::judge(&mut info, decision, voter)?;
            w.info = info.clone();
            (decided, info)
        };
        match &decided {
            Decided::Counted { .. } => {
                if let Some(db) = &self.db {
                    db.set_subject(id, &info.subject).await?;
                }
            }
            Decided::Ended(ending) => {
                if let Ending::Allowed { always: true, .. } = ending
                    && let Subject::Call {
                        session_id, tool, ..
                    } = &info.subject
                {
                    self.always().insert((session_id.clone(), tool.clone()));
                }
                let ended = self.end(id, ending.clone()).await?;
                if &ended != ending {
                    // It ended another way in between (expired).
                    return Err(Refusal::NotWaiting(id.to_string()));
                }
            }
        }
        Ok(decided)
    }

    /// Forgets the "always" answers of session `session_id` (reset or
    /// deleted: its key's next session asks again).
    pub fn forget_session(&self, session_id: &str) {
        self.always().retain(|(id, _)| id != session_id);
    }

    fn always_allowed(&self, session_id: &str, tool: &str) -> bool {
        self.always()
            .contains(&(session_id.to_string(), tool.to_string()))
    }
}

#[cfg(test)]
mod tests;
