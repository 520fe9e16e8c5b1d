//! A minimal Telegram Bot API server for load: it stands in for the
//! emulator (`telegram-test-api`, [`crate::telegram`]) in the 200-chat
//! bench (`daemon/benches/telegram_load.sh`) and nowhere else. The
//! emulator cannot carry that measurement: its `getUpdates` answers at
//! once instead of long-polling, so the bridge polls it every 50 ms and
//! that pause, not the bridge, would be the latency measured; and the
//! bot's answers can only be read back by fetching its whole history, once
//! per chat and poll, from one Node.js thread sharing the two cores with
//! pincerd.
//!
//! What it speaks is the real wire format, JSON bodies as the bridge sends
//! them: `getMe`; `getUpdates` with `offset` (updates below it are
//! confirmed and forgotten, the rest handed out again until confirmed),
//! `limit` and `timeout` (a long poll: it answers as soon as an update
//! arrives, or with `[]` when the timeout passes), and a 409 for a poll a
//! newer one superseded, as Telegram answers it; `sendMessage` (400 for an
//! empty text or one over 4,096 characters); `sendChatAction`,
//! `setMyCommands`, `getMyCommands`, `deleteMyCommands`,
//! `getWebhookInfo`, `deleteWebhook`; method names in any case; 401 for
//! another token, 404 for other methods. Chats are private chats, message
//! ids are numbered per chat as Telegram does.
//!
//! The test's side: [`BotApi::user_says`] puts a user's message in the
//! update queue and answers when it did (the start of a reply's latency;
//! [`BotApi::handed_out`] says when `getUpdates` first handed it out);
//! every message the bot sends is recorded with the instant the server
//! received it ([`Sent`]) and handed to the chat's watcher
//! ([`BotApi::watch`]).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// The bot's id (the number before the token's colon).
pub const BOT_ID: i64 = 123456;
/// The token the server accepts.
pub const TOKEN: &str = "123456:LOAD";
/// The bot's username.
pub const BOT_USERNAME: &str = "pincer_load_bot";

/// The longest text `sendMessage` takes, in characters.
const MAX_TEXT: usize = 4096;

/// A message the bot sent, as the server received it.
#[derive(Debug, Clone)]
pub struct Sent {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    /// `reply_parameters.message_id`, if any.
    pub reply_to: Option<i64>,
    /// When the server received the request.
    pub at: Instant,
}

#[derive(Default)]
struct Inner {
    /// Updates not yet confirmed by an `offset` past them, oldest first,
    /// with their chat and message ids.
    updates: VecDeque<(i64, (i64, i64), Value)>,
    /// When each message was first handed out by `getUpdates`.
    handed_out: HashMap<(i64, i64), Instant>,
    next_update: i64,
    /// The last message id of each chat.
    message_ids: HashMap<i64, i64>,
    sent: Vec<Sent>,
    watchers: HashMap<i64, mpsc::UnboundedSender<Sent>>,
    calls: HashMap<String, u64>,
    /// Bumped by every `getUpdates`: a waiting poll that sees a newer one
    /// answers 409, as Telegram does.
    poll: u64,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Woken when an update arrives or a newer poll starts.
    news: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running server on 127.0.0.1; it serves until the runtime ends.
#[derive(Clone)]
pub struct BotApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl BotApi {
    /// Starts the server on a free port.
    pub async fn start() -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next_update: 1,
                ..Inner::default()
            }),
            news: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new().fallback(handle).with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared })
    }

    /// The `api_url` to configure.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// User `user_id` writes `text` in their private chat with the bot;
    /// answers the message's id and the instant it became available to
    /// `getUpdates`.
    pub fn user_says(&self, user_id: i64, text: &str) -> (i64, Instant) {
        let (message_id, at) = {
            let mut inner = self.shared.lock();
            let message_id = next_message_id(&mut inner, user_id);
            let update_id = inner.next_update;
            inner.next_update += 1;
            let user =
                json!({"id": user_id, "is_bot": false, "first_name": format!("User {user_id}")});
            let update = json!({
                "update_id": update_id,
                "message": {
                    "message_id": message_id,
                    "from": user,
                    "chat": {"id": user_id, "type": "private", "first_name": format!("User {user_id}")},
                    "date": unix_now(),
                    "text": text,
                },
            });
            inner
                .updates
                .push_back((update_id, (user_id, message_id), update));
            (message_id, Instant::now())
        };
        self.shared.news.notify_waiters();
        (message_id, at)
    }

    /// The bot's messages to `chat_id` from now on, as they arrive.
    pub fn watch(&self, chat_id: i64) -> mpsc::UnboundedReceiver<Sent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.lock().watchers.insert(chat_id, tx);
        rx
    }

    /// Every message the bot sent, in the order the server received them.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// How often the bot called `method` (as the Bot API spells it).
    pub fn calls(&self, method: &str) -> u64 {
        let key = method.to_ascii_lowercase();
        self.shared.lock().calls.get(&key).copied().unwrap_or(0)
    }

    /// Updates the bot has not confirmed yet.
    pub fn pending_updates(&self) -> usize {
        self.shared.lock().updates.len()
    }

    /// When `getUpdates` first handed out message `message_id` of
    /// `chat_id`.
    pub fn handed_out(&self, chat_id: i64, message_id: i64) -> Option<Instant> {
        self.shared
            .lock()
            .handed_out
            .get(&(chat_id, message_id))
            .copied()
    }
}

fn next_message_id(inner: &mut Inner, chat_id: i64) -> i64 {
    let id = inner.message_ids.entry(chat_id).or_insert(0);
    *id += 1;
    *id
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn error(code: u16, description: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    (
        status,
        axum::Json(json!({"ok": false, "error_code": code, "description": description})),
    )
        .into_response()
}

/// A chat id or message id the Bot API takes as a number or a string.
fn id_of(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
}

fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Pincer Load", "username": BOT_USERNAME})
}

async fn handle(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let path = uri.path();
    let Some((token, method)) = path
        .strip_prefix("/bot")
        .and_then(|rest| rest.rsplit_once('/'))
    else {
        return error(404, "Not Found");
    };
    if token != TOKEN {
        return error(401, "Unauthorized");
    }
    let method = method.to_ascii_lowercase();
    let params: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return error(400, "Bad Request: the body is not a JSON object"),
        }
    };
    *shared.lock().calls.entry(method.clone()).or_default() += 1;
    match method.as_str() {
        "getme" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "Pincer Load", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false,
        })),
        "getupdates" => get_updates(&shared, &params).await,
        "sendmessage" => send_message(&shared, &params),
        "getwebhookinfo" => {
            let pending = shared.lock().updates.len();
            ok(json!({"url": "", "has_custom_certificate": false, "pending_update_count": pending}))
        }
        "getmycommands" => ok(json!([])),
        "sendchataction" | "setmycommands" | "deletemycommands" | "deletewebhook" => {
            ok(json!(true))
        }
        _ => error(404, "Not Found"),
    }
}

async fn get_updates(shared: &Shared, params: &Value) -> Response {
    let offset = params.get("offset").and_then(id_of);
    let limit = params
        .get("limit")
        .and_then(id_of)
        .unwrap_or(100)
        .clamp(1, 100) as usize;
    let timeout = params
        .get("timeout")
        .and_then(id_of)
        .unwrap_or(0)
        .clamp(0, 50) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let me = {
        let mut inner = shared.lock();
        inner.poll += 1;
        // Confirming: everything below the offset is forgotten (a negative
        // offset keeps the last |offset| updates).
        match offset {
            Some(o) if o < 0 => {
                let keep = o.unsigned_abs() as usize;
                while inner.updates.len() > keep {
                    inner.updates.pop_front();
                }
            }
            Some(o) => {
                while inner.updates.front().is_some_and(|(id, _, _)| *id < o) {
                    inner.updates.pop_front();
                }
            }
            None => {}
        }
        inner.poll
    };
    // A poll waiting before this one is superseded.
    shared.news.notify_waiters();
    loop {
        let news = shared.news.notified();
        tokio::pin!(news);
        news.as_mut().enable();
        {
            let mut inner = shared.lock();
            if inner.poll != me {
                return error(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                );
            }
            if !inner.updates.is_empty() {
                let now = Instant::now();
                let inner = &mut *inner;
                let mut batch = Vec::new();
                for (_, ids, update) in inner.updates.iter().take(limit) {
                    inner.handed_out.entry(*ids).or_insert(now);
                    batch.push(update.clone());
                }
                return ok(Value::Array(batch));
            }
        }
        if tokio::time::timeout_at(deadline, news).await.is_err() {
            return ok(json!([]));
        }
    }
}

fn send_message(shared: &Shared, params: &Value) -> Response {
    let at = Instant::now();
    let Some(chat_id) = params.get("chat_id").and_then(id_of) else {
        return error(400, "Bad Request: chat_id is empty");
    };
    let text = params
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if text.trim().is_empty() {
        return error(400, "Bad Request: message text is empty");
    }
    if text.chars().count() > MAX_TEXT {
        return error(400, "Bad Request: message is too long");
    }
    let reply_to = params
        .pointer("/reply_parameters/message_id")
        .and_then(id_of)
        .or_else(|| params.get("reply_to_message_id").and_then(id_of));
    let mut inner = shared.lock();
    let message_id = next_message_id(&mut inner, chat_id);
    let sent = Sent {
        chat_id,
        message_id,
        text: text.clone(),
        reply_to,
        at,
    };
    if let Some(watcher) = inner.watchers.get(&chat_id) {
        let _ = watcher.send(sent.clone());
    }
    inner.sent.push(sent);
    drop(inner);
    ok(json!({
        "message_id": message_id,
        "from": bot_user(),
        "chat": {"id": chat_id, "type": "private", "first_name": format!("User {chat_id}")},
        "date": unix_now(),
        "text": text,
    }))
}
