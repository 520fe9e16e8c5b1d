//! A value owned by one thread of its own, which runs the jobs sent to it
//! one at a time, in the order they came; async callers wait for a job's
//! answer as tasks, never on a lock.
//!
//! pincerd keeps each SQLite database this way (the session registry, the
//! workflow runs, schedules, approvals: one connection, so exactly one
//! writer) and the bridges' delivery ledger too. Why a thread and not a
//! blocking task per call: a caller waiting on a mutex inside
//! `spawn_blocking` holds a thread of tokio's blocking pool, and under
//! load the pool grows one per waiting call (measured on the Telegram
//! bridge: 493 threads while 200 chats sent at once). Here a waiting call
//! is a task on a queue and one thread works through the queue without a
//! hand-off between jobs.
//!
//! A job that panics loses its own answer (its caller gets [`Unfinished`])
//! and nothing else: the thread goes on with the jobs after it. The
//! thread ends when the last [`Worker`] handle is dropped.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use tokio::sync::oneshot;

type Job<T> = Box<dyn FnOnce(&mut T) + Send>;

/// A cloneable handle on the thread that owns a `T`; see the crate doc.
pub struct Worker<T> {
    jobs: mpsc::Sender<Job<T>>,
}

// Not derived: a derive would ask `T: Clone`, and the handle clones
// without touching the value.
impl<T> Clone for Worker<T> {
    fn clone(&self) -> Self {
        Self {
            jobs: self.jobs.clone(),
        }
    }
}

/// A job that did not return an answer: it panicked, or the owning thread
/// is gone.
#[derive(Debug, thiserror::Error)]
#[error("the call did not finish (it panicked, or the thread that runs it is gone)")]
pub struct Unfinished;

impl<T: Send + 'static> Worker<T> {
    /// Starts a thread named `name` that owns `value`. Fails only when the
    /// system will not start a thread.
    pub fn start(name: &str, mut value: T) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job<T>>();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                for job in queue {
                    // A panicking job drops its answer's sender, which is
                    // how its caller learns of it.
                    let _ = catch_unwind(AssertUnwindSafe(|| job(&mut value)));
                }
            })?;
        Ok(Self { jobs })
    }

    /// Runs `f` on the owned value after the jobs before it and answers
    /// its result. The job is sent when the future is first polled.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut T) -> R + Send + 'static,
    ) -> Result<R, Unfinished> {
        self.send(f).await
    }

    /// Sends `f` now and answers a future of its result, so the caller can
    /// do other work while the job runs (jobs still run in order).
    pub fn send<R, F>(&self, f: F) -> impl Future<Output = Result<R, Unfinished>> + use<T, R, F>
    where
        R: Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let sent = self
            .jobs
            .send(Box::new(move |value| {
                let _ = answer.send(f(value));
            }))
            .map_err(|_| Unfinished);
        async move {
            sent?;
            answered.await.map_err(|_| Unfinished)
        }
    }

    /// Queues `f` without waiting for it; it still runs in order. `Err`
    /// when the owning thread is gone.
    pub fn queue(&self, f: impl FnOnce(&mut T) + Send + 'static) -> Result<(), Unfinished> {
        self.jobs.send(Box::new(f)).map_err(|_| Unfinished)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_jobs_run_one_at_a_time_on_one_thread() {
        let worker = Worker::start("test-worker", 0u32).unwrap();
        // Each job reads the counter and moves it one further: one at a
        // time, the jobs read 0 to 199, each value once.
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..200 {
            let worker = worker.clone();
            calls.spawn(async move {
                worker
                    .run(|n| {
                        let before = *n;
                        std::thread::yield_now();
                        *n = before + 1;
                        (before, std::thread::current().id())
                    })
                    .await
                    .unwrap()
            });
        }
        let seen = calls.join_all().await;
        let threads: HashSet<_> = seen.iter().map(|(_, thread)| *thread).collect();
        assert_eq!(threads.len(), 1, "every job on the worker's one thread");
        let mut read: Vec<_> = seen.iter().map(|(before, _)| *before).collect();
        read.sort_unstable();
        assert_eq!(read, (0..200).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_job_that_panics_loses_its_answer_and_nothing_else() {
        let worker = Worker::start("test-worker", Vec::<u32>::new()).unwrap();
        worker.run(|v| v.push(7)).await.unwrap();
        let failed = worker.run(|_| -> () { panic!("a bug in a job") });
        assert!(failed.await.is_err());
        worker.queue(|v| v.push(8)).unwrap();
        assert_eq!(worker.run(|v| v.clone()).await.unwrap(), vec![7, 8]);
    }

    #[tokio::test]
    async fn jobs_run_in_the_order_they_were_sent() {
        let worker = Worker::start("test-worker", Vec::<u32>::new()).unwrap();
        // `send` hands the job over at once: the second job, sent and
        // awaited first, still runs after the first.
        let first = worker.send(|v| v.push(1));
        let second = worker.send(|v| {
            v.push(2);
            v.clone()
        });
        assert_eq!(second.await.unwrap(), vec![1, 2]);
        first.await.unwrap();
    }
}
