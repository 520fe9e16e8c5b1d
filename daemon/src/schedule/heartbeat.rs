//! The heartbeat (SPEC §13a): per agent with a `[heartbeat.<id>]`, a
//! check-in every `every` within the active hours. Each beat reads the
//! workspace's `HEARTBEAT.md`: with nothing in it but blank lines,
//! headings and comments, the beat ends there — no model call, no row.
//! Otherwise the agent gets the file in its own session
//! `agent:<agent>:heartbeat:<agent>:beats` (never `main`), is told to
//! answer the agreed token when nothing needs the owner, and a report
//! that is not that token is delivered (`deliver`); the token is
//! delivered nowhere. Beats that called the model are rows of the
//! schedules' ledger under `heartbeat:<agent>`. A beat still running when
//! the next is due lets that one go.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent::hub::Hub;
use crate::config::Config;
use crate::config::heartbeat::HeartbeatSpec;
use crate::config::schedules::Target;
use crate::lifecycle::{Part, Reloaded, StartFuture, StopFuture};

use super::clock::Clock;
use super::fire::{self, Unscheduled};
use super::store::ScheduleStore;
use super::watchers::Watchers;

/// The file a beat reads, in the agent's workspace.
pub const FILE: &str = "HEARTBEAT.md";

/// Whether `text` asks for nothing: only blank lines, Markdown headings
/// and HTML comments.
pub fn is_empty(text: &str) -> bool {
    let mut in_comment = false;
    for line in text.lines() {
        let mut rest = line.trim();
        loop {
            if in_comment {
                match rest.find("-->") {
                    Some(i) => {
                        in_comment = false;
                        rest = rest[i + 3..].trim();
                    }
                    None => {
                        rest = "";
                        break;
                    }
                }
            } else if let Some(after) = rest.strip_prefix("<!--") {
                in_comment = true;
                rest = after;
            } else {
                break;
            }
        }
        if !rest.is_empty() && !rest.starts_with('#') {
            return false;
        }
    }
    true
}

/// Whether an answer is the "nothing to report" token (alone, maybe
/// with punctuation or Markdown around it).
pub fn is_ok(answer: &str, token: &str) -> bool {
    answer
        .trim()
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
        == token
}

/// The beat's prompt around the file's text.
fn prompt(text: &str, token: &str) -> String {
    format!(
        "Heartbeat check-in. Your {FILE} says:\n\n{text}\n\nDo what it asks now. If nothing needs the owner's attention, answer exactly {token} and nothing else; otherwise answer with what the owner should know."
    )
}

/// The heartbeats of the config in force.
#[derive(Clone)]
pub struct Heartbeats {
    inner: Arc<Inner>,
}

struct Inner {
    hub: Hub,
    store: ScheduleStore,
    clock: Arc<dyn Clock>,
    watchers: Watchers,
}

impl Heartbeats {
    pub fn new(hub: Hub, store: ScheduleStore, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Arc::new(Inner {
                hub,
                store,
                clock,
                watchers: Watchers::default(),
            }),
        }
    }

    fn watch(&self, specs: &[HeartbeatSpec]) {
        let cancel = self.inner.watchers.restart();
        for spec in specs {
            let me = self.clone();
            let spec = Arc::new(spec.clone());
            let cancel = cancel.clone();
            tokio::spawn(async move { me.beats(spec, cancel).await });
        }
    }

    async fn beats(&self, spec: Arc<HeartbeatSpec>, cancel: CancellationToken) {
        let inner = &self.inner;
        let busy = Arc::new(AtomicBool::new(false));
        let mut next = spec.next_after(inner.clock.now());
        loop {
            tokio::select! {
                () = inner.clock.sleep_until(next) => {}
                () = cancel.cancelled() => return,
            }
            let now = inner.clock.now();
            if now < next {
                // Woken early (the clock was set back): wait again.
                continue;
            }
            next = spec.next_after(now);
            if !spec.active_at(now) || busy.load(Ordering::Acquire) {
                continue;
            }
            let Some(workspace) = inner
                .hub
                .config()
                .agent(&spec.agent)
                .map(|a| a.workspace.clone())
            else {
                continue;
            };
            let text = tokio::fs::read_to_string(workspace.join(FILE))
                .await
                .unwrap_or_default();
            if is_empty(&text) {
                continue;
            }
            busy.store(true, Ordering::Release);
            let (me, spec, busy) = (self.clone(), spec.clone(), busy.clone());
            inner.watchers.spawn_run(async move {
                me.beat(&spec, &text).await;
                busy.store(false, Ordering::Release);
            });
        }
    }

    async fn beat(&self, spec: &HeartbeatSpec, text: &str) {
        let inner = &self.inner;
        let ledger = format!("heartbeat:{}", spec.agent);
        let target = Target::Prompt {
            text: prompt(text, &spec.ok_token),
            session: Some("beats".into()),
        };
        let u = Unscheduled {
            ledger: &ledger,
            detail: "heartbeat",
            kind: "heartbeat",
            name: &spec.agent,
            agent: &spec.agent,
            target: &target,
            deliver: &spec.deliver,
            principal: "owner",
            chat: None,
        };
        let now = || inner.clock.now();
        let token = spec.ok_token.clone();
        fire::run_unscheduled(
            &inner.hub,
            &inner.store,
            u,
            move |answer| is_ok(answer, &token),
            &now,
        )
        .await;
    }
}

impl Part for Heartbeats {
    fn name(&self) -> &'static str {
        "heartbeat"
    }

    fn start<'a>(&'a self, config: &'a Config) -> StartFuture<'a> {
        Box::pin(async move {
            self.watch(&config.heartbeats);
            Ok(())
        })
    }

    fn reload(&self, old: &Config, new: &Config) -> Reloaded {
        if old.heartbeats == new.heartbeats {
            return Reloaded::Unchanged;
        }
        self.watch(&new.heartbeats);
        Reloaded::Applied(format!("{} agents", new.heartbeats.len()))
    }

    fn stop(&self, grace: Duration) -> StopFuture<'_> {
        Box::pin(self.inner.watchers.stop(grace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_headings_and_comments_asks_for_nothing() {
        assert!(is_empty(""));
        assert!(is_empty("  \n\n"));
        assert!(is_empty(
            "# HEARTBEAT.md\n\n<!-- Write what to check. -->\n"
        ));
        assert!(is_empty("<!--\nmany\nlines\n-->\n## Later\n"));
        assert!(!is_empty("# Checks\n- Is the build green?\n"));
        assert!(!is_empty("<!-- x --> check the mail\n"));
    }

    #[test]
    fn the_token_alone_is_nothing_to_report() {
        assert!(is_ok("HEARTBEAT_OK", "HEARTBEAT_OK"));
        assert!(is_ok(" **HEARTBEAT_OK**.\n", "HEARTBEAT_OK"));
        assert!(!is_ok("HEARTBEAT_OK but the build is red", "HEARTBEAT_OK"));
        assert!(!is_ok("The build is red.", "HEARTBEAT_OK"));
    }
}
