//! Test doubles shared by the crate's tests: a fake Bot API on a local
//! port (scripted `getMe` and `getUpdates`, every call recorded, unknown
//! methods answered 500 as telegram-test-api does), a scripted [`Host`],
//! and a real [`Bridge`] with its ledger in a temporary folder.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use pincer_channel::{
    BoxFuture, Bridge, BridgeSettings, Command, Health, Host, HostError, Inbound, Ledger, Pairings,
    Platform, TurnEvent,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::settings::TelegramSettings;
use crate::telegram::{Telegram, connect};

pub(crate) const TOKEN: &str = "123456:TEST-token";
pub(crate) const BOT_ID: i64 = 7000000001;

/// What the fake answers to `getUpdates`.
#[derive(Clone)]
pub(crate) enum Updates {
    /// Never answers (a connection that died silently).
    Hang,
    /// The same list every time, at once (telegram-test-api ignores
    /// `offset` and does not long-poll).
    Same(Vec<Value>),
    /// An error status with a Bot API error body.
    Fail(u16, String),
}

/// How the fake behaves.
#[derive(Clone)]
pub(crate) struct Script {
    pub(crate) get_me: (u16, Value),
    pub(crate) updates: Updates,
    /// `getFile`'s result and the file's bytes.
    pub(crate) file: (Value, Vec<u8>),
    pub(crate) webhook_url: String,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            get_me: (
                200,
                json!({"ok": true, "result": {
                    "id": BOT_ID, "is_bot": true, "first_name": "Pincer",
                    "username": "pincer_bot", "can_read_all_group_messages": false
                }}),
            ),
            updates: Updates::Same(Vec::new()),
            file: (
                json!({"file_id": "F", "file_unique_id": "u", "file_path": "documents/f.bin"}),
                b"hello file".to_vec(),
            ),
            webhook_url: String::new(),
        }
    }
}

/// One recorded call: the method (or `file:<path>`) and the body as text.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) method: String,
    pub(crate) body: String,
}

impl Call {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

struct Fake {
    script: Script,
    calls: Mutex<Vec<Call>>,
}

/// A running fake Bot API.
#[derive(Clone)]
pub(crate) struct FakeApi {
    pub(crate) url: String,
    fake: Arc<Fake>,
}

impl FakeApi {
    pub(crate) fn calls(&self, method: &str) -> Vec<Call> {
        self.fake
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Settings for a bot on this fake, polling every 100 ms.
    pub(crate) fn settings(&self) -> TelegramSettings {
        let mut s = TelegramSettings::new(TOKEN);
        s.api_url = self.url.clone();
        s.poll_timeout = Duration::from_millis(100);
        s
    }

    pub(crate) async fn connect(&self) -> Arc<Telegram> {
        connect(self.settings()).await.unwrap()
    }
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

async fn answer(State(fake): State<Arc<Fake>>, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let text = String::from_utf8_lossy(&body).into_owned();
    if let Some(file) = path.strip_prefix(&format!("/file/bot{TOKEN}/")) {
        fake.calls.lock().unwrap().push(Call {
            method: format!("file:{file}"),
            body: text,
        });
        return fake.script.file.1.clone().into_response();
    }
    let Some(method) = path.strip_prefix(&format!("/bot{TOKEN}/")) else {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        )
            .into_response();
    };
    let n = {
        let mut calls = fake.calls.lock().unwrap();
        calls.push(Call {
            method: method.to_string(),
            body: text,
        });
        calls.len() as i64
    };
    match method {
        "getMe" => {
            let (status, body) = fake.script.get_me.clone();
            (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
        }
        "getUpdates" => match &fake.script.updates {
            Updates::Hang => std::future::pending().await,
            Updates::Same(list) => ok(Value::Array(list.clone())),
            Updates::Fail(status, description) => (
                StatusCode::from_u16(*status).unwrap(),
                axum::Json(json!({"ok": false, "error_code": status, "description": description})),
            )
                .into_response(),
        },
        "sendMessage" | "sendDocument" => ok(json!({
            "message_id": 1000 + n, "date": 1735689612345_i64,
            "chat": {"id": 1, "type": "private"}, "text": "x"
        })),
        // As telegram-test-api answers it.
        "editMessageText" => ok(Value::Null),
        "getFile" => ok(fake.script.file.0.clone()),
        "getWebhookInfo" => ok(json!({"url": fake.script.webhook_url, "pending_update_count": 0})),
        "answerCallbackQuery" | "setMyCommands" | "setWebhook" | "deleteWebhook" => ok(json!(true)),
        other => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"message": format!("API method '{other}' is not supported.")})),
        )
            .into_response(),
    }
}

/// Serves `router` on a free local port until the test ends.
pub(crate) async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

pub(crate) async fn fake_api(script: Script) -> FakeApi {
    let fake = Arc::new(Fake {
        script,
        calls: Mutex::default(),
    });
    let addr = serve(Router::new().fallback(answer).with_state(fake.clone())).await;
    FakeApi {
        url: format!("http://{addr}"),
        fake,
    }
}

/// A host that answers every message at once with `echo: <text>`.
pub(crate) struct ScriptedHost {
    /// The workspace; attachments go to its `inbox`.
    workspace: PathBuf,
    pub(crate) turns: Mutex<Vec<String>>,
}

impl Host for ScriptedHost {
    fn chat<'a>(
        &'a self,
        msg: &'a Inbound,
        text: String,
        _images: Vec<String>,
    ) -> BoxFuture<'a, Result<mpsc::UnboundedReceiver<TurnEvent>, HostError>> {
        Box::pin(async move {
            let (tx, rx) = mpsc::unbounded_channel();
            let turn_id = format!("turn-{}", msg.message_id);
            let _ = tx.send(TurnEvent::Started {
                turn_id: turn_id.clone(),
            });
            let _ = tx.send(TurnEvent::Finished {
                turn_id,
                text: format!("echo: {text}"),
            });
            self.turns.lock().unwrap().push(text);
            Ok(rx)
        })
    }

    fn command<'a>(
        &'a self,
        _msg: &'a Inbound,
        _command: &'a Command,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async { Ok("done".to_string()) })
    }

    fn decide_approval<'a>(
        &'a self,
        id: &'a str,
        decision: pincer_channel::ApprovalAnswer,
        _by: &'a pincer_channel::ChatPerson,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move { Ok(format!("{id}: {}", decision.verb())) })
    }

    fn is_waiting(&self, _id: &str) -> bool {
        true
    }

    fn inbox(&self, _msg: &Inbound) -> Result<pincer_channel::Dir, HostError> {
        pincer_fs::Root::create(&self.workspace)
            .and_then(|root| root.create_dir_all("inbox"))
            .map_err(|e| HostError::Refused(e.to_string()))
    }
}

/// A real bridge over `platform`, its ledger and pairings in `dir`, with
/// `owner` (who passes in DMs without pairing).
pub(crate) fn bridge(
    platform: Arc<dyn Platform>,
    dir: &Path,
    owner: &str,
    mode: &str,
) -> (Arc<Bridge>, Arc<ScriptedHost>) {
    let host = Arc::new(ScriptedHost {
        workspace: dir.to_path_buf(),
        turns: Mutex::default(),
    });
    let ledger = Ledger::open(&dir.join("ledger.sqlite")).unwrap();
    let pairings = Pairings::open(&dir.join("pairings.json")).unwrap();
    let settings = BridgeSettings {
        owner: Some(owner.to_string()),
        ..BridgeSettings::default()
    };
    let bridge = Bridge::new(
        platform,
        host.clone(),
        settings,
        ledger.share().unwrap(),
        Arc::new(pairings),
        Arc::new(Health::new("telegram", mode)),
        Box::new(|bytes: &mut [u8]| bytes.fill(7)),
    );
    (bridge, host)
}

/// Waits until `check` holds, at most `limit`.
pub(crate) async fn until<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
