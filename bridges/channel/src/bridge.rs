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
//! [`delivery`] plans and sends answers (rendering, retries, the send
//! gate per chat); [`approvals`] shows approvals to the owner and takes
//! the presses on their buttons; `tests.rs` drives the whole bridge.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod approvals;
mod delivery;

use crate::access::{AccessPolicy, Decision};
use crate::context::{self, ContextBuffer, ContextKey};
use crate::health::Health;
use crate::host::{ApprovalAnswer, ChatPerson, Command, HELP, Host, HostError, TurnEvent};
use crate::ledger::{Claim, Key, Ledger, LedgerError};
use crate::message::{Attachment, ChatKind, Formatting, Inbound};
use crate::pairings::Pairings;
use crate::platform::{Event, Incoming, Platform, Target};
use crate::untrusted::{display_name, neutralise};

/// Turns tried for one message across restarts before the bridge gives
/// up on it (a message that crashes the daemon every time).
pub const MAX_ATTEMPTS: u32 = 3;

/// Transient send errors tried before an answer is left for the next
/// start.
const SEND_TRIES: u32 = 6;

/// The longest `retry_after` honoured in one wait.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// The message that shows an answer while it is written.
#[derive(Default)]
struct Preview {
    id: Option<String>,
    text: String,
    shown_at: Option<tokio::time::Instant>,
}

/// Turn ids remembered to send a merged turn's answer once.
const TURNS_REMEMBERED: usize = 4096;

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
    #[error("the ledger task failed: {0}")]
    Join(String),
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
    ledger: Arc<Mutex<Ledger>>,
    pairings: Arc<Pairings>,
    context: Mutex<ContextBuffer>,
    health: Arc<Health>,
    random: Mutex<Random>,
    queues: Mutex<HashMap<String, ChatQueue>>,
    /// One answer at a time per chat: a gate per chat being answered,
    /// dropped by the last sender that held it.
    sending: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    turns: Mutex<(HashSet<String>, VecDeque<String>)>,
    presses: Mutex<VecDeque<String>>,
    /// The approval messages sent to the owner, by approval id, until the
    /// approval ends.
    approvals: Mutex<VecDeque<(String, approvals::ShownApproval)>>,
    /// Groups not listed that wrote since the start (logged once each).
    unlisted: Mutex<HashSet<String>>,
    tasks: TaskTracker,
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
        ledger: Arc<Mutex<Ledger>>,
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
            turns: Mutex::default(),
            presses: Mutex::default(),
            approvals: Mutex::default(),
            unlisted: Mutex::default(),
            tasks: TaskTracker::new(),
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

    /// Runs `f` on the ledger in a blocking thread (each commit is an
    /// fsync).
    async fn ledger<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Ledger) -> Result<T, LedgerError> + Send + 'static,
    ) -> Result<T, BridgeError> {
        let ledger = self.ledger.clone();
        tokio::task::spawn_blocking(move || f(&mut lock(&ledger)))
            .await
            .map_err(|e| BridgeError::Join(e.to_string()))?
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
                    let this = self.clone();
                    self.tasks.spawn(async move { this.button(press).await });
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
                if claim == Claim::Duplicate {
                    tracing::debug!(channel = %msg.channel, message = %msg.message_id, "a message seen before: not answered again");
                    return Ok(());
                }
                self.health.message_in();
                self.enqueue(msg);
                Ok(())
            }
        }
    }

    /// Finishes what a previous run left: answers planned but not wholly
    /// sent are sent, messages claimed but never answered are handled
    /// again (each at most [`MAX_ATTEMPTS`] times). Call once, before the
    /// reader starts.
    pub async fn resume(self: &Arc<Self>) -> Result<usize, BridgeError> {
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

    /// Queues a claimed message behind its chat's earlier ones.
    fn enqueue(self: &Arc<Self>, msg: Inbound) {
        let chat = chat_of(&msg);
        let mut queues = lock(&self.queues);
        let queue = queues.entry(chat.clone()).or_default();
        queue.waiting.push_back(msg);
        if !queue.worker {
            queue.worker = true;
            let this = self.clone();
            self.tasks.spawn(async move { this.drain(chat).await });
        }
    }

    async fn drain(self: Arc<Self>, chat: String) {
        loop {
            let next = {
                let mut queues = lock(&self.queues);
                let Some(queue) = queues.get_mut(&chat) else {
                    return;
                };
                match queue.waiting.pop_front() {
                    Some(msg) => msg,
                    None => {
                        queues.remove(&chat);
                        return;
                    }
                }
            };
            self.accept(next).await;
        }
    }

    /// Steps 3 to 5 of the module docs for one message.
    async fn accept(self: &Arc<Self>, msg: Inbound) {
        let settings = self.settings();
        let decision = if msg.kind == ChatKind::Direct && is_owner_in(&settings, &msg.sender.id) {
            Decision::Pass
        } else {
            let mut random = lock(&self.random);
            match self
                .pairings
                .decide(&settings.access, &msg, crate::unix_now(), &mut *random)
            {
                Ok(d) => d,
                Err(e) => {
                    // Without a saved code a stranger would get a new one
                    // each message: ignore instead (and say so).
                    tracing::error!("{e}");
                    self.health.error(&e.to_string());
                    Decision::Ignore
                }
            }
        };
        match decision {
            Decision::Pass => self.pass(msg, &settings).await,
            Decision::PassAsContext => {
                lock(&self.context).push_inbound(&msg, crate::unix_now());
                self.settle(&msg).await;
            }
            Decision::SendPairingCode { code } => {
                tracing::info!(channel = %msg.channel, sender = %msg.sender.id, "a stranger was sent a pairing code");
                self.reply(&msg, pairing_text(&msg.channel, &code)).await;
            }
            Decision::Ignore | Decision::AlreadyPending | Decision::TooManyPending => {
                if msg.kind != ChatKind::Direct
                    && !settings.access.listens_to_group(&msg)
                    && lock(&self.unlisted).insert(msg.chat_id.clone())
                {
                    // Once per group and run: how the owner learns the id.
                    let guild = msg
                        .guild_id
                        .as_ref()
                        .map(|g| {
                            format!(
                                ", or [channels.{}.guilds.\"{g}\"] for its whole guild",
                                msg.channel
                            )
                        })
                        .unwrap_or_default();
                    tracing::info!(
                        "{}: a message in group {}, which is not listed under [channels.{}.groups]; add [channels.{}.groups.\"{}\"] to answer there{guild}",
                        msg.channel,
                        msg.chat_id,
                        msg.channel,
                        msg.channel,
                        msg.chat_id
                    );
                }
                self.settle(&msg).await;
            }
        }
    }

    async fn pass(self: &Arc<Self>, msg: Inbound, settings: &BridgeSettings) {
        if let Some(command) = Command::parse(&msg.text, self.platform.bot_username()) {
            let answer = match &command {
                Command::Help => Ok(HELP.to_string()),
                Command::Approve(id) | Command::Deny(id) => {
                    if is_owner_in(settings, &msg.sender.id) {
                        let by = ChatPerson {
                            channel: msg.channel.clone(),
                            id: msg.sender.id.clone(),
                            name: msg.sender.name.clone(),
                        };
                        self.host
                            .decide_approval(
                                id,
                                if matches!(command, Command::Approve(_)) {
                                    ApprovalAnswer::Allow
                                } else {
                                    ApprovalAnswer::Deny
                                },
                                &by,
                            )
                            .await
                    } else {
                        Ok("Only the owner can approve or deny tool calls.".to_string())
                    }
                }
                _ => self.host.command(&msg, &command).await,
            };
            match answer {
                Ok(text) | Err(HostError::Refused(text)) => self.reply(&msg, text).await,
                Err(HostError::ShuttingDown) => {}
            }
            return;
        }
        // The person's text can hold lines that look like the headers the
        // bridge (context, notes) and the daemon add: escaped before any
        // of them is added.
        let mut text = neutralise(&msg.text).into_owned();
        if msg.kind != ChatKind::Direct {
            let lines = lock(&self.context).take(&ContextKey::of(&msg));
            if let Some(block) = context::render(&lines) {
                text = format!("{block}\n\n{text}");
            }
        }
        let (notes, images) = self.save_attachments(&msg, settings).await;
        for note in notes {
            text.push_str("\n\n");
            text.push_str(&note);
        }
        match self.host.chat(&msg, text, images).await {
            Ok(events) => {
                let this = self.clone();
                self.tasks
                    .spawn(async move { this.follow(msg, events).await });
            }
            // Left unanswered in the ledger: taken up after the restart.
            Err(HostError::ShuttingDown) => {}
            Err(HostError::Refused(why)) => self.reply(&msg, why).await,
        }
    }

    /// Saves the message's attachments in the chat's folder of the agent's
    /// workspace ([`Host::inbox`], opened by the daemon): each file is
    /// created there exclusively, never through a link nor over anything,
    /// and handed to the platform to fill. Answers one note per
    /// attachment for the agent, and the saved files that may be images,
    /// relative to the workspace (for [`Host::chat`]). What could not be
    /// saved is said in the note and logged.
    async fn save_attachments(
        &self,
        msg: &Inbound,
        settings: &BridgeSettings,
    ) -> (Vec<String>, Vec<String>) {
        if msg.attachments.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let inbox = match self.host.inbox(msg) {
            Ok(dir) => dir,
            Err(e) => {
                tracing::warn!(
                    channel = %msg.channel,
                    chat = %msg.chat_id,
                    "The attachments of message {} were not saved: {e}",
                    msg.message_id
                );
                return (
                    vec![format!("[the attachments could not be saved: {e}]")],
                    Vec::new(),
                );
            }
        };
        let mut notes = Vec::new();
        let mut images = Vec::new();
        for (i, att) in msg.attachments.iter().enumerate() {
            let name = safe_name(&att.name, &att.kind);
            // The message id names the chat too (Telegram's `chat:message`);
            // only characters that are safe in any file name.
            let id: String = msg
                .message_id
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let file = format!("{}-{i}-{name}", id.trim_start_matches('-'));
            if att.size.is_some_and(|s| s > settings.max_attachment_bytes) {
                notes.push(format!(
                    "[{} `{}` not saved: larger than the {} MB limit]",
                    att.kind,
                    display_name(&att.name),
                    settings.max_attachment_bytes / (1024 * 1024)
                ));
                continue;
            }
            let saved = inbox.relative().join(&file).display().to_string();
            let dest = match inbox.create_new(&file) {
                Ok(dest) => dest,
                Err(e) => {
                    tracing::warn!(
                        channel = %msg.channel,
                        chat = %msg.chat_id,
                        "The {} `{}` of message {} was not saved: {e}",
                        att.kind,
                        display_name(&att.name),
                        msg.message_id
                    );
                    notes.push(format!(
                        "[{} `{}` could not be saved: {e}]",
                        att.kind,
                        display_name(&att.name)
                    ));
                    continue;
                }
            };
            match self
                .platform
                .download(att, dest, settings.max_attachment_bytes)
                .await
            {
                Ok(bytes) => {
                    notes.push(format!("[{} saved as {saved} ({bytes} bytes)]", att.kind));
                    if may_be_image(att) {
                        images.push(saved);
                    }
                }
                Err(e) => {
                    // Through the same opened folder: the half-written
                    // file, never a name swapped in since.
                    if let Err(removed) = inbox.remove_file(&file) {
                        tracing::warn!("A failed download was not cleaned up: {removed}");
                    }
                    notes.push(format!(
                        "[{} `{}` could not be saved: {}]",
                        att.kind,
                        display_name(&att.name),
                        display_name(&e.to_string())
                    ));
                }
            }
        }
        (notes, images)
    }

    /// Waits for the end of the turn that answers `msg`, showing typing
    /// (and the live preview), then plans and sends the answer. Several
    /// queued messages answered by one turn all follow it; the first to
    /// see it start owns it (its preview, its answer), the others are
    /// settled without a message.
    async fn follow(self: Arc<Self>, msg: Inbound, mut events: mpsc::UnboundedReceiver<TurnEvent>) {
        let target = Target::reply(&msg);
        let caps = self.platform.capabilities();
        let previewing = self.settings().preview && caps.edits;
        let mut owner: Option<bool> = None;
        let mut preview = Preview::default();
        // Tools this chat was told wait for the owner (once each).
        let mut told_waiting: Vec<String> = Vec::new();
        let typing = caps.typing;
        // Never fires when the platform has no typing indicator.
        let mut tick = tokio::time::interval(typing.unwrap_or(Duration::from_secs(3600)));
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(TurnEvent::Started { turn_id }) => {
                        owner = Some(self.owns(&turn_id));
                    }
                    Some(TurnEvent::Text(delta)) => {
                        if previewing && owner == Some(true) {
                            preview.text.push_str(&delta);
                            self.show_preview(&target, &mut preview).await;
                        }
                    }
                    Some(TurnEvent::WaitingForApproval { tool }) => {
                        if owner != Some(false) && !told_waiting.contains(&tool) {
                            let note = waiting_text(&tool);
                            told_waiting.push(tool);
                            if let Err(e) = self.send_text(&target, &note, &[]).await {
                                tracing::debug!("could not say that a call waits for the owner: {e}");
                            }
                        }
                    }
                    Some(TurnEvent::Finished { turn_id, text }) => {
                        let mine = owner.unwrap_or_else(|| self.owns(&turn_id));
                        if mine && !text.trim().is_empty() {
                            self.reply_with(&msg, text, preview.id).await;
                        } else {
                            self.settle(&msg).await;
                        }
                        return;
                    }
                    Some(TurnEvent::Failed { turn_id, message }) => {
                        if owner.unwrap_or_else(|| self.owns(&turn_id)) {
                            let text = format!("Sorry, something went wrong: {message}");
                            self.reply_with(&msg, text, preview.id).await;
                        } else {
                            self.settle(&msg).await;
                        }
                        return;
                    }
                    // The daemon stopped mid-turn: the message stays owed
                    // and is taken up after the restart.
                    None => return,
                },
                _ = tick.tick(), if typing.is_some() => {
                    let _ = self.platform.typing(&target).await;
                }
                _ = self.stop.cancelled() => return,
            }
        }
    }

    /// Whether this follower owns `turn_id` (an empty id: a failure before
    /// any turn started, which only this message saw).
    fn owns(&self, turn_id: &str) -> bool {
        turn_id.is_empty() || self.first_answer(turn_id)
    }

    /// Shows the answer so far in one message, edited at most once per
    /// the platform's `edit_every`; plain text (Markdown half written does not
    /// render), cut to the platform's length.
    async fn show_preview(&self, target: &Target, preview: &mut Preview) {
        if preview
            .shown_at
            .is_some_and(|at| at.elapsed() < self.platform.capabilities().edit_every)
        {
            return;
        }
        let max = self.platform.capabilities().max_chars.saturating_sub(1);
        let mut shown: String = preview.text.chars().take(max).collect();
        shown.push('…');
        preview.shown_at = Some(tokio::time::Instant::now());
        match &preview.id {
            None => {
                match self
                    .platform
                    .send(target, &shown, Formatting::Plain, &[])
                    .await
                {
                    Ok(id) => preview.id = Some(id),
                    Err(e) => tracing::debug!("the preview could not be shown: {e}"),
                }
            }
            Some(id) => {
                if let Err(e) = self
                    .platform
                    .edit(target, id, &shown, Formatting::Plain)
                    .await
                {
                    tracing::debug!("the preview could not be updated: {e}");
                }
            }
        }
    }

    /// Whether this is the first answer of `turn_id` (a turn answering
    /// several queued messages is sent once, under the first of them).
    fn first_answer(&self, turn_id: &str) -> bool {
        let mut turns = lock(&self.turns);
        let (seen, order) = &mut *turns;
        if !seen.insert(turn_id.to_string()) {
            return false;
        }
        order.push_back(turn_id.to_string());
        if order.len() > TURNS_REMEMBERED
            && let Some(old) = order.pop_front()
        {
            seen.remove(&old);
        }
        true
    }

    /// Stops the bridge: waits, at most `grace`, for answers being sent.
    pub async fn stop(&self, grace: Duration) {
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

/// A file name made safe: no folders, no leading dots, no control
/// characters, at most 80 characters; the kind when nothing is left.
fn safe_name(name: &str, kind: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| {
            if c.is_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .chars()
        .take(80)
        .collect();
    if cleaned.is_empty() {
        kind.chars().filter(|c| c.is_ascii_alphanumeric()).collect()
    } else {
        cleaned
    }
}

/// Whether an attachment may be an image a model can look at: a photo, or
/// a document named like one (Telegram sends a picture as a document when
/// the sender asks for no compression). A guess the daemon checks against
/// the file's first bytes.
fn may_be_image(att: &Attachment) -> bool {
    const EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "gif", "webp"];
    att.kind == "photo"
        || (att.kind == "document"
            && Path::new(&att.name)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x))))
}

#[cfg(test)]
mod tests;
