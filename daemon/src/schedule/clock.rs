//! The wall clock the scheduler reads and waits on. Schedules are about
//! wall time (08:00 in Paris), and a laptop sleeps: a monotonic timer
//! stops while it sleeps, so a wait of "eight hours" set at midnight ends
//! hours late. The system clock therefore waits on an absolute
//! `CLOCK_REALTIME` timerfd (Linux) that also wakes when the clock is set
//! (`TFD_TIMER_CANCEL_ON_SET`); elsewhere it sleeps at most a minute and
//! looks again. Either way an idle scheduler wakes only at its deadlines.
//!
//! The tests' clock (feature `test-clock`, `PINCER_TEST_CLOCK=<file>`) is
//! a file holding an RFC 3339 instant that the tests rewrite: time stands
//! still until they move it, and never comes from the machine.

use std::time::Duration;

use futures_util::future::BoxFuture;
use jiff::Timestamp;

/// A source of wall time that can be waited on.
pub trait Clock: Send + Sync {
    /// The time now.
    fn now(&self) -> Timestamp;
    /// Returns at `at` or earlier (a clock change, a cap); the caller
    /// reads [`Clock::now`] again.
    fn sleep_until(&self, at: Timestamp) -> BoxFuture<'_, ()>;
}

/// The machine's clock.
pub struct SystemClock;

/// How long the portable wait sleeps before it looks at the clock again.
const LOOK_AGAIN: Duration = Duration::from_secs(60);

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn sleep_until(&self, at: Timestamp) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            #[cfg(target_os = "linux")]
            match realtime::wait(at).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::debug!(error = %e, "no realtime timer; sleeping instead");
                }
            }
            let left = at.duration_since(Timestamp::now());
            let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
            tokio::time::sleep(left.min(LOOK_AGAIN)).await;
        })
    }
}

#[cfg(target_os = "linux")]
mod realtime {
    use jiff::Timestamp;
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
        timerfd_settime,
    };
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// Waits on an absolute realtime timer until `at`, or until the clock
    /// is set (the read then fails with `ECANCELED`: the caller looks at
    /// the time again either way).
    pub(super) async fn wait(at: Timestamp) -> std::io::Result<()> {
        let fd = timerfd_create(
            TimerfdClockId::Realtime,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // A deadline in the past fires at once; 0 would disarm the timer.
        let value = Timespec {
            tv_sec: at.as_second().max(1),
            tv_nsec: i64::from(at.subsec_nanosecond().max(0)),
        };
        timerfd_settime(
            &fd,
            TimerfdTimerFlags::ABSTIME | TimerfdTimerFlags::CANCEL_ON_SET,
            &Itimerspec {
                it_interval: zero,
                it_value: value,
            },
        )?;
        // SAFETY: the `OwnedFd` is moved in: it stays open, and the same
        // descriptor, for as long as the `AsyncFd` that owns it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
        loop {
            let mut ready = fd.readable().await?;
            let mut buf = [0u8; 8];
            match rustix::io::read(fd.get_ref(), &mut buf) {
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::CANCELED) => return Ok(()),
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The tests' clock: the instant written in a file.
#[cfg(feature = "test-clock")]
pub struct FileClock {
    path: std::path::PathBuf,
    last: std::sync::Mutex<Timestamp>,
}

#[cfg(feature = "test-clock")]
impl FileClock {
    /// The clock `PINCER_TEST_CLOCK` names, if it names one.
    pub fn from_env() -> Option<Self> {
        let path = std::env::var_os("PINCER_TEST_CLOCK")?;
        Some(Self {
            path: path.into(),
            last: std::sync::Mutex::new(Timestamp::UNIX_EPOCH),
        })
    }

    fn read(&self) -> Option<Timestamp> {
        std::fs::read_to_string(&self.path)
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

#[cfg(feature = "test-clock")]
impl Clock for FileClock {
    fn now(&self) -> Timestamp {
        // A file being rewritten reads empty for an instant: the last
        // time read is taken again then.
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = self.read() {
            *last = t;
        }
        *last
    }

    fn sleep_until(&self, at: Timestamp) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let start = self.read();
            // Test-only: the file is looked at every 20 ms.
            loop {
                let now = self.read();
                if now.is_some_and(|n| n >= at) || now != start {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    }
}

/// The clock the daemon runs on: the tests' when they set one.
pub fn clock() -> std::sync::Arc<dyn Clock> {
    #[cfg(feature = "test-clock")]
    if let Some(c) = FileClock::from_env() {
        tracing::warn!("the scheduler runs on the test clock in PINCER_TEST_CLOCK");
        return std::sync::Arc::new(c);
    }
    std::sync::Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_system_clock_wakes_at_a_deadline_in_the_past_at_once() {
        let c = SystemClock;
        let start = std::time::Instant::now();
        c.sleep_until(Timestamp::now() - jiff::SignedDuration::from_secs(5))
            .await;
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn the_system_clock_wakes_at_a_near_deadline() {
        let c = SystemClock;
        let at = Timestamp::now() + jiff::SignedDuration::from_millis(150);
        c.sleep_until(at).await;
        assert!(Timestamp::now() >= at, "woke before the deadline");
    }
}
