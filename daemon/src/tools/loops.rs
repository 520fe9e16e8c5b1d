//! Loop detection (SPEC §8.4), on by default: a window of a session's last
//! calls, each `(tool, arguments hash, result hash)`, and four detectors —
//!
//! - `generic_repeat`: the same call (tool and arguments) again and again;
//!   warns only, because a repeated call may be making progress (polling a
//!   job whose output grows);
//! - `known_poll_no_progress`: the same call with the same result, in a
//!   row: warns, then blocks;
//! - `ping_pong`: two different calls alternating: warns, then blocks;
//! - the global breaker: identical no-progress outcomes filling the window:
//!   the turn ends with a summary.
//!
//! A warning is a note appended to the tool result, so the model sees it.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use crate::config::LoopSettings;

/// A stable hash for arguments and results (FNV-1a, 64 bit): the same text
/// always hashes the same, across runs.
pub fn stable_hash(text: &str) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    text.hash(&mut h);
    h.0
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Call {
    tool: u64,
    args: u64,
    result: u64,
}

/// What the detectors say about a call about to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopVerdict {
    Ok,
    /// Run it, and append this note to its result.
    Warn {
        detector: &'static str,
        note: String,
    },
    /// Do not run it; this is its result.
    Block {
        detector: &'static str,
        message: String,
    },
    /// End the turn.
    Break {
        detector: &'static str,
        message: String,
    },
}

/// One session's window.
#[derive(Debug, Default)]
pub struct LoopDetector {
    window: VecDeque<Call>,
}

impl LoopDetector {
    /// Judges a call before it runs, from the calls before it.
    pub fn check(&self, s: &LoopSettings, tool: &str, args_hash: u64) -> LoopVerdict {
        if !s.enabled {
            return LoopVerdict::Ok;
        }
        let tool_hash = stable_hash(tool);
        let same = |c: &&Call| c.tool == tool_hash && c.args == args_hash;

        // Breaker: the window holds nothing but one identical outcome.
        if let Some(last) = self.window.back()
            && last.tool == tool_hash
            && last.args == args_hash
        {
            let identical = self.window.iter().filter(|c| **c == *last).count() + 1;
            if identical >= s.breaker {
                return LoopVerdict::Break {
                    detector: "global_breaker",
                    message: format!(
                        "`{tool}` was called {identical} times with the same arguments and the same result; the turn is stopped to break the loop"
                    ),
                };
            }
        }

        // Same call, same result, in a row (this call would be one more).
        let streak = match self.window.back() {
            Some(last) if last.tool == tool_hash && last.args == args_hash => {
                1 + self
                    .window
                    .iter()
                    .rev()
                    .take_while(|c| **c == *last)
                    .count()
            }
            _ => 1,
        };
        if streak >= s.critical {
            return LoopVerdict::Block {
                detector: "known_poll_no_progress",
                message: format!(
                    "blocked: `{tool}` has returned the same result {} times in a row for the same arguments; calling it again will not change anything. Use what you have, try something different, or answer.",
                    streak - 1
                ),
            };
        }

        // Two calls alternating: …A B A B, and this call is the next A.
        let pong = self.ping_pong_length(tool_hash, args_hash);
        if pong >= s.critical {
            return LoopVerdict::Block {
                detector: "ping_pong",
                message: format!(
                    "blocked: the last {} calls alternated between two calls without progress. Stop alternating: use the results you have, or try a different approach.",
                    pong - 1
                ),
            };
        }
        if streak >= s.warning {
            return LoopVerdict::Warn {
                detector: "known_poll_no_progress",
                note: format!(
                    "[pincer loop detection] This is call {streak} of `{tool}` in a row with the same arguments and, so far, the same result. It will be blocked at {}.",
                    s.critical
                ),
            };
        }
        if pong >= s.warning {
            return LoopVerdict::Warn {
                detector: "ping_pong",
                note: format!(
                    "[pincer loop detection] The last {pong} calls alternate between two calls. That looks like a loop; it will be blocked at {}.",
                    s.critical
                ),
            };
        }
        let repeats = self.window.iter().filter(same).count() + 1;
        if repeats >= s.warning {
            return LoopVerdict::Warn {
                detector: "generic_repeat",
                note: format!(
                    "[pincer loop detection] `{tool}` has been called {repeats} times with these arguments in the last {} calls. If you are not making progress, change approach.",
                    self.window.len() + 1
                ),
            };
        }
        LoopVerdict::Ok
    }

    /// Records a call that ran (or was blocked: its message is its result).
    pub fn record(&mut self, s: &LoopSettings, tool: &str, args_hash: u64, result: &str) {
        if !s.enabled {
            return;
        }
        self.window.push_back(Call {
            tool: stable_hash(tool),
            args: args_hash,
            result: stable_hash(result),
        });
        while self.window.len() > s.window {
            self.window.pop_front();
        }
    }

    /// Records a call the detectors blocked: not a new outcome, so it
    /// repeats the last result this call had (the breaker keeps counting).
    pub fn record_blocked(&mut self, s: &LoopSettings, tool: &str, args_hash: u64) {
        if !s.enabled {
            return;
        }
        let tool_hash = stable_hash(tool);
        let result = self
            .window
            .iter()
            .rev()
            .find(|c| c.tool == tool_hash && c.args == args_hash)
            .map_or(0, |c| c.result);
        self.window.push_back(Call {
            tool: tool_hash,
            args: args_hash,
            result,
        });
        while self.window.len() > s.window {
            self.window.pop_front();
        }
    }

    /// Length of the trailing alternation A B A B … that this call (A)
    /// would extend, counting this call; 0 when there is none.
    fn ping_pong_length(&self, tool: u64, args: u64) -> usize {
        let is_a = |c: &Call| c.tool == tool && c.args == args;
        let mut iter = self.window.iter().rev();
        let Some(b) = iter.next() else { return 0 };
        if is_a(b) {
            return 0;
        }
        let is_b = |c: &Call| c.tool == b.tool && c.args == b.args;
        let mut len = 2; // b and this call
        let mut want_a = true;
        for c in iter {
            let ok = if want_a { is_a(c) } else { is_b(c) };
            if !ok {
                break;
            }
            len += 1;
            want_a = !want_a;
        }
        if len >= 4 { len } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LoopSettings {
        LoopSettings {
            enabled: true,
            window: 30,
            warning: 10,
            critical: 20,
            breaker: 30,
        }
    }

    /// Runs calls `(tool, args, result)` through a detector the way the
    /// pipeline does, returning each verdict's detector and kind.
    fn run(calls: impl Iterator<Item = (&'static str, String, String)>) -> Vec<String> {
        let s = settings();
        let mut d = LoopDetector::default();
        let mut out = Vec::new();
        for (tool, args, result) in calls {
            let h = stable_hash(&args);
            let v = d.check(&s, tool, h);
            let label = match &v {
                LoopVerdict::Ok => "ok".to_string(),
                LoopVerdict::Warn { detector, .. } => format!("warn:{detector}"),
                LoopVerdict::Block { detector, .. } => format!("block:{detector}"),
                LoopVerdict::Break { detector, .. } => format!("break:{detector}"),
            };
            match v {
                LoopVerdict::Ok | LoopVerdict::Warn { .. } => d.record(&s, tool, h, &result),
                _ => d.record_blocked(&s, tool, h),
            }
            out.push(label);
        }
        out
    }

    #[test]
    fn a_repeated_call_without_progress_warns_then_blocks_then_breaks() {
        let v = run((0..40).map(|_| ("process", "{\"id\":1}".into(), "still running".into())));
        assert_eq!(v[8], "ok");
        assert_eq!(v[9], "warn:known_poll_no_progress", "{v:?}");
        assert_eq!(v[18], "warn:known_poll_no_progress");
        assert_eq!(v[19], "block:known_poll_no_progress");
        // Blocked calls keep counting; with the window full of one
        // identical outcome, the breaker ends the turn.
        assert_eq!(v[29], "break:global_breaker", "{v:?}");
    }

    #[test]
    fn polling_with_progress_only_warns() {
        let v = run((0..40).map(|i| ("process", "{\"id\":1}".into(), format!("{i} lines"))));
        assert_eq!(v[8], "ok");
        assert_eq!(v[9], "warn:generic_repeat");
        assert!(
            v.iter()
                .all(|l| !l.starts_with("block") && !l.starts_with("break")),
            "{v:?}"
        );
    }

    #[test]
    fn ping_pong_warns_then_blocks() {
        let v = run((0..30).map(|i| {
            if i % 2 == 0 {
                ("read", "{\"path\":\"a\"}".into(), "A".into())
            } else {
                ("read", "{\"path\":\"b\"}".into(), "B".into())
            }
        }));
        assert_eq!(v[8], "ok");
        assert_eq!(v[9], "warn:ping_pong", "{v:?}");
        assert_eq!(v[19], "block:ping_pong", "{v:?}");
    }

    #[test]
    fn varied_work_never_trips_and_disabled_means_off() {
        let v = run((0..100).map(|i| {
            (
                "read",
                format!("{{\"path\":\"{}\"}}", i % 7),
                format!("r{i}"),
            )
        }));
        assert!(v.iter().all(|l| l == "ok"), "{v:?}");
        let mut s = settings();
        s.enabled = false;
        let mut d = LoopDetector::default();
        for _ in 0..50 {
            assert_eq!(d.check(&s, "x", 1), LoopVerdict::Ok);
            d.record(&s, "x", 1, "same");
        }
    }
}
