//! The REST client: Discord's HTTP API v10 under `{api_url}/api/v10`, on
//! reqwest, honouring the rate limits itself.
//!
//! Why not serenity's `Http`: it reaches a custom origin only with its
//! rate limiter off, and then a 429's `retry_after` and bucket headers
//! never reach the caller (DEPENDENCIES.md). Here every response's
//! `x-ratelimit-remaining` / `x-ratelimit-reset-after` is kept per route
//! (a bucket exhausted waits before its next request, only that route
//! waits), and a 429 answers [`RestError::RateLimited`] with its wait, so
//! the bridge's retry loop (or the caller's) waits as Discord says. A 429
//! on one route never holds up another: the waits are per route, and a
//! global 429 alone stops all.
//!
//! Routes are keyed as Discord buckets them: the method and the path with
//! every id but the first (the major parameter: a channel, a guild, a
//! webhook) replaced.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

/// The longest a bucket's reset is waited in one go.
const MAX_BUCKET_WAIT: Duration = Duration::from_secs(60);

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestError {
    /// 429: try again after this long.
    #[error("rate limited by Discord; retry after {0:?}")]
    RateLimited(Duration),
    /// The network, a timeout, a 5xx: worth another try.
    #[error("{0}")]
    Transient(String),
    /// 401: the token is refused.
    #[error("Discord refused the bot token (401): check DISCORD_BOT_TOKEN or token_file")]
    Unauthorized,
    /// Any other 4xx: the request will fail however often it is sent.
    #[error("Discord refused the request ({status}): {message}")]
    Refused {
        status: u16,
        code: u64,
        message: String,
    },
}

/// The HTTP client could not be set up (TLS roots, the resolver).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct ClientError(#[source] reqwest::Error);

/// The HTTP API with the bot's token.
pub struct Rest {
    http: reqwest::Client,
    base: String,
    authorization: String,
    /// When each route (and, under `""`, everything: a global limit) may
    /// be called again.
    blocked: Mutex<HashMap<String, Instant>>,
}

impl Rest {
    pub fn new(origin: &str, token: &str) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!(
                "DiscordBot (https://example.invalid/pincer, ",
                env!("CARGO_PKG_VERSION"),
                ")"
            ))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(ClientError)?;
        Ok(Self {
            http,
            base: format!("{}/api/v10", origin.trim_end_matches('/')),
            authorization: format!("Bot {}", token.trim()),
            blocked: Mutex::new(HashMap::new()),
        })
    }

    /// The HTTP client, for downloads from Discord's CDN (without the
    /// token: an attachment URL is not the API).
    pub fn client(&self) -> &reqwest::Client {
        &self.http
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Value, RestError> {
        self.call(Method::GET, path, None).await
    }

    /// A call with an optional JSON body; answers the JSON (Null for 204).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, RestError> {
        let route = route_key(&method, path);
        self.wait_for(&route).await;
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("authorization", &self.authorization);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.finish(&route, request).await
    }

    /// A multipart call (a file with `payload_json`).
    pub async fn multipart(
        &self,
        path: &str,
        form: reqwest::multipart::Form,
    ) -> Result<Value, RestError> {
        let route = route_key(&Method::POST, path);
        self.wait_for(&route).await;
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("authorization", &self.authorization)
            .multipart(form);
        self.finish(&route, request).await
    }

    async fn finish(
        &self,
        route: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, RestError> {
        let response = request
            .send()
            .await
            .map_err(|e| RestError::Transient(format!("cannot reach Discord: {e}")))?;
        let status = response.status();
        let headers = response.headers().clone();
        self.note_bucket(route, &headers);
        let text = response
            .text()
            .await
            .map_err(|e| RestError::Transient(format!("Discord's answer was cut off: {e}")))?;
        let json: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(json);
        }
        match status {
            StatusCode::TOO_MANY_REQUESTS => {
                let wait = retry_after(&headers, &json);
                let global = json["global"].as_bool().unwrap_or(false)
                    || headers.get("x-ratelimit-global").is_some();
                self.block(if global { "" } else { route }, wait);
                tracing::warn!(
                    route,
                    global,
                    wait_ms = wait.as_millis() as u64,
                    "discord: rate limited"
                );
                Err(RestError::RateLimited(wait))
            }
            StatusCode::UNAUTHORIZED => Err(RestError::Unauthorized),
            s if s.is_server_error() => Err(RestError::Transient(format!(
                "Discord answered {s}; trying again"
            ))),
            s => Err(RestError::Refused {
                status: s.as_u16(),
                code: json["code"].as_u64().unwrap_or(0),
                message: json["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| s.to_string()),
            }),
        }
    }

    /// Waits while the route's bucket (or the global limit) is spent.
    async fn wait_for(&self, route: &str) {
        let until = {
            let blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
            [blocked.get(""), blocked.get(route)]
                .into_iter()
                .flatten()
                .max()
                .copied()
        };
        if let Some(until) = until {
            let now = Instant::now();
            if until > now {
                tokio::time::sleep((until - now).min(MAX_BUCKET_WAIT)).await;
            }
        }
    }

    fn block(&self, route: &str, wait: Duration) {
        let until = Instant::now() + wait.min(MAX_BUCKET_WAIT);
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        let entry = blocked.entry(route.to_string()).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// A bucket with nothing left blocks its route until it resets.
    fn note_bucket(&self, route: &str, headers: &reqwest::header::HeaderMap) {
        let remaining = header_f64(headers, "x-ratelimit-remaining");
        let reset_after = header_f64(headers, "x-ratelimit-reset-after");
        if let (Some(remaining), Some(reset)) = (remaining, reset_after)
            && remaining < 1.0
            && reset > 0.0
        {
            self.block(route, Duration::from_secs_f64(reset));
        }
    }
}

fn header_f64(headers: &reqwest::header::HeaderMap, name: &str) -> Option<f64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// A 429's wait: the body's `retry_after` (seconds, fractional), else the
/// `retry-after` header, else one second.
fn retry_after(headers: &reqwest::header::HeaderMap, body: &Value) -> Duration {
    body["retry_after"]
        .as_f64()
        .or_else(|| header_f64(headers, "retry-after"))
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(1))
}

/// The bucket key of a call: the method and the path, every id after the
/// first replaced (a webhook's token too).
fn route_key(method: &Method, path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let parts: Vec<&str> = path.split('/').collect();
    let mut ids = 0;
    let mut out = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let is_id = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        let owner = i.checked_sub(2).map(|j| parts[j]);
        if !is_id && matches!(owner, Some("webhooks" | "interactions")) {
            out.push(":token");
        } else if is_id {
            ids += 1;
            out.push(if ids > 1 { ":id" } else { part });
        } else {
            out.push(part);
        }
    }
    format!("{method} {}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_keep_the_major_id_and_hide_the_others() {
        assert_eq!(
            route_key(&Method::POST, "/channels/123/messages"),
            "POST /channels/123/messages"
        );
        assert_eq!(
            route_key(&Method::PATCH, "/channels/123/messages/456"),
            "PATCH /channels/123/messages/:id"
        );
        assert_eq!(
            route_key(&Method::GET, "/channels/9/messages?after=5&limit=50"),
            "GET /channels/9/messages"
        );
        assert_eq!(
            route_key(&Method::POST, "/webhooks/77/secret-token"),
            "POST /webhooks/77/:token"
        );
    }

    #[test]
    fn a_429_wait_comes_from_the_body_then_the_header() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        let body = serde_json::json!({"retry_after": 0.25});
        assert_eq!(retry_after(&headers, &body), Duration::from_millis(250));
        assert_eq!(retry_after(&headers, &Value::Null), Duration::from_secs(3));
        assert_eq!(
            retry_after(&reqwest::header::HeaderMap::new(), &Value::Null),
            Duration::from_secs(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_bucket_holds_its_route_only() {
        let rest = Rest::new("http://127.0.0.1:9", "t").unwrap();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-after", "2.5".parse().unwrap());
        rest.note_bucket("POST /channels/1/messages", &headers);
        let start = Instant::now();
        rest.wait_for("POST /channels/2/messages").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        rest.wait_for("POST /channels/1/messages").await;
        assert_eq!(start.elapsed(), Duration::from_millis(2500));
    }
}
