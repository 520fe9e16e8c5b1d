//! Approvals (SPEC §8.4): a call to a tool the agent has set to `ask`
//! waits until the owner allows or denies it (`pincer approvals allow|deny`,
//! the buttons or `/approve` in the owner's DM) or the request expires,
//! which counts as denied. An answer may be "always": that call runs, and
//! later calls of the same tool in the same session run without asking.
//! "The same session" is the session's id, not its key: after `/new` or
//! `pincer sessions reset` the chat has a new session that asks again
//! (and the hub forgets the old id's answers, [`Approvals::forget_session`]).
//!
//! Every request and every end of one — allowed, denied, expired, aborted,
//! with who answered and where — is broadcast as an [`ApprovalEvent`]:
//! the bridges show the request to the owners and edit their message when
//! it ends, whichever way it ends.
//!
//! The store is in memory: a restart of the daemon aborts running turns,
//! and with them their pending approvals, and forgets the "always"
//! answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::origin::{ChatOrigin, ChatPlace};

/// Who asked for a call, when it is not the owner at the CLI or in their
/// own DM: the person (their name as routing made it fit for one line)
/// and the chat, so the owner knows whose call they answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub channel: String,
    pub sender_id: String,
    pub name: String,
    /// The group's chat id; `None` for a DM.
    pub group: Option<String>,
    /// The thread (forum topic) inside the group.
    pub thread: Option<String>,
}

impl Requester {
    /// The requester of a call made for `origin`; `None` for the owner's
    /// own chats (the CLI, their DM).
    pub fn of(origin: &ChatOrigin) -> Option<Self> {
        if origin.is_owner() {
            return None;
        }
        let sender_id = origin
            .sender
            .split(',')
            .next()
            .and_then(|s| s.split_once(':'))
            .map(|(_, id)| id.to_string())
            .unwrap_or_default();
        match &origin.chat {
            ChatPlace::Cli => None,
            ChatPlace::Direct { channel, .. } => Some(Self {
                channel: channel.clone(),
                sender_id,
                name: origin.name.clone(),
                group: None,
                thread: None,
            }),
            ChatPlace::Group {
                channel,
                chat_id,
                thread_id,
            } => Some(Self {
                channel: channel.clone(),
                sender_id,
                name: origin.name.clone(),
                group: Some(chat_id.clone()),
                thread: thread_id.clone(),
            }),
        }
    }
}

/// A call waiting for the owner.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    pub id: String,
    pub session_key: String,
    /// The session's id: what an "always" answer is remembered for.
    pub session_id: String,
    pub agent: String,
    pub tool: String,
    pub arguments: String,
    pub requested_at: SystemTime,
    pub expires_at: SystemTime,
    pub requester: Option<Requester>,
}

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

/// How a request ended, for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    Denied,
    Expired,
    /// The turn was aborted while it waited.
    Aborted,
}

/// Who answered a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecidedBy {
    /// A client of the socket: `pincer approvals`, `pincer chat`.
    Cli,
    /// A channel's owner in a chat (a button, `/approve`).
    Chat {
        channel: String,
        user_id: String,
        name: String,
    },
}

/// How a request ended, for the bridges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Allowed {
        always: bool,
        by: DecidedBy,
    },
    /// `by` is `None` when the request was dropped unanswered.
    Denied {
        by: Option<DecidedBy>,
    },
    /// Nobody answered within `after`.
    Expired {
        after: Duration,
    },
    /// The turn was aborted (or the daemon stopped) while it waited.
    Aborted,
}

/// A request that ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalEnded {
    pub id: String,
    pub session_key: String,
    pub tool: String,
    pub ending: Ending,
}

/// What the store broadcasts, in order: each request, then its end.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalEvent {
    Requested(PendingApproval),
    Ended(ApprovalEnded),
}

/// The owner's answer, from [`Approvals::decide`] to the waiting call.
struct Verdict {
    allow: bool,
    always: bool,
    by: DecidedBy,
}

struct Waiting {
    info: PendingApproval,
    answer: oneshot::Sender<Verdict>,
}

/// The shared store; cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    inner: Arc<Mutex<BTreeMap<String, Waiting>>>,
    /// (session id, tool) pairs the owner answered "always" for.
    always: Arc<Mutex<BTreeSet<(String, String)>>>,
    /// Every request and every end, for the bridges.
    events: tokio::sync::broadcast::Sender<ApprovalEvent>,
}

impl Default for Approvals {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            always: Arc::default(),
            events: tokio::sync::broadcast::channel(64).0,
        }
    }
}

/// A registered request: removed from the store, and its end announced,
/// however the wait ends — also when the waiting call is dropped.
struct Registered<'a> {
    store: &'a Approvals,
    id: String,
    session_key: String,
    tool: String,
    ending: Option<Ending>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.store.lock().remove(&self.id);
        let _ = self.store.events.send(ApprovalEvent::Ended(ApprovalEnded {
            id: std::mem::take(&mut self.id),
            session_key: std::mem::take(&mut self.session_key),
            tool: std::mem::take(&mut self.tool),
            ending: self.ending.take().unwrap_or(Ending::Aborted),
        }));
    }
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Waiting>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn always(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, String)>> {
        self.always.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a request; `announce` is told about it (the chat's client
    /// shows it) before the wait starts.
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
        let (tx, rx) = oneshot::channel();
        let info = {
            let mut waiting = self.lock();
            // Short ids are easy to type; collisions are checked.
            let id = loop {
                let candidate = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
                if !waiting.contains_key(&candidate) {
                    break candidate;
                }
            };
            let info = PendingApproval {
                id: id.clone(),
                session_key: call.session_key.to_string(),
                session_id: call.session_id.to_string(),
                agent: call.agent.to_string(),
                tool: call.tool.to_string(),
                arguments: call.arguments.to_string(),
                requested_at: now,
                expires_at: now + timeout,
                requester: call.requester.cloned(),
            };
            waiting.insert(
                id,
                Waiting {
                    info: info.clone(),
                    answer: tx,
                },
            );
            info
        };
        let mut registered = Registered {
            store: self,
            id: info.id.clone(),
            session_key: info.session_key.clone(),
            tool: info.tool.clone(),
            ending: None,
        };
        announce(&info);
        // Nobody listening (no bridge with an owner) is fine.
        let _ = self.events.send(ApprovalEvent::Requested(info));
        let (answer, ending) = tokio::select! {
            r = tokio::time::timeout(timeout, rx) => match r {
                Ok(Ok(Verdict { allow: true, always, by })) => {
                    (Answer::Allowed, Ending::Allowed { always, by })
                }
                Ok(Ok(Verdict { allow: false, by, .. })) => {
                    (Answer::Denied, Ending::Denied { by: Some(by) })
                }
                Ok(Err(_)) => (Answer::Denied, Ending::Denied { by: None }),
                Err(_) => (Answer::Expired, Ending::Expired { after: timeout }),
            },
            _ = cancel.cancelled() => (Answer::Aborted, Ending::Aborted),
        };
        registered.ending = Some(ending);
        answer
    }

    /// Requests and their ends from now on, as they happen.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ApprovalEvent> {
        self.events.subscribe()
    }

    pub fn pending(&self) -> Vec<PendingApproval> {
        self.lock().values().map(|w| w.info.clone()).collect()
    }

    /// Answers a request for `by`; false when no such request is waiting.
    /// `always` (with `allow`) also allows the tool's later calls in that
    /// session (its id: a reset session asks again).
    pub fn decide(&self, id: &str, allow: bool, always: bool, by: DecidedBy) -> bool {
        let Some(w) = self.lock().remove(id.trim()) else {
            return false;
        };
        let always = allow && always;
        if always {
            self.always()
                .insert((w.info.session_id.clone(), w.info.tool.clone()));
        }
        w.answer.send(Verdict { allow, always, by }).is_ok()
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
mod tests {
    use super::*;

    const ASK: Ask<'static> = Ask {
        session_key: "k",
        session_id: "s1",
        agent: "main",
        tool: "exec",
        arguments: "{}",
        requester: None,
    };

    /// Answers the first request to show up, as the owner would.
    fn answer_first_pending(
        store: &Approvals,
        allow: bool,
        always: bool,
    ) -> tokio::task::JoinHandle<()> {
        let s = store.clone();
        tokio::spawn(async move {
            loop {
                if let Some(p) = s.pending().first() {
                    assert!(s.decide(&p.id, allow, always, DecidedBy::Cli));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }

    async fn ask(store: &Approvals, call: Ask<'_>, timeout_ms: u64) -> (Answer, bool) {
        let cancel = CancellationToken::new();
        let mut announced = false;
        let got = store
            .request(call, Duration::from_millis(timeout_ms), &cancel, |_| {
                announced = true
            })
            .await;
        (got, announced)
    }

    #[tokio::test]
    async fn allowed_denied_expired_aborted() {
        let store = Approvals::default();
        let cancel = CancellationToken::new();
        for (allow, want) in [(true, Answer::Allowed), (false, Answer::Denied)] {
            let decider = answer_first_pending(&store, allow, false);
            let got = store
                .request(ASK, Duration::from_secs(5), &cancel, |_| {})
                .await;
            decider.await.unwrap();
            assert_eq!(got, want);
        }
        let got = store
            .request(ASK, Duration::from_millis(20), &cancel, |_| {})
            .await;
        assert_eq!(got, Answer::Expired);
        assert!(store.pending().is_empty(), "expired requests are gone");
        cancel.cancel();
        let got = store
            .request(ASK, Duration::from_secs(5), &cancel, |_| {})
            .await;
        assert_eq!(got, Answer::Aborted);
        assert!(!store.decide("nope", true, false, DecidedBy::Cli));
    }

    #[tokio::test]
    async fn always_allows_later_calls_of_that_tool_in_that_session_only() {
        let store = Approvals::default();
        let decider = answer_first_pending(&store, true, true);
        let (got, _) = ask(&store, ASK, 5_000).await;
        decider.await.unwrap();
        assert_eq!(got, Answer::Allowed);
        let (again, announced) = ask(&store, ASK, 50).await;
        assert_eq!(again, Answer::Allowed);
        assert!(!announced, "an always-allowed call is not asked for");
        for other in [
            Ask {
                tool: "write",
                ..ASK
            },
            Ask {
                session_key: "other",
                session_id: "s2",
                ..ASK
            },
            // The same chat after `/new`: same key, a new session.
            Ask {
                session_id: "s3",
                ..ASK
            },
        ] {
            let (got, announced) = ask(&store, other, 20).await;
            assert_eq!(got, Answer::Expired, "{other:?} still asks");
            assert!(announced);
        }
    }

    #[tokio::test]
    async fn a_forgotten_session_asks_again() {
        let store = Approvals::default();
        let decider = answer_first_pending(&store, true, true);
        ask(&store, ASK, 5_000).await;
        decider.await.unwrap();
        store.forget_session("s1");
        let (got, announced) = ask(&store, ASK, 20).await;
        assert_eq!(got, Answer::Expired);
        assert!(announced, "the reset session's call was asked for");
    }

    #[test]
    fn the_requester_is_the_person_and_chat_unless_the_owner_asks() {
        assert_eq!(Requester::of(&ChatOrigin::owner(true)), None);
        let stranger = ChatOrigin {
            sender: "telegram:42".into(),
            name: "Eve".into(),
            principal: crate::session::Principal::Group {
                channel: "telegram".into(),
                chat: "-100".into(),
            },
            chat: ChatPlace::Group {
                channel: "telegram".into(),
                chat_id: "-100".into(),
                thread_id: Some("7".into()),
            },
            in_channel: true,
            ..ChatOrigin::owner(false)
        };
        assert_eq!(
            Requester::of(&stranger),
            Some(Requester {
                channel: "telegram".into(),
                sender_id: "42".into(),
                name: "Eve".into(),
                group: Some("-100".into()),
                thread: Some("7".into()),
            })
        );
    }

    /// The next event, waiting at most a second.
    async fn next(events: &mut tokio::sync::broadcast::Receiver<ApprovalEvent>) -> ApprovalEvent {
        tokio::time::timeout(Duration::from_secs(1), events.recv())
            .await
            .expect("an event within a second")
            .expect("the store is alive")
    }

    fn ended(event: ApprovalEvent) -> ApprovalEnded {
        match event {
            ApprovalEvent::Ended(e) => e,
            other => panic!("not an end: {other:?}"),
        }
    }

    #[tokio::test]
    async fn every_end_is_announced_with_who_answered() {
        let store = Approvals::default();
        let mut events = store.subscribe();
        let by = DecidedBy::Chat {
            channel: "telegram".into(),
            user_id: "1".into(),
            name: "Owner".into(),
        };
        let s = store.clone();
        let chat_by = by.clone();
        let decider = tokio::spawn(async move {
            loop {
                if let Some(p) = s.pending().first() {
                    assert!(s.decide(&p.id, true, true, chat_by));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        ask(&store, ASK, 5_000).await;
        decider.await.unwrap();
        let ApprovalEvent::Requested(requested) = next(&mut events).await else {
            panic!("the request comes first");
        };
        let end = ended(next(&mut events).await);
        assert_eq!(end.id, requested.id);
        assert_eq!(end.tool, "exec");
        assert_eq!(end.ending, Ending::Allowed { always: true, by });

        let decider = answer_first_pending(&store, false, false);
        ask(
            &store,
            Ask {
                tool: "write",
                ..ASK
            },
            5_000,
        )
        .await;
        decider.await.unwrap();
        next(&mut events).await;
        assert_eq!(
            ended(next(&mut events).await).ending,
            Ending::Denied {
                by: Some(DecidedBy::Cli)
            }
        );

        ask(
            &store,
            Ask {
                tool: "write",
                ..ASK
            },
            20,
        )
        .await;
        next(&mut events).await;
        assert_eq!(
            ended(next(&mut events).await).ending,
            Ending::Expired {
                after: Duration::from_millis(20)
            }
        );

        // A waiting call dropped (its turn gone) ends as aborted, and
        // leaves nothing pending.
        let waiting = ask(
            &store,
            Ask {
                tool: "write",
                ..ASK
            },
            5_000,
        );
        let _ = tokio::time::timeout(Duration::from_millis(30), waiting).await;
        next(&mut events).await;
        assert_eq!(ended(next(&mut events).await).ending, Ending::Aborted);
        assert!(store.pending().is_empty());
    }
}
