//! The daemon's one ledger, shared by all its bridges: one thread of its
//! own runs every call, in the order the calls came.
//!
//! Why a thread of its own and not a blocking task per call: a bridge
//! under load makes a ledger call per message and per chunk, and each
//! commit is an fsync. As blocking tasks waiting on a mutex, every waiting
//! call held a thread of tokio's blocking pool and the pool grew a thread
//! for each (measured with `pincer-telegram-load`: 493 threads while 200
//! Telegram chats sent at once, and 8–10 MB of the peak RSS that a
//! thread of its own saves). Here the calls wait as tasks on a
//! queue and one thread works through it without a hand-off between
//! calls.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use tokio::sync::oneshot;

use super::Ledger;

type Call = Box<dyn FnOnce(&mut Ledger) + Send>;

/// A cloneable handle on the ledger; see the module doc.
#[derive(Clone)]
pub struct SharedLedger {
    calls: mpsc::Sender<Call>,
}

/// A ledger call that did not return: it panicked, or the ledger's thread
/// is gone.
#[derive(Debug, thiserror::Error)]
#[error("the ledger call did not finish (it panicked, or the ledger's thread is gone)")]
pub struct Unfinished;

impl SharedLedger {
    /// Starts the ledger's thread; the thread ends when the last handle is
    /// dropped.
    pub fn start(mut ledger: Ledger) -> std::io::Result<Self> {
        let (calls, queue) = mpsc::channel::<Call>();
        std::thread::Builder::new()
            .name("pincer-ledger".into())
            .spawn(move || {
                for call in queue {
                    // A panicking call drops its answer (its caller sees
                    // `Unfinished`); the calls after it still run.
                    let _ = catch_unwind(AssertUnwindSafe(|| call(&mut ledger)));
                }
            })?;
        Ok(Self { calls })
    }

    /// Runs `f` on the ledger after the calls before it.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Ledger) -> T + Send + 'static,
    ) -> Result<T, Unfinished> {
        let (answer, answered) = oneshot::channel();
        let call: Call = Box::new(move |ledger| {
            let _ = answer.send(f(ledger));
        });
        self.calls.send(call).map_err(|_| Unfinished)?;
        answered.await.map_err(|_| Unfinished)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn shared(dir: &tempfile::TempDir) -> SharedLedger {
        SharedLedger::start(Ledger::open(&dir.path().join("channels.db")).unwrap()).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_calls_run_one_at_a_time_on_one_thread() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = shared(&dir);
        // Each call reads the cursor and moves it one further: one at a
        // time, the calls read 0 (none yet) to 199, each value once.
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..200 {
            let ledger = ledger.clone();
            calls.spawn(async move {
                ledger
                    .run(|l| {
                        let before: u32 = l
                            .cursor("telegram", "bot", "updates")
                            .unwrap()
                            .map_or(0, |v| v.parse().unwrap());
                        let next = (before + 1).to_string();
                        l.set_cursor("telegram", "bot", "updates", &next, 0)
                            .unwrap();
                        (before, std::thread::current().id())
                    })
                    .await
                    .unwrap()
            });
        }
        let seen = calls.join_all().await;
        let threads: HashSet<_> = seen.iter().map(|(_, thread)| *thread).collect();
        assert_eq!(threads.len(), 1, "every call on the ledger's one thread");
        let mut read: Vec<_> = seen.iter().map(|(before, _)| *before).collect();
        read.sort_unstable();
        assert_eq!(read, (0..200).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_call_that_panics_loses_its_answer_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = shared(&dir);
        ledger
            .run(|l| l.set_cursor("telegram", "bot", "updates", "7", 0))
            .await
            .unwrap()
            .unwrap();
        let failed = ledger.run(|_| -> () { panic!("a bug in a ledger call") });
        assert!(failed.await.is_err());
        let cursor = ledger
            .run(|l| l.cursor("telegram", "bot", "updates"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cursor.as_deref(), Some("7"));
    }
}
