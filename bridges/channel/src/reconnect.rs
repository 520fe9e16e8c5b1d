//! Staying connected, written once for every platform: [`Backoff`], the
//! doubling waits between failed attempts, and [`supervise`], the loop a
//! bridge lives in — connect, run the reader until it ends, say why in
//! the bridge's health, wait, connect again — until the daemon stops it.
//!
//! A platform supplies the two steps (connecting, which can fail with a
//! sentence; running, which ends with one); the loop decides when to try
//! again and what people see meanwhile. Time is tokio's, so tests pause
//! and advance it.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::health::Health;

/// Doubling waits between failed attempts, from `first` up to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next attempt; the one after is twice as long,
    /// up to the maximum.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// After a success: the next failure waits the first wait again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// How a connection attempt or a reader ended, when `stop` did not end
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Worth another try after a wait (the network, a dropped socket).
    Retry(String),
    /// Will fail however often it is tried (a token the platform refuses,
    /// intents the bot is not allowed): this bridge stops, saying why,
    /// and never loops; the daemon and the other bridges go on.
    Fatal(String),
}

impl From<String> for Ended {
    fn from(why: String) -> Self {
        Self::Retry(why)
    }
}

/// Sleeps for `wait` unless `stop` comes first; answers whether it slept.
pub async fn pause(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = stop.cancelled() => false,
    }
}

/// Keeps the bridge of `channel` connected until `stop`: `connect` is
/// tried with `backoff` between failures (each failure's sentence goes to
/// the log and to `health`); once connected, `run` drives the bridge and
/// answers how its reader ended, which — unless `stop` ended it — is a
/// bridge that died quietly and is said as such before connecting again.
/// A [`Ended::Fatal`] from either step ends the loop with its sentence in
/// `health`.
pub async fn supervise<C, E, R, Connect, Connecting, Run, Running>(
    channel: &str,
    health: &Health,
    mut backoff: Backoff,
    stop: &CancellationToken,
    mut connect: Connect,
    mut run: Run,
) where
    Connect: FnMut() -> Connecting,
    Connecting: Future<Output = Result<C, E>>,
    E: Into<Ended>,
    Run: FnMut(C) -> Running,
    Running: Future<Output = R>,
    R: Into<Ended>,
{
    loop {
        let attempt = tokio::select! {
            attempt = connect() => attempt,
            _ = stop.cancelled() => return,
        };
        let wait = match attempt {
            Ok(connected) => {
                backoff.reset();
                let ended = run(connected).await.into();
                if stop.is_cancelled() {
                    return;
                }
                let ended = match ended {
                    Ended::Retry(why) => why,
                    Ended::Fatal(why) => return give_up(channel, health, &why),
                };
                let why =
                    format!("the {channel} reader stopped unexpectedly ({ended}); reconnecting");
                tracing::error!("{channel}: {why}");
                health.disconnected(&why);
                backoff.next_wait()
            }
            Err(failed) => {
                let why = match failed.into() {
                    Ended::Retry(why) => why,
                    Ended::Fatal(why) => return give_up(channel, health, &why),
                };
                let wait = backoff.next_wait();
                tracing::warn!("{channel}: {why}; trying again in {} s", wait.as_secs());
                health.disconnected(&why);
                wait
            }
        };
        if !pause(stop, wait).await {
            return;
        }
    }
}

/// The end of a bridge that must not try again.
fn give_up(channel: &str, health: &Health, why: &str) {
    tracing::error!("{channel}: {why}; this bridge stopped (pincerd and the other bridges go on)");
    health.disconnected(why);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn waits_double_up_to_the_maximum_and_start_over_after_a_success() {
        let mut b = Backoff::new(Duration::from_secs(5), Duration::from_secs(30));
        let waits: Vec<u64> = (0..5).map(|_| b.next_wait().as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 30, 30]);
        b.reset();
        assert_eq!(b.next_wait(), Duration::from_secs(5));
    }

    /// Two failed connects, a reader that dies, one more connect, then the
    /// stop: the attempts come at the backed-off times, health says each
    /// failure, and nothing runs after the stop.
    #[tokio::test(start_paused = true)]
    async fn failures_back_off_a_dead_reader_reconnects_and_stop_ends_it() {
        let health = Health::new("test", "polling");
        let stop = CancellationToken::new();
        let start = tokio::time::Instant::now();
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let runs = Arc::new(Mutex::new(0));
        let connect = {
            let attempts = attempts.clone();
            move || {
                let attempts = attempts.clone();
                async move {
                    let mut a = attempts.lock().unwrap();
                    a.push(start.elapsed().as_secs());
                    if a.len() <= 2 {
                        Err(format!("cannot reach it (attempt {})", a.len()))
                    } else {
                        Ok(a.len())
                    }
                }
            }
        };
        let run = {
            let (runs, stop) = (runs.clone(), stop.clone());
            move |attempt: usize| {
                let (runs, stop) = (runs.clone(), stop.clone());
                async move {
                    *runs.lock().unwrap() += 1;
                    if attempt == 3 {
                        "it returned".to_string()
                    } else {
                        stop.cancel();
                        "stopped".to_string()
                    }
                }
            }
        };
        let backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
        supervise("test", &health, backoff, &stop, connect, run).await;
        // Failed at 0 and 5 (waits 5, 10); connected at 15, the reader
        // died at once (the success reset the backoff: wait 5), connected
        // at 20 and stopped there.
        assert_eq!(*attempts.lock().unwrap(), [0, 5, 15, 20]);
        assert_eq!(*runs.lock().unwrap(), 2);
        let last = health.snapshot().last_error.map(|(_, why)| why);
        assert_eq!(
            last.as_deref(),
            Some("the test reader stopped unexpectedly (it returned); reconnecting")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_during_the_wait_ends_the_loop_at_once() {
        let health = Health::new("test", "polling");
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        let connect = move || {
            stopper.cancel();
            async { Err::<(), _>("down".to_string()) }
        };
        let start = tokio::time::Instant::now();
        let backoff = Backoff::new(Duration::from_secs(60), Duration::from_secs(300));
        supervise("test", &health, backoff, &stop, connect, |()| async {
            String::new()
        })
        .await;
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    /// A fatal end (a refused token, disallowed intents) is tried once:
    /// no second connect, whatever the backoff, and health keeps why.
    #[tokio::test(start_paused = true)]
    async fn a_fatal_end_stops_the_bridge_without_a_second_attempt() {
        let health = Health::new("test", "gateway");
        let stop = CancellationToken::new();
        let attempts = Arc::new(Mutex::new(0));
        let counted = attempts.clone();
        let connect = move || {
            *counted.lock().unwrap() += 1;
            async { Ok::<(), String>(()) }
        };
        let run = |()| async { Ended::Fatal("intents not allowed: enable them".to_string()) };
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(1));
        supervise("test", &health, backoff, &stop, connect, run).await;
        assert_eq!(*attempts.lock().unwrap(), 1);
        let snap = health.snapshot();
        assert!(!snap.connected);
        assert_eq!(
            snap.last_error.map(|(_, why)| why).as_deref(),
            Some("intents not allowed: enable them")
        );
    }
}
