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

/// How long the TCP and TLS handshakes may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an ordinary call may take, answer included (a long poll and a
/// download set their own).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

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
            .build()
            .map_err(SetupError::Client)?;
        let bot = Bot::with_client(token, client).set_api_url(url);
        Ok(Self { bot, base })
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

    /// Calls the method `payload` describes; answers the `result`.
    pub(crate) async fn call<P: Payload + Serialize>(&self, payload: &P) -> Result<Value, Failure> {
        let body = serde_json::to_vec(payload)
            .map_err(|e| Failure::Network(format!("cannot encode a {} request: {e}", P::NAME)))?;
        self.post_json(&method_name(P::NAME), body, None).await
    }

    /// Calls `method` with a JSON body, waiting at most `timeout` (the
    /// client's 60 s when `None`).
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

    /// Calls `method` with a multipart body (file uploads).
    pub(crate) async fn call_form(&self, method: &str, form: Form) -> Result<Value, Failure> {
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
}
