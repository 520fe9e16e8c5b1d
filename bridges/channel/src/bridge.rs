//! The bridge: one bot account of one platform, driven the same way for
//! every platform. A platform's reader hands it [`Incoming`] events
//! ([`Bridge::receive`]); it answers through the [`Platform`] and reaches
//! the daemon through the [`Host`].
//!
//! # One message, start to end
//!
//! 1. **Claim** ([`Bridge::receive`]): the message is recorded in the
//!    [`Ledger`] and the platform's cursor moved past it, in one
//!    transaction, before the reader asks the platform for more. A message
//!    seen before (a restart, a server that ignores `offset`) stops here.
//! 2. **In order per chat**: claimed messages wait in their chat's queue;
//!    one worker per chat takes them in arrival order, so a person's second
//!    message never overtakes the first.
//! 3. **Access** ([`crate::access`]): strangers get one pairing code (sent
//!    through the ledger like an answer: exactly once) and never reach the
//!    daemon; un-mentioned group messages go to the context buffer; the rest
//!    pass. The channel's owner always passes in their DM.
//! 4. **Commands** (`/new`, `/reset`, `/stop`, `/status`, `/help`,
//!    `/approve ID`, `/deny ID`) are answered without a turn.
//! 5. **The turn**: the group's context and notes on saved attachments
//!    (each created through the chat's folder the [`Host`] opened, never
//!    through a link) are added to the text, and the [`Host`] runs it,
//!    given the saved files that may be images (a model with vision gets
//!    to see them). The worker moves on as
//!    soon as the daemon took the message (later messages queue in the
//!    daemon's session and are answered together); a follower task shows
//!    "typing…" and waits for the end of the turn.
//! 6. **Plan, then send**: the answer is cut into chunks within the
//!    platform's limits, at most `max_messages_per_answer` of them (the
//!    rest of a longer answer as one file: [`crate::answer`]), and the
//!    chunks are stored in the ledger before the first is sent; each is
//!    confirmed there when the platform confirms it.
//!    A restart sends only the chunks never confirmed ([`Bridge::resume`]).
//!
//! # Live preview
//!
//! With `preview`, the turn's streamed text is shown in one plain-text
//! message, edited at most once per `edit_every` of the platform (Telegram 1 s,
//! Discord 1.2 s); when the turn ends, that
//! message is edited into the answer's first chunk (and confirmed in the
//! ledger as such), the rest is sent as usual. A crash mid-turn leaves the
//! preview as it was; the turn runs again after the restart and answers
//! in new messages.
//!
//! # Files
//!
//! This file holds the bridge itself: its settings, claiming what the
//! platform hands over ([`Bridge::receive`]), taking up what a previous
//! run left ([`Bridge::resume`]) and stopping. By job: `queue` keeps each
//! chat in order; `intake` decides access, answers commands and starts
//! turns; `attachments` saves what came with a message; `follower`
//! follows a turn (typing, preview) to its answer; [`delivery`] plans and
//! sends answers (rendering, retries, the send gate per chat);
//! [`approvals`] shows approvals to the owner and takes the presses on
//! their buttons; `tests.rs` drives the whole bridge.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod approvals;
mod attachments;
mod delivery;
mod follower;
mod intake;
mod queue;

use crate::access::{AccessPolicy, Decision};
use crate::context::{self, ContextBuffer, ContextKey};
use crate::health::Health;
use crate::host::{ChatPerson, Command, HELP, Host, HostError, TurnEvent};
use crate::ledger::{Claim, Key, Ledger, LedgerError, SharedLedger, Unfinished};
use crate::message::{Attachment, ChatKind, Formatting, Inbound};
use crate::pairings::Pairings;
use crate::platform::{ButtonPress, Event, Incoming, Platform, Target};
use crate::untrusted::{display_name, neutralise};

/// Turns tried for one message across restarts before the bridge gives
/// up on it (a message that crashes the daemon every time).
pub const MAX_ATTEMPTS: u32 = 3;

/// Transient send errors tried before an answer is left for the next
/// start.
const SEND_TRIES: u32 = 6;

/// The longest `retry_after` honoured in one wait.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// How one bridge behaves; the daemon builds it from the config and
/// replaces it on reload ([`Bridge::set_settings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeSettings {
    pub access: AccessPolicy,
    /// The owner's user id: passes in DMs, receives approvals, alone may
    /// answer them.
    pub owner: Option<String>,
    /// Un-mentioned group messages kept per chat.
    pub context_messages: usize,
    /// The largest attachment saved, in bytes.
    pub max_attachment_bytes: u64,
    /// Show the answer while it is written, in one message edited at most
    /// once per second (Discord: 1.2 s) that becomes the answer's first part.
    pub preview: bool,
    /// Messages one answer takes at most; the rest of a longer one goes as
    /// one Markdown file ([`crate::answer`]).
    pub max_messages_per_answer: usize,
}

impl Default for BridgeSettings {
    fn default() -> Self {
        Self {
            access: AccessPolicy::default(),
            owner: None,
            context_messages: context::DEFAULT_LIMIT,
            max_attachment_bytes: 20 * 1024 * 1024,
            preview: false,
            max_messages_per_answer: crate::answer::DEFAULT_MAX_MESSAGES,
        }
    }
}

/// Why the bridge could not record an event; the reader must not move the
/// platform's cursor past it (it is read again).
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Unfinished(#[from] Unfinished),
}

/// Random bytes for pairing codes (the OS's, from the daemon).
pub type Random = Box<dyn FnMut(&mut [u8]) + Send>;

/// An inbound message's ledger key, owned (for blocking tasks).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MsgKey {
    channel: String,
    account: String,
    message_id: String,
}

impl MsgKey {
    fn of(msg: &Inbound) -> Self {
        Self {
            channel: msg.channel.clone(),
            account: msg.account.clone(),
            message_id: msg.message_id.clone(),
        }
    }

    fn key(&self) -> Key<'_> {
        Key::new(&self.channel, &self.account, &self.message_id)
    }
}

/// A chat's queue of claimed messages and whether a worker drains it.
#[derive(Default)]
struct ChatQueue {
    waiting: VecDeque<Inbound>,
    worker: bool,
}

/// One bot account of one platform.
pub struct Bridge {
    platform: Arc<dyn Platform>,
    host: Arc<dyn Host>,
    settings: RwLock<Arc<BridgeSettings>>,
    ledger: SharedLedger,
    pairings: Arc<Pairings>,
    context: Mutex<ContextBuffer>,
    health: Arc<Health>,
    random: Mutex<Random>,
    queues: Mutex<HashMap<String, ChatQueue>>,
    /// One answer at a time per chat: a gate per chat being answered,
    /// dropped by the last sender that held it.
    sending: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Answers their own task is planning or sending: a recovery's
    /// delivery leaves them to it (it would send the first part anew
    /// instead of editing the live preview into it).
    answering: Mutex<HashSet<MsgKey>>,
    turns: Mutex<(HashSet<String>, VecDeque<String>)>,
    presses: Mutex<VecDeque<String>>,
    /// The approval messages sent to the owner, by approval id, until the
    /// approval ends.
    approvals: Mutex<VecDeque<(String, approvals::ShownApproval)>>,
    /// Groups not listed that wrote since the start (logged once each).
    unlisted: Mutex<HashSet<String>>,
    tasks: TaskTracker,
    /// Cancelled when [`Bridge::stop`] begins: ends what only waits.
    closing: CancellationToken,
    /// Cancelled when the grace of a stop is over: ends what still works.
    stop: CancellationToken,
}

/// The ledger's clock (signed, as SQLite stores it).
fn now() -> i64 {
    crate::unix_now() as i64
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `user_id` is the owner under `settings` (see
/// [`Bridge::is_owner`]).
fn is_owner_in(settings: &BridgeSettings, user_id: &str) -> bool {
    !user_id.trim().is_empty() && settings.owner.as_deref() == Some(user_id)
}

/// The queue (and send lock) a message belongs to: its chat and thread.
fn chat_of(msg: &Inbound) -> String {
    match &msg.thread_id {
        Some(t) => format!("{}/{t}", msg.chat_id),
        None => msg.chat_id.clone(),
    }
}

/// What a chat that is not the owner's is told while a call of its turn
/// waits for the owner: the tool only, never its arguments.
pub fn waiting_text(tool: &str) -> String {
    let tool = crate::untrusted::display_name(tool);
    let fence = if tool.contains('`') { "``" } else { "`" };
    format!("Waiting for the owner to approve {fence}{tool}{fence}…")
}

/// The text a stranger's code comes with.
pub fn pairing_text(channel: &str, code: &str) -> String {
    format!(
        "Hi! This is a private assistant. To talk to it, ask its owner to approve you with this code (valid for one hour):\n\n{code}\n\n(The owner runs: pincer pairing approve {channel} {code})"
    )
}

impl Bridge {
    /// A bridge over `platform`, recording in `ledger` (shared by all
    /// bridges of the daemon) and `pairings`.
    pub fn new(
        platform: Arc<dyn Platform>,
        host: Arc<dyn Host>,
        settings: BridgeSettings,
        ledger: SharedLedger,
        pairings: Arc<Pairings>,
        health: Arc<Health>,
        random: Random,
    ) -> Arc<Self> {
        let context = ContextBuffer::new(settings.context_messages);
        Arc::new(Self {
            platform,
            host,
            settings: RwLock::new(Arc::new(settings)),
            ledger,
            pairings,
            context: Mutex::new(context),
            health,
            random: Mutex::new(random),
            queues: Mutex::default(),
            sending: Mutex::default(),
            answering: Mutex::default(),
            turns: Mutex::default(),
            presses: Mutex::default(),
            approvals: Mutex::default(),
            unlisted: Mutex::default(),
            tasks: TaskTracker::new(),
            closing: CancellationToken::new(),
            stop: CancellationToken::new(),
        })
    }

    pub fn channel(&self) -> &str {
        self.platform.channel()
    }

    pub fn account(&self) -> &str {
        self.platform.account()
    }

    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    pub fn platform(&self) -> &Arc<dyn Platform> {
        &self.platform
    }

    pub fn settings(&self) -> Arc<BridgeSettings> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes in new settings (a config reload); a smaller context limit
    /// applies from the next message.
    pub fn set_settings(&self, settings: BridgeSettings) {
        if settings.context_messages != self.settings().context_messages {
            let mut ctx = lock(&self.context);
            *ctx = ContextBuffer::new(settings.context_messages);
        }
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(settings);
    }

    /// Whether `user_id` is this channel's owner. An empty id (a message
    /// without a sender) is nobody: never the owner, even of a channel
    /// whose owner was set to "".
    pub fn is_owner(&self, user_id: &str) -> bool {
        is_owner_in(&self.settings(), user_id)
    }

    /// Runs `f` on the ledger's thread, after the calls before it (each
    /// commit is an fsync).
    async fn ledger<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Ledger) -> Result<T, LedgerError> + Send + 'static,
    ) -> Result<T, BridgeError> {
        self.ledger
            .run(f)
            .await
            .map_err(BridgeError::from)?
            .map_err(BridgeError::from)
    }

    /// Where the platform's reader resumes (`scope`: `updates` for
    /// Telegram).
    pub async fn cursor(&self, scope: &str) -> Result<Option<String>, BridgeError> {
        let (channel, account, scope) = (
            self.channel().to_string(),
            self.account().to_string(),
            scope.to_string(),
        );
        self.ledger(move |l| l.cursor(&channel, &account, &scope))
            .await
    }

    /// Every read position the ledger holds for this bot, `(scope,
    /// cursor)` (Discord: one per channel it handled a message in; what
    /// catch-up resumes from).
    pub async fn scopes(&self) -> Result<Vec<(String, String)>, BridgeError> {
        let (channel, account) = (self.channel().to_string(), self.account().to_string());
        self.ledger(move |l| l.scopes(&channel, &account)).await
    }

    /// Records one event from the platform and starts handling it; returns
    /// once it is safely recorded (the reader may then move on). An error
    /// means nothing was recorded: the reader must read it again.
    pub async fn receive(self: &Arc<Self>, incoming: Incoming) -> Result<(), BridgeError> {
        self.health.update_seen();
        let (channel, account) = (self.channel().to_string(), self.account().to_string());
        let at = now();
        match incoming.event {
            Event::Other | Event::Button(_) => {
                if let Some((scope, value)) = incoming.cursor {
                    self.ledger(move |l| l.set_cursor(&channel, &account, &scope, &value, at))
                        .await?;
                }
                if let Event::Button(press) = incoming.event {
                    self.press(press);
                }
                Ok(())
            }
            Event::Message(mut msg) => {
                msg.channel = channel;
                msg.account = account;
                let copy = msg.clone();
                let claim = self
                    .ledger(move |l| match &incoming.cursor {
                        Some((scope, value)) => l.claim_and_advance(&copy, scope, value, at),
                        None => l.claim(&copy, at),
                    })
                    .await?;
                self.admit(msg, claim);
                Ok(())
            }
        }
    }

    /// A recorded message joins its chat's queue, unless it was seen
    /// before.
    fn admit(self: &Arc<Self>, msg: Inbound, claim: Claim) {
        if claim == Claim::Duplicate {
            tracing::debug!(channel = %msg.channel, message = %msg.message_id, "a message seen before: not answered again");
            return;
        }
        self.health.message_in();
        self.enqueue(msg);
    }

    /// A button press is handled in the background.
    fn press(self: &Arc<Self>, press: ButtonPress) {
        let this = self.clone();
        self.tasks.spawn(async move { this.button(press).await });
    }

    /// Records a batch of events read from one place (Telegram's
    /// `getUpdates`) in one ledger transaction, with `cursor` (scope,
    /// value) the position past the batch, then handles each event in
    /// order as [`Bridge::receive`] does. An error means nothing was
    /// recorded: the reader must read the batch again.
    pub async fn receive_batch(
        self: &Arc<Self>,
        events: Vec<Event>,
        cursor: (String, String),
    ) -> Result<(), BridgeError> {
        self.health.update_seen();
        let (channel, account) = (self.channel().to_string(), self.account().to_string());
        let at = now();
        let mut events = events;
        let mut messages = Vec::new();
        for event in &mut events {
            if let Event::Message(msg) = event {
                msg.channel = channel.clone();
                msg.account = account.clone();
                messages.push(msg.clone());
            }
        }
        let claims = self
            .ledger(move |l| {
                let (scope, value) = &cursor;
                l.claim_batch(&channel, &account, &messages, scope, value, at)
            })
            .await?;
        // In the batch's order, as one `receive` after another would.
        let mut claims = claims.into_iter();
        for event in events {
            match event {
                Event::Message(msg) => {
                    if let Some(claim) = claims.next() {
                        self.admit(msg, claim);
                    }
                }
                Event::Button(press) => self.press(press),
                Event::Other => {}
            }
        }
        Ok(())
    }

    /// Finishes what a previous run left: answers planned but not wholly
    /// sent are sent, messages claimed but never answered are handled
    /// again (each at most [`MAX_ATTEMPTS`] times). Call once, before the
    /// reader starts; from then on, answers an outage left owed are sent
    /// when the platform is reached again.
    pub async fn resume(self: &Arc<Self>) -> Result<usize, BridgeError> {
        self.tasks.spawn(self.clone().deliver_after_outages());
        let (channel, account) = (self.channel().to_string(), self.account().to_string());
        let owed = self
            .ledger(move |l| l.unanswered(&channel, &account))
            .await?;
        let n = owed.len();
        for item in owed {
            let msg = item.inbound;
            if item.planned {
                let this = self.clone();
                self.tasks.spawn(async move { this.deliver(&msg).await });
                continue;
            }
            let key = MsgKey::of(&msg);
            let attempts = self.ledger(move |l| l.retrying(key.key())).await?;
            if attempts > MAX_ATTEMPTS {
                tracing::warn!(channel = %msg.channel, message = %msg.message_id, attempts, "giving up on a message that failed every time");
                let this = self.clone();
                self.tasks.spawn(async move {
                    this.reply(
                        &msg,
                        "Sorry, I could not handle this message (it failed several times).".into(),
                    )
                    .await;
                });
                continue;
            }
            self.enqueue(msg);
        }
        if n > 0 {
            tracing::info!(channel = %self.channel(), owed = n, "taking up messages left from before the restart");
        }
        Ok(n)
    }

    /// Stops the bridge: waits, at most `grace`, for answers being sent.
    pub async fn stop(&self, grace: Duration) {
        self.closing.cancel();
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            self.stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(1), self.tasks.wait()).await;
        }
    }
}

#[cfg(test)]
mod tests;
