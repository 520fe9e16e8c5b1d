//! Our own Discord server for what crabline ([`crate::discord`]) lacks:
//! interactions (buttons, slash commands and their callbacks within 3 s),
//! attachments both ways, rate limits (429 with Discord's body and
//! headers) and 5xx answers, gateway lifecycle controls (RECONNECT,
//! INVALID_SESSION, close codes, a server that stops acknowledging
//! heartbeats, a RESUME that replays more than it should, a second live
//! socket), guild members with roles, history that was never dispatched
//! (catch-up after downtime), and threads and forum posts.
//!
//! What it speaks is the real wire format, as Discord documents it and a
//! bridge sends and reads it: Discord REST v10 under
//! `{origin}/api/v10/` (JSON bodies, and `multipart/form-data` with
//! `payload_json` and `files[n]` for uploads; snowflakes as strings; errors
//! as `{"message", "code"}`; 401 for another `Authorization: Bot …`), and
//! gateway v10 with JSON encoding and no compression on a port of its own,
//! as Discord's gateway is a host of its own: `GET /api/v10/gateway/bot`
//! names it. The gateway sends HELLO, takes IDENTIFY (wrong token: close
//! 4004; a privileged intent the fake was told is not enabled, such as
//! MESSAGE_CONTENT: close 4014), answers READY and a GUILD_CREATE for the
//! fixture guild, acknowledges heartbeats, and takes RESUME (the events
//! after the client's `seq` from the session's buffer, then RESUMED; an
//! unknown or invalidated session gets INVALID_SESSION `false`). Events are
//! sent only for the intents the session asked for (guild messages, direct
//! messages, guilds), and without MESSAGE_CONTENT a guild message that does
//! not mention the bot arrives with its content, attachments and
//! components blanked, as Discord does.
//!
//! Its fixtures: the bot [`BOT_ID`] (its application id is the same, as
//! for every bot made today), one guild [`GUILD_ID`] with the text
//! channels [`CHANNEL_ID`] and [`OTHER_CHANNEL_ID`], the forum
//! [`FORUM_ID`], the `@everyone` role and [`ROLE_ID`];
//! [`DiscordFake::add_text_channel`] adds more text channels. Ids it makes
//! are snowflakes from the current time, increasing.
//!
//! The test's side: people writing ([`DiscordFake::user_says`] dispatches
//! MESSAGE_CREATE with a full message object; [`DiscordFake::put_history`]
//! only stores one, for catch-up), pressing buttons and running slash
//! commands ([`DiscordFake::press_button`], [`DiscordFake::slash_command`]:
//! INTERACTION_CREATE), threads and forum posts; reading what the bot did
//! ([`DiscordFake::bot_messages`], [`DiscordFake::watch`] for one
//! channel's as they come, [`DiscordFake::callbacks`],
//! [`DiscordFake::calls`], [`DiscordFake::deliveries`]); and faults
//! ([`DiscordFake::fail_next`], the gateway controls).
//!
//! Where it is simpler than Discord: one shard, one guild; a message's
//! `mentions` come from `<@id>` in its content (and the replied-to author,
//! as Discord's reply ping does); permissions are not checked (a channel's
//! overwrites are only what `GET /channels/{id}` answers:
//! [`DiscordFake::set_overwrites`]); rate limits happen only when a test
//! asks for them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request, Response as WsResponse,
};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The bot token the fake accepts (REST `Authorization: Bot …`, and the
/// gateway's IDENTIFY and RESUME with or without the `Bot ` prefix, as
/// Discord takes it). Its first part is the bot's id in base64, as in a
/// real token.
pub const TOKEN: &str = "MTAwMDAwMDAwMDAwMDAwMDAx.pincer.fake-discord";
/// The bot's user id.
pub const BOT_ID: &str = "100000000000000001";
/// The bot's application id (the bot's user id, as for every bot made today).
pub const APPLICATION_ID: &str = BOT_ID;
/// The bot's username.
pub const BOT_NAME: &str = "pincer_fake";
/// The fixture guild.
pub const GUILD_ID: &str = "100000000000000010";
/// A text channel of the guild (`#general`).
pub const CHANNEL_ID: &str = "100000000000000011";
/// Another text channel of the guild (`#random`).
pub const OTHER_CHANNEL_ID: &str = "100000000000000012";
/// A forum channel of the guild (type 15, `#forum`): its posts are threads.
pub const FORUM_ID: &str = "100000000000000013";
/// A role of the guild (`helpers`) besides `@everyone` (whose id is the
/// guild's).
pub const ROLE_ID: &str = "100000000000000014";
/// The guild's owner (a person, not the bot).
pub const OWNER_ID: &str = "100000000000000015";

/// The longest message content Discord takes, in characters.
pub const MAX_CONTENT: usize = 2000;
/// How long an interaction waits for its callback.
pub const INTERACTION_WINDOW: Duration = Duration::from_secs(3);

/// Gateway intents (the bits of IDENTIFY's `intents`) the fake looks at.
pub mod intents {
    pub const GUILDS: u64 = 1 << 0;
    /// Privileged.
    pub const GUILD_MEMBERS: u64 = 1 << 1;
    pub const GUILD_MESSAGES: u64 = 1 << 9;
    pub const GUILD_MESSAGE_REACTIONS: u64 = 1 << 10;
    pub const DIRECT_MESSAGES: u64 = 1 << 12;
    /// Privileged.
    pub const MESSAGE_CONTENT: u64 = 1 << 15;
    /// Every intent Discord defines (bits 0–25).
    pub const ALL: u64 = (1 << 26) - 1;
}

const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;
/// Events kept per session for RESUME.
const SESSION_BUFFER: usize = 1000;

/// How the fake is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// HELLO's `heartbeat_interval` (Discord: 41.25 s; short here so that
    /// a missed ACK is noticed quickly).
    pub heartbeat_interval: Duration,
    /// Whether the MESSAGE_CONTENT privileged intent is enabled for the bot
    /// in the developer portal: when not, an IDENTIFY asking for it is
    /// closed with 4014.
    pub message_content_enabled: bool,
    /// The same for GUILD_MEMBERS.
    pub members_intent_enabled: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_millis(1000),
            message_content_enabled: true,
            members_intent_enabled: true,
        }
    }
}

/// Someone writing: a person or another bot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Author {
    pub id: String,
    pub name: String,
    pub bot: bool,
}

impl Author {
    /// A person with this snowflake and username.
    pub fn user(id: &str, name: &str) -> Self {
        Self {
            id: id.to_string(),
            name: name.to_string(),
            bot: false,
        }
    }

    /// Another bot rather than a person.
    pub fn bot(mut self) -> Self {
        self.bot = true;
        self
    }

    /// The Discord user object.
    pub fn json(&self) -> Value {
        let mut user = json!({
            "id": self.id, "username": self.name, "global_name": self.name,
            "discriminator": "0", "avatar": null, "public_flags": 0, "flags": 0,
            "banner": null, "accent_color": null, "avatar_decoration_data": null,
        });
        if self.bot {
            user["bot"] = json!(true);
        }
        user
    }
}

/// The bot as a Discord user object.
pub fn bot_user() -> Value {
    let mut user = Author::user(BOT_ID, BOT_NAME).bot().json();
    user["global_name"] = Value::Null;
    user
}

/// A file: one the test attaches to a user's message, or one the bot
/// uploaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub filename: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// A user's message beyond its author and channel: built with
/// [`Say::text`] and the setters.
#[derive(Clone, Debug, Default)]
pub struct Say {
    content: String,
    mention_bot: bool,
    reply_to: Option<String>,
    quiet_reply: bool,
    roles: Option<Vec<String>>,
    attachments: Vec<Upload>,
    ago: Option<Duration>,
}

impl Say {
    /// A message with this content; `<@id>` in it mentions that user, as
    /// Discord's client writes a mention.
    pub fn text(content: &str) -> Self {
        Self {
            content: content.to_string(),
            ..Self::default()
        }
    }

    /// Mentions the bot: `<@BOT_ID> ` in front of the content.
    pub fn mention_bot(mut self) -> Self {
        self.mention_bot = true;
        self
    }

    /// A reply to message `message_id` of the same channel (the bot's or a
    /// user's): `message_reference` and `referenced_message`, and its author
    /// in `mentions` (Discord's reply ping) unless [`Say::quiet_reply`].
    pub fn reply_to(mut self, message_id: &str) -> Self {
        self.reply_to = Some(message_id.to_string());
        self
    }

    /// A reply with the ping turned off.
    pub fn quiet_reply(mut self) -> Self {
        self.quiet_reply = true;
        self
    }

    /// The author's roles in the guild (kept for later messages and
    /// `GET /guilds/{g}/members/{u}`).
    pub fn roles(mut self, roles: &[&str]) -> Self {
        self.roles = Some(roles.iter().map(|r| r.to_string()).collect());
        self
    }

    /// Attaches a file (served from the fake's CDN route).
    pub fn attach(mut self, filename: &str, content_type: &str, bytes: &[u8]) -> Self {
        self.attachments.push(Upload {
            filename: filename.to_string(),
            content_type: content_type.to_string(),
            bytes: bytes.to_vec(),
        });
        self
    }

    /// Written this long ago: its snowflake and timestamp say so (for
    /// history older than a catch-up window). Only for [`DiscordFake::put_history`].
    pub fn ago(mut self, ago: Duration) -> Self {
        self.ago = Some(ago);
        self
    }
}

/// A message the bot posted (REST or an interaction's response), as the
/// fake stores it now (after any edits), with the request that made it.
#[derive(Clone, Debug)]
pub struct BotMessage {
    /// The message object as `GET …/messages/{id}` answers it.
    pub message: Value,
    /// The JSON body of the request that created it (`payload_json` for an
    /// upload): `allowed_mentions`, `components`, `message_reference`, …
    pub request: Value,
    /// The files uploaded with it.
    pub files: Vec<Upload>,
    /// The bodies of the edits (PATCH) made to it since, in order.
    pub edits: Vec<Value>,
    /// When the fake received the request that created it.
    pub at: Instant,
}

impl BotMessage {
    pub fn id(&self) -> &str {
        self.message["id"].as_str().unwrap_or_default()
    }

    pub fn channel_id(&self) -> &str {
        self.message["channel_id"].as_str().unwrap_or_default()
    }

    pub fn content(&self) -> &str {
        self.message["content"].as_str().unwrap_or_default()
    }
}

/// An HTTP request the fake received (REST or CDN).
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    pub status: u16,
    /// The JSON body (`payload_json` for a multipart one); `Null` for none.
    pub body: Value,
    pub at: Instant,
}

/// What the next matching request is answered with instead of its result.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// 429 with `{"message": "You are being rate limited.", "retry_after",
    /// "global"}` and the headers `retry-after`, `x-ratelimit-bucket`,
    /// `x-ratelimit-limit`, `x-ratelimit-remaining: 0`,
    /// `x-ratelimit-reset`, `x-ratelimit-reset-after`, `x-ratelimit-scope`
    /// (and `x-ratelimit-global` when global).
    RateLimited { retry_after: f64, global: bool },
    /// This status (500, 502, 503, …) with Discord's body for it.
    Status(u16),
    /// The request is carried out, then answered with this status, as
    /// when Discord did the work and the answer was lost on the way (a 502
    /// from its edge, a connection cut).
    AnswerLost(u16),
}

/// A `press_button` or `slash_command` the fake dispatched.
#[derive(Clone, Debug)]
pub struct Interaction {
    pub id: String,
    pub token: String,
    /// The INTERACTION_CREATE payload (`d`).
    pub payload: Value,
}

/// An interaction callback the bot made.
#[derive(Clone, Debug)]
pub struct Callback {
    pub interaction_id: String,
    /// The callback type (4 message, 5 deferred message, 6 deferred
    /// update, 7 update message, 9 modal, …).
    pub kind: u64,
    pub data: Value,
    /// How long after the dispatch it came.
    pub after: Duration,
    /// Whether it came within [`INTERACTION_WINDOW`] (a later one is
    /// refused with 404 "Unknown interaction", as Discord does).
    pub in_time: bool,
}

/// A gateway connection, numbered from 1 in the order they opened.
#[derive(Clone, Debug)]
pub struct Connection {
    pub number: usize,
    pub opened_at: Instant,
    /// When it closed (either side); `None` while live.
    pub closed_at: Option<Instant>,
    /// The close code (the server's or the client's), if one was sent.
    pub close_code: Option<u16>,
    pub closed_by_server: bool,
    /// The session it identified or resumed.
    pub session_id: Option<String>,
    /// Whether it resumed a session rather than identifying.
    pub resumed: bool,
    /// Heartbeats received on it.
    pub heartbeats: usize,
}

/// A dispatch (op 0) sent on a connection.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub connection: usize,
    pub session_id: String,
    pub seq: u64,
    pub event: String,
    /// The event's `d`.
    pub data: Value,
    /// Whether it was sent again by a RESUME.
    pub replayed: bool,
    pub at: Instant,
}

struct FaultRule {
    method: String,
    pattern: Vec<String>,
    remaining: u32,
    fault: Fault,
}

struct PendingInteraction {
    token: String,
    channel_id: String,
    /// The message a button was on.
    message_id: Option<String>,
    /// The original response's message, once there is one.
    response_id: Option<String>,
    created: Instant,
    answered: bool,
}

struct Session {
    intents: u64,
    seq: u64,
    events: VecDeque<(u64, String, Value)>,
    valid: bool,
    connection: Option<usize>,
}

enum Out {
    Text(String),
    Close(u16, String),
}

struct Conn {
    info: Connection,
    tx: Option<mpsc::UnboundedSender<Out>>,
}

#[derive(Default)]
struct Inner {
    options: Options,
    last_snowflake: u64,
    channels: BTreeMap<String, Value>,
    roles: Vec<Value>,
    /// Guild members by user id (the member object with its `user`).
    members: BTreeMap<String, Value>,
    /// Every message by channel, oldest first.
    messages: HashMap<String, Vec<Value>>,
    bot_messages: Vec<BotMessage>,
    /// Per channel, who is told of each message the bot posts there
    /// ([`DiscordFake::watch`]).
    watchers: HashMap<String, mpsc::UnboundedSender<BotMessage>>,
    /// Files by attachment id: the channel and the file.
    attachments: HashMap<String, (String, Upload)>,
    dm_channels: HashMap<String, String>,
    calls: Vec<Call>,
    faults: Vec<FaultRule>,
    /// The bot's message for each `nonce` it sent with `enforce_nonce`,
    /// and when (Discord answers the same message again for a few
    /// minutes instead of creating another).
    nonces: HashMap<String, (String, Instant)>,
    interactions: HashMap<String, PendingInteraction>,
    callbacks: Vec<Callback>,
    /// Application commands: the global ones under "", a guild's under its id.
    commands: BTreeMap<String, Vec<Value>>,
    sessions: HashMap<String, Session>,
    connections: Vec<Conn>,
    deliveries: Vec<Delivery>,
    identifies: Vec<Value>,
    resumes: Vec<Value>,
    stop_acking: bool,
    replay_on_resume: Option<usize>,
    /// Discord cannot be reached ([`DiscordFake::outage`]).
    down: bool,
    origin: String,
    gateway_url: String,
    /// READY's `resume_gateway_url` when not the gateway's own address.
    resume_url: Option<String>,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Woken on every change a test may wait for.
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake on 127.0.0.1 (REST and CDN on one port, the gateway on
/// another); it serves until the runtime ends.
#[derive(Clone)]
pub struct DiscordFake {
    addr: SocketAddr,
    gateway_addr: SocketAddr,
    shared: Arc<Shared>,
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The ISO 8601 timestamp Discord writes for a snowflake's time.
fn timestamp_of(snowflake: &str) -> String {
    let ms = snowflake
        .parse::<u64>()
        .map_or(0, |s| (s >> 22) + DISCORD_EPOCH_MS);
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

fn now_timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

impl Inner {
    /// A new snowflake for now, above every one made before.
    fn snowflake(&mut self) -> String {
        self.snowflake_at(SystemTime::now())
    }

    /// A new snowflake for `at`; above every one made before when `at` is
    /// now, so that ids increase as Discord's do.
    fn snowflake_at(&mut self, at: SystemTime) -> String {
        let ms = unix_ms(at).saturating_sub(DISCORD_EPOCH_MS);
        let id = (ms << 22) | 1;
        if at + Duration::from_secs(1) < SystemTime::now() {
            // history: older than anything live, but unique
            let taken = |id: u64| {
                let id = id.to_string();
                self.messages
                    .values()
                    .flatten()
                    .any(|m| m["id"].as_str() == Some(id.as_str()))
            };
            let mut id = id;
            while taken(id) {
                id += 1;
            }
            return id.to_string();
        }
        let id = id.max(self.last_snowflake + 1);
        self.last_snowflake = id;
        id.to_string()
    }

    fn channel(&self, id: &str) -> Option<&Value> {
        self.channels.get(id)
    }

    fn guild_of(&self, channel_id: &str) -> Option<String> {
        self.channel(channel_id)
            .and_then(|c| c["guild_id"].as_str())
            .map(str::to_string)
    }

    fn find_message(&self, channel_id: &str, message_id: &str) -> Option<&Value> {
        self.messages
            .get(channel_id)?
            .iter()
            .find(|m| m["id"] == message_id)
    }

    fn find_message_mut(&mut self, channel_id: &str, message_id: &str) -> Option<&mut Value> {
        self.messages
            .get_mut(channel_id)?
            .iter_mut()
            .find(|m| m["id"] == message_id)
    }

    /// Stores a message in its channel, in id order.
    fn store_message(&mut self, message: Value) {
        let channel_id = message["channel_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let id: u64 = message["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let list = self.messages.entry(channel_id.clone()).or_default();
        let at = list
            .iter()
            .position(|m| {
                m["id"]
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0)
                    > id
            })
            .unwrap_or(list.len());
        list.insert(at, message);
        let newest = list.last().map(|m| m["id"].clone()).unwrap_or(Value::Null);
        if let Some(channel) = self.channels.get_mut(&channel_id) {
            channel["last_message_id"] = newest;
        }
    }

    /// The member object of `user` in the guild, made on first sight.
    fn member(&mut self, user: &Value, roles: Option<Vec<String>>) -> Value {
        let id = user["id"].as_str().unwrap_or_default().to_string();
        let member = self
            .members
            .entry(id)
            .or_insert_with(|| member_object(user, &[]));
        if let Some(roles) = roles {
            member["roles"] = json!(roles);
        }
        member.clone()
    }

    /// The attachment object of a stored file.
    fn attachment(&mut self, channel_id: &str, file: Upload) -> Value {
        let id = self.snowflake();
        let url = cdn_url(&self.origin, channel_id, &id, &file.filename);
        let object = json!({
            "id": id, "filename": file.filename, "size": file.bytes.len(),
            "url": url, "proxy_url": url, "content_type": file.content_type,
        });
        self.attachments.insert(id, (channel_id.to_string(), file));
        object
    }

    /// Dispatches an event to every valid session that wants it, and sends
    /// it on the connection of each that has a live one.
    fn dispatch(&mut self, event: &str, data: &Value) {
        let ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.valid)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.dispatch_to(&id, event, data);
        }
    }

    fn dispatch_to(&mut self, session_id: &str, event: &str, data: &Value) {
        let Some(session) = self.sessions.get_mut(session_id) else {
            return;
        };
        if !wants(session.intents, event, data) {
            return;
        }
        let data = shaped(session.intents, event, data);
        session.seq += 1;
        let seq = session.seq;
        session
            .events
            .push_back((seq, event.to_string(), data.clone()));
        if session.events.len() > SESSION_BUFFER {
            session.events.pop_front();
        }
        if let Some(conn) = session.connection {
            self.send_dispatch(conn, session_id, seq, event, data, false);
        }
    }

    /// Sends a dispatch on a live connection and records it.
    fn send_dispatch(
        &mut self,
        conn: usize,
        session_id: &str,
        seq: u64,
        event: &str,
        data: Value,
        replayed: bool,
    ) {
        let payload = json!({"op": 0, "s": seq, "t": event, "d": data});
        let Some(c) = self.conn_mut(conn) else {
            return;
        };
        if c.info.closed_at.is_some() {
            return;
        }
        if let Some(tx) = &c.tx {
            let _ = tx.send(Out::Text(payload.to_string()));
        }
        self.deliveries.push(Delivery {
            connection: conn,
            session_id: session_id.to_string(),
            seq,
            event: event.to_string(),
            data,
            replayed,
            at: Instant::now(),
        });
    }

    fn conn_mut(&mut self, number: usize) -> Option<&mut Conn> {
        self.connections.get_mut(number.checked_sub(1)?)
    }

    fn send(&mut self, conn: usize, payload: Value) {
        if let Some(tx) = self.conn_mut(conn).and_then(|c| c.tx.as_ref()) {
            let _ = tx.send(Out::Text(payload.to_string()));
        }
    }

    /// Closes a connection from the server's side with `code`.
    fn close(&mut self, conn: usize, code: u16, reason: &str) {
        let Some(c) = self.conn_mut(conn) else {
            return;
        };
        if c.info.closed_at.is_some() {
            return;
        }
        if let Some(tx) = c.tx.take() {
            let _ = tx.send(Out::Close(code, reason.to_string()));
        }
        c.info.closed_at = Some(Instant::now());
        c.info.close_code = Some(code);
        c.info.closed_by_server = true;
        self.detach(conn);
    }

    /// The connection no longer carries its session's events.
    fn detach(&mut self, conn: usize) {
        for session in self.sessions.values_mut() {
            if session.connection == Some(conn) {
                session.connection = None;
            }
        }
    }

    fn live(&self) -> Vec<usize> {
        self.connections
            .iter()
            .filter(|c| c.info.closed_at.is_none())
            .map(|c| c.info.number)
            .collect()
    }
}

/// Whether a session with these intents gets this event.
fn wants(intents: u64, event: &str, data: &Value) -> bool {
    match event {
        "MESSAGE_CREATE" | "MESSAGE_UPDATE" | "MESSAGE_DELETE" => {
            if data.get("guild_id").is_some_and(Value::is_string) {
                intents & intents::GUILD_MESSAGES != 0
            } else {
                intents & intents::DIRECT_MESSAGES != 0
            }
        }
        "GUILD_CREATE" | "CHANNEL_CREATE" | "THREAD_CREATE" | "THREAD_UPDATE" => {
            intents & intents::GUILDS != 0
        }
        "GUILD_MEMBER_UPDATE" => intents & intents::GUILD_MEMBERS != 0,
        _ => true,
    }
}

/// The event as a session with these intents sees it: without
/// MESSAGE_CONTENT, a guild message that neither mentions the bot nor is
/// the bot's own comes with its content, embeds, attachments and
/// components empty.
fn shaped(intents: u64, event: &str, data: &Value) -> Value {
    let message = matches!(event, "MESSAGE_CREATE" | "MESSAGE_UPDATE");
    if !message || intents & intents::MESSAGE_CONTENT != 0 || !data["guild_id"].is_string() {
        return data.clone();
    }
    let own = data["author"]["id"] == BOT_ID;
    let mentioned = data["mentions"]
        .as_array()
        .is_some_and(|m| m.iter().any(|u| u["id"] == BOT_ID));
    if own || mentioned {
        return data.clone();
    }
    let mut data = data.clone();
    data["content"] = json!("");
    data["embeds"] = json!([]);
    data["attachments"] = json!([]);
    data["components"] = json!([]);
    data
}

fn cdn_url(origin: &str, channel_id: &str, id: &str, filename: &str) -> String {
    let (ex, is, hm) = signature(id);
    format!("{origin}/attachments/{channel_id}/{id}/{filename}?ex={ex}&is={is}&hm={hm}")
}

/// The fake's stand-in for the CDN's signed query: derived from the id,
/// required on download (a client that drops the query gets a 404, as
/// from Discord's CDN).
fn signature(id: &str) -> (String, String, String) {
    let n: u64 = id.parse().unwrap_or(0);
    let ex = format!("{:x}", (n >> 22) / 1000 + 86_400);
    let is = format!("{:x}", (n >> 22) / 1000);
    let hm = format!("{:016x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (ex, is, hm)
}

fn member_object(user: &Value, roles: &[String]) -> Value {
    json!({
        "user": user, "nick": null, "avatar": null, "banner": null, "roles": roles,
        "joined_at": "2024-01-01T00:00:00.000000+00:00", "premium_since": null,
        "deaf": false, "mute": false, "flags": 0, "pending": false,
        "communication_disabled_until": null,
    })
}

fn role_object(id: &str, name: &str, position: u64, permissions: &str) -> Value {
    json!({
        "id": id, "name": name, "description": null, "color": 0,
        "colors": {"primary_color": 0, "secondary_color": null, "tertiary_color": null},
        "hoist": false, "icon": null, "unicode_emoji": null, "position": position,
        "permissions": permissions, "managed": false, "mentionable": true, "flags": 0,
    })
}

fn text_channel(id: &str, name: &str, position: u64) -> Value {
    json!({
        "id": id, "type": 0, "guild_id": GUILD_ID, "position": position,
        "permission_overwrites": [], "name": name, "topic": null, "nsfw": false,
        "last_message_id": null, "rate_limit_per_user": 0, "parent_id": null, "flags": 0,
        "last_pin_timestamp": null,
    })
}

fn forum_channel(id: &str, name: &str, position: u64) -> Value {
    json!({
        "id": id, "type": 15, "guild_id": GUILD_ID, "position": position,
        "permission_overwrites": [], "name": name, "topic": null, "nsfw": false,
        "last_message_id": null, "rate_limit_per_user": 0, "parent_id": null, "flags": 0,
        "available_tags": [], "default_reaction_emoji": null,
        "default_thread_rate_limit_per_user": 0, "default_sort_order": null,
        "default_forum_layout": 0, "template": "",
    })
}

fn thread_channel(id: &str, parent: &str, name: &str, owner: &str) -> Value {
    let now = now_timestamp();
    json!({
        "id": id, "type": 11, "guild_id": GUILD_ID, "parent_id": parent, "owner_id": owner,
        "name": name, "last_message_id": null, "message_count": 0, "member_count": 1,
        "total_message_sent": 0, "rate_limit_per_user": 0, "flags": 0, "applied_tags": [],
        "thread_metadata": {
            "archived": false, "auto_archive_duration": 1440, "archive_timestamp": now,
            "locked": false, "create_timestamp": now,
        },
    })
}

fn user_for(inner: &Inner, id: &str) -> Value {
    if id == BOT_ID {
        return bot_user();
    }
    inner
        .members
        .get(id)
        .map(|m| m["user"].clone())
        .unwrap_or_else(|| {
            Author::user(id, &format!("user-{}", &id[id.len().saturating_sub(6)..])).json()
        })
}

/// The users `<@id>` and `<@!id>` in `content` mention.
fn mentioned_ids(content: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("<@") {
        rest = &rest[start + 2..];
        let body = rest.strip_prefix('!').unwrap_or(rest);
        if let Some(end) = body.find('>') {
            let id = &body[..end];
            if !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && !ids.iter().any(|i| i == id)
            {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

/// The roles `<@&id>` in `content` mentions.
fn mentioned_roles(content: &str) -> Vec<String> {
    content
        .split("<@&")
        .skip(1)
        .filter_map(|s| s.split_once('>').map(|(id, _)| id))
        .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

/// Who a message pings, as Discord decides it from its content and
/// `allowed_mentions` (absent: everything in the content may ping):
/// (`mention_everyone`, user ids, role ids).
fn pings(
    content: &str,
    allowed: Option<&Value>,
    replied_author: Option<&str>,
) -> (bool, Vec<String>, Vec<String>) {
    let parse: Vec<&str> = allowed
        .and_then(|a| a["parse"].as_array())
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let listed = |key: &str| -> Vec<String> {
        allowed
            .and_then(|a| a[key].as_array())
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let everyone_text = content.contains("@everyone") || content.contains("@here");
    let everyone = everyone_text && (allowed.is_none() || parse.contains(&"everyone"));
    let user_allowed = |id: &str| {
        allowed.is_none() || parse.contains(&"users") || listed("users").iter().any(|u| u == id)
    };
    let mut users: Vec<String> = mentioned_ids(content)
        .into_iter()
        .filter(|id| user_allowed(id))
        .collect();
    if let Some(author) = replied_author {
        let ping = allowed.is_none_or(|a| a["replied_user"] == true);
        if ping && !users.iter().any(|u| u == author) {
            users.push(author.to_string());
        }
    }
    let role_allowed = |id: &str| {
        allowed.is_none() || parse.contains(&"roles") || listed("roles").iter().any(|r| r == id)
    };
    let roles = mentioned_roles(content)
        .into_iter()
        .filter(|id| role_allowed(id))
        .collect();
    (everyone, users, roles)
}

/// Whether a path matches a pattern whose `*` segments match any one segment.
fn matches(pattern: &[String], path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    segments.len() == pattern.len()
        && pattern
            .iter()
            .zip(&segments)
            .all(|(p, s)| p == "*" || p == s)
}

impl DiscordFake {
    /// Starts the fake with the default [`Options`] on two free ports.
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    /// Starts the fake with these options.
    pub async fn start_with(options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Discord REST port");
        let gateway = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Discord gateway port");
        let addr = listener.local_addr().expect("REST address");
        let gateway_addr = gateway.local_addr().expect("gateway address");
        let mut inner = Inner {
            options,
            origin: format!("http://{addr}"),
            gateway_url: format!("ws://{gateway_addr}"),
            ..Inner::default()
        };
        for channel in [
            text_channel(CHANNEL_ID, "general", 0),
            text_channel(OTHER_CHANNEL_ID, "random", 1),
            forum_channel(FORUM_ID, "forum", 2),
        ] {
            inner.channels.insert(
                channel["id"].as_str().unwrap_or_default().to_string(),
                channel,
            );
        }
        inner.roles = vec![
            role_object(GUILD_ID, "@everyone", 0, "1071698660929"),
            role_object(ROLE_ID, "helpers", 1, "1071698660929"),
        ];
        inner
            .members
            .insert(BOT_ID.to_string(), member_object(&bot_user(), &[]));
        let owner = Author::user(OWNER_ID, "owner").json();
        inner
            .members
            .insert(OWNER_ID.to_string(), member_object(&owner, &[]));
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            changed: Notify::new(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let gateway_shared = shared.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = gateway.accept().await {
                tokio::spawn(serve_gateway(gateway_shared.clone(), stream));
            }
        });
        Self {
            addr,
            gateway_addr,
            shared,
        }
    }

    /// The origin to configure as the bridge's `api_url`
    /// (`http://127.0.0.1:PORT`; REST is under `/api/v10/`).
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The gateway's URL, as `GET /api/v10/gateway/bot` names it.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.gateway_addr)
    }

    fn changed(&self) {
        self.shared.changed.notify_waiters();
    }

    // ----- the test's side: people -----

    /// The DM channel between the bot and `user` (the one `POST
    /// /users/@me/channels` answers), made on first use.
    pub fn dm_channel(&self, user: &Author) -> String {
        let mut inner = self.shared.lock();
        dm_channel_for(&mut inner, &user.json())
    }

    /// A new text channel of the guild named `name`, dispatched as
    /// CHANNEL_CREATE; answers its id. Made before the bot connects, it is
    /// in the guild's GUILD_CREATE like the fixture channels (the load
    /// bench makes hundreds this way).
    pub fn add_text_channel(&self, name: &str) -> String {
        let mut inner = self.shared.lock();
        let id = inner.snowflake();
        let position = inner.channels.len() as u64;
        let channel = text_channel(&id, name, position);
        inner.channels.insert(id.clone(), channel.clone());
        inner.dispatch("CHANNEL_CREATE", &channel);
        drop(inner);
        self.changed();
        id
    }

    /// `author` writes in `channel` (a guild channel, a thread or a DM
    /// channel from [`Self::dm_channel`]): the message is stored and
    /// dispatched as MESSAGE_CREATE. Answers the message object.
    pub fn user_says(&self, channel: &str, author: &Author, say: Say) -> Value {
        let message = {
            let mut inner = self.shared.lock();
            let message = new_user_message(&mut inner, channel, author, say);
            inner.store_message(message.clone());
            inner.dispatch("MESSAGE_CREATE", &message);
            message
        };
        self.changed();
        message
    }

    /// Stores a message that was never dispatched, as if it was written
    /// while the bot was away: the bot finds it only by reading the
    /// channel's history. [`Say::ago`] dates it.
    pub fn put_history(&self, channel: &str, author: &Author, say: Say) -> Value {
        let message = {
            let mut inner = self.shared.lock();
            let message = new_user_message(&mut inner, channel, author, say);
            inner.store_message(message.clone());
            message
        };
        self.changed();
        message
    }

    /// Sets `user`'s roles in the guild (what `GET
    /// /guilds/{g}/members/{u}` and later messages say).
    pub fn set_roles(&self, user: &Author, roles: &[&str]) {
        let roles = roles.iter().map(|r| r.to_string()).collect();
        self.shared.lock().member(&user.json(), Some(roles));
        self.changed();
    }

    /// Sets a channel's `permission_overwrites` (Discord's overwrite
    /// objects: `{id, type (0 role, 1 member), allow, deny}`, the bit sets
    /// as decimal strings). The fake itself enforces no permission: this
    /// is what `GET /channels/{id}` answers, for a client that computes
    /// the bot's permissions.
    pub fn set_overwrites(&self, channel: &str, overwrites: Value) {
        if let Some(c) = self.shared.lock().channels.get_mut(channel) {
            c["permission_overwrites"] = overwrites;
        }
        self.changed();
    }

    /// A public thread under `parent` named `name`, dispatched as
    /// THREAD_CREATE; answers its id.
    pub fn create_thread(&self, parent: &str, name: &str, owner: &Author) -> String {
        let mut inner = self.shared.lock();
        let id = inner.snowflake();
        let thread = thread_channel(&id, parent, name, &owner.id);
        inner.channels.insert(id.clone(), thread.clone());
        let mut event = thread;
        event["newly_created"] = json!(true);
        inner.dispatch("THREAD_CREATE", &event);
        drop(inner);
        self.changed();
        id
    }

    /// A post in the forum `forum`: THREAD_CREATE for the thread (its
    /// parent the forum), then MESSAGE_CREATE for its first message, whose
    /// id is the thread's, as Discord makes them. Answers (thread id,
    /// message object).
    pub fn forum_post(
        &self,
        forum: &str,
        author: &Author,
        title: &str,
        say: Say,
    ) -> (String, Value) {
        let message = {
            let mut inner = self.shared.lock();
            let mut message = new_user_message(&mut inner, forum, author, say);
            let id = message["id"].as_str().unwrap_or_default().to_string();
            let mut thread = thread_channel(&id, forum, title, &author.id);
            thread["message_count"] = json!(1);
            thread["total_message_sent"] = json!(1);
            inner.channels.insert(id.clone(), thread.clone());
            thread["newly_created"] = json!(true);
            inner.dispatch("THREAD_CREATE", &thread);
            message["channel_id"] = json!(id);
            message["position"] = json!(0);
            inner.store_message(message.clone());
            inner.dispatch("MESSAGE_CREATE", &message);
            message
        };
        self.changed();
        (
            message["channel_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            message,
        )
    }

    /// `user` presses the button `custom_id` on message `message_id` of
    /// `channel`: INTERACTION_CREATE of type 3 (message component).
    pub fn press_button(
        &self,
        channel: &str,
        message_id: &str,
        user: &Author,
        custom_id: &str,
    ) -> Interaction {
        let interaction = {
            let mut inner = self.shared.lock();
            let message = inner
                .find_message(channel, message_id)
                .cloned()
                .unwrap_or_else(|| {
                    panic!("no message {message_id} in channel {channel} to press a button on")
                });
            let data = json!({"custom_id": custom_id, "component_type": 2});
            new_interaction(&mut inner, channel, user, 3, data, Some(message))
        };
        self.changed();
        interaction
    }

    /// `user` runs the slash command `/name` with these `options` (the
    /// `options` array of Discord's interaction data) in `channel`:
    /// INTERACTION_CREATE of type 2 (application command).
    pub fn slash_command(
        &self,
        channel: &str,
        user: &Author,
        name: &str,
        options: Value,
    ) -> Interaction {
        let interaction = {
            let mut inner = self.shared.lock();
            let guild = inner.guild_of(channel);
            let registered = inner
                .commands
                .iter()
                .filter(|(scope, _)| scope.is_empty() || Some(scope.as_str()) == guild.as_deref())
                .flat_map(|(_, list)| list)
                .find(|c| c["name"] == name)
                .and_then(|c| c["id"].as_str())
                .map(str::to_string);
            let id = registered.unwrap_or_else(|| inner.snowflake());
            let mut data = json!({"id": id, "name": name, "type": 1});
            if options.as_array().is_some_and(|o| !o.is_empty()) {
                data["options"] = options;
            }
            if let Some(guild) = guild {
                data["guild_id"] = json!(guild);
            }
            new_interaction(&mut inner, channel, user, 2, data, None)
        };
        self.changed();
        interaction
    }

    // ----- the test's side: reading -----

    /// The messages the bot posted in `channel`, oldest first.
    pub fn bot_messages(&self, channel: &str) -> Vec<BotMessage> {
        let inner = self.shared.lock();
        inner
            .bot_messages
            .iter()
            .filter(|m| m.channel_id() == channel)
            .cloned()
            .collect()
    }

    /// Each message the bot posts in `channel` from now on, as it is
    /// posted: a cheap wait for one channel's answers under load (no scan
    /// of every message the bot posted). A second watch of the same
    /// channel replaces the first.
    pub fn watch(&self, channel: &str) -> mpsc::UnboundedReceiver<BotMessage> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.lock().watchers.insert(channel.to_string(), tx);
        rx
    }

    /// Every message the bot posted, oldest first.
    pub fn all_bot_messages(&self) -> Vec<BotMessage> {
        self.shared.lock().bot_messages.clone()
    }

    /// Every message of `channel` the fake holds (users', the bot's,
    /// history), oldest first.
    pub fn channel_messages(&self, channel: &str) -> Vec<Value> {
        self.shared
            .lock()
            .messages
            .get(channel)
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until the bot posted at least `n` messages in `channel`;
    /// panics after `timeout`.
    pub async fn wait_for_bot_messages(
        &self,
        channel: &str,
        n: usize,
        timeout: Duration,
    ) -> Vec<BotMessage> {
        let what = format!("{n} bot message(s) in channel {channel}");
        self.wait_for(&what, timeout, |fake| {
            let got = fake.bot_messages(channel);
            (got.len() >= n).then_some(got)
        })
        .await
    }

    /// Waits until `check` answers something; panics with `what` after
    /// `timeout`.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(found) = check(self) {
                return found;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                panic!("the fake Discord waited {timeout:?} for {what}");
            }
            let _ = tokio::time::timeout((deadline - now).min(Duration::from_millis(50)), changed)
                .await;
        }
    }

    /// Every REST and CDN request, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// The requests of `method` whose path matches `pattern` (`*` matches
    /// one segment: `/api/v10/channels/*/messages`).
    pub fn calls_to(&self, method: &str, pattern: &str) -> Vec<Call> {
        let pattern = split_pattern(pattern);
        self.calls()
            .into_iter()
            .filter(|c| c.method.eq_ignore_ascii_case(method) && matches(&pattern, &c.path))
            .collect()
    }

    /// The interaction callbacks the bot made, in order.
    pub fn callbacks(&self) -> Vec<Callback> {
        self.shared.lock().callbacks.clone()
    }

    /// The application commands registered: globally (`None`) or in a guild.
    pub fn commands(&self, guild: Option<&str>) -> Vec<Value> {
        self.shared
            .lock()
            .commands
            .get(guild.unwrap_or_default())
            .cloned()
            .unwrap_or_default()
    }

    /// A guild member as the fake holds it (with `roles`).
    pub fn member(&self, user_id: &str) -> Option<Value> {
        self.shared.lock().members.get(user_id).cloned()
    }

    // ----- faults -----

    /// The next `times` requests of `method` whose path matches `pattern`
    /// (`*` matches one segment) are answered with `fault`.
    pub fn fail_next(&self, method: &str, pattern: &str, times: u32, fault: Fault) {
        self.shared.lock().faults.push(FaultRule {
            method: method.to_ascii_uppercase(),
            pattern: split_pattern(pattern),
            remaining: times,
            fault,
        });
    }

    /// [`Self::fail_next`] with a 429 of this `retry_after` (seconds), not global.
    pub fn rate_limit_next(&self, method: &str, pattern: &str, times: u32, retry_after: f64) {
        self.fail_next(
            method,
            pattern,
            times,
            Fault::RateLimited {
                retry_after,
                global: false,
            },
        );
    }

    // ----- the gateway -----

    /// READY names `url` as the session's resume address from now on (one
    /// that answers nothing, to see the bot give it up).
    pub fn set_resume_url(&self, url: &str) {
        self.shared.lock().resume_url = Some(url.to_string());
    }

    /// Sends RECONNECT (op 7) on every live connection (they stay open: the
    /// client is to close and resume).
    pub fn send_reconnect(&self) {
        let mut inner = self.shared.lock();
        for conn in inner.live() {
            inner.send(conn, json!({"op": 7, "d": null}));
        }
    }

    /// Sends INVALID_SESSION (op 9) with `d: resumable` on every live
    /// connection; when not resumable their sessions are gone (a RESUME
    /// then gets INVALID_SESSION `false`).
    pub fn invalidate_session(&self, resumable: bool) {
        let mut inner = self.shared.lock();
        for conn in inner.live() {
            inner.send(conn, json!({"op": 9, "d": resumable}));
            if !resumable {
                for session in inner.sessions.values_mut() {
                    if session.connection == Some(conn) {
                        session.valid = false;
                    }
                }
                inner.detach(conn);
            }
        }
        drop(inner);
        self.changed();
    }

    /// Closes every live connection with `code` (4000 unknown error, 4004
    /// authentication failed, 4007 invalid seq, 4009 session timed out,
    /// 4014 disallowed intents, …). After 4007 and 4009 their sessions
    /// cannot be resumed.
    pub fn close(&self, code: u16) {
        let mut inner = self.shared.lock();
        for conn in inner.live() {
            if matches!(code, 4007 | 4009) {
                for session in inner.sessions.values_mut() {
                    if session.connection == Some(conn) {
                        session.valid = false;
                    }
                }
            }
            inner.close(conn, code, "closed by the test");
        }
        drop(inner);
        self.changed();
    }

    /// Discord cannot be reached until [`Self::outage_over`]: every live
    /// gateway connection is closed with 1001 (going away, as when
    /// Discord's edge restarts), a new one is cut before its handshake,
    /// and every REST call is answered 503. Sessions stay resumable and
    /// keep their events, as Discord's do.
    pub fn outage(&self) {
        let mut inner = self.shared.lock();
        inner.down = true;
        for conn in inner.live() {
            inner.close(conn, 1001, "Discord is unavailable");
        }
        drop(inner);
        self.changed();
    }

    /// Ends [`Self::outage`].
    pub fn outage_over(&self) {
        self.shared.lock().down = false;
        self.changed();
    }

    /// Heartbeats are no longer acknowledged (a zombied connection), until
    /// [`Self::resume_acking`].
    pub fn stop_acking(&self) {
        self.shared.lock().stop_acking = true;
    }

    pub fn resume_acking(&self) {
        self.shared.lock().stop_acking = false;
    }

    /// The next RESUME replays the session's last `n` events, whatever
    /// `seq` it gives (events the client has already seen).
    pub fn replay_on_resume(&self, n: usize) {
        self.shared.lock().replay_on_resume = Some(n);
    }

    /// How many gateway connections are open.
    pub fn live_sockets(&self) -> usize {
        self.shared.lock().live().len()
    }

    /// Every gateway connection so far, in the order they opened.
    pub fn connections(&self) -> Vec<Connection> {
        self.shared
            .lock()
            .connections
            .iter()
            .map(|c| c.info.clone())
            .collect()
    }

    /// Every dispatch sent, in order, with the connection that carried it.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.shared.lock().deliveries.clone()
    }

    /// The `d` of every IDENTIFY received.
    pub fn identifies(&self) -> Vec<Value> {
        self.shared.lock().identifies.clone()
    }

    /// The `d` of every RESUME received.
    pub fn resumes(&self) -> Vec<Value> {
        self.shared.lock().resumes.clone()
    }

    /// Waits until a connection has identified or resumed and is live
    /// (READY or RESUMED sent); answers its number.
    pub async fn wait_ready(&self, timeout: Duration) -> usize {
        self.wait_for("a live identified gateway connection", timeout, |fake| {
            fake.connections()
                .into_iter()
                .rev()
                .find(|c| c.closed_at.is_none() && c.session_id.is_some())
                .map(|c| c.number)
        })
        .await
    }
}

fn split_pattern(pattern: &str) -> Vec<String> {
    pattern
        .trim_matches('/')
        .split('/')
        .map(str::to_string)
        .collect()
}

fn dm_channel_for(inner: &mut Inner, user: &Value) -> String {
    let user_id = user["id"].as_str().unwrap_or_default().to_string();
    if let Some(id) = inner.dm_channels.get(&user_id) {
        return id.clone();
    }
    let id = inner.snowflake();
    let channel = json!({
        "id": id, "type": 1, "last_message_id": null, "flags": 0, "recipients": [user],
    });
    inner.channels.insert(id.clone(), channel);
    inner.dm_channels.insert(user_id, id.clone());
    id
}

/// A user's message object, not yet stored.
fn new_user_message(inner: &mut Inner, channel: &str, author: &Author, say: Say) -> Value {
    assert!(
        inner.channels.contains_key(channel),
        "the fake Discord has no channel {channel}"
    );
    let id = match say.ago {
        Some(ago) => inner.snowflake_at(SystemTime::now() - ago),
        None => inner.snowflake(),
    };
    let content = if say.mention_bot {
        format!("<@{BOT_ID}> {}", say.content)
    } else {
        say.content.clone()
    };
    let guild = inner.guild_of(channel);
    let referenced = say
        .reply_to
        .as_ref()
        .map(|reply_to| {
            inner
                .find_message(channel, reply_to)
                .cloned()
                .unwrap_or_else(|| panic!("no message {reply_to} in channel {channel} to reply to"))
        })
        .map(|mut m| {
            // Discord embeds the parent without its own parent.
            if let Some(m) = m.as_object_mut() {
                m.remove("referenced_message");
                m.remove("member");
            }
            m
        });
    let replied_author = referenced
        .as_ref()
        .filter(|_| !say.quiet_reply)
        .and_then(|m| m["author"]["id"].as_str())
        .map(str::to_string);
    let (everyone, users, roles) = pings(&content, None, replied_author.as_deref());
    let mentions: Vec<Value> = users.iter().map(|id| user_for(inner, id)).collect();
    let attachments: Vec<Value> = say
        .attachments
        .into_iter()
        .map(|file| inner.attachment(channel, file))
        .collect();
    let mut message = json!({
        "id": id, "channel_id": channel, "author": author.json(), "content": content,
        "timestamp": timestamp_of(&id), "edited_timestamp": null, "tts": false,
        "mention_everyone": everyone, "mentions": mentions, "mention_roles": roles,
        "attachments": attachments, "embeds": [], "pinned": false, "type": 0, "flags": 0,
        "components": [], "nonce": id,
    });
    if let Some(parent) = referenced {
        message["type"] = json!(19);
        let mut reference = json!({"type": 0, "channel_id": channel, "message_id": parent["id"]});
        if let Some(guild) = &guild {
            reference["guild_id"] = json!(guild);
        }
        message["message_reference"] = reference;
        message["referenced_message"] = parent;
    }
    if let Some(guild) = guild {
        message["guild_id"] = json!(guild);
        let mut member = inner.member(&author.json(), say.roles);
        if let Some(m) = member.as_object_mut() {
            m.remove("user");
        }
        message["member"] = member;
    }
    message
}

fn new_interaction(
    inner: &mut Inner,
    channel: &str,
    user: &Author,
    kind: u64,
    data: Value,
    message: Option<Value>,
) -> Interaction {
    let channel_object = inner
        .channel(channel)
        .cloned()
        .unwrap_or_else(|| panic!("the fake Discord has no channel {channel}"));
    let id = inner.snowflake();
    let token = format!("aW50ZXJhY3Rpb246{id}.fake-interaction-token");
    let guild = inner.guild_of(channel);
    let mut payload = json!({
        "id": id, "application_id": APPLICATION_ID, "type": kind, "data": data,
        "channel_id": channel, "channel": channel_object, "token": token, "version": 1,
        "app_permissions": "2248473465835073", "locale": "en-US", "entitlements": [],
        "attachment_size_limit": 10_485_760,
    });
    if let Some(guild) = &guild {
        let mut member = inner.member(&user.json(), None);
        member["permissions"] = json!("2248473465835073");
        payload["guild_id"] = json!(guild);
        payload["guild_locale"] = json!("en-US");
        payload["guild"] = json!({"id": guild, "locale": "en-US", "features": []});
        payload["member"] = member;
        payload["authorizing_integration_owners"] = json!({"0": guild});
        payload["context"] = json!(0);
    } else {
        payload["user"] = user.json();
        payload["authorizing_integration_owners"] = json!({"0": "0"});
        payload["context"] = json!(1);
    }
    let message_id = message
        .as_ref()
        .and_then(|m| m["id"].as_str())
        .map(str::to_string);
    if let Some(mut message) = message {
        if let Some(m) = message.as_object_mut() {
            m.remove("member");
        }
        payload["message"] = message;
    }
    inner.interactions.insert(
        id.clone(),
        PendingInteraction {
            token: token.clone(),
            channel_id: channel.to_string(),
            message_id,
            response_id: None,
            created: Instant::now(),
            answered: false,
        },
    );
    inner.dispatch("INTERACTION_CREATE", &payload);
    Interaction { id, token, payload }
}

// ----- REST -----

/// An answer before the rate-limit headers are added.
enum Reply {
    Json(u16, Value),
    Empty(u16),
    File(String, Vec<u8>),
}

fn error(status: u16, code: u64, message: &str) -> Reply {
    Reply::Json(status, json!({"message": message, "code": code}))
}

fn unknown_channel() -> Reply {
    error(404, 10003, "Unknown Channel")
}

fn unknown_message() -> Reply {
    error(404, 10008, "Unknown Message")
}

fn invalid_form(field: &str, code: &str, message: &str) -> Reply {
    Reply::Json(
        400,
        json!({
            "message": "Invalid Form Body", "code": 50035,
            "errors": {field: {"_errors": [{"code": code, "message": message}]}},
        }),
    )
}

/// A request body: JSON, or multipart with `payload_json` and files.
struct Body {
    json: Value,
    files: Vec<Upload>,
}

fn parse_body(headers: &HeaderMap, bytes: &[u8]) -> Result<Body, Reply> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if let Some(boundary) = content_type
        .strip_prefix("multipart/form-data")
        .and_then(|rest| rest.split("boundary=").nth(1))
    {
        let boundary = boundary
            .split(';')
            .next()
            .unwrap_or_default()
            .trim_matches('"');
        let parts = parse_multipart(bytes, boundary)
            .map_err(|e| error(400, 50035, &format!("Invalid Form Body: {e}")))?;
        let mut json = json!({});
        let mut files = Vec::new();
        for part in parts {
            if part.name == "payload_json" {
                json = serde_json::from_slice(&part.data)
                    .map_err(|_| error(400, 50109, "The request body contains invalid JSON."))?;
            } else if let Some(filename) = part.filename {
                files.push(Upload {
                    filename,
                    content_type: part
                        .content_type
                        .unwrap_or_else(|| "application/octet-stream".into()),
                    bytes: part.data,
                });
            } else if let Ok(text) = String::from_utf8(part.data) {
                // a form field given on its own (`content`, …)
                json[part.name] = json!(text);
            }
        }
        return Ok(Body { json, files });
    }
    if bytes.is_empty() {
        return Ok(Body {
            json: Value::Null,
            files: Vec::new(),
        });
    }
    let json = serde_json::from_slice(bytes)
        .map_err(|_| error(400, 50109, "The request body contains invalid JSON."))?;
    Ok(Body {
        json,
        files: Vec::new(),
    })
}

struct Part {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    data: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// The parts of a `multipart/form-data` body (RFC 7578).
fn parse_multipart(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let delimiter = format!("--{boundary}");
    let mut at = find(body, delimiter.as_bytes(), 0).ok_or("no boundary")? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        at += 2; // CRLF after the delimiter
        let head_end = find(body, b"\r\n\r\n", at).ok_or("a part without headers")?;
        let head = String::from_utf8_lossy(&body[at..head_end]).to_string();
        let data_start = head_end + 4;
        let next = find(body, format!("\r\n{delimiter}").as_bytes(), data_start)
            .ok_or("an unterminated part")?;
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            data: body[data_start..next].to_vec(),
        };
        for line in head.split("\r\n") {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            if key.eq_ignore_ascii_case("content-type") {
                part.content_type = Some(value.trim().to_string());
            } else if key.eq_ignore_ascii_case("content-disposition") {
                for param in value.split(';').map(str::trim) {
                    if let Some(v) = param.strip_prefix("name=") {
                        part.name = v.trim_matches('"').to_string();
                    } else if let Some(v) = param.strip_prefix("filename=") {
                        part.filename = Some(v.trim_matches('"').to_string());
                    }
                }
            }
        }
        parts.push(part);
        at = next + 2 + delimiter.len();
    }
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or_default().to_string();
    let at = Instant::now();
    let body = parse_body(&headers, &bytes);
    let recorded = body.as_ref().map(|b| b.json.clone()).unwrap_or(Value::Null);
    let (reply, extra) = {
        let mut inner = shared.lock();
        let reply = answer(&mut inner, &method, &path, &query, &headers, body);
        inner.calls.push(Call {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            status: reply.0.status(),
            body: recorded,
            at,
        });
        reply
    };
    shared.changed.notify_waiters();
    respond(reply, extra)
}

impl Reply {
    fn status(&self) -> u16 {
        match self {
            Reply::Json(status, _) | Reply::Empty(status) => *status,
            Reply::File(..) => 200,
        }
    }
}

fn respond(reply: Reply, extra: Vec<(&'static str, String)>) -> Response {
    let mut response = match reply {
        Reply::Json(status, value) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(value),
        )
            .into_response(),
        Reply::Empty(status) => StatusCode::from_u16(status)
            .unwrap_or(StatusCode::NO_CONTENT)
            .into_response(),
        Reply::File(content_type, bytes) => {
            let mut response = bytes.into_response();
            if let Ok(value) = HeaderValue::from_str(&content_type) {
                response.headers_mut().insert("content-type", value);
            }
            response
        }
    };
    for (name, value) in extra {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The normal rate-limit headers of a REST answer (plenty left).
fn bucket_headers() -> Vec<(&'static str, String)> {
    let reset = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        + 1.0;
    vec![
        ("x-ratelimit-bucket", "fake0bucket0messages".to_string()),
        ("x-ratelimit-limit", "5".to_string()),
        ("x-ratelimit-remaining", "4".to_string()),
        ("x-ratelimit-reset", format!("{reset:.3}")),
        ("x-ratelimit-reset-after", "1.000".to_string()),
    ]
}

fn fault_reply(fault: &Fault) -> (Reply, Vec<(&'static str, String)>) {
    match fault {
        Fault::RateLimited {
            retry_after,
            global,
        } => {
            let reset = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
                + retry_after;
            let mut headers = vec![
                ("retry-after", format!("{}", retry_after.ceil() as u64)),
                ("x-ratelimit-bucket", "fake0bucket0messages".to_string()),
                ("x-ratelimit-limit", "5".to_string()),
                ("x-ratelimit-remaining", "0".to_string()),
                ("x-ratelimit-reset", format!("{reset:.3}")),
                ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
                (
                    "x-ratelimit-scope",
                    if *global { "global" } else { "user" }.to_string(),
                ),
            ];
            if *global {
                headers.push(("x-ratelimit-global", "true".to_string()));
            }
            let body = json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": global});
            (Reply::Json(429, body), headers)
        }
        Fault::Status(status) | Fault::AnswerLost(status) => {
            let text = StatusCode::from_u16(*status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Error");
            (error(*status, 0, &format!("{status}: {text}")), Vec::new())
        }
    }
}

fn answer(
    inner: &mut Inner,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: Result<Body, Reply>,
) -> (Reply, Vec<(&'static str, String)>) {
    if inner.down {
        return fault_reply(&Fault::Status(503));
    }
    if let Some(rule) = inner
        .faults
        .iter_mut()
        .find(|r| r.remaining > 0 && r.method == method.as_str() && matches(&r.pattern, path))
    {
        rule.remaining -= 1;
        let fault = rule.fault.clone();
        inner.faults.retain(|r| r.remaining > 0);
        if let Fault::AnswerLost(status) = fault {
            let _done = carry_out(inner, method, path, query, headers, body);
            return fault_reply(&Fault::Status(status));
        }
        return fault_reply(&fault);
    }
    carry_out(inner, method, path, query, headers, body)
}

/// [`answer`] past the faults: the request as Discord handles it.
fn carry_out(
    inner: &mut Inner,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: Result<Body, Reply>,
) -> (Reply, Vec<(&'static str, String)>) {
    if let Some(rest) = path.strip_prefix("/attachments/") {
        return (download(inner, rest, query), Vec::new());
    }
    let Some(route) = path.strip_prefix("/api/v10/") else {
        return (error(404, 0, "404: Not Found"), Vec::new());
    };
    let route: Vec<&str> = route.trim_end_matches('/').split('/').collect();
    // Interaction callbacks and webhooks are authorised by their token;
    // `/gateway` needs none.
    let token_routes = matches!(route.first(), Some(&"interactions") | Some(&"webhooks"));
    if !token_routes && route != ["gateway"] {
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if authorization != format!("Bot {TOKEN}") {
            return (error(401, 0, "401: Unauthorized"), Vec::new());
        }
    }
    let body = match body {
        Ok(body) => body,
        Err(reply) => return (reply, bucket_headers()),
    };
    let m = method.as_str();
    let reply = match (m, route.as_slice()) {
        ("GET", ["gateway"]) => Reply::Json(200, json!({"url": inner.gateway_url})),
        ("GET", ["gateway", "bot"]) => Reply::Json(
            200,
            json!({
                "url": inner.gateway_url, "shards": 1,
                "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1},
            }),
        ),
        ("GET", ["users", "@me"]) => {
            let mut me = bot_user();
            me["verified"] = json!(true);
            me["mfa_enabled"] = json!(false);
            me["email"] = Value::Null;
            me["locale"] = json!("en-US");
            Reply::Json(200, me)
        }
        ("GET", ["users", id]) => Reply::Json(200, user_for(inner, id)),
        ("POST", ["users", "@me", "channels"]) => {
            let Some(recipient) = body.json["recipient_id"].as_str() else {
                return (
                    invalid_form(
                        "recipient_id",
                        "BASE_TYPE_REQUIRED",
                        "This field is required",
                    ),
                    bucket_headers(),
                );
            };
            let user = user_for(inner, recipient);
            let id = dm_channel_for(inner, &user);
            Reply::Json(200, inner.channels[&id].clone())
        }
        ("GET", ["oauth2", "applications", "@me"]) | ("GET", ["applications", "@me"]) => {
            Reply::Json(200, application())
        }
        ("GET", ["applications", app, "commands"]) => commands_get(inner, app, ""),
        ("PUT", ["applications", app, "commands"]) => commands_put(inner, app, "", body.json),
        ("GET", ["applications", app, "guilds", guild, "commands"]) => {
            commands_get(inner, app, guild)
        }
        ("PUT", ["applications", app, "guilds", guild, "commands"]) => {
            commands_put(inner, app, guild, body.json)
        }
        ("GET", ["channels", channel]) => match inner.channel(channel) {
            Some(c) => Reply::Json(200, c.clone()),
            None => unknown_channel(),
        },
        ("POST", ["channels", channel, "typing"]) => {
            if inner.channel(channel).is_some() {
                Reply::Empty(204)
            } else {
                unknown_channel()
            }
        }
        ("GET", ["channels", channel, "messages"]) => history(inner, channel, query),
        ("POST", ["channels", channel, "messages"]) => bot_post(inner, channel, body, None),
        ("GET", ["channels", channel, "messages", id]) => match inner.find_message(channel, id) {
            Some(m) => Reply::Json(200, m.clone()),
            None => unknown_message(),
        },
        ("PATCH", ["channels", channel, "messages", id]) => bot_edit(inner, channel, id, body),
        ("DELETE", ["channels", channel, "messages", id]) => {
            let guild = inner.guild_of(channel);
            let Some(list) = inner.messages.get_mut(*channel) else {
                return (unknown_channel(), bucket_headers());
            };
            let before = list.len();
            list.retain(|m| m["id"] != *id);
            if list.len() == before {
                unknown_message()
            } else {
                inner.bot_messages.retain(|b| b.id() != *id);
                let mut event = json!({"id": id, "channel_id": channel});
                if let Some(guild) = guild {
                    event["guild_id"] = json!(guild);
                }
                inner.dispatch("MESSAGE_DELETE", &event);
                Reply::Empty(204)
            }
        }
        ("PUT" | "DELETE", ["channels", channel, "messages", id, "reactions", _, "@me"]) => {
            if inner.find_message(channel, id).is_some() {
                Reply::Empty(204)
            } else {
                unknown_message()
            }
        }
        ("GET", ["guilds", guild]) if *guild == GUILD_ID => {
            Reply::Json(200, guild_object(inner, false))
        }
        ("GET", ["guilds", guild, "channels"]) if *guild == GUILD_ID => Reply::Json(
            200,
            json!(
                inner
                    .channels
                    .values()
                    .filter(|c| c["guild_id"] == GUILD_ID && c["type"] != 11)
                    .collect::<Vec<_>>()
            ),
        ),
        ("GET", ["guilds", guild, "roles"]) if *guild == GUILD_ID => {
            Reply::Json(200, json!(inner.roles))
        }
        ("GET", ["guilds", guild, "members", user]) if *guild == GUILD_ID => {
            match inner.members.get(*user) {
                Some(member) => Reply::Json(200, member.clone()),
                None => error(404, 10007, "Unknown Member"),
            }
        }
        ("GET", ["guilds", _, ..]) => error(404, 10004, "Unknown Guild"),
        ("POST", ["interactions", id, token, "callback"]) => {
            interaction_callback(inner, id, token, query, body)
        }
        ("POST", ["webhooks", app, token]) if *app == APPLICATION_ID => {
            followup(inner, token, body)
        }
        ("GET" | "PATCH" | "DELETE", ["webhooks", app, token, "messages", id])
            if *app == APPLICATION_ID =>
        {
            webhook_message(inner, m, token, id, body)
        }
        _ => error(404, 0, "404: Not Found"),
    };
    (reply, bucket_headers())
}

fn application() -> Value {
    json!({
        "id": APPLICATION_ID, "name": BOT_NAME, "icon": null, "description": "",
        "type": null, "bot": bot_user(), "bot_public": false, "bot_require_code_grant": false,
        "verify_key": "0000000000000000000000000000000000000000000000000000000000000000",
        "flags": 8_953_856, "owner": Author::user(OWNER_ID, "owner").json(), "team": null,
        "summary": "", "hook": true, "is_monetized": false, "tags": [],
        "rpc_origins": [], "redirect_uris": [], "interactions_endpoint_url": null,
        "approximate_guild_count": 1, "integration_types_config": {"0": {}},
    })
}

fn guild_object(inner: &Inner, with_state: bool) -> Value {
    let mut guild = json!({
        "id": GUILD_ID, "name": "Pincer Test Guild", "icon": null, "icon_hash": null, "splash": null,
        "discovery_splash": null, "owner_id": OWNER_ID, "afk_channel_id": null, "afk_timeout": 300,
        "widget_enabled": false, "widget_channel_id": null, "verification_level": 0,
        "default_message_notifications": 1, "explicit_content_filter": 0, "roles": inner.roles,
        "emojis": [], "features": [], "mfa_level": 0, "application_id": null,
        "system_channel_id": CHANNEL_ID, "system_channel_flags": 0, "rules_channel_id": null,
        "max_presences": null, "max_members": 500_000, "vanity_url_code": null, "description": null,
        "banner": null, "premium_tier": 0, "premium_subscription_count": 0, "preferred_locale": "en-US",
        "public_updates_channel_id": null, "max_video_channel_users": 25,
        "max_stage_video_channel_users": 50, "nsfw_level": 0, "stickers": [],
        "premium_progress_bar_enabled": false, "safety_alerts_channel_id": null,
        "incidents_data": null, "nsfw": false, "region": "deprecated", "hub_type": null,
    });
    if with_state {
        let channels: Vec<&Value> = inner
            .channels
            .values()
            .filter(|c| c["guild_id"] == GUILD_ID && c["type"] != 11)
            .collect();
        let threads: Vec<&Value> = inner
            .channels
            .values()
            .filter(|c| c["guild_id"] == GUILD_ID && c["type"] == 11)
            .collect();
        let members: Vec<&Value> = inner.members.values().collect();
        guild["joined_at"] = json!("2024-01-01T00:00:00.000000+00:00");
        guild["large"] = json!(false);
        guild["unavailable"] = json!(false);
        guild["member_count"] = json!(members.len());
        guild["voice_states"] = json!([]);
        guild["members"] = json!(members);
        guild["channels"] = json!(channels);
        guild["threads"] = json!(threads);
        guild["presences"] = json!([]);
        guild["stage_instances"] = json!([]);
        guild["guild_scheduled_events"] = json!([]);
        guild["soundboard_sounds"] = json!([]);
        guild["lazy"] = json!(true);
    }
    guild
}

fn commands_get(inner: &Inner, app: &str, scope: &str) -> Reply {
    if app != APPLICATION_ID {
        return error(403, 50001, "Missing Access");
    }
    Reply::Json(
        200,
        json!(inner.commands.get(scope).cloned().unwrap_or_default()),
    )
}

fn commands_put(inner: &mut Inner, app: &str, scope: &str, body: Value) -> Reply {
    if app != APPLICATION_ID {
        return error(403, 50001, "Missing Access");
    }
    if !scope.is_empty() && scope != GUILD_ID {
        return error(404, 10004, "Unknown Guild");
    }
    let Some(list) = body.as_array() else {
        return error(400, 50035, "Invalid Form Body");
    };
    let mut commands = Vec::new();
    for command in list {
        let Some(name) = command["name"].as_str() else {
            return invalid_form("0.name", "BASE_TYPE_REQUIRED", "This field is required");
        };
        let existing = inner
            .commands
            .get(scope)
            .and_then(|l| l.iter().find(|c| c["name"] == name))
            .and_then(|c| c["id"].as_str())
            .map(str::to_string);
        let id = existing.unwrap_or_else(|| inner.snowflake());
        let mut command = command.clone();
        command["id"] = json!(id);
        command["application_id"] = json!(APPLICATION_ID);
        command["version"] = json!(inner.snowflake());
        command["type"] = command.get("type").cloned().unwrap_or(json!(1));
        command["description"] = command.get("description").cloned().unwrap_or(json!(""));
        command["default_member_permissions"] = command
            .get("default_member_permissions")
            .cloned()
            .unwrap_or(Value::Null);
        command["nsfw"] = json!(false);
        if !scope.is_empty() {
            command["guild_id"] = json!(scope);
        }
        commands.push(command);
    }
    inner.commands.insert(scope.to_string(), commands.clone());
    Reply::Json(200, json!(commands))
}

/// `GET /channels/{id}/messages`: newest first, as Discord answers; with
/// `after`, the `limit` messages right after it; with `before`, the ones
/// right before it; otherwise the newest.
fn history(inner: &Inner, channel: &str, query: &str) -> Reply {
    if inner.channel(channel).is_none() {
        return unknown_channel();
    }
    let limit: usize = match query_param(query, "limit").map(str::parse) {
        None => 50,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => {
            return invalid_form(
                "limit",
                "NUMBER_TYPE_MAX",
                "int value should be less than or equal to 100.",
            );
        }
    };
    let id_of = |m: &Value| {
        m["id"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let parse = |key: &str| query_param(query, key).and_then(|v| v.parse::<u64>().ok());
    let all = inner.messages.get(channel).cloned().unwrap_or_default();
    let page: Vec<Value> = if let Some(after) = parse("after") {
        let mut page: Vec<Value> = all
            .into_iter()
            .filter(|m| id_of(m) > after)
            .take(limit)
            .collect();
        page.reverse();
        page
    } else if let Some(before) = parse("before") {
        all.into_iter()
            .filter(|m| id_of(m) < before)
            .rev()
            .take(limit)
            .collect()
    } else {
        all.into_iter().rev().take(limit).collect()
    };
    Reply::Json(200, json!(page))
}

/// A message the bot sends: `body` checked as Discord checks it.
fn bot_message_object(inner: &mut Inner, channel: &str, body: &Body) -> Result<Value, Reply> {
    let content = body.json["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if content.chars().count() > MAX_CONTENT {
        return Err(invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        ));
    }
    let empty = |key: &str| body.json[key].as_array().is_none_or(Vec::is_empty);
    if content.is_empty()
        && body.files.is_empty()
        && empty("embeds")
        && empty("components")
        && body.json["sticker_ids"].is_null()
    {
        return Err(error(400, 50006, "Cannot send an empty message"));
    }
    let reference = body.json.get("message_reference").filter(|r| r.is_object());
    let referenced = match reference.and_then(|r| r["message_id"].as_str()) {
        Some(id) => {
            let parent = inner.find_message(channel, id).cloned();
            if parent.is_none() && reference.is_some_and(|r| r["fail_if_not_exists"] != false) {
                return Err(invalid_form(
                    "message_reference",
                    "REPLIES_UNKNOWN_MESSAGE",
                    "Unknown message",
                ));
            }
            parent
        }
        None => None,
    };
    let id = inner.snowflake();
    let replied_author = referenced
        .as_ref()
        .and_then(|m| m["author"]["id"].as_str())
        .map(str::to_string);
    let (everyone, users, roles) = pings(
        &content,
        body.json.get("allowed_mentions").filter(|a| a.is_object()),
        replied_author.as_deref(),
    );
    let mentions: Vec<Value> = users.iter().map(|u| user_for(inner, u)).collect();
    let attachments: Vec<Value> = body
        .files
        .iter()
        .cloned()
        .map(|file| inner.attachment(channel, file))
        .collect();
    let mut message = json!({
        "id": id, "channel_id": channel, "author": bot_user(), "content": content,
        "timestamp": timestamp_of(&id), "edited_timestamp": null, "tts": body.json["tts"] == true,
        "mention_everyone": everyone, "mentions": mentions, "mention_roles": roles,
        "attachments": attachments, "embeds": body.json.get("embeds").cloned().unwrap_or(json!([])),
        "pinned": false, "type": 0, "flags": body.json["flags"].as_u64().unwrap_or(0),
        "components": body.json.get("components").cloned().unwrap_or(json!([])),
    });
    if let Some(nonce) = body.json.get("nonce").filter(|n| !n.is_null()) {
        message["nonce"] = nonce.clone();
    }
    if let Some(mut parent) = referenced {
        if let Some(p) = parent.as_object_mut() {
            p.remove("referenced_message");
            p.remove("member");
        }
        message["type"] = json!(19);
        let mut reference = json!({"type": 0, "channel_id": channel, "message_id": parent["id"]});
        if let Some(guild) = inner.guild_of(channel) {
            reference["guild_id"] = json!(guild);
        }
        message["message_reference"] = reference;
        message["referenced_message"] = parent;
    }
    Ok(message)
}

/// `POST /channels/{id}/messages` (and an interaction's response message).
/// How long a nonce sent with `enforce_nonce` stands for its message
/// ("a few minutes" in Discord's docs).
const NONCE_KEPT: Duration = Duration::from_secs(300);

fn bot_post(inner: &mut Inner, channel: &str, body: Body, interaction: Option<&str>) -> Reply {
    if inner.channel(channel).is_none() {
        return unknown_channel();
    }
    let nonce = match &body.json["nonce"] {
        Value::String(n) => Some(n.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    if let Some(n) = &nonce {
        if n.chars().count() > 25 {
            return invalid_form(
                "nonce",
                "BASE_TYPE_MAX_LENGTH",
                "Must be 25 or fewer in length.",
            );
        }
        if body.json["enforce_nonce"] == true
            && let Some((id, at)) = inner.nonces.get(n)
            && at.elapsed() < NONCE_KEPT
            && let Some(existing) = inner.find_message(channel, id)
        {
            return Reply::Json(200, existing.clone());
        }
    }
    let mut message = match bot_message_object(inner, channel, &body) {
        Ok(message) => message,
        Err(reply) => return reply,
    };
    if let Some(n) = nonce {
        message["nonce"] = json!(n);
        if body.json["enforce_nonce"] == true {
            let id = message["id"].as_str().unwrap_or_default().to_string();
            inner.nonces.insert(n, (id, Instant::now()));
        }
    }
    if let Some(interaction) = interaction {
        message["webhook_id"] = json!(APPLICATION_ID);
        message["application_id"] = json!(APPLICATION_ID);
        message["interaction_metadata"] = json!({"id": interaction, "type": 2, "user": bot_user()});
    }
    inner.store_message(message.clone());
    let posted = BotMessage {
        message: message.clone(),
        request: body.json,
        files: body.files,
        edits: Vec::new(),
        at: Instant::now(),
    };
    if let Some(watcher) = inner.watchers.get(channel) {
        let _ = watcher.send(posted.clone());
    }
    inner.bot_messages.push(posted);
    let mut event = message.clone();
    if let Some(guild) = inner.guild_of(channel) {
        event["guild_id"] = json!(guild);
        let mut member = inner.member(&bot_user(), None);
        if let Some(m) = member.as_object_mut() {
            m.remove("user");
        }
        event["member"] = member;
    }
    inner.dispatch("MESSAGE_CREATE", &event);
    Reply::Json(200, message)
}

/// `PATCH /channels/{id}/messages/{mid}`: the bot edits its message.
fn bot_edit(inner: &mut Inner, channel: &str, id: &str, body: Body) -> Reply {
    let Some(current) = inner.find_message(channel, id).cloned() else {
        return unknown_message();
    };
    if current["author"]["id"] != BOT_ID {
        return error(403, 50005, "Cannot edit a message authored by another user");
    }
    match apply_edit(inner, channel, id, &body) {
        Ok(message) => Reply::Json(200, message),
        Err(reply) => reply,
    }
}

fn apply_edit(inner: &mut Inner, channel: &str, id: &str, body: &Body) -> Result<Value, Reply> {
    if let Some(content) = body.json["content"].as_str()
        && content.chars().count() > MAX_CONTENT
    {
        return Err(invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        ));
    }
    if inner.find_message(channel, id).is_none() {
        return Err(unknown_message());
    }
    let attachments: Vec<Value> = body
        .files
        .iter()
        .cloned()
        .map(|file| inner.attachment(channel, file))
        .collect();
    let pinged = body.json["content"].as_str().map(|content| {
        let allowed = body.json.get("allowed_mentions").filter(|a| a.is_object());
        let (everyone, users, roles) = pings(content, allowed, None);
        let users: Vec<Value> = users.iter().map(|u| user_for(inner, u)).collect();
        (everyone, users, roles)
    });
    let guild = inner.guild_of(channel);
    let message = inner.find_message_mut(channel, id).expect("the message");
    for key in ["content", "embeds", "components", "flags"] {
        if let Some(value) = body.json.get(key) {
            message[key] = match (key, value) {
                ("content", Value::Null) => json!(""),
                ("flags", Value::Null) => json!(0),
                (_, Value::Null) => json!([]),
                _ => value.clone(),
            };
        }
    }
    if !attachments.is_empty() {
        let mut all = message["attachments"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        all.extend(attachments);
        message["attachments"] = json!(all);
    }
    if let Some((everyone, users, roles)) = pinged {
        message["mention_everyone"] = json!(everyone);
        message["mentions"] = json!(users);
        message["mention_roles"] = json!(roles);
    }
    message["edited_timestamp"] = json!(now_timestamp());
    let message = message.clone();
    if let Some(bot) = inner.bot_messages.iter_mut().find(|b| b.id() == id) {
        bot.message = message.clone();
        bot.edits.push(body.json.clone());
        bot.files.extend(body.files.iter().cloned());
    }
    let mut event = message.clone();
    if let Some(guild) = guild {
        event["guild_id"] = json!(guild);
    }
    inner.dispatch("MESSAGE_UPDATE", &event);
    Ok(message)
}

fn interaction_callback(
    inner: &mut Inner,
    id: &str,
    token: &str,
    query: &str,
    body: Body,
) -> Reply {
    let Some(pending) = inner.interactions.get(id) else {
        return error(404, 10062, "Unknown interaction");
    };
    if pending.token != token {
        return error(401, 50027, "Invalid Webhook Token");
    }
    let after = pending.created.elapsed();
    let in_time = after <= INTERACTION_WINDOW;
    let already = pending.answered;
    let kind = body.json["type"].as_u64().unwrap_or(0);
    let data = body.json.get("data").cloned().unwrap_or(Value::Null);
    inner.callbacks.push(Callback {
        interaction_id: id.to_string(),
        kind,
        data: data.clone(),
        after,
        in_time,
    });
    if !in_time {
        return error(404, 10062, "Unknown interaction");
    }
    if already {
        return error(400, 40060, "Interaction has already been acknowledged.");
    }
    let (channel, message_id) = {
        let pending = inner.interactions.get_mut(id).expect("interaction");
        pending.answered = true;
        (pending.channel_id.clone(), pending.message_id.clone())
    };
    let mut resource = Value::Null;
    match kind {
        // CHANNEL_MESSAGE_WITH_SOURCE: the response is a new message.
        4 => {
            let reply = bot_post(
                inner,
                &channel,
                Body {
                    json: data,
                    files: body.files,
                },
                Some(id),
            );
            match reply {
                Reply::Json(200, message) => {
                    if let Some(p) = inner.interactions.get_mut(id) {
                        p.response_id = message["id"].as_str().map(str::to_string);
                    }
                    resource = message;
                }
                other => return other,
            }
        }
        // UPDATE_MESSAGE: the button's message is edited.
        7 => {
            let Some(message_id) = message_id else {
                return error(
                    400,
                    40004,
                    "Interaction callback type 7 needs a component interaction",
                );
            };
            match apply_edit(
                inner,
                &channel,
                &message_id,
                &Body {
                    json: data,
                    files: body.files,
                },
            ) {
                Ok(message) => resource = message,
                Err(reply) => return reply,
            }
        }
        1 | 5 | 6 | 8 | 9 | 10 | 12 => {}
        _ => {
            return invalid_form(
                "type",
                "BASE_TYPE_CHOICES",
                "Value must be one of {1, 4, 5, 6, 7, 8, 9, 10, 12}.",
            );
        }
    }
    if query_param(query, "with_response") == Some("true") {
        let mut answer =
            json!({"interaction": {"id": id, "type": kind, "response_message_loading": kind == 5}});
        if !resource.is_null() {
            answer["resource"] = json!({"type": kind, "message": resource});
        }
        return Reply::Json(200, answer);
    }
    Reply::Empty(204)
}

fn interaction_by_token(inner: &Inner, token: &str) -> Option<String> {
    inner
        .interactions
        .iter()
        .find(|(_, p)| p.token == token)
        .map(|(id, _)| id.clone())
}

/// `POST /webhooks/{app}/{token}`: a follow-up message.
fn followup(inner: &mut Inner, token: &str, body: Body) -> Reply {
    let Some(id) = interaction_by_token(inner, token) else {
        return error(404, 10015, "Unknown Webhook");
    };
    let channel = inner.interactions[&id].channel_id.clone();
    bot_post(inner, &channel, body, Some(&id))
}

/// `…/webhooks/{app}/{token}/messages/{id|@original}`.
fn webhook_message(
    inner: &mut Inner,
    method: &str,
    token: &str,
    message: &str,
    body: Body,
) -> Reply {
    let Some(id) = interaction_by_token(inner, token) else {
        return error(404, 10015, "Unknown Webhook");
    };
    let (channel, response) = {
        let p = &inner.interactions[&id];
        (p.channel_id.clone(), p.response_id.clone())
    };
    let target = if message == "@original" {
        response
    } else {
        Some(message.to_string())
    };
    match (method, target) {
        ("PATCH", None) if message == "@original" => {
            // the first edit of a deferred response makes its message
            let reply = bot_post(inner, &channel, body, Some(&id));
            if let Reply::Json(200, m) = &reply
                && let Some(p) = inner.interactions.get_mut(&id)
            {
                p.response_id = m["id"].as_str().map(str::to_string);
            }
            reply
        }
        ("PATCH", Some(target)) => match apply_edit(inner, &channel, &target, &body) {
            Ok(message) => Reply::Json(200, message),
            Err(reply) => reply,
        },
        ("GET", Some(target)) => match inner.find_message(&channel, &target) {
            Some(m) => Reply::Json(200, m.clone()),
            None => unknown_message(),
        },
        ("DELETE", Some(target)) => {
            if let Some(list) = inner.messages.get_mut(&channel) {
                list.retain(|m| m["id"] != target);
            }
            inner.bot_messages.retain(|b| b.id() != target);
            Reply::Empty(204)
        }
        _ => unknown_message(),
    }
}

/// `GET /attachments/{channel}/{id}/{name}?ex=&is=&hm=`: the CDN.
fn download(inner: &Inner, rest: &str, query: &str) -> Reply {
    let parts: Vec<&str> = rest.split('/').collect();
    let [channel, id, name] = parts.as_slice() else {
        return Reply::Json(404, json!({"message": "404: Not Found", "code": 0}));
    };
    let Some((stored_channel, file)) = inner.attachments.get(*id) else {
        return Reply::Json(404, json!({"message": "404: Not Found", "code": 0}));
    };
    let (_, _, hm) = signature(id);
    if stored_channel != channel
        || file.filename != *name
        || query_param(query, "hm") != Some(hm.as_str())
    {
        // Discord's CDN without a valid signature
        return Reply::Json(
            404,
            json!({"message": "This content is no longer available.", "code": 0}),
        );
    }
    Reply::File(file.content_type.clone(), file.bytes.clone())
}

// ----- the gateway -----

async fn serve_gateway(shared: Arc<Shared>, stream: tokio::net::TcpStream) {
    // `?v=10&encoding=json` as Discord's docs write it; no
    // transport compression.
    #[allow(clippy::result_large_err)]
    let check = |request: &Request, response: WsResponse| -> Result<WsResponse, ErrorResponse> {
        let query = request.uri().query().unwrap_or_default();
        let refuse = |why: &str| {
            let mut response = ErrorResponse::new(Some(why.to_string()));
            *response.status_mut() = StatusCode::BAD_REQUEST;
            response
        };
        if query_param(query, "v").is_some_and(|v| v != "10") {
            return Err(refuse("the fake Discord gateway speaks v=10 only"));
        }
        if query_param(query, "encoding").is_some_and(|e| e != "json") {
            return Err(refuse("the fake Discord gateway speaks encoding=json only"));
        }
        if query_param(query, "compress").is_some() {
            return Err(refuse("the fake Discord gateway does not compress"));
        }
        Ok(response)
    };
    // Each event goes out as it happens, as from Discord: without this the
    // kernel holds a small frame back while an earlier one is not yet
    // acknowledged (Nagle), tens of milliseconds under load.
    let _ = stream.set_nodelay(true);
    if shared.lock().down {
        return;
    }
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
    let number = {
        let mut inner = shared.lock();
        let number = inner.connections.len() + 1;
        inner.connections.push(Conn {
            info: Connection {
                number,
                opened_at: Instant::now(),
                closed_at: None,
                close_code: None,
                closed_by_server: false,
                session_id: None,
                resumed: false,
                heartbeats: 0,
            },
            tx: Some(tx.clone()),
        });
        let interval = inner.options.heartbeat_interval.as_millis() as u64;
        inner.send(
            number,
            json!({"op": 10, "s": null, "t": null, "d": {"heartbeat_interval": interval, "_trace": ["[\"fake-gateway\",{}]"]}}),
        );
        number
    };
    drop(tx);
    shared.changed.notify_waiters();
    let writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            match out {
                Out::Text(text) => {
                    if sink.send(WsMessage::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Out::Close(code, reason) => {
                    let frame = CloseFrame {
                        code: CloseCode::from(code),
                        reason: reason.into(),
                    };
                    let _ = sink.send(WsMessage::Close(Some(frame))).await;
                    break;
                }
            }
        }
    });
    let mut client_code = None;
    while let Some(message) = source.next().await {
        match message {
            Ok(WsMessage::Text(text)) => {
                if !on_payload(&shared, number, &text) {
                    break;
                }
            }
            Ok(WsMessage::Binary(_)) => {
                shared.lock().close(number, 4002, "Decode error");
            }
            Ok(WsMessage::Close(frame)) => {
                client_code = Some(frame.map_or(1005, |f| u16::from(f.code)));
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
        shared.changed.notify_waiters();
    }
    {
        let mut inner = shared.lock();
        if let Some(conn) = inner.conn_mut(number)
            && conn.info.closed_at.is_none()
        {
            conn.info.closed_at = Some(Instant::now());
            conn.info.close_code = client_code;
            conn.tx = None;
        }
        inner.detach(number);
    }
    shared.changed.notify_waiters();
    // Let a close frame queued by the server go out before the socket drops.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
}

/// Handles one client payload; false when the connection is to end.
fn on_payload(shared: &Shared, conn: usize, text: &str) -> bool {
    let mut inner = shared.lock();
    let Ok(payload) = serde_json::from_str::<Value>(text) else {
        inner.close(conn, 4002, "Decode error");
        return false;
    };
    let identified = inner
        .conn_mut(conn)
        .and_then(|c| c.info.session_id.clone())
        .is_some();
    let d = payload.get("d").cloned().unwrap_or(Value::Null);
    let token_ok = |d: &Value| {
        d["token"]
            .as_str()
            .map(|t| t.strip_prefix("Bot ").unwrap_or(t))
            == Some(TOKEN)
    };
    match payload["op"].as_u64() {
        Some(1) => {
            if let Some(c) = inner.conn_mut(conn) {
                c.info.heartbeats += 1;
            }
            if !inner.stop_acking {
                inner.send(conn, json!({"op": 11, "s": null, "t": null, "d": null}));
            }
        }
        Some(2) => {
            if identified {
                inner.close(conn, 4005, "Already authenticated.");
                return false;
            }
            let mut recorded = d.clone();
            recorded["token"] = json!("[redacted]");
            inner.identifies.push(recorded);
            if !token_ok(&d) {
                inner.close(conn, 4004, "Authentication failed.");
                return false;
            }
            let Some(asked) = d["intents"].as_u64() else {
                inner.close(conn, 4002, "Decode error");
                return false;
            };
            if asked & !intents::ALL != 0 {
                inner.close(conn, 4013, "Invalid intent(s).");
                return false;
            }
            let content =
                asked & intents::MESSAGE_CONTENT != 0 && !inner.options.message_content_enabled;
            let members =
                asked & intents::GUILD_MEMBERS != 0 && !inner.options.members_intent_enabled;
            if content || members {
                inner.close(conn, 4014, "Disallowed intent(s).");
                return false;
            }
            let n: u64 = inner.snowflake().parse().unwrap_or(0);
            let session_id = format!("{n:016x}{:016x}", n.rotate_left(29));
            inner.sessions.insert(
                session_id.clone(),
                Session {
                    intents: asked,
                    seq: 1,
                    events: VecDeque::new(),
                    valid: true,
                    connection: Some(conn),
                },
            );
            if let Some(c) = inner.conn_mut(conn) {
                c.info.session_id = Some(session_id.clone());
            }
            let ready = json!({
                "v": 10, "user_settings": {}, "user": {
                    "id": BOT_ID, "username": BOT_NAME, "global_name": null, "discriminator": "0",
                    "avatar": null, "bot": true, "verified": true, "mfa_enabled": false,
                    "email": null, "flags": 0, "public_flags": 0,
                },
                "guilds": [{"id": GUILD_ID, "unavailable": true}],
                "session_id": session_id, "session_type": "normal",
                "resume_gateway_url": inner.resume_url.as_deref().unwrap_or(&inner.gateway_url), "shard": [0, 1],
                "application": {"id": APPLICATION_ID, "flags": 8_953_856},
                "private_channels": [], "presences": [], "relationships": [],
                "guild_join_requests": [], "geo_ordered_rtc_regions": [], "auth": {},
                "_trace": ["[\"fake-gateway\",{}]"],
            });
            inner.send_dispatch(conn, &session_id, 1, "READY", ready, false);
            let guild = guild_object(&inner, true);
            inner.dispatch_to(&session_id, "GUILD_CREATE", &guild);
        }
        Some(6) => {
            let mut recorded = d.clone();
            recorded["token"] = json!("[redacted]");
            inner.resumes.push(recorded);
            if !token_ok(&d) {
                inner.close(conn, 4004, "Authentication failed.");
                return false;
            }
            let session_id = d["session_id"].as_str().unwrap_or_default().to_string();
            let valid = inner.sessions.get(&session_id).is_some_and(|s| s.valid);
            let Some(seq) = d["seq"].as_u64().filter(|_| valid) else {
                inner.send(conn, json!({"op": 9, "s": null, "t": null, "d": false}));
                return true;
            };
            let replay_last = inner.replay_on_resume.take();
            let (events, resumed_seq) = {
                let session = inner.sessions.get_mut(&session_id).expect("session");
                session.connection = Some(conn);
                let events: Vec<(u64, String, Value)> = match replay_last {
                    Some(n) => session.events.iter().rev().take(n).rev().cloned().collect(),
                    None => session
                        .events
                        .iter()
                        .filter(|(s, _, _)| *s > seq)
                        .cloned()
                        .collect(),
                };
                session.seq += 1;
                (events, session.seq)
            };
            if let Some(c) = inner.conn_mut(conn) {
                c.info.session_id = Some(session_id.clone());
                c.info.resumed = true;
            }
            for (seq, event, data) in events {
                inner.send_dispatch(conn, &session_id, seq, &event, data, true);
            }
            inner.send_dispatch(
                conn,
                &session_id,
                resumed_seq,
                "RESUMED",
                json!({"_trace": ["[\"fake-gateway\",{}]"]}),
                false,
            );
        }
        Some(3 | 4 | 8 | 31) if identified => {}
        Some(3 | 4 | 8 | 31) => {
            inner.close(conn, 4003, "Not authenticated.");
            return false;
        }
        _ => {
            inner.close(conn, 4001, "Unknown opcode.");
            return false;
        }
    }
    true
}
