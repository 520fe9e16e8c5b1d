//! The Telegram Bot API emulator as a test peer (SPEC §15): the real npm
//! package `telegram-test-api`, which `tests/setup.sh` installs into
//! `~/.cache/pincer-test/telegram`, started on 127.0.0.1 through our
//! launcher `tests/fixtures/telegram/emulator.js` (it adds the Bot API
//! routes the emulator lacks; its header lists them). This module owns
//! starting it ([`TelegramEmulator::start`], killed on drop; stopped and
//! started again on its port for an outage: [`TelegramEmulator::stop`],
//! [`TelegramEmulator::resume`]) and the test's
//! side of the conversation: users writing in a DM, a group or a forum
//! topic ([`TelegramEmulator::user_says`], [`TelegramEmulator::user_sends`]),
//! pressing inline buttons, sending files; and reading what the bot did:
//! its messages, chat actions, commands, every call it made; and injecting
//! the API errors a bridge must survive (429 `retry_after`, "can't parse
//! entities").
//!
//! What the emulator does that the real API does not (the bridge copes with
//! these; they are deliberately kept): `getUpdates` ignores `offset`,
//! `limit` and `timeout`, answers at once, and hands out each update
//! exactly once (it flags it read and never hands it out again, whatever
//! the offset); the message `sendMessage` answers has its `date` in
//! milliseconds and a made-up private chat; `editMessageText` and
//! `editMessageReplyMarkup` answer `result: null`; unknown methods answer
//! HTTP 500. Updates the tests inject carry dates in seconds, as the
//! package's own client writes them.
//!
//! A missing `node` or package fails the test with the sentence that says
//! how to install it (`bash tests/setup.sh`).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::peers::peers_dir;

/// The bot token the emulator is used with (any token works there; the
/// number before the colon is the bot's user id, as on Telegram).
pub const TOKEN: &str = "123456:TEST";
/// The bot's user id (`getMe`).
pub const BOT_ID: i64 = 123456;
/// The bot's username (`getMe`), without the `@`.
pub const BOT_USERNAME: &str = "pincer_test_bot";

/// The `node_modules` folder holding `telegram-test-api`, or a failure that
/// says how to install it.
pub fn emulator_modules() -> PathBuf {
    let modules = peers_dir().join("telegram/node_modules");
    assert!(
        modules.join("telegram-test-api/package.json").is_file(),
        "the Telegram Bot API emulator telegram-test-api is not installed in {}: run `bash tests/setup.sh` (it installs it from npm into ~/.cache/pincer-test/telegram; it needs node and npm)",
        modules.display()
    );
    modules
}

/// The `node` executable on `PATH`, or a failure that says how to install it.
pub fn node() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("node"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "Node.js is not installed (no `node` on PATH): the Telegram Bot API emulator runs on it; install it (apt-get install nodejs npm) and run `bash tests/setup.sh`"
            )
        })
}

/// Seconds since the epoch, as the real API dates messages.
fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Someone writing to the bot.
#[derive(Clone, Debug, PartialEq)]
pub struct UserSpec {
    pub id: i64,
    pub first_name: String,
    pub username: Option<String>,
    pub is_bot: bool,
}

impl UserSpec {
    /// A person with this id and first name.
    pub fn new(id: i64, first_name: &str) -> Self {
        Self {
            id,
            first_name: first_name.to_string(),
            username: None,
            is_bot: false,
        }
    }

    /// With a username (without the `@`).
    pub fn username(mut self, username: &str) -> Self {
        self.username = Some(username.to_string());
        self
    }

    /// Another bot rather than a person.
    pub fn bot(mut self) -> Self {
        self.is_bot = true;
        self
    }

    /// The Bot API `User`.
    pub fn json(&self) -> Value {
        let mut user = json!({"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name});
        if let Some(name) = &self.username {
            user["username"] = json!(name);
        }
        user
    }
}

/// The kind of a chat, as the Bot API's `Chat.type` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatKind {
    Private,
    Group,
    Supergroup,
}

/// Where a message is written: a DM, a group, a supergroup, or a topic of
/// a forum supergroup (`thread_id`).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatSpec {
    pub id: i64,
    pub kind: ChatKind,
    /// The group's title, or the user's first name in a DM.
    pub title: String,
    /// The user's username in a DM.
    pub username: Option<String>,
    /// The forum topic (`message_thread_id`).
    pub thread_id: Option<i64>,
}

impl ChatSpec {
    /// The private chat with `user` (its id is the user's id).
    pub fn private(user: &UserSpec) -> Self {
        Self {
            id: user.id,
            kind: ChatKind::Private,
            title: user.first_name.clone(),
            username: user.username.clone(),
            thread_id: None,
        }
    }

    /// A basic group (ids of groups are negative).
    pub fn group(id: i64, title: &str) -> Self {
        Self {
            id,
            kind: ChatKind::Group,
            title: title.to_string(),
            username: None,
            thread_id: None,
        }
    }

    /// A supergroup (ids look like `-100…`).
    pub fn supergroup(id: i64, title: &str) -> Self {
        Self {
            kind: ChatKind::Supergroup,
            ..Self::group(id, title)
        }
    }

    /// Topic `thread_id` of the forum supergroup `id`.
    pub fn topic(id: i64, title: &str, thread_id: i64) -> Self {
        Self {
            thread_id: Some(thread_id),
            ..Self::supergroup(id, title)
        }
    }

    /// The Bot API `Chat`.
    pub fn json(&self) -> Value {
        match self.kind {
            ChatKind::Private => {
                let mut chat = json!({"id": self.id, "type": "private", "first_name": self.title});
                if let Some(name) = &self.username {
                    chat["username"] = json!(name);
                }
                chat
            }
            ChatKind::Group => json!({"id": self.id, "type": "group", "title": self.title}),
            ChatKind::Supergroup if self.thread_id.is_some() => {
                json!({"id": self.id, "type": "supergroup", "title": self.title, "is_forum": true})
            }
            ChatKind::Supergroup => {
                json!({"id": self.id, "type": "supergroup", "title": self.title})
            }
        }
    }
}

/// The entities Telegram's servers find in a text by themselves: a
/// `bot_command` for `/word` and a `mention` for `@username` at the start
/// of a word; offsets and lengths in UTF-16 code units, as the API counts.
pub fn auto_entities(text: &str) -> Vec<Value> {
    let mut entities = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut offset = 0usize; // UTF-16 units before chars[i]
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || chars[i - 1].is_whitespace();
        let word = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
        if starts_word && (chars[i] == '/' || chars[i] == '@') {
            let mut end = i + 1;
            while end < chars.len() && word(&chars[end]) {
                end += 1;
            }
            // a command may name its bot: /help@pincer_test_bot
            if chars[i] == '/' && end < chars.len() && chars[end] == '@' {
                let mut bot_end = end + 1;
                while bot_end < chars.len() && word(&chars[bot_end]) {
                    bot_end += 1;
                }
                if bot_end > end + 1 {
                    end = bot_end;
                }
            }
            let len = end - i - 1;
            let (kind, long_enough) = if chars[i] == '/' {
                ("bot_command", len >= 1)
            } else {
                ("mention", len >= 5)
            };
            if long_enough {
                let units: usize = chars[i..end].iter().map(|c| c.len_utf16()).sum();
                entities.push(json!({"type": kind, "offset": offset, "length": units}));
            }
            offset += chars[i..end].iter().map(|c| c.len_utf16()).sum::<usize>();
            i = end;
            continue;
        }
        offset += chars[i].len_utf16();
        i += 1;
    }
    entities
}

/// A user's message with everything beyond its text: a reply, explicit
/// entities, media fields. Built with [`Say::text`] and the setters.
#[derive(Clone, Debug, Default)]
pub struct Say {
    text: Option<String>,
    caption: Option<String>,
    reply_to: Option<i64>,
    entities: Option<Vec<Value>>,
    fields: serde_json::Map<String, Value>,
}

impl Say {
    /// A text message; commands and @mentions get their entities as
    /// Telegram gives them.
    pub fn text(text: &str) -> Self {
        Self {
            text: Some(text.to_string()),
            ..Self::default()
        }
    }

    /// A media message with this caption (entities as for a text).
    pub fn caption(caption: &str) -> Self {
        Self {
            caption: Some(caption.to_string()),
            ..Self::default()
        }
    }

    /// A reply to message `message_id` of the same chat (the bot's or a
    /// user's): the update carries that message as `reply_to_message`.
    pub fn reply_to(mut self, message_id: i64) -> Self {
        self.reply_to = Some(message_id);
        self
    }

    /// These entities instead of the ones Telegram would find.
    pub fn entities(mut self, entities: Vec<Value>) -> Self {
        self.entities = Some(entities);
        self
    }

    /// Any other `Message` field (`photo`, `document`, `voice`, …).
    pub fn field(mut self, key: &str, value: Value) -> Self {
        self.fields.insert(key.to_string(), value);
        self
    }
}

/// The ids an injected update got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injected {
    pub update_id: i64,
    pub message_id: i64,
}

/// A file registered with the emulator (`getFile` finds it, the file
/// route serves it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRef {
    pub file_id: String,
    pub file_unique_id: String,
    pub file_path: String,
    pub file_size: u64,
}

/// A message the bot sent (or sent and edited: the emulator keeps the
/// edited state), as the emulator stores it: the request's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct BotMessage {
    pub message_id: i64,
    pub chat_id: i64,
    pub text: Option<String>,
    pub caption: Option<String>,
    pub parse_mode: Option<String>,
    /// The inline keyboard (`{"inline_keyboard": [...]}`), if any.
    pub reply_markup: Option<Value>,
    pub thread_id: Option<i64>,
    /// The message it answers (`reply_parameters` or `reply_to_message_id`).
    pub reply_to: Option<i64>,
    /// Everything the emulator stored for it.
    pub raw: Value,
}

/// A `sendChatAction` the bot made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatAction {
    pub chat_id: i64,
    pub action: String,
    pub thread_id: Option<i64>,
}

/// An error the emulator answers the next matching call with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// 429 "Too Many Requests: retry after N" with `parameters.retry_after`.
    RetryAfter(u32),
    /// 400 "Bad Request: can't parse entities: …" for the next call that
    /// has a `parse_mode` (a plain-text retry then goes through).
    CantParseEntities,
    /// Any other error.
    Api { code: u16, description: String },
}

/// An HTTP answer of the emulator.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The Bot API `result` of a successful answer; panics on anything else.
    pub fn result(&self) -> Value {
        let body = self.json();
        assert!(
            self.status == 200 && body["ok"] == true,
            "the emulator answered {}: {}",
            self.status,
            String::from_utf8_lossy(&self.body)
        );
        body["result"].clone()
    }
}

/// A running emulator on 127.0.0.1, killed on drop.
pub struct TelegramEmulator {
    child: Child,
    honor_offset: bool,
    // Held open: the launcher exits when it closes (our process died).
    _stdin: Option<ChildStdin>,
    port: u16,
    stderr: Arc<Mutex<String>>,
}

impl TelegramEmulator {
    /// Starts the emulator on a free port and waits until it listens.
    pub fn start() -> Self {
        Self::launch(false)
    }

    /// [`Self::start`] with `getUpdates` answering as the real Bot API:
    /// updates from `offset` on until a higher offset confirms them (the
    /// emulator alone hands each out once), for tests that kill the bot
    /// mid-batch.
    pub fn start_honoring_offset() -> Self {
        Self::launch(true)
    }

    /// Stops the emulator, as an outage would: the bot's calls fail to
    /// connect until [`Self::resume`].
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the emulator again on the same port (a fresh one: what was
    /// sent before the outage is gone).
    pub fn resume(&mut self) {
        let fresh = Self::launch_on(self.port, self.honor_offset);
        drop(std::mem::replace(self, fresh));
    }

    fn launch(honor_offset: bool) -> Self {
        Self::launch_on(0, honor_offset)
    }

    /// Starts it on `port` (0: a free one).
    fn launch_on(port: u16, honor_offset: bool) -> Self {
        let node = node();
        let modules = emulator_modules();
        let launcher =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/telegram/emulator.js");
        let mut child = Command::new(&node)
            .arg(&launcher)
            .args(["--port", &port.to_string()])
            .args(["--username", BOT_USERNAME, "--watch-stdin"])
            .args(["--token", TOKEN])
            .args(honor_offset.then_some("--honor-offset"))
            .arg("--modules")
            .arg(&modules)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", node.display()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines().map_while(Result::ok) {
                let mut text = sink.lock().unwrap_or_else(|e| e.into_inner());
                if text.len() < 64 * 1024 {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        });
        let out_pipe = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out_pipe).lines().map_while(Result::ok);
            let port = lines.next().and_then(|line| {
                line.strip_prefix("listening 127.0.0.1:")
                    .and_then(|p| p.trim().parse::<u16>().ok())
            });
            let _ = tx.send(port);
            for _ in lines {} // keep draining
        });
        let port = rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
        let stdin = child.stdin.take();
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
            let text = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
            panic!(
                "the Telegram emulator did not report its port within 30 s; its stderr:\n{text}"
            );
        };
        Self {
            child,
            honor_offset,
            _stdin: stdin,
            port,
            stderr,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The Bot API base URL (`api_url` of `[channels.telegram]`).
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bot token to configure.
    pub fn token(&self) -> &'static str {
        TOKEN
    }

    pub fn bot_username(&self) -> &'static str {
        BOT_USERNAME
    }

    /// The bot as a Bot API `User`.
    pub fn bot_user(&self) -> Value {
        json!({"id": BOT_ID, "is_bot": true, "first_name": "Pincer Test", "username": BOT_USERNAME})
    }

    /// What the emulator wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A raw HTTP request to the emulator.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Reply {
        let fut = http(self.port, method, path, content_type, body);
        match tokio::time::timeout(Duration::from_secs(30), fut).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => panic!(
                "request {method} {path} to the Telegram emulator failed: {e}\n{}",
                self.stderr()
            ),
            Err(_) => panic!("request {method} {path} to the Telegram emulator took over 30 s"),
        }
    }

    async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.request(
            "POST",
            path,
            "application/json",
            body.to_string().into_bytes(),
        )
        .await
    }

    /// A Bot API call as the bot makes it (JSON body).
    pub async fn bot_call(&self, method: &str, params: Value) -> Reply {
        self.post_json(&format!("/bot{TOKEN}/{method}"), &params)
            .await
    }

    /// A Bot API call as multipart/form-data, the way teloxide uploads:
    /// text `fields` and `files` as (part name, file name, bytes); a field
    /// refers to a file part with `attach://<part name>`.
    pub async fn bot_call_multipart(
        &self,
        method: &str,
        fields: &[(&str, &str)],
        files: &[(&str, &str, &[u8])],
    ) -> Reply {
        let boundary = "pincer-test-boundary-7c1f";
        let mut body = Vec::new();
        for (name, value) in fields {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            );
        }
        for (name, file_name, bytes) in files {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\r\n")
                    .as_bytes(),
            );
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        self.request(
            "POST",
            &format!("/bot{TOKEN}/{method}"),
            &format!("multipart/form-data; boundary={boundary}"),
            body,
        )
        .await
    }

    /// `user` writes `text` in `chat` (commands and @mentions get their
    /// entities; in a forum topic the message belongs to the topic).
    pub async fn user_says(&self, chat: &ChatSpec, user: &UserSpec, text: &str) -> Injected {
        self.user_sends(chat, user, Say::text(text)).await
    }

    /// `user` writes `text` in `chat` as a reply to message `reply_to`.
    pub async fn user_replies(
        &self,
        chat: &ChatSpec,
        user: &UserSpec,
        reply_to: i64,
        text: &str,
    ) -> Injected {
        self.user_sends(chat, user, Say::text(text).reply_to(reply_to))
            .await
    }

    /// `user` sends `say` in `chat`, shaped as the real API delivers it.
    pub async fn user_sends(&self, chat: &ChatSpec, user: &UserSpec, say: Say) -> Injected {
        let mut message = json!({
            "botToken": TOKEN,
            "from": user.json(),
            "chat": chat.json(),
            "date": now_secs(),
        });
        if let Some(text) = &say.text {
            message["text"] = json!(text);
        }
        if let Some(caption) = &say.caption {
            message["caption"] = json!(caption);
        }
        let written = say.text.as_deref().or(say.caption.as_deref()).unwrap_or("");
        let entities = say
            .entities
            .clone()
            .unwrap_or_else(|| auto_entities(written));
        if !entities.is_empty() {
            let key = if say.text.is_some() {
                "entities"
            } else {
                "caption_entities"
            };
            message[key] = Value::Array(entities);
        }
        if let Some(thread) = chat.thread_id {
            message["message_thread_id"] = json!(thread);
            message["is_topic_message"] = json!(true);
        }
        if let Some(reply_to) = say.reply_to {
            message["reply_to_message"] = self.message_as_sent(chat, reply_to).await;
        } else if let Some(thread) = chat.thread_id {
            // In a forum topic, a message that answers nothing replies to
            // the topic's creation (the real API's shape).
            message["reply_to_message"] = json!({
                "message_id": thread,
                "message_thread_id": thread,
                "is_topic_message": true,
                "from": user.json(),
                "chat": chat.json(),
                "date": now_secs(),
                "forum_topic_created": {"name": format!("topic {thread}"), "icon_color": 7322096},
            });
        }
        for (key, value) in say.fields {
            message[key] = value;
        }
        let reply = self.post_json("/sendMessage", &message).await;
        reply.result();
        injected(&reply)
    }

    /// `user` sends a photo (`bytes`) with an optional caption.
    pub async fn send_photo(
        &self,
        chat: &ChatSpec,
        user: &UserSpec,
        bytes: &[u8],
        caption: Option<&str>,
    ) -> Injected {
        let file = self
            .register_file(bytes, Some("photo.jpg"), Some("image/jpeg"))
            .await;
        let size = |w: u32| {
            json!({"file_id": file.file_id, "file_unique_id": file.file_unique_id,
                   "file_size": file.file_size, "width": w, "height": w})
        };
        let say = caption.map_or_else(Say::default, Say::caption);
        self.user_sends(chat, user, say.field("photo", json!([size(90), size(800)])))
            .await
    }

    /// `user` sends a document.
    pub async fn send_document(
        &self,
        chat: &ChatSpec,
        user: &UserSpec,
        bytes: &[u8],
        file_name: &str,
        mime_type: &str,
        caption: Option<&str>,
    ) -> Injected {
        let file = self
            .register_file(bytes, Some(file_name), Some(mime_type))
            .await;
        let document = json!({"file_id": file.file_id, "file_unique_id": file.file_unique_id,
                              "file_size": file.file_size, "file_name": file_name, "mime_type": mime_type});
        let say = caption.map_or_else(Say::default, Say::caption);
        self.user_sends(chat, user, say.field("document", document))
            .await
    }

    /// `user` sends a voice note (OGG/Opus) of `duration` seconds.
    pub async fn send_voice(
        &self,
        chat: &ChatSpec,
        user: &UserSpec,
        bytes: &[u8],
        duration: u32,
    ) -> Injected {
        let file = self
            .register_file(bytes, Some("voice.ogg"), Some("audio/ogg"))
            .await;
        let voice = json!({"file_id": file.file_id, "file_unique_id": file.file_unique_id,
                           "file_size": file.file_size, "duration": duration, "mime_type": "audio/ogg"});
        self.user_sends(chat, user, Say::default().field("voice", voice))
            .await
    }

    /// `user` presses the inline button with callback `data` on the bot's
    /// message `message_id` in `chat`; answers the update id.
    pub async fn press_button(
        &self,
        chat: &ChatSpec,
        user: &UserSpec,
        message_id: i64,
        data: &str,
    ) -> i64 {
        let message = self.message_as_sent(chat, message_id).await;
        let body = json!({
            "botToken": TOKEN,
            "from": user.json(),
            "message": message,
            "data": data,
            "chat_instance": format!("instance{}", chat.id),
        });
        let reply = self.post_json("/sendCallback", &body).await;
        reply.result();
        header_id(&reply, "X-Update-Id")
    }

    /// Registers `bytes` as a file the bot can `getFile` and download.
    pub async fn register_file(
        &self,
        bytes: &[u8],
        file_name: Option<&str>,
        mime_type: Option<&str>,
    ) -> FileRef {
        let body = json!({"base64": base64(bytes), "file_name": file_name, "mime_type": mime_type});
        let file = self.post_json("/_test/files", &body).await.result();
        FileRef {
            file_id: file["file_id"].as_str().unwrap_or_default().to_string(),
            file_unique_id: file["file_unique_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            file_path: file["file_path"].as_str().unwrap_or_default().to_string(),
            file_size: file["file_size"].as_u64().unwrap_or_default(),
        }
    }

    /// The bytes of a file: registered by the test or uploaded by the bot.
    pub async fn file_bytes(&self, file_id: &str) -> Vec<u8> {
        let reply = self
            .request("GET", &format!("/_test/file/{file_id}"), "", Vec::new())
            .await;
        assert_eq!(reply.status, 200, "no file {file_id} in the emulator");
        reply.body
    }

    /// Every update and bot message the emulator holds for our token, in
    /// time order (its client API `getUpdatesHistory`).
    pub async fn history(&self) -> Vec<Value> {
        let reply = self
            .post_json("/getUpdatesHistory", &json!({"token": TOKEN}))
            .await;
        match reply.result() {
            Value::Array(items) => items,
            _ => Vec::new(),
        }
    }

    /// What the bot sent to `chat_id` (all threads), oldest first.
    pub async fn bot_messages(&self, chat_id: i64) -> Vec<BotMessage> {
        let mut messages = self.all_bot_messages().await;
        messages.retain(|m| m.chat_id == chat_id);
        messages
    }

    /// What the bot sent to any chat, oldest first (one request, for
    /// tests that watch many chats at once).
    pub async fn all_bot_messages(&self) -> Vec<BotMessage> {
        self.history()
            .await
            .iter()
            .filter_map(bot_message)
            .collect()
    }

    /// Waits until the bot has sent at least `n` messages to `chat_id`.
    pub async fn wait_for_bot_messages(
        &self,
        chat_id: i64,
        n: usize,
        timeout: Duration,
    ) -> Vec<BotMessage> {
        let deadline = Instant::now() + timeout;
        loop {
            let messages = self.bot_messages(chat_id).await;
            if messages.len() >= n {
                return messages;
            }
            assert!(
                Instant::now() < deadline,
                "the bot sent {} of {n} messages to chat {chat_id} within {timeout:?}: {messages:#?}",
                messages.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every Bot API call the bot made to `method` (getUpdates is only
    /// counted): `{method, token, params, time, failed}`.
    pub async fn calls(&self, method: &str) -> Vec<Value> {
        let reply = self
            .request(
                "GET",
                &format!("/_test/calls?method={method}"),
                "",
                Vec::new(),
            )
            .await;
        match reply.result() {
            Value::Array(items) => items,
            _ => Vec::new(),
        }
    }

    /// How many times the bot called `method` (getUpdates included).
    pub async fn count(&self, method: &str) -> u64 {
        let reply = self.request("GET", "/_test/counts", "", Vec::new()).await;
        reply.result()["counts"][method].as_u64().unwrap_or(0)
    }

    /// The parameters of the bot's last `getUpdates` (offset, timeout, …).
    pub async fn last_get_updates(&self) -> Value {
        let reply = self.request("GET", "/_test/counts", "", Vec::new()).await;
        reply.result()["last_get_updates"].clone()
    }

    /// The chat actions the bot showed (typing, …), oldest first.
    pub async fn chat_actions(&self) -> Vec<ChatAction> {
        self.calls("sendChatAction")
            .await
            .iter()
            .filter(|c| c["failed"] == false)
            .map(|c| ChatAction {
                chat_id: id_of(&c["params"]["chat_id"]).unwrap_or_default(),
                action: c["params"]["action"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                thread_id: id_of(&c["params"]["message_thread_id"]),
            })
            .collect()
    }

    /// The bot's commands (default scope) as (command, description).
    pub async fn commands(&self) -> Vec<(String, String)> {
        let result = self.bot_call("getMyCommands", json!({})).await.result();
        result
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (text("command"), text("description"))
            })
            .collect()
    }

    /// The bot's `answerCallbackQuery` parameters, oldest first.
    pub async fn callback_answers(&self) -> Vec<Value> {
        self.calls("answerCallbackQuery")
            .await
            .into_iter()
            .map(|c| c["params"].clone())
            .collect()
    }

    /// The bot's next `method` call (its next one with a `parse_mode` for
    /// [`Failure::CantParseEntities`]) answers `failure`. Queued in order.
    pub async fn fail_next(&self, method: &str, failure: Failure) {
        let body = match failure {
            Failure::RetryAfter(secs) => json!({
                "method": method, "error_code": 429, "retry_after": secs,
                "description": format!("Too Many Requests: retry after {secs}"),
            }),
            Failure::CantParseEntities => json!({
                "method": method, "error_code": 400, "needs_parse_mode": true,
                "description": "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 0",
            }),
            Failure::Api { code, description } => {
                json!({"method": method, "error_code": code, "description": description})
            }
        };
        self.post_json("/_test/fail", &body).await.result();
    }

    /// The bot's next `sendMessage` answers `failure`.
    pub async fn fail_next_send(&self, failure: Failure) {
        self.fail_next("sendMessage", failure).await;
    }

    /// Message `message_id` of `chat` as the API delivers it inside an
    /// update (`reply_to_message`, a callback query's `message`).
    async fn message_as_sent(&self, chat: &ChatSpec, message_id: i64) -> Value {
        let history = self.history().await;
        let item = history
            .iter()
            .find(|item| {
                item["messageId"].as_i64() == Some(message_id)
                    && (id_of(&item["message"]["chat_id"]) == Some(chat.id)
                        || id_of(&item["message"]["chat"]["id"]) == Some(chat.id))
            })
            .unwrap_or_else(|| {
                panic!(
                    "no message {message_id} in chat {} in the emulator",
                    chat.id
                )
            });
        let stored = &item["message"];
        if stored.get("chat_id").is_none() {
            // a user's message: as delivered, less the emulator's own field
            // (and, as on Telegram, no reply inside a reply)
            let mut message = stored.clone();
            if let Some(fields) = message.as_object_mut() {
                fields.remove("botToken");
                fields.remove("reply_to_message");
            }
            message["message_id"] = json!(message_id);
            return message;
        }
        let mut message = json!({
            "message_id": message_id,
            "from": self.bot_user(),
            "chat": chat.json(),
            "date": item["time"].as_i64().map_or_else(now_secs, |ms| ms / 1000),
        });
        for key in [
            "text", "caption", "document", "photo", "voice", "audio", "video",
        ] {
            if let Some(value) = stored.get(key).filter(|v| !v.is_null()) {
                message[key] = value.clone();
            }
        }
        if let Some(markup) = stored.get("reply_markup").filter(|m| {
            m["inline_keyboard"]
                .as_array()
                .is_some_and(|k| !k.is_empty())
        }) {
            message["reply_markup"] = markup.clone();
        }
        if let Some(thread) = id_of(&stored["message_thread_id"]) {
            message["message_thread_id"] = json!(thread);
            message["is_topic_message"] = json!(true);
        }
        message
    }
}

impl Drop for TelegramEmulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A chat or message id the Bot API may write as a number or a string.
fn id_of(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

fn header_id(reply: &Reply, name: &str) -> i64 {
    reply
        .header(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the emulator's answer has no {name} header"))
}

fn injected(reply: &Reply) -> Injected {
    Injected {
        update_id: header_id(reply, "X-Update-Id"),
        message_id: header_id(reply, "X-Message-Id"),
    }
}

/// A bot message from a `getUpdatesHistory` item (user updates have a
/// `chat`, the bot's stored requests a `chat_id`).
fn bot_message(item: &Value) -> Option<BotMessage> {
    let stored = item.get("message")?;
    let chat_id = id_of(stored.get("chat_id")?)?;
    let text = |k: &str| stored[k].as_str().map(str::to_string);
    let reply_markup = stored
        .get("reply_markup")
        .filter(|m| m.get("inline_keyboard").is_some())
        .cloned();
    Some(BotMessage {
        message_id: item["messageId"].as_i64()?,
        chat_id,
        text: text("text"),
        caption: text("caption"),
        parse_mode: text("parse_mode"),
        reply_markup,
        thread_id: id_of(&stored["message_thread_id"]),
        reply_to: id_of(&stored["reply_parameters"]["message_id"])
            .or_else(|| id_of(&stored["reply_to_message_id"])),
        raw: stored.clone(),
    })
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One HTTP/1.0 exchange over loopback (the answer ends when the server
/// closes the connection).
async fn http(
    port: u16,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> std::io::Result<Reply> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        request.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    stream.write_all(&body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP header in the answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}
