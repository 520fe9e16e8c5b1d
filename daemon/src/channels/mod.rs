//! The chat bridges inside pincerd (SPEC §11). The platform-free logic is
//! the `pincer-channel` crate (access, ledger, chunking, the bridge); each
//! platform is a crate of its own (`pincer-telegram`, `pincer-discord`). This module attaches
//! them to the daemon:
//!
//! - [`Channels`], the cloneable handle the gRPC `Channels` service and
//!   the lifecycle part share: the running bridges, the shared delivery
//!   ledger (`state/channels.db`) and pairing state (`state/pairing.json`),
//!   status, pairing verbs, approvals forwarded to the owners' DMs;
//! - [`host`], the [`pincer_channel::Host`] seam over the hub;
//! - [`commands`], the chat commands: who may reset, stop, see the status;
//! - [`outbox`], the bridges as the `message` tool sends through them;
//! - [`part`], the lifecycle part: start, reload, stop;
//! - [`settings`], the channel config as the bridge's settings;
//! - `telegram`, the Telegram attachment (cargo feature `telegram`);
//! - `discord`, the Discord attachment (cargo feature `discord`).

pub mod commands;
#[cfg(feature = "discord")]
mod discord;
pub mod host;
pub mod outbox;
pub mod part;
pub mod settings;
#[cfg(feature = "telegram")]
mod telegram;

/// Random bytes from the OS (pairing codes), through uuid's v4 source.
#[cfg_attr(not(any(feature = "telegram", feature = "discord")), allow(dead_code))]
fn os_random(buf: &mut [u8]) {
    for chunk in buf.chunks_mut(16) {
        let id = uuid::Uuid::new_v4();
        chunk.copy_from_slice(&id.as_bytes()[..chunk.len()]);
    }
}

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use pincer_channel::unix_now as now;

use pincer_channel::{
    Answerer, ApprovalEnd, ApprovalOutcome, ApprovalRequest, Bridge, ChatPerson, HaltKind,
    HaltRequest, Health, HealthSnapshot, KnownSender, Ledger, Pairings, PairingsError,
    RETENTION_SECS, Requester, SharedLedger,
};
use tokio_util::sync::CancellationToken;

use crate::agent::hub::Hub;
use crate::home::Home;
use crate::tools::approvals::{
    ApprovalEnded, ApprovalEvent, DecidedBy, Ending, HaltAsk, PendingApproval, Subject,
};

/// Why the bridges' state could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ChannelsError {
    #[error("cannot open the delivery ledger {path}: {source}")]
    Ledger {
        path: std::path::PathBuf,
        source: pincer_channel::LedgerError,
    },
    #[error("cannot start the delivery ledger's thread: {0}")]
    LedgerThread(std::io::Error),
    #[error(transparent)]
    Pairings(#[from] PairingsError),
}

/// Why a pairing verb failed; mapped to a gRPC status in the server.
#[derive(Debug, thiserror::Error)]
pub enum PairingVerbError {
    #[error("no channel `{0}` is configured (channels: {1})")]
    UnknownChannel(String, String),
    #[error(
        "sender {1} may write to the bot through allow_from in [channels.{0}] of config.toml, not through pairing: remove them there (then `pincer config reload`)"
    )]
    AllowedInConfig(String, String),
    #[error(transparent)]
    Pairings(#[from] PairingsError),
}

/// One configured bridge as `pincer channels status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelStatus {
    pub channel: String,
    pub account: String,
    pub enabled: bool,
    pub bot: String,
    pub health: HealthSnapshot,
    pub pending_pairings: usize,
}

/// A bridge the part started: its health exists from the first attempt
/// to connect; the bridge once connected.
pub(crate) struct Running {
    pub(crate) health: Arc<Health>,
    pub(crate) bridge: Arc<RwLock<Option<Arc<Bridge>>>>,
    pub(crate) stop: CancellationToken,
    pub(crate) task: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub(crate) fn bridge(&self) -> Option<Arc<Bridge>> {
        self.bridge
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

struct Inner {
    hub: Hub,
    // Read by the platform attachments (features).
    #[cfg_attr(not(any(feature = "telegram", feature = "discord")), allow(dead_code))]
    ledger: SharedLedger,
    pairings: Arc<Pairings>,
    running: Mutex<BTreeMap<String, Running>>,
}

/// The bridges of this daemon; cheap to clone.
#[derive(Clone)]
pub struct Channels {
    inner: Arc<Inner>,
}

impl Channels {
    /// Opens the shared ledger and pairing state under `state/`.
    pub fn open(home: &Home, hub: Hub) -> Result<Self, ChannelsError> {
        let path = home.state_dir().join("channels.db");
        let ledger = Ledger::open(&path).map_err(|source| ChannelsError::Ledger {
            path: path.clone(),
            source,
        })?;
        let pairings = Pairings::open(&home.state_dir().join("pairing.json"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                hub,
                ledger: ledger.share().map_err(ChannelsError::LedgerThread)?,
                pairings: Arc::new(pairings),
                running: Mutex::default(),
            }),
        })
    }

    pub(crate) fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    #[cfg_attr(not(any(feature = "telegram", feature = "discord")), allow(dead_code))]
    pub(crate) fn ledger(&self) -> &SharedLedger {
        &self.inner.ledger
    }

    pub(crate) fn pairings(&self) -> &Arc<Pairings> {
        &self.inner.pairings
    }

    pub(crate) fn running(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.inner.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bridge of `channel`, when it is connected.
    pub fn bridge(&self, channel: &str) -> Option<Arc<Bridge>> {
        self.running().get(channel).and_then(Running::bridge)
    }

    /// Every configured bridge (running or not), by channel name.
    pub fn status(&self) -> Vec<ChannelStatus> {
        let config = self.hub().config();
        let now = now();
        let running = self.running();
        config
            .channels
            .iter()
            .map(|(name, settings)| {
                let run = running.get(name);
                let bridge = run.and_then(Running::bridge);
                ChannelStatus {
                    channel: name.clone(),
                    account: bridge
                        .as_ref()
                        .map(|b| b.account().to_string())
                        .unwrap_or_else(|| "default".into()),
                    enabled: settings.enabled,
                    bot: bridge
                        .as_ref()
                        .map(|b| b.platform().bot_username().to_string())
                        .unwrap_or_default(),
                    health: run.map(|r| r.health.snapshot()).unwrap_or_default(),
                    pending_pairings: self.pairings().pending_count(name, now),
                }
            })
            .collect()
    }

    /// The running bridges' health as `pincer doctor` findings: a bridge
    /// that is not connected says why in one sentence.
    pub fn findings(&self) -> Vec<crate::doctor::Finding> {
        use crate::doctor::{Finding, Level};
        self.status()
            .into_iter()
            .filter(|s| s.enabled)
            .map(|s| {
                let subject = format!("bridge {}", s.channel);
                let error = s.health.last_error.map(|(_, why)| why);
                let (level, message) = if s.health.connected {
                    let mut m = format!(
                        "connected as @{} ({}); {} messages in, {} out",
                        s.bot, s.health.mode, s.health.messages_in, s.health.messages_out
                    );
                    if s.health.watchdog_restarts > 0 {
                        m.push_str(&format!(
                            "; the poll watchdog restarted {} stalled polls",
                            s.health.watchdog_restarts
                        ));
                    }
                    (Level::Ok, m)
                } else {
                    (
                        Level::Error,
                        format!(
                            "not connected: {}",
                            error.unwrap_or_else(|| "still connecting".into())
                        ),
                    )
                };
                Finding {
                    level,
                    subject,
                    message,
                }
            })
            .collect()
    }

    /// Pending pairing codes (of one channel, or all with `""`).
    pub fn pairings_list(&self, channel: &str) -> Vec<pincer_channel::access::PendingView> {
        self.pairings()
            .list(now())
            .into_iter()
            .filter(|p| channel.is_empty() || p.channel == channel)
            .collect()
    }

    /// `channel` (any case, blanks trimmed) when it is configured.
    fn configured(&self, channel: &str) -> Result<String, PairingVerbError> {
        let channel = channel.trim().to_lowercase();
        let config = self.hub().config();
        if config.channels.contains_key(&channel) {
            return Ok(channel);
        }
        Err(PairingVerbError::UnknownChannel(
            channel,
            config
                .channels
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        ))
    }

    /// The senders the owner approved or denied (of one configured
    /// channel, or all with `""`), with when.
    pub fn paired(&self, channel: &str) -> Result<Vec<KnownSender>, PairingVerbError> {
        let channel = match channel.trim() {
            "" => String::new(),
            named => self.configured(named)?,
        };
        Ok(self
            .pairings()
            .known()
            .into_iter()
            .filter(|k| channel.is_empty() || k.channel == channel)
            .collect())
    }

    /// Revokes the approval or denial of `sender_id` on `channel`: their
    /// next message is a stranger's again (a new code). They are not
    /// told.
    pub fn revoke_pairing(
        &self,
        channel: &str,
        sender_id: &str,
    ) -> Result<KnownSender, PairingVerbError> {
        let channel = self.configured(channel)?;
        let sender_id = sender_id.trim();
        let revoked = match self.pairings().revoke(&channel, sender_id) {
            Err(PairingsError::Pairing(pincer_channel::PairingError::UnknownSender { .. }))
                if self
                    .hub()
                    .config()
                    .channels
                    .get(&channel)
                    .is_some_and(|c| c.allow_from.iter().any(|id| id == sender_id)) =>
            {
                return Err(PairingVerbError::AllowedInConfig(
                    channel,
                    sender_id.to_string(),
                ));
            }
            other => other?,
        };
        tracing::info!(
            channel = %revoked.channel,
            sender = %revoked.sender_id,
            was_approved = revoked.approved,
            "pairing revoked"
        );
        Ok(revoked)
    }

    /// Approves or denies a code; an approved sender is told they can
    /// talk now. Answers (sender id, sender name).
    pub async fn decide_pairing(
        &self,
        channel: &str,
        code: &str,
        approve: bool,
    ) -> Result<(String, String), PairingVerbError> {
        let channel = self.configured(channel)?;
        if !approve {
            let denied = self.pairings().deny(&channel, code, now())?;
            tracing::info!(channel = %denied.channel, sender = %denied.sender_id, "pairing denied");
            return Ok((denied.sender_id, denied.sender_name));
        }
        let approved = self.pairings().approve(&channel, code, now())?;
        tracing::info!(channel = %approved.channel, sender = %approved.sender_id, "pairing approved");
        if let Some(bridge) = self.bridge(&channel)
            && let Err(e) = bridge
                .send_to_user(
                    &approved.sender_id,
                    "You're approved: you can talk to the assistant now.",
                )
                .await
        {
            tracing::warn!("could not tell an approved sender: {e}");
        }
        Ok((approved.sender_id, approved.sender_name))
    }

    /// Keeps the delivery ledger from growing without end: settled
    /// messages (answered, or needing no answer) received more than
    /// [`RETENTION_SECS`] ago leave it, with their chunks, once at start and
    /// then every hour, until `stop`. Unanswered ones stay for the replay.
    /// Far longer than any platform redelivers, so a late duplicate is
    /// still recognised.
    pub(crate) fn prune_ledger(&self, stop: CancellationToken) {
        let ledger = self.ledger().clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60 * 60));
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    _ = stop.cancelled() => return,
                }
                let before = now() as i64 - RETENTION_SECS;
                match ledger.run(move |l| l.prune(before)).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!(
                        "delivery ledger: {n} settled messages older than a week let go"
                    ),
                    Ok(Err(e)) => tracing::warn!("delivery ledger: could not prune it: {e}"),
                    Err(e) => tracing::warn!("delivery ledger: {e}"),
                }
            }
        });
    }

    /// Forwards every new approval request to the owners' DMs, and every
    /// end of one to the bridges (which edit the message that asked),
    /// until `stop`. One task, in the store's order: a request's message
    /// is sent before its end is handled.
    pub(crate) fn forward_approvals(&self, stop: CancellationToken) {
        let mut events = self.hub().approvals().subscribe();
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    r = events.recv() => r,
                    _ = stop.cancelled() => return,
                };
                let event = match event {
                    Ok(e) => e,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(
                            "{n} approval requests or answers were not forwarded to chats (too many at once); `pincer approvals` lists the waiting ones"
                        );
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let bridges: Vec<_> = this
                    .running()
                    .values()
                    .filter_map(Running::bridge)
                    .collect();
                match event {
                    ApprovalEvent::Requested(pending) => {
                        let request = approval_request(&pending);
                        for bridge in bridges {
                            if let Err(e) = bridge.ask_owner(&request).await {
                                tracing::warn!(channel = %bridge.channel(), "could not send an approval to the owner: {e}");
                            }
                        }
                    }
                    ApprovalEvent::Ended(ended) => {
                        let end = approval_end(ended);
                        for bridge in bridges {
                            if let Err(e) = bridge.approval_ended(&end).await {
                                tracing::warn!(channel = %bridge.channel(), "could not mark an approval as answered in the owner's chat: {e}");
                            }
                        }
                    }
                }
            }
        });
    }
}

/// A waiting request as the bridges show it.
fn approval_request(pending: &PendingApproval) -> ApprovalRequest {
    // Rounded up: a 5 s timeout forwarded a few ms later still reads 5 s.
    let expires_in_s = pending
        .expires_at
        .duration_since(SystemTime::now())
        .map(|d| d.as_secs_f64().ceil() as u64)
        .unwrap_or(0);
    let (tool, arguments, halt) = match &pending.subject {
        Subject::Call {
            tool, arguments, ..
        } => (tool.clone(), arguments.clone(), None),
        Subject::Step(halt) => {
            let (shown, ask) = match &halt.ask {
                HaltAsk::Approval {
                    data,
                    approvers,
                    quorum,
                    votes,
                    edit,
                    revisions_left,
                    ..
                } => (
                    data.as_ref().map(|d| d.to_string()).unwrap_or_default(),
                    HaltKind::Approval {
                        approvers: approvers.clone(),
                        quorum: *quorum,
                        votes: votes.len() as u32,
                        edit: *edit,
                        revise: *revisions_left > 0,
                    },
                ),
                HaltAsk::Input { schema } => (
                    schema.as_ref().map(|s| s.to_string()).unwrap_or_default(),
                    HaltKind::Input,
                ),
            };
            (
                String::new(),
                shown,
                Some(HaltRequest {
                    workflow: halt.workflow.clone(),
                    run: halt.run.clone(),
                    step: halt.step.clone(),
                    prompt: halt.prompt.clone(),
                    ask,
                }),
            )
        }
    };
    ApprovalRequest {
        id: pending.id.clone(),
        agent: pending.agent.clone(),
        session: pending.session_key.clone(),
        tool,
        arguments,
        expires_in_s,
        requester: pending.requester.as_ref().map(|r| Requester {
            person: ChatPerson {
                channel: r.channel.clone(),
                id: r.sender_id.clone(),
                name: r.name.clone(),
            },
            group: r.group.clone(),
            thread: r.thread.clone(),
        }),
        halt,
    }
}

/// An approval's end as the bridges show it.
fn approval_end(ended: ApprovalEnded) -> ApprovalEnd {
    let answerer = |by: DecidedBy| match by {
        DecidedBy::Cli => Answerer::Cli,
        DecidedBy::Chat {
            channel,
            user_id,
            name,
        } => Answerer::Chat(ChatPerson {
            channel,
            id: user_id,
            name,
        }),
    };
    ApprovalEnd {
        id: ended.id,
        outcome: match ended.ending {
            Ending::Allowed { always, by } => ApprovalOutcome::Approved {
                always,
                by: answerer(by),
            },
            Ending::Denied { by } => ApprovalOutcome::Denied {
                by: by.map(answerer),
            },
            Ending::Expired { after } => ApprovalOutcome::Expired {
                after_s: after.as_secs_f64().round() as u64,
            },
            Ending::Aborted => ApprovalOutcome::Aborted,
            Ending::Edited { by, .. } => ApprovalOutcome::Edited { by: answerer(by) },
            Ending::Revised { by, .. } => ApprovalOutcome::Revised { by: answerer(by) },
            Ending::Answered { by, .. } => ApprovalOutcome::Answered { by: answerer(by) },
        },
    }
}
