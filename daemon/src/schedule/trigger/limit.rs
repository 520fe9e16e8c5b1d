//! How often a trigger may fire: at least `min_interval` apart and at
//! most `per_hour` in any hour. Pure: the caller passes the instant.

use std::collections::VecDeque;

use jiff::{SignedDuration, Timestamp};

use crate::config::triggers::Limits;

const HOUR: SignedDuration = SignedDuration::from_hours(1);

/// The fires of the last hour of one trigger.
#[derive(Debug)]
pub struct Limiter {
    limits: Limits,
    fired: VecDeque<Timestamp>,
}

impl Limiter {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            fired: VecDeque::new(),
        }
    }

    /// `Ok` when a fire at `now` is allowed, else the first instant one is.
    pub fn check(&mut self, now: Timestamp) -> Result<(), Timestamp> {
        while self
            .fired
            .front()
            .is_some_and(|t| now.duration_since(*t) >= HOUR)
        {
            self.fired.pop_front();
        }
        let min = SignedDuration::try_from(self.limits.min_interval).unwrap_or(HOUR);
        let mut at = now;
        if let Some(last) = self.fired.back() {
            at = at.max(last.checked_add(min).unwrap_or(now));
        }
        if self.fired.len() >= self.limits.per_hour as usize
            && let Some(oldest) = self.fired.front()
        {
            at = at.max(oldest.checked_add(HOUR).unwrap_or(now));
        }
        if at <= now { Ok(()) } else { Err(at) }
    }

    /// A fire happened at `now`.
    pub fn record(&mut self, now: Timestamp) {
        self.fired.push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn fires_keep_the_minimum_interval_and_the_hourly_cap() {
        let mut l = Limiter::new(Limits {
            min_interval: Duration::from_secs(10),
            per_hour: 3,
        });
        let t0 = at("2026-11-27T08:00:00Z");
        assert_eq!(l.check(t0), Ok(()));
        l.record(t0);
        assert_eq!(
            l.check(at("2026-11-27T08:00:05Z")),
            Err(at("2026-11-27T08:00:10Z"))
        );
        l.record(at("2026-11-27T08:00:10Z"));
        l.record(at("2026-11-27T08:00:20Z"));
        // The fourth waits for the first to be an hour old.
        assert_eq!(
            l.check(at("2026-11-27T08:30:00Z")),
            Err(at("2026-11-27T09:00:00Z"))
        );
        assert_eq!(l.check(at("2026-11-27T09:00:00Z")), Ok(()));
    }
}
