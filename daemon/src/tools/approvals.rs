//! Approvals (SPEC §8.4): a call to a tool the agent has set to `ask`
//! waits until the owner allows or denies it (`pincer approvals allow|deny`)
//! or the request expires, which counts as denied. An answer may be
//! "always": that call runs, and later calls of the same tool in the same
//! session run without asking. The store is in memory: a restart of the
//! daemon aborts running turns, and with them their pending approvals, and
//! forgets the "always" answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A call waiting for the owner.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    pub id: String,
    pub session_key: String,
    pub agent: String,
    pub tool: String,
    pub arguments: String,
    pub requested_at: SystemTime,
    pub expires_at: SystemTime,
}

/// The call an approval is asked for.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub session_key: &'a str,
    pub agent: &'a str,
    pub tool: &'a str,
    pub arguments: &'a str,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    Denied,
    Expired,
    /// The turn was aborted while it waited.
    Aborted,
}

struct Waiting {
    info: PendingApproval,
    answer: oneshot::Sender<bool>,
}

/// The shared store; cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    inner: Arc<Mutex<BTreeMap<String, Waiting>>>,
    /// (session key, tool) pairs the owner answered "always" for.
    always: Arc<Mutex<BTreeSet<(String, String)>>>,
    /// Every new request, for the bridges (the owner's DM gets buttons).
    announced: tokio::sync::broadcast::Sender<PendingApproval>,
}

impl Default for Approvals {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            always: Arc::default(),
            announced: tokio::sync::broadcast::channel(64).0,
        }
    }
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Waiting>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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
        if self.always_allowed(call.session_key, call.tool) {
            return Answer::Allowed;
        }
        let now = SystemTime::now();
        // Short ids are easy to type; collisions are checked.
        let id = loop {
            let candidate = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
            if !self.lock().contains_key(&candidate) {
                break candidate;
            }
        };
        let info = PendingApproval {
            id: id.clone(),
            session_key: call.session_key.to_string(),
            agent: call.agent.to_string(),
            tool: call.tool.to_string(),
            arguments: call.arguments.to_string(),
            requested_at: now,
            expires_at: now + timeout,
        };
        let (tx, rx) = oneshot::channel();
        announce(&info);
        let announced = info.clone();
        self.lock().insert(id.clone(), Waiting { info, answer: tx });
        // Nobody listening (no bridge with an owner) is fine.
        let _ = self.announced.send(announced);
        let answer = tokio::select! {
            r = tokio::time::timeout(timeout, rx) => match r {
                Ok(Ok(true)) => Answer::Allowed,
                Ok(Ok(false)) | Ok(Err(_)) => Answer::Denied,
                Err(_) => Answer::Expired,
            },
            _ = cancel.cancelled() => Answer::Aborted,
        };
        self.lock().remove(&id);
        answer
    }

    /// New requests from now on, as they are made.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PendingApproval> {
        self.announced.subscribe()
    }

    pub fn pending(&self) -> Vec<PendingApproval> {
        self.lock().values().map(|w| w.info.clone()).collect()
    }

    /// Answers a request; false when no such request is waiting. `always`
    /// (with `allow`) also allows the tool's later calls in that session.
    pub fn decide(&self, id: &str, allow: bool, always: bool) -> bool {
        let Some(w) = self.lock().remove(id.trim()) else {
            return false;
        };
        if allow && always {
            self.always
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((w.info.session_key.clone(), w.info.tool.clone()));
        }
        w.answer.send(allow).is_ok()
    }

    fn always_allowed(&self, session_key: &str, tool: &str) -> bool {
        self.always
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(session_key.to_string(), tool.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASK: Ask<'static> = Ask {
        session_key: "k",
        agent: "main",
        tool: "exec",
        arguments: "{}",
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
                    assert!(s.decide(&p.id, allow, always));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
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
        assert!(!store.decide("nope", true, false));
    }

    #[tokio::test]
    async fn always_allows_later_calls_of_that_tool_in_that_session_only() {
        let store = Approvals::default();
        let cancel = CancellationToken::new();
        let decider = answer_first_pending(&store, true, true);
        let got = store
            .request(ASK, Duration::from_secs(5), &cancel, |_| {})
            .await;
        decider.await.unwrap();
        assert_eq!(got, Answer::Allowed);
        let mut announced = false;
        let again = store
            .request(ASK, Duration::from_millis(50), &cancel, |_| {
                announced = true
            })
            .await;
        assert_eq!(again, Answer::Allowed);
        assert!(!announced, "an always-allowed call is not asked for");
        for other in [
            Ask {
                tool: "write",
                ..ASK
            },
            Ask {
                session_key: "other",
                ..ASK
            },
        ] {
            let got = store
                .request(other, Duration::from_millis(20), &cancel, |_| {})
                .await;
            assert_eq!(got, Answer::Expired, "{other:?} still asks");
        }
    }
}
