//! The Bot API transport: one HTTP request per method on the client of
//! teloxide-core's [`Bot`], with the request bodies teloxide's payload
//! types serialise.
//!
//! The bridge sends the requests itself instead of through teloxide's
//! `Requester` for three reasons found in teloxide-core 0.13's source:
//! it sleeps 10 s inside every call answered with a 5xx (a typing tick, or
//! any method a test emulator lacks, would stall a chat that long); it
//! drops the HTTP status and `error_code`, so a 409 or a 401 cannot be
//! told from other refusals; and it parses every answer into its typed
//! result, so an emulator that answers `editMessageText` with `null` reads
//! as an error. Here the answer is the envelope's `result` as JSON, and
//! each caller reads the few fields it needs.

use std::time::Duration;

use reqwest::multipart::Form;
use serde::Serialize;
use serde_json::Value;
use teloxide_core::Bot;
use teloxide_core::requests::Payload;
use tokio::sync::{Semaphore, SemaphorePermit};

/// How long the TCP and TLS handshakes may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an ordinary call may take, answer included (a long poll and a
/// download set their own).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How many calls of one bot (the long poll apart) may be in flight at
/// once; the rest wait their turn. Each call in flight holds a connection
/// of its own (HTTP/1.1), and the client keeps a connection it opened:
/// without a bound, 200 chats answered at once opened some 150
/// connections and kept them (measured with `pincer-telegram-load`: the
/// burst raised the daemon's RSS by 19 MB with them, 9 MB with this
/// bound). More would not be faster: the
/// Bot API lets a bot send about 30 messages a second in all, and 8 calls
/// at a time keep far more than that going at a transatlantic round trip.
const CALLS_IN_FLIGHT: usize = 8;

/// Why a Bot API call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No answer: the connection failed or timed out. The sentence never
    /// holds the URL (it carries the token).
    Network(String),
    /// The Bot API answered with an error: `status` is its `error_code`
    /// (or the HTTP status when the body has none), `description` its
    /// text, `retry_after` the seconds a 429 asks to wait.
    Api {
        status: u16,
        description: String,
        retry_after: Option<u64>,
    },
}

/// url's `ParseError`, named through reqwest's `Url` (the bridge does not
/// depend on url itself).
pub(crate) type UrlError = <reqwest::Url as std::str::FromStr>::Err;

/// Why [`Api::new`] could not set up the API.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    #[error("the Telegram api_url `{base}` is not a URL ({source})")]
    NotAUrl { base: String, source: UrlError },
    #[error(
        "the Telegram api_url `{base}` must start with https:// (or http:// for a local server)"
    )]
    NotHttp { base: String },
    #[error("cannot set up the HTTP client for Telegram: {0}")]
    Client(#[source] reqwest::Error),
}

/// The Bot API of one bot.
pub(crate) struct Api {
    bot: Bot,
    /// `api_url` without a trailing slash: methods are
    /// `{base}/bot{token}/{method}`, files `{base}/file/bot{token}/{path}`.
    base: String,
    /// [`CALLS_IN_FLIGHT`] permits.
    in_flight: Semaphore,
}

impl Api {
    /// The API at `api_url` for `token`. Fails when the URL is not one or
    /// the HTTP client cannot be built.
    pub(crate) fn new(token: &str, api_url: &str) -> Result<Self, SetupError> {
        let base = api_url.trim().trim_end_matches('/').to_string();
        let url = match reqwest::Url::parse(&base) {
            Ok(url) => url,
            Err(source) => return Err(SetupError::NotAUrl { base, source }),
        };
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SetupError::NotHttp { base });
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .tcp_nodelay(true)
            // The long poll's connection and the calls' own.
            .pool_max_idle_per_host(CALLS_IN_FLIGHT + 1)
            .build()
            .map_err(SetupError::Client)?;
        let bot = Bot::with_client(token, client).set_api_url(url);
        Ok(Self {
            bot,
            base,
            in_flight: Semaphore::new(CALLS_IN_FLIGHT),
        })
    }

    /// The Bot API base URL, for messages (no token in it).
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    fn method_url(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.base, self.bot.token())
    }

    /// The URL a file from `getFile` is downloaded from.
    pub(crate) fn file_url(&self, file_path: &str) -> String {
        format!(
            "{}/file/bot{}/{}",
            self.base,
            self.bot.token(),
            file_path.trim_start_matches('/')
        )
    }

    pub(crate) fn client(&self) -> &reqwest::Client {
        self.bot.client()
    }

    /// Calls the method `payload` describes, once fewer than
    /// [`CALLS_IN_FLIGHT`] calls are in flight; answers the `result`.
    pub(crate) async fn call<P: Payload + Serialize>(&self, payload: &P) -> Result<Value, Failure> {
        let body = serde_json::to_vec(payload)
            .map_err(|e| Failure::Network(format!("cannot encode a {} request: {e}", P::NAME)))?;
        let _turn = self.turn().await?;
        self.post_json(&method_name(P::NAME), body, None).await
    }

    /// Calls `method` with a JSON body, waiting at most `timeout` (the
    /// client's 60 s when `None`). For the long poll: it does not wait
    /// for, nor hold, a place among the calls in flight.
    pub(crate) async fn call_json(
        &self,
        method: &str,
        body: &Value,
        timeout: Option<Duration>,
    ) -> Result<Value, Failure> {
        let body = serde_json::to_vec(body)
            .map_err(|e| Failure::Network(format!("cannot encode a {method} request: {e}")))?;
        self.post_json(method, body, timeout).await
    }

    /// A place among the calls in flight, held until dropped.
    async fn turn(&self) -> Result<SemaphorePermit<'_>, Failure> {
        // The semaphore is never closed; the error cannot happen.
        self.in_flight
            .acquire()
            .await
            .map_err(|_| Failure::Network("the Telegram API is shut down".into()))
    }

    async fn post_json(
        &self,
        method: &str,
        body: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<Value, Failure> {
        let mut request = self
            .client()
            .post(self.method_url(method))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(t) = timeout {
            request = request.timeout(t);
        }
        let response = request.send().await.map_err(network)?;
        read(response).await
    }

    /// Calls `method` with a multipart body (file uploads), as
    /// [`Api::call`] does.
    pub(crate) async fn call_form(&self, method: &str, form: Form) -> Result<Value, Failure> {
        let _turn = self.turn().await?;
        let response = self
            .client()
            .post(self.method_url(method))
            .multipart(form)
            .send()
            .await
            .map_err(network)?;
        read(response).await
    }
}

/// `SendMessage` (teloxide's payload name) as the Bot API spells it,
/// `sendMessage`; the API ignores case, but emulators may not.
fn method_name(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) => first.to_ascii_lowercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// A request that got no answer, as a sentence without the URL (which
/// holds the token).
pub(crate) fn network(e: reqwest::Error) -> Failure {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    let mut why = format!("the request to Telegram {what}");
    let e = e.without_url();
    let mut source = std::error::Error::source(&e);
    // The innermost cause names the real problem (connection refused,
    // certificate); reqwest's own text is generic.
    let mut last = None;
    while let Some(s) = source {
        last = Some(s.to_string());
        source = s.source();
    }
    if let Some(cause) = last {
        why.push_str(": ");
        why.push_str(&cause);
    }
    Failure::Network(why)
}

/// Reads the Bot API envelope `{"ok": …, "result": …}` of an answer.
///
/// A 2xx answer is a success whatever its body: the request was carried
/// out, so a `result` that is `null` or missing (as telegram-test-api
/// answers `editMessageText`) or a body that is not JSON reads as `null`,
/// never as an error that would make the bridge send the same thing again.
async fn read(response: reqwest::Response) -> Result<Value, Failure> {
    let http = response.status();
    let body = response.bytes().await.map_err(network)?;
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refused = json.get("ok").and_then(Value::as_bool) == Some(false);
    if http.is_success() && !refused {
        return Ok(json.get("result").cloned().unwrap_or(Value::Null));
    }
    let status = json
        .get("error_code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(http.as_u16());
    // `description` is the Bot API's; `message` is what telegram-test-api
    // sends for a method it lacks.
    let description = json
        .get("description")
        .or_else(|| json.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            format!(
                "HTTP {} {}",
                http.as_u16(),
                http.canonical_reason().unwrap_or("")
            )
            .trim_end()
            .to_string()
        });
    let retry_after = json
        .pointer("/parameters/retry_after")
        .and_then(Value::as_u64);
    Err(Failure::Api {
        status,
        description,
        retry_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_are_spelled_as_the_bot_api_does() {
        assert_eq!(method_name("SendMessage"), "sendMessage");
        assert_eq!(method_name("GetMe"), "getMe");
        assert_eq!(method_name(""), "");
    }

    #[test]
    fn the_base_url_loses_its_trailing_slash() {
        let api = Api::new("1:T", "http://127.0.0.1:9000/tg/").unwrap();
        assert_eq!(api.base(), "http://127.0.0.1:9000/tg");
        assert_eq!(
            api.method_url("getMe"),
            "http://127.0.0.1:9000/tg/bot1:T/getMe"
        );
        assert_eq!(
            api.file_url("/documents/a.pdf"),
            "http://127.0.0.1:9000/tg/file/bot1:T/documents/a.pdf"
        );
        assert!(Api::new("1:T", "not a url").is_err());
        assert!(Api::new("1:T", "ftp://example.org").is_err());
    }

    /// 100 calls at once, against a Bot API that takes 20 ms a call: never
    /// more than [`CALLS_IN_FLIGHT`] at a time, and the long poll outside
    /// that bound.
    #[tokio::test]
    async fn calls_in_flight_are_bounded_and_the_long_poll_is_not_counted() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        use axum::Router;
        use axum::extract::State;
        use teloxide_core::payloads::GetMe;

        #[derive(Default)]
        struct Load {
            now: AtomicUsize,
            most: AtomicUsize,
        }
        async fn answer(State(load): State<Arc<Load>>, uri: axum::http::Uri) -> String {
            let long_poll = uri.path().ends_with("/getUpdates");
            if !long_poll {
                let now = load.now.fetch_add(1, Ordering::SeqCst) + 1;
                load.most.fetch_max(now, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(if long_poll { 500 } else { 20 })).await;
            if !long_poll {
                load.now.fetch_sub(1, Ordering::SeqCst);
            }
            r#"{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"b","username":"b"}}"#.into()
        }
        let load = Arc::new(Load::default());
        let addr =
            crate::testing::serve(Router::new().fallback(answer).with_state(load.clone())).await;
        let api = Arc::new(Api::new("1:T", &format!("http://{addr}")).unwrap());

        let poll = {
            let api = api.clone();
            tokio::spawn(async move {
                api.call_json("getUpdates", &serde_json::json!({}), None)
                    .await
            })
        };
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..100 {
            let api = api.clone();
            calls.spawn(async move { api.call(&GetMe::new()).await });
        }
        for answered in calls.join_all().await {
            assert!(answered.is_ok(), "{answered:?}");
        }
        assert_eq!(load.most.load(Ordering::SeqCst), CALLS_IN_FLIGHT);
        assert!(poll.await.unwrap().is_ok());
    }
}
