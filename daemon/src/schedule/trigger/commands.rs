//! The triggers that run commands of their own (through [`process`]):
//!
//! - `exits`: the command runs; when it exits, that fires (its status and
//!   last lines the event) and it runs again, no sooner than the
//!   trigger's minimum interval.
//! - `lines`: a long-running command (`tail -F log`, `journalctl -f`);
//!   each output line matching `pattern` is kept, and the kept lines fire
//!   together once no match has come for [`BATCH_QUIET`] — or once the
//!   limits allow, a flood being held meanwhile (up to [`MAX_LINES`],
//!   counting the rest). A command that ends is started again after a
//!   growing pause.
//! - `condition`: a script runs every `every`; exit status 0 fires, with
//!   its output as the event. Nothing runs between two intervals.
//!
//! An event over the limits is held (`lines`) or let go (`exits`,
//! `condition`); the first of a streak let go is recorded as skipped, so
//! none is lost silently and a condition that stays true does not fill
//! the ledger.

use std::collections::VecDeque;
use std::time::Duration;

use jiff::SignedDuration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::Watch;
use super::event::Event;
use super::limit::Limiter;
use super::process::{self, ProcessError};

/// How long after the last matching line a batch fires.
pub const BATCH_QUIET: Duration = Duration::from_secs(1);
/// The most lines one event keeps.
pub const MAX_LINES: usize = 100;
/// How long a condition script may run.
const CONDITION_LIMIT: Duration = Duration::from_secs(60);
/// The last lines of an `exits` command kept for its event.
const TAIL_LINES: usize = 20;
/// A supervised command that ran this long restarts at once after it
/// ends; a shorter life doubles the pause (up to [`MAX_PAUSE`]).
const HEALTHY: Duration = Duration::from_secs(60);
const MAX_PAUSE: Duration = Duration::from_secs(60);

fn start(w: &Watch, command: &str) -> Result<tokio::process::Command, ProcessError> {
    process::shell(w.runtime(), &w.spec.agent, &w.spec.name, command)
}

/// Lets an event fire when the limits allow; records the first one of a
/// streak it lets go (not each: a condition that stays true would fill
/// the ledger).
struct Gate {
    limiter: Limiter,
    dropping: bool,
}

impl Gate {
    async fn pass(&mut self, w: &Watch, event: Event) {
        let now = w.now();
        match self.limiter.check(now) {
            Ok(()) => {
                self.limiter.record(now);
                self.dropping = false;
                w.fire(event);
            }
            Err(_) if self.dropping => {}
            Err(_) => {
                self.dropping = true;
                w.dropped(
                    &event,
                    "over the trigger's limits (the next ones are not recorded until one fires)",
                )
                .await;
            }
        }
    }
}

/// The pause before a supervised command starts again.
fn next_pause(pause: Duration, ran: Duration) -> Duration {
    if ran >= HEALTHY {
        Duration::from_secs(1)
    } else {
        (pause * 2).clamp(Duration::from_secs(1), MAX_PAUSE)
    }
}

pub async fn exits(w: Watch, command: &str, limiter: Limiter) {
    let mut gate = Gate {
        limiter,
        dropping: false,
    };
    let mut pause = Duration::from_secs(1);
    loop {
        let began = tokio::time::Instant::now();
        let (status, tail) = match run_to_end(&w, command).await {
            Some(Ok(done)) => done,
            Some(Err(why)) => {
                tracing::warn!(trigger = %w.spec.name, error = %why, "the watched command did not start");
                pause = next_pause(pause, Duration::ZERO);
                if !w.sleep(pause).await {
                    return;
                }
                continue;
            }
            None => return,
        };
        let event = Event {
            kind: "exits",
            summary: format!("`{}` {status}", crate::util::preview(command, 60)),
            data: tail,
        };
        gate.pass(&w, event).await;
        // Runs again no sooner than the minimum interval.
        pause = next_pause(pause, began.elapsed());
        let wait = pause.max(w.spec.limits.min_interval);
        let at = w
            .now()
            .checked_add(SignedDuration::try_from(wait).unwrap_or(SignedDuration::ZERO))
            .unwrap_or_else(|_| w.now());
        if !w.sleep_until(at).await {
            return;
        }
    }
}

/// Runs `command` to its end: how it ended and its last lines; `None`
/// when the trigger stopped meanwhile (the command is killed).
async fn run_to_end(w: &Watch, command: &str) -> Option<Result<(String, String), String>> {
    let cmd = match start(w, command) {
        Ok(c) => c,
        Err(e) => return Some(Err(e.to_string())),
    };
    let mut child = match process::spawn(cmd).await {
        Ok(c) => c,
        Err(e) => return Some(Err(e.to_string())),
    };
    let Some(out) = child.stdout.take() else {
        return Some(Err("no output to read".into()));
    };
    let mut lines = BufReader::new(out).lines();
    let mut tail: VecDeque<String> = VecDeque::new();
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(l)) => {
                    tail.push_back(l);
                    if tail.len() > TAIL_LINES {
                        tail.pop_front();
                    }
                }
                _ => break,
            },
            () = w.cancel.cancelled() => return None,
        }
    }
    let status = tokio::select! {
        s = child.wait() => s,
        () = w.cancel.cancelled() => return None,
    };
    let status = match status {
        Ok(s) => match s.code() {
            Some(0) => "exited with status 0".to_string(),
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        },
        Err(e) => format!("ended ({e})"),
    };
    Some(Ok((status, Vec::from(tail).join("\n"))))
}

pub async fn lines(w: Watch, command: &str, pattern: &regex::Regex, mut limiter: Limiter) {
    let mut pause = Duration::from_secs(1);
    let mut held: Vec<String> = Vec::new();
    let mut over = 0usize;
    loop {
        let began = tokio::time::Instant::now();
        let child = match start(&w, command) {
            Ok(cmd) => process::spawn(cmd).await,
            Err(e) => Err(e),
        };
        let mut child = match child {
            Ok(c) => c,
            Err(why) => {
                tracing::warn!(trigger = %w.spec.name, error = %why, "the watched command did not start");
                pause = next_pause(pause, Duration::ZERO);
                if !w.sleep(pause).await {
                    return;
                }
                continue;
            }
        };
        let Some(out) = child.stdout.take() else {
            return;
        };
        let mut out = BufReader::new(out).lines();
        // When the held lines may fire: quiet after the last match, and
        // the limits allow.
        let mut due: Option<tokio::time::Instant> = None;
        loop {
            let wait = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                line = out.next_line() => match line {
                    Ok(Some(l)) if pattern.is_match(&l) => {
                        if held.len() < MAX_LINES {
                            held.push(l);
                        } else {
                            over += 1;
                        }
                        due = Some(tokio::time::Instant::now() + BATCH_QUIET);
                    }
                    Ok(Some(_)) => {}
                    _ => break,
                },
                () = wait => {
                    let now = w.now();
                    match limiter.check(now) {
                        Ok(()) => {
                            limiter.record(now);
                            w.fire(batch(command, &mut held, &mut over));
                            due = None;
                        }
                        Err(at) => {
                            let left = at.duration_since(now);
                            due = Some(tokio::time::Instant::now()
                                + Duration::try_from(left).unwrap_or(BATCH_QUIET));
                        }
                    }
                }
                () = w.cancel.cancelled() => return,
            }
        }
        let _ = child.wait().await;
        tracing::warn!(trigger = %w.spec.name, "the watched command ended; it starts again");
        pause = next_pause(pause, began.elapsed());
        if !w.sleep(pause).await {
            return;
        }
    }
}

/// The held lines as one event (emptied).
fn batch(command: &str, held: &mut Vec<String>, over: &mut usize) -> Event {
    let mut data = std::mem::take(held).join("\n");
    let n = data.lines().count();
    if *over > 0 {
        data.push_str(&format!("\n(and {over} more matching lines, not kept)"));
    }
    let summary = format!(
        "{} matching line{} of `{}`",
        n + *over,
        if n + *over == 1 { "" } else { "s" },
        crate::util::preview(command, 60)
    );
    *over = 0;
    Event {
        kind: "lines",
        summary,
        data,
    }
}

pub async fn condition(w: Watch, script: &str, every: Duration, limiter: Limiter) {
    let mut gate = Gate {
        limiter,
        dropping: false,
    };
    let step = SignedDuration::try_from(every).unwrap_or(SignedDuration::from_secs(60));
    let mut next = w.now().checked_add(step).unwrap_or_else(|_| w.now());
    loop {
        if !w.sleep_until(next).await {
            return;
        }
        next = w.now().checked_add(step).unwrap_or_else(|_| w.now());
        let cmd = match start(&w, script) {
            Ok(c) => c,
            Err(why) => {
                tracing::warn!(trigger = %w.spec.name, error = %why, "the condition script cannot run");
                continue;
            }
        };
        let mut child = match process::spawn(cmd).await {
            Ok(c) => c,
            Err(why) => {
                tracing::warn!(trigger = %w.spec.name, error = %why, "the condition script cannot run");
                continue;
            }
        };
        let mut out = String::new();
        let ran = async {
            if let Some(mut o) = child.stdout.take() {
                let mut buf = Vec::new();
                let _ = (&mut o).take(64 * 1024).read_to_end(&mut buf).await;
                out = String::from_utf8_lossy(&buf).into_owned();
            }
            child.wait().await
        };
        let status = tokio::select! {
            s = tokio::time::timeout(CONDITION_LIMIT, ran) => s,
            () = w.cancel.cancelled() => return,
        };
        let yes = matches!(status, Ok(Ok(s)) if s.success());
        if !yes {
            continue;
        }
        let event = Event {
            kind: "condition",
            summary: format!("`{}` answered yes", crate::util::preview(script, 60)),
            data: out.trim().to_string(),
        };
        gate.pass(&w, event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_keeps_dying_waits_longer_each_time() {
        let p = next_pause(Duration::from_secs(1), Duration::ZERO);
        assert_eq!(p, Duration::from_secs(2));
        assert_eq!(
            next_pause(Duration::from_secs(40), Duration::ZERO),
            MAX_PAUSE
        );
        assert_eq!(next_pause(MAX_PAUSE, HEALTHY), Duration::from_secs(1));
    }

    #[test]
    fn a_flood_is_one_event_that_counts_what_it_left_out() {
        let mut held = vec!["ERROR a".to_string(), "ERROR b".to_string()];
        let mut over = 5;
        let e = batch("tail -F log", &mut held, &mut over);
        assert_eq!(e.summary, "7 matching lines of `tail -F log`");
        assert!(e.data.ends_with("(and 5 more matching lines, not kept)"));
        assert!(held.is_empty());
        assert_eq!(over, 0);
    }
}
