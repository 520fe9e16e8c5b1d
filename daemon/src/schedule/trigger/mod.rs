//! Event triggers (SPEC §13a): `[triggers.<name>]` fire the same targets
//! as schedules when something happens — files land under a workspace
//! glob ([`files`]), a supervised command exits or prints matching lines,
//! a condition script answers yes ([`commands`]). A trigger sleeps until
//! its source says something (no polling: an idle trigger costs no
//! wake-ups, a condition wakes only at its interval) — the `files` ones
//! together in one task, the others each in a task of its own;
//! [`limit`] keeps its fires apart and under the hourly cap; [`event`]
//! frames what it saw as data for the model.
//!
//! A fire is a row of the schedules' ledger under the trigger's name,
//! run by `fire::perform` as the owner (who declared it in config.toml)
//! — or, for a `files` trigger watching a chat's folder
//! (`inbox/telegram-dm-42/**`), as that chat, whose files it sees — in
//! the session `agent:<agent>:trigger:<name>[:fire-N]`, its answer
//! delivered like a schedule's.

pub mod commands;
pub mod event;
pub mod files;
pub mod limit;
pub mod process;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::agent::hub::Hub;
use crate::config::Config;
use crate::config::schedules::Target;
use crate::config::triggers::{Source, TriggerSpec};
use crate::lifecycle::{Part, Reloaded, StartFuture, StopFuture};
use crate::session::Principal;
use crate::tools::origin::{Chat, Inbound, Sender};

use super::clock::Clock;
use super::fire::{self, Unscheduled};
use super::store::{FireState, ScheduleStore};
use super::watchers::Watchers;
use event::Event;
use limit::Limiter;

/// The triggers of the config in force, each watching in a task.
#[derive(Clone)]
pub struct Triggers {
    inner: Arc<Inner>,
}

struct Inner {
    hub: Hub,
    store: ScheduleStore,
    clock: Arc<dyn Clock>,
    watchers: Watchers,
}

/// What a source loop needs: its trigger, a clock and a way to fire.
#[derive(Clone)]
pub struct Watch {
    triggers: Triggers,
    pub spec: Arc<TriggerSpec>,
    pub cancel: CancellationToken,
}

impl Watch {
    pub fn now(&self) -> Timestamp {
        self.triggers.inner.clock.now()
    }

    /// Sleeps on the scheduler's clock until `at`; `false` when the
    /// trigger is stopped meanwhile.
    pub async fn sleep_until(&self, at: Timestamp) -> bool {
        tokio::select! {
            () = self.triggers.inner.clock.sleep_until(at) => true,
            () = self.cancel.cancelled() => false,
        }
    }

    /// Sleeps `d` (monotonic: short waits); `false` when stopped.
    pub async fn sleep(&self, d: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(d) => true,
            () = self.cancel.cancelled() => false,
        }
    }

    /// The runtime a trigger's command runs in (its sandbox).
    pub fn runtime(&self) -> &crate::agent::Runtime {
        self.triggers.inner.hub.runtime()
    }

    /// The config in force now.
    pub fn config(&self) -> std::sync::Arc<crate::config::Config> {
        self.triggers.inner.hub.config()
    }

    /// Fires with `event` in the background.
    pub fn fire(&self, event: Event) {
        let me = self.clone();
        self.triggers
            .inner
            .watchers
            .spawn_run(async move { me.run(event).await });
    }

    /// Records that `event` was let go (over the trigger's limits).
    pub async fn dropped(&self, event: &Event, why: &str) {
        let store = &self.triggers.inner.store;
        let now = self.now();
        let r = match store
            .claim_now(
                &self.spec.name,
                now,
                &format!("{}: {}", event.kind, event.summary),
            )
            .await
        {
            Ok(id) => {
                store
                    .ended(id, FireState::Skipped, why.to_string(), now)
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            tracing::error!(trigger = %self.spec.name, error = %e, "cannot record a dropped event");
        }
    }

    async fn run(&self, event: Event) {
        let inner = &self.triggers.inner;
        let spec = &self.spec;
        // The event goes to the model framed as data; a workflow or a
        // command runs as written.
        let target = match &spec.target {
            Target::Prompt { text, session } => Target::Prompt {
                text: event.framed(text),
                session: session.clone(),
            },
            other => other.clone(),
        };
        let detail = format!("{}: {}", event.kind, event.summary);
        let chat = chat_watched(spec);
        let principal = chat
            .as_ref()
            .map_or_else(|| "owner".to_string(), |c| c.principal.to_string());
        let u = Unscheduled {
            ledger: &spec.name,
            detail: &detail,
            kind: "trigger",
            name: &spec.name,
            agent: &spec.agent,
            target: &target,
            deliver: &spec.deliver,
            principal: &principal,
            chat: chat.as_ref().map(|c| &c.inbound),
        };
        let now = || inner.clock.now();
        fire::run_unscheduled(&inner.hub, &inner.store, u, |_| false, &now).await;
    }
}

/// The chat a trigger runs as, when it watches that chat's folder.
struct Watched {
    principal: Principal,
    /// A message of that chat, for routing: its policy and principal
    /// under the config in force.
    inbound: Inbound,
}

/// The chat whose folder a `files` trigger watches (its glob starts in
/// `inbox/<channel>-dm-<user>` or `inbox/<channel>-group-<chat>`): what
/// lands there came from that chat, so the run is that chat's, under the
/// data boundary, not the owner's. `None` for every other trigger.
fn chat_watched(spec: &TriggerSpec) -> Option<Watched> {
    let Source::Files { glob } = &spec.source else {
        return None;
    };
    let principal = Principal::of_folder(&files::base_of(glob))?;
    let (channel, chat) = match &principal {
        Principal::Person { channel, .. } => (channel.clone(), Chat::Direct),
        Principal::Group { channel, chat } => (channel.clone(), Chat::Group(chat.clone())),
        Principal::Owner => return None,
    };
    // In a DM the sender is the person; in a group no member wrote, so
    // no member's own tools apply.
    let sender = match &principal {
        Principal::Person { user, .. } => user.clone(),
        _ => format!("trigger:{}", spec.name),
    };
    Some(Watched {
        inbound: Inbound {
            channel,
            account: None,
            chat,
            thread: None,
            guild: None,
            roles: Vec::new(),
            sender: Sender {
                name: sender.clone(),
                id: sender,
            },
        },
        principal,
    })
}

impl Triggers {
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

    /// Stops the triggers in force and starts `specs`: the `files` ones
    /// in one task, each other one in a task of its own.
    fn watch(&self, specs: &[Arc<TriggerSpec>]) {
        let cancel = self.inner.watchers.restart();
        let mut files = Vec::new();
        for spec in specs {
            let w = Watch {
                triggers: self.clone(),
                spec: spec.clone(),
                cancel: cancel.clone(),
            };
            let limiter = Limiter::new(spec.limits);
            // One spawn per kind: a task is as large as its future, and
            // a single `match` inside one would make every task as large
            // as the largest.
            match spec.source.clone() {
                Source::Files { glob } => files.push((w, glob, limiter)),
                Source::Exits { command } => {
                    tokio::spawn(async move { commands::exits(w, &command, limiter).await });
                }
                Source::Lines { command, pattern } => {
                    tokio::spawn(
                        async move { commands::lines(w, &command, &pattern, limiter).await },
                    );
                }
                Source::Condition { script, every } => {
                    tokio::spawn(
                        async move { commands::condition(w, &script, every, limiter).await },
                    );
                }
            }
        }
        if !files.is_empty() {
            tokio::spawn(files::watch_all(files));
        }
    }
}

impl Part for Triggers {
    fn name(&self) -> &'static str {
        "triggers"
    }

    fn start<'a>(&'a self, config: &'a Config) -> StartFuture<'a> {
        Box::pin(async move {
            self.watch(&config.triggers);
            Ok(())
        })
    }

    fn reload(&self, old: &Config, new: &Config) -> Reloaded {
        if old.triggers == new.triggers {
            return Reloaded::Unchanged;
        }
        self.watch(&new.triggers);
        Reloaded::Applied(format!("{} watching", new.triggers.len()))
    }

    fn stop(&self, grace: Duration) -> StopFuture<'_> {
        Box::pin(self.inner.watchers.stop(grace))
    }
}
