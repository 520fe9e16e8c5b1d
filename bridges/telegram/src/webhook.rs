//! Webhook mode: an HTTP server Telegram posts each update to. The bot's
//! webhook is pointed at the configured URL (with its secret) at start;
//! each delivery must carry the secret in `X-Telegram-Bot-Api-Secret-Token`
//! (compared in constant time; 401 otherwise) and is answered 200 only
//! once the bridge recorded it — a 500 makes Telegram deliver it again.
//!
//! The server speaks plain HTTP on `listen` (127.0.0.1:8443 by default):
//! TLS is for the reverse proxy in front of it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use pincer_channel::{Bridge, Incoming, pause};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::UrlError;
use crate::telegram::Telegram;
use crate::updates;

/// The header Telegram sends the secret in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The wait between tries to bind or to set the webhook.
const RETRY: Duration = Duration::from_secs(30);

struct Hook {
    telegram: Arc<Telegram>,
    bridge: Arc<Bridge>,
    path: String,
    secret: String,
}

/// Equal bytes, in a time that does not depend on where they differ.
fn same(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// The configured webhook URL does not parse.
#[derive(Debug, thiserror::Error)]
#[error("the webhook url `{url}` is not a URL ({source})")]
pub(crate) struct BadUrl {
    url: String,
    source: UrlError,
}

/// The path of the webhook URL the server answers on (`/` when none).
pub(crate) fn path_of(url: &str) -> Result<String, BadUrl> {
    let parsed = reqwest::Url::parse(url).map_err(|source| BadUrl {
        url: url.to_string(),
        source,
    })?;
    Ok(parsed.path().to_string())
}

/// The server's routes: the webhook path alone, POST only. A fallback
/// compares the path itself, so no configured path can upset the router.
pub(crate) fn router(
    telegram: Arc<Telegram>,
    bridge: Arc<Bridge>,
    path: String,
    secret: String,
) -> Router {
    let hook = Arc::new(Hook {
        telegram,
        bridge,
        path,
        secret,
    });
    Router::new().fallback(deliver).with_state(hook)
}

async fn deliver(
    State(hook): State<Arc<Hook>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    if uri.path() != hook.path {
        return StatusCode::NOT_FOUND;
    }
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED;
    }
    let given = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !same(given, hook.secret.as_bytes()) {
        tracing::warn!("a webhook request without the right secret was refused");
        return StatusCode::UNAUTHORIZED;
    }
    let Ok(update) = serde_json::from_slice::<Value>(&body) else {
        tracing::warn!("a webhook delivery that is not JSON was refused");
        return StatusCode::BAD_REQUEST;
    };
    let incoming = Incoming {
        event: updates::event(&update, &hook.telegram.me, &hook.telegram.settings.account),
        cursor: None,
    };
    match hook.bridge.receive(incoming).await {
        Ok(()) => StatusCode::OK,
        Err(e) => {
            let why = format!(
                "a Telegram update could not be recorded ({e}); Telegram will deliver it again"
            );
            tracing::error!("{why}");
            hook.bridge.health().error(&why);
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// Serves the webhook until `stop`: binds `listen`, points the bot's
/// webhook at `url`, then answers deliveries. Failures are sentences in
/// the bridge's health, tried again every 30 s.
pub(crate) async fn run(
    telegram: Arc<Telegram>,
    bridge: Arc<Bridge>,
    stop: CancellationToken,
    url: String,
    listen: SocketAddr,
    secret: String,
) {
    let health = bridge.health().clone();
    let path = match path_of(&url) {
        Ok(p) => p,
        Err(e) => {
            let why = e.to_string();
            tracing::error!("{why}");
            health.disconnected(&why);
            return;
        }
    };
    if secret.is_empty() {
        let why = "the Telegram webhook needs a secret: without one anyone who finds its URL could post updates to the bot";
        tracing::error!("{why}");
        health.disconnected(why);
        return;
    }
    let listener = loop {
        match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => break l,
            Err(e) => {
                let why = format!("cannot listen for the Telegram webhook on {listen}: {e}");
                tracing::error!("{why}");
                health.disconnected(&why);
                if !pause(&stop, RETRY).await {
                    return;
                }
            }
        }
    };
    loop {
        match telegram.set_webhook(&url, &secret).await {
            Ok(()) => break,
            Err(e) => {
                let why = format!("{e}; trying again in {} s", RETRY.as_secs());
                tracing::error!("{why}");
                health.disconnected(&why);
                if !pause(&stop, RETRY).await {
                    return;
                }
            }
        }
    }
    health.connected();
    tracing::info!(%listen, %path, "Telegram webhook set; serving deliveries");
    let app = router(telegram, bridge, path, secret);
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
    {
        let why = format!("the Telegram webhook server stopped: {e}");
        tracing::error!("{why}");
        health.disconnected(&why);
    }
}

#[cfg(test)]
mod tests;
