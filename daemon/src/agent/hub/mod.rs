//! The session hub: one turn at a time per session, follow-ups queued and
//! delivered together as the next turn, sessions in parallel up to the
//! global limit (SPEC §6).
//!
//! A session's transcript is owned by the task that drives its turns; the
//! hub's lock is held only to queue, subscribe or abort, never across a turn.
//! Between turns the most recently used sessions keep their transcript open
//! and loaded; the rest are closed and read again when a message comes.
//!
//! [`sessions`] holds the session verbs (find, list, history, reset,
//! delete, compact, abort, last prompt, audit) that the gRPC layer and the
//! chat commands call.

pub mod sessions;
pub mod stop;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::session_log::SessionLog;
use super::turn::Turn;
use super::{Event, Runtime};
use crate::config::ToolLayer;
use crate::session::SessionKey;
use crate::session::registry::{NewSession, SessionRow};
use crate::tools::policy::ChatOrigin;

pub type Subscriber = mpsc::UnboundedSender<Event>;

/// Idle sessions that keep their transcript open and loaded for the next
/// turn. Each costs a file descriptor and its history in memory, so a
/// daemon that serves many chats for weeks closes the least recently used
/// beyond this; reopening one reads its transcript again (a few ms).
const IDLE_SESSIONS_KEPT: usize = 32;

/// What a hub operation can fail with; the server maps each to one gRPC
/// status (`server::status`), the message is the sentence the user reads.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("no agent `{agent}` is configured (agents: {known})")]
    UnknownAgent { agent: String, known: String },
    #[error("no session `{name}` (looked for {key}); `pincer sessions list` shows them")]
    UnknownSession { name: String, key: String },
    #[error("{0}")]
    BadSessionName(String),
    #[error("session {0} has made no model call since it was created or reset")]
    NoPrompt(String),
    #[error("the session registry failed: {0}")]
    Registry(#[from] crate::session::registry::RegistryError),
    #[error("cannot read or write the transcript: {0}")]
    Transcript(std::io::Error),
    #[error("a turn is running in session {0}; abort it first (pincer abort --session {0})")]
    Busy(String),
    #[error("pincerd is shutting down")]
    ShuttingDown,
    #[error(
        "the message is about {tokens} tokens, more than the {limit} a single message may take with agent `{agent}`'s model (half its {window}-token context window); shorten it, split it, or save it to a file in the workspace and name the file"
    )]
    TooLarge {
        agent: String,
        tokens: u64,
        limit: u64,
        window: u64,
    },
    /// The compaction ran and did not complete (the history was kept whole).
    #[error("the compaction did not complete: {0}")]
    Compaction(#[from] super::compaction::CompactionError),
    /// A message would have gone into a session of another principal
    /// (the data boundary, SPEC §8.3).
    #[error("{key} is not a conversation of {asking}; nothing was sent to it")]
    OtherPrincipal { key: String, asking: String },
}

/// How a delivery finds its session.
#[derive(Debug, Clone)]
pub enum Reach {
    /// Made if new (the CLI, a chat): whose it is comes from the chat the
    /// key names, else from the sender.
    Open,
    /// Only an existing session of the sender's own principal
    /// (`sessions_send`): never made, never another's.
    Existing,
    /// A new sub-agent session under `parent`, narrowed by `layer`.
    Child { parent: String, layer: ToolLayer },
}

/// The session a driver task serves.
struct Driven {
    key: SessionKey,
    /// Valid for the whole drive: reset and delete are refused meanwhile.
    row: SessionRow,
    /// Started by another turn: takes no slot of the global limit.
    nested: bool,
}

struct Pending {
    text: String,
    /// Images sent with it, relative to the agent's workspace.
    images: Vec<String>,
    origin: ChatOrigin,
    subscriber: Subscriber,
}

#[derive(Default)]
struct Slot {
    /// Set while a driver task runs this session's turns: cancels the
    /// running turn.
    running: Option<CancellationToken>,
    /// Whose messages the running turn answers (`ChatOrigin::sender`, one
    /// each): `/stop` from anyone else leaves it running (`stop.rs`).
    answering: Vec<String>,
    pending: Vec<Pending>,
    /// Loaded transcript kept between turns (taken by the driver).
    log: Option<SessionLog>,
    /// When the slot last went idle: the oldest idle slots are dropped
    /// first.
    idle_since: Option<Instant>,
}

/// Cloneable handle to every session's turn state.
#[derive(Clone)]
pub struct Hub {
    rt: Runtime,
    slots: Arc<Mutex<HashMap<String, Slot>>>,
    limit: Arc<Semaphore>,
    max_turns: usize,
    /// Cancelled when running turns must stop (end of the shutdown grace).
    shutdown: CancellationToken,
    /// Set when shutdown begins: no new turns start.
    closing: Arc<std::sync::atomic::AtomicBool>,
    tasks: tokio_util::task::TaskTracker,
}

impl Hub {
    pub fn new(rt: Runtime, max_concurrent_turns: usize) -> Self {
        Self {
            rt,
            slots: Arc::default(),
            limit: Arc::new(Semaphore::new(max_concurrent_turns.max(1))),
            max_turns: max_concurrent_turns.max(1),
            shutdown: CancellationToken::new(),
            closing: Arc::default(),
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }

    /// A hub with `config` over a fresh home, for tests that drive its
    /// slots and verbs without a model.
    #[cfg(test)]
    pub(crate) fn for_tests(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")).keep();
        let home = crate::home::Home::at(&dir);
        let config = crate::config::load::parse(
            &home,
            std::path::Path::new("/h/config.toml"),
            config,
            &|| None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let registry = crate::session::registry::Registry::open(&dir.join("registry.db"))
            .unwrap_or_else(|e| panic!("{e}"));
        let models = crate::llm::client::ModelClient::new(&config.providers)
            .unwrap_or_else(|e| panic!("{e}"));
        Self::new(Runtime::new(home, registry, config, models), 1)
    }

    /// The runtime, for the parts that run tool calls and turns of their
    /// own around the hub (the workflow runner, the scheduler's fires, the
    /// triggers' commands, doctor): they need its sandbox, tools and
    /// models as a turn does. Everything else asks the hub's verbs.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The config in force now (a snapshot: a reload does not change it
    /// under the caller).
    pub fn config(&self) -> Arc<crate::config::Config> {
        self.rt.config()
    }

    /// What waits on a person: tool calls' approvals and workflow halts.
    pub fn approvals(&self) -> &crate::tools::approvals::Approvals {
        self.rt.approvals()
    }

    /// Every agent's long-term memory index.
    pub fn memory(&self) -> &crate::memory::Memory {
        self.rt.memory()
    }

    /// The exec sandbox (what the kernel offers).
    pub fn sandbox(&self) -> &crate::sandbox::Sandbox {
        self.rt.sandbox()
    }

    /// Every tool a turn could be offered now: the core tools, then
    /// those of MCP servers and plugins (started on first need).
    pub async fn tool_registry(&self) -> Arc<crate::tools::ToolRegistry> {
        self.rt.tool_registry().await
    }

    /// The MCP servers of the config in force and how each is doing.
    pub async fn mcp_status(&self) -> Vec<crate::tools::mcp::ServerStatus> {
        self.rt.mcp().status().await
    }

    /// Every path inside `PINCER_HOME`.
    pub fn home(&self) -> &crate::home::Home {
        self.rt.home()
    }

    /// The workflow engine (`/run`), once the daemon installed it.
    pub fn workflows(&self) -> Option<Arc<dyn crate::tools::workflow_run::WorkflowRunner>> {
        self.rt.workflows()
    }

    /// The scheduler (`/schedules`), once the daemon installed it.
    pub fn schedules(&self) -> Option<Arc<dyn crate::tools::schedule_book::ScheduleBook>> {
        self.rt.schedules()
    }

    /// The chat bridges, once the channels installed them.
    pub fn outbox(&self) -> Option<Arc<dyn crate::tools::message::Outbox>> {
        self.rt.outbox()
    }

    /// Installs the chat bridges for the `message` tool and deliveries;
    /// the first one installed stays.
    pub fn install_outbox(&self, outbox: Arc<dyn crate::tools::message::Outbox>) {
        self.rt.set_outbox(outbox);
    }

    pub fn max_concurrent_turns(&self) -> usize {
        self.max_turns
    }

    /// Turns running right now.
    pub fn running_turns(&self) -> usize {
        self.max_turns - self.limit.available_permits()
    }

    /// Whether a session has a turn running or queued.
    pub fn is_running(&self, key: &str) -> bool {
        self.lock().get(key).is_some_and(|s| s.running.is_some())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves an agent id (empty: the default agent).
    pub fn agent_id(&self, requested: &str) -> Result<String, HubError> {
        let config = self.rt.config();
        let id = if requested.is_empty() {
            config.default_agent.clone()
        } else {
            requested.to_string()
        };
        if config.agents.contains_key(&id) {
            Ok(id)
        } else {
            Err(HubError::UnknownAgent {
                agent: id,
                known: config.agents.keys().cloned().collect::<Vec<_>>().join(", "),
            })
        }
    }

    /// Delivers a message to a session: starts a turn, or queues it behind
    /// the running one. `origin` (built by `crate::routing`: the owner at
    /// the CLI, a sender in a channel chat) decides the policy layers and
    /// owner-only tools. Events go to `subscriber`.
    pub async fn chat(
        &self,
        key: SessionKey,
        text: String,
        origin: ChatOrigin,
        subscriber: Subscriber,
    ) -> Result<(), HubError> {
        self.deliver(
            key,
            (text, Vec::new()),
            origin,
            subscriber,
            Reach::Open,
            false,
        )
        .await
    }

    /// [`Hub::chat`] with images: `images` are paths relative to the
    /// agent's workspace (a chat's photos, saved in its `inbox/`). They
    /// are recorded with the message and sent to a model with vision
    /// (`context::images`); the text should name them as well, for every
    /// other model.
    pub async fn chat_with_images(
        &self,
        key: SessionKey,
        text: String,
        images: Vec<String>,
        origin: ChatOrigin,
        subscriber: Subscriber,
    ) -> Result<(), HubError> {
        self.deliver(key, (text, images), origin, subscriber, Reach::Open, false)
            .await
    }

    /// A message from a running turn (`sessions_send`, `sessions_spawn`):
    /// its turns do not take a slot of the global limit, because the turn
    /// waiting for them holds one already (otherwise a full limit would
    /// deadlock). Fan-out is bounded by the sub-agent limits.
    /// `reach` says whether the session may be made (a sub-agent's) or
    /// must exist already and be the sender's own (`sessions_send`).
    pub async fn chat_nested(
        &self,
        key: SessionKey,
        text: String,
        origin: ChatOrigin,
        subscriber: Subscriber,
        reach: Reach,
    ) -> Result<(), HubError> {
        self.deliver(key, (text, Vec::new()), origin, subscriber, reach, true)
            .await
    }

    /// The session `key` for a message of `origin`, made if `reach`
    /// allows: its principal is the chat's the key names (a DM's person,
    /// the owner in their own DM, a group), else the sender's; a
    /// sub-agent's is its spawner's, with its parent recorded.
    async fn session_for(
        &self,
        key: &SessionKey,
        origin: &ChatOrigin,
        reach: Reach,
    ) -> Result<SessionRow, HubError> {
        let registry = &self.rt.registry;
        let key_text = key.to_string();
        let new = match reach {
            Reach::Existing => {
                let row = registry
                    .find(&key_text)
                    .await?
                    .filter(|row| row.key == key_text)
                    .ok_or_else(|| HubError::UnknownSession {
                        name: key_text.clone(),
                        key: key_text.clone(),
                    })?;
                if row.principal != origin.principal {
                    return Err(HubError::OtherPrincipal {
                        key: key_text,
                        asking: origin.principal.describe(),
                    });
                }
                return Ok(row);
            }
            Reach::Open => {
                let config = self.rt.config();
                let principal = key
                    .chat_principal(|channel, user| config.is_channel_owner(channel, user))
                    .unwrap_or_else(|| origin.principal.clone());
                NewSession::of(principal)
            }
            Reach::Child { parent, layer } => NewSession {
                principal: origin.principal.clone(),
                parent: Some((parent, layer)),
            },
        };
        Ok(registry
            .get_or_create(&key_text, key.agent(), key.channel(), new)
            .await?)
    }

    async fn deliver(
        &self,
        key: SessionKey,
        (text, images): (String, Vec<String>),
        mut origin: ChatOrigin,
        subscriber: Subscriber,
        reach: Reach,
        nested: bool,
    ) -> Result<(), HubError> {
        // An origin that travels into another session (sessions_send, a
        // sub-agent) does not carry the main session's exemption with it,
        // nor its chat's prompt addition: that belongs to the chat the
        // message was written in. Its layers it keeps.
        origin.main_session &= key.is_main();
        if nested {
            origin.prompt = None;
        }
        if self.is_stopping() {
            return Err(HubError::ShuttingDown);
        }
        self.agent_id(key.agent())?;
        self.check_size(&key, &text)?;
        // Make sure the session exists before anything is queued.
        let row = self.session_for(&key, &origin, reach).await?;
        let mut slots = self.lock();
        let slot = slots.entry(key.to_string()).or_default();
        if slot.running.is_some() {
            slot.pending.push(Pending {
                text,
                images,
                origin,
                subscriber: subscriber.clone(),
            });
            let _ = subscriber.send(Event::Queued {
                position: slot.pending.len() as u32,
            });
            return Ok(());
        }
        let cancel = self.shutdown.child_token();
        let subscribers = Arc::new(Mutex::new(vec![subscriber]));
        slot.running = Some(cancel.clone());
        slot.answering = stop::senders(&origin);
        let log = slot.log.take();
        drop(slots);
        let text = if origin.is_owner() {
            text
        } else {
            origin.attributed(&text)
        };
        let hub = self.clone();
        self.tasks.spawn(async move {
            hub.drive(
                Driven { key, row, nested },
                log,
                (text, images, origin),
                cancel,
                subscribers,
            )
            .await
        });
        Ok(())
    }

    /// Runs turns for one session until its queue is empty. `row` stays
    /// valid throughout: reset and delete are refused while a driver runs
    /// (see [`Hub::forget`]).
    async fn drive(
        self,
        session: Driven,
        mut log: Option<SessionLog>,
        (mut text, mut images, mut origin): (String, Vec<String>, ChatOrigin),
        mut cancel: CancellationToken,
        mut subscribers: Arc<Mutex<Vec<Subscriber>>>,
    ) {
        let key = &session.key;
        loop {
            let emit_to = subscribers.clone();
            let emit: super::session_log::Emit = Arc::new(move |event: Event| {
                let mut subs = emit_to.lock().unwrap_or_else(|e| e.into_inner());
                // A client that went away stops receiving; the turn goes on.
                subs.retain(|s| s.send(event.clone()).is_ok());
            });
            let outcome = self
                .one_turn(
                    &session,
                    &mut log,
                    (text, images, origin),
                    cancel,
                    emit.clone(),
                )
                .await;
            if let Err(e) = outcome {
                emit(Event::Error {
                    code: "internal",
                    message: e.to_string(),
                });
            }

            let Some(next) = self.take_next(key, &mut log) else {
                return;
            };
            (text, images, origin, subscribers, cancel) = next;
        }
    }

    async fn one_turn(
        &self,
        session: &Driven,
        log: &mut Option<SessionLog>,
        (text, images, origin): (String, Vec<String>, ChatOrigin),
        cancel: CancellationToken,
        emit: super::session_log::Emit,
    ) -> Result<(), HubError> {
        let (key, row, nested) = (&session.key, &session.row, session.nested);
        let _permit = tokio::select! {
            p = self.limit.clone().acquire_owned(), if !nested => Some(p.map_err(|_| HubError::ShuttingDown)?),
            _ = std::future::ready(()), if nested => None,
            _ = cancel.cancelled() => {
                emit(Event::Finished { text: String::new(), segments: Vec::new(), stop_reason: "aborted", model_calls: 0, tool_calls: 0 });
                return Ok(());
            }
        };
        self.open_log(key, row, log).await?;
        let Some(session_log) = log.as_mut() else {
            return Ok(());
        };
        let config = self.rt.config();
        let Some(agent) = config.agent(key.agent()).cloned() else {
            return Err(HubError::UnknownAgent {
                agent: key.agent().to_string(),
                known: String::new(),
            });
        };
        // The turn's last event waits for the registry: a client that
        // lists sessions the moment its turn ends sees this turn's outcome.
        let last: Arc<Mutex<Option<Event>>> = Arc::default();
        let held = last.clone();
        let to_client = emit.clone();
        let turn_emit: super::session_log::Emit = Arc::new(move |event: Event| {
            if matches!(event, Event::Finished { .. } | Event::Error { .. }) {
                *held.lock().unwrap_or_else(|e| e.into_inner()) = Some(event);
            } else {
                to_client(event);
            }
        });
        let turn = Turn {
            rt: &self.rt,
            config: config.clone(),
            agent: &agent,
            session: row,
            key,
            turn_id: uuid::Uuid::now_v7().to_string(),
            cancel,
            emit: turn_emit,
            sessions: std::sync::Arc::new(self.clone()),
            origin,
        };
        // Marked until finish_turn: a crash meanwhile is reported at the
        // next start.
        self.rt.registry.start_turn(&row.id);
        // The outcome goes to the registry as soon as it is known and is
        // written while the transcript is fsynced; the last event still
        // waits for both.
        let registry = &self.rt.registry;
        let (_, recording) = turn
            .run_then(session_log, text, images, |outcome| {
                registry.finish_turn(&row.id, outcome.clone())
            })
            .await;
        let recorded = recording.await;
        let last = last.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(event) = last {
            emit(event);
        }
        recorded?;
        Ok(())
    }

    /// A single message may take at most half the model's context window:
    /// the rest is for the system prompt, the tools, the history and the
    /// answer. A larger one is refused before it is recorded, instead of
    /// being sent whole and failing at the provider.
    fn check_size(&self, key: &SessionKey, text: &str) -> Result<(), HubError> {
        use crate::llm::windows::ContextWindow;
        let config = self.rt.config();
        let Some(agent) = config.agent(key.agent()) else {
            return Ok(());
        };
        let window = agent.context_window();
        let limit = window / 2;
        let tokens = crate::context::tokens::estimate_text(text);
        if tokens > limit {
            return Err(HubError::TooLarge {
                agent: agent.id.clone(),
                tokens,
                limit,
                window,
            });
        }
        Ok(())
    }

    /// `pincer sessions compact`: summarises the session's older history
    /// now. Refused while a turn runs; messages arriving meanwhile queue
    /// and start their turn when it is done.
    pub async fn compact(&self, row: SessionRow) -> Result<super::compaction::Compacted, HubError> {
        if self.is_stopping() {
            return Err(HubError::ShuttingDown);
        }
        let key =
            SessionKey::parse(&row.key).map_err(|e| HubError::BadSessionName(e.to_string()))?;
        let cancel = self.shutdown.child_token();
        let mut log = {
            let mut slots = self.lock();
            let slot = slots.entry(row.key.clone()).or_default();
            if slot.running.is_some() {
                return Err(HubError::Busy(row.key.clone()));
            }
            slot.running = Some(cancel.clone());
            slot.log.take()
        };
        let result = self.compact_locked(&key, &row, &mut log, &cancel).await;
        self.release(key, row, log);
        result
    }

    async fn compact_locked(
        &self,
        key: &SessionKey,
        row: &SessionRow,
        log: &mut Option<SessionLog>,
        cancel: &CancellationToken,
    ) -> Result<super::compaction::Compacted, HubError> {
        self.open_log(key, row, log).await?;
        let Some(session_log) = log.as_mut() else {
            return Err(HubError::Transcript(std::io::Error::other(
                "the transcript could not be opened",
            )));
        };
        let config = self.rt.config();
        let agent = config
            .agent(key.agent())
            .cloned()
            .ok_or_else(|| HubError::UnknownAgent {
                agent: key.agent().to_string(),
                known: String::new(),
            })?;
        let emit: super::session_log::Emit = Arc::new(|_| {});
        let compactor = super::compaction::Compactor {
            rt: &self.rt,
            config: &config,
            agent: &agent,
            key,
            session_id: &row.id,
            owner: true,
            emit: &emit,
            cancel,
        };
        let turn = uuid::Uuid::now_v7().to_string();
        let result = compactor.run(session_log, &turn, "manual", true, 0).await;
        if let Err(e) = session_log.transcript.sync() {
            tracing::error!(error = %e, "cannot fsync the transcript");
        }
        result.map_err(HubError::Compaction)
    }

    /// Ends an exclusive use of a session's slot: keeps the log, or hands
    /// it to a driver for the messages that queued meanwhile.
    fn release(&self, key: SessionKey, row: SessionRow, mut log: Option<SessionLog>) {
        let Some((text, images, origin, subscribers, cancel)) = self.take_next(&key, &mut log)
        else {
            return;
        };
        let hub = self.clone();
        self.tasks.spawn(async move {
            hub.drive(
                Driven {
                    key,
                    row,
                    nested: false,
                },
                log,
                (text, images, origin),
                cancel,
                subscribers,
            )
            .await
        });
    }

    /// After a turn or a compaction: the messages queued meanwhile become
    /// the next turn (the slot stays running), or the slot goes idle and
    /// keeps `log` for the next one.
    fn take_next(&self, key: &SessionKey, log: &mut Option<SessionLog>) -> Option<NextTurn> {
        let mut slots = self.lock();
        let slot = slots.get_mut(&key.to_string())?;
        if slot.pending.is_empty() || self.is_stopping() {
            refuse_pending(slot);
            slot.running = None;
            slot.answering.clear();
            slot.log = log.take();
            slot.idle_since = Some(Instant::now());
            close_oldest_idle(&mut slots, IDLE_SESSIONS_KEPT);
            return None;
        }
        let (text, images, origin, subscribers) = next_turn(slot);
        let cancel = self.shutdown.child_token();
        slot.running = Some(cancel.clone());
        slot.answering = stop::senders(&origin);
        Some((text, images, origin, subscribers, cancel))
    }

    /// Opens the session's transcript unless `log` holds it already.
    async fn open_log(
        &self,
        key: &SessionKey,
        row: &SessionRow,
        log: &mut Option<SessionLog>,
    ) -> Result<(), HubError> {
        if log.as_ref().is_some_and(|l| l.session_id == row.id) {
            return Ok(());
        }
        let path = self.rt.home.transcript(key.agent(), &row.id);
        *log = Some(
            SessionLog::open(path, row.id.clone())
                .await
                .map_err(HubError::Transcript)?,
        );
        Ok(())
    }

    /// Whether shutdown has begun (no new turns; running ones finish or
    /// are aborted at the end of the grace).
    pub fn is_stopping(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Aborts the running turn of a session; false if none runs.
    pub fn abort(&self, key: &str) -> bool {
        match self.lock().get(key).and_then(|s| s.running.as_ref()) {
            Some(r) => {
                r.cancel();
                true
            }
            None => false,
        }
    }

    /// Forgets a session's cached transcript (after reset or delete);
    /// refused while a turn runs.
    pub fn forget(&self, key: &str) -> Result<(), HubError> {
        let mut slots = self.lock();
        if slots.get(key).is_some_and(|s| s.running.is_some()) {
            return Err(HubError::Busy(key.to_string()));
        }
        slots.remove(key);
        Ok(())
    }

    /// Stops accepting turns, aborts queued ones and waits up to `grace`
    /// for running turns to finish, then aborts them.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("turns still running after {grace:?}; aborting them");
            self.shutdown.cancel();
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(5), self.tasks.wait()).await;
        }
        self.shutdown.cancel();
    }
}

/// The next turn of a session: its message and images, origin,
/// subscribers and the token that cancels it.
type NextTurn = (
    String,
    Vec<String>,
    ChatOrigin,
    Arc<Mutex<Vec<Subscriber>>>,
    CancellationToken,
);

/// Everything that queued up, as the next turn: the messages joined (and
/// their images, in order), the turn run under all of their origins at
/// once, and all their subscribers.
fn next_turn(slot: &mut Slot) -> (String, Vec<String>, ChatOrigin, Arc<Mutex<Vec<Subscriber>>>) {
    let pending: Vec<Pending> = slot.pending.drain(..).collect();
    let origins: Vec<ChatOrigin> = pending.iter().map(|p| p.origin.clone()).collect();
    let text = join_messages(&pending);
    let images = pending.iter().flat_map(|p| p.images.clone()).collect();
    let subscribers = Arc::new(Mutex::new(
        pending.into_iter().map(|p| p.subscriber).collect(),
    ));
    (text, images, ChatOrigin::merge(&origins), subscribers)
}

/// The queued messages as one user message. When anyone but the owner
/// wrote one of them, each keeps its sender's name, so the model knows who
/// asked what.
fn join_messages(pending: &[Pending]) -> String {
    let attribute = pending.iter().any(|p| !p.origin.is_owner());
    pending
        .iter()
        .map(|p| {
            if attribute {
                p.origin.attributed(&p.text)
            } else {
                p.text.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Drops the slots (and so closes the transcripts) of the least recently
/// used idle sessions until at most `keep` are left. An idle slot holds
/// nothing else: its queue is empty and no turn runs.
fn close_oldest_idle(slots: &mut HashMap<String, Slot>, keep: usize) {
    loop {
        let idle = slots.values().filter(|s| s.running.is_none()).count();
        if idle <= keep {
            return;
        }
        let oldest = slots
            .iter()
            .filter(|(_, s)| s.running.is_none())
            .min_by_key(|(_, s)| s.idle_since)
            .map(|(key, _)| key.clone());
        match oldest {
            Some(key) => slots.remove(&key),
            None => return,
        };
    }
}

/// Tells everyone still queued that their message was not delivered
/// (pincerd is shutting down).
fn refuse_pending(slot: &mut Slot) {
    for p in slot.pending.drain(..) {
        let _ = p.subscriber.send(Event::Error {
            code: "aborted",
            message: "pincerd is shutting down; the message was not delivered".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ToolLayer;
    use crate::tools::ToolRegistry;
    use crate::tools::policy::{PolicyInput, resolve};

    /// A stranger in a Telegram group whose sender layer denies `deny`.
    fn stranger(id: &str, deny: &str) -> ChatOrigin {
        ChatOrigin {
            sender: format!("telegram:{id}"),
            name: format!("user{id}"),
            principal: crate::session::Principal::Group {
                channel: "telegram".into(),
                chat: "-100".into(),
            },
            chat: crate::tools::origin::ChatPlace::Group {
                channel: "telegram".into(),
                chat_id: "-100".into(),
                thread_id: None,
            },
            other_chats: Vec::new(),
            in_channel: true,
            channel: vec![ToolLayer::default()],
            role_layers: Vec::new(),
            sender_layers: vec![ToolLayer {
                deny: vec![deny.into()],
                ..Default::default()
            }],
            main_session: false,
            prompt: None,
            source: None,
        }
    }

    fn pending(origin: ChatOrigin, text: &str) -> Pending {
        Pending {
            text: text.into(),
            images: Vec::new(),
            origin,
            subscriber: mpsc::unbounded_channel().0,
        }
    }

    #[test]
    fn a_turn_from_several_senders_runs_under_all_their_layers() {
        let mut slot = Slot::default();
        slot.pending
            .push(pending(stranger("1", "sessions_history"), "what's up?"));
        slot.pending
            .push(pending(stranger("2", "sessions_list"), "list them"));
        let (text, _, origin, _) = next_turn(&mut slot);

        // Each message keeps its sender's name.
        assert!(text.contains("user1 (telegram:1)]\nwhat's up?"), "{text}");
        assert!(text.contains("user2 (telegram:2)]\nlist them"), "{text}");

        // The second sender's layer applies too, not only the first's.
        let config = crate::config::load::parse(
            &crate::home::Home::at("/tmp/pincer-hub-test"),
            std::path::Path::new("/h/config.toml"),
            "[agents.main]\n",
            &|| None,
        )
        .unwrap();
        let agent = config.agent("main").unwrap();
        let registry = ToolRegistry::core();
        let input = PolicyInput::for_origin(agent, &origin, None);
        let offered: Vec<String> = resolve(&registry, &config.policy, &input)
            .offered()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert!(
            offered.contains(&"session_status".to_string()),
            "{offered:?}"
        );
        assert!(
            !offered.contains(&"sessions_history".to_string()),
            "{offered:?}"
        );
        assert!(
            !offered.contains(&"sessions_list".to_string()),
            "{offered:?}"
        );
        assert_eq!(origin.sender, "telegram:1,telegram:2");
    }

    #[test]
    fn queued_messages_bring_their_images_in_order() {
        let mut slot = Slot::default();
        for (text, images) in [
            ("one", vec!["inbox/a.jpg"]),
            ("two", vec![]),
            ("three", vec!["inbox/b.png", "inbox/c.gif"]),
        ] {
            let mut p = pending(ChatOrigin::owner(true), text);
            p.images = images.into_iter().map(String::from).collect();
            slot.pending.push(p);
        }
        let (_, images, _, _) = next_turn(&mut slot);
        assert_eq!(images, ["inbox/a.jpg", "inbox/b.png", "inbox/c.gif"]);
    }

    #[test]
    fn the_owners_queued_messages_are_joined_as_they_are() {
        let mut slot = Slot::default();
        slot.pending.push(pending(ChatOrigin::owner(true), "one"));
        slot.pending.push(pending(ChatOrigin::owner(true), "two"));
        let (text, _, origin, _) = next_turn(&mut slot);
        assert_eq!(text, "one\n\ntwo");
        assert!(origin.is_owner() && origin.main_session);
    }
}
