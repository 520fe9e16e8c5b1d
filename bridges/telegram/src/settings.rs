//! What the Telegram bridge is told by the daemon's config: the bot token,
//! where the Bot API is, which account this is, and how updates arrive
//! (long polling or a webhook).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The real Bot API.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

/// How long one `getUpdates` waits on the server for news.
pub const DEFAULT_POLL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the webhook server listens unless told otherwise (a reverse proxy
/// in front of it terminates TLS).
pub const DEFAULT_WEBHOOK_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8443);

/// How updates reach the bridge.
#[derive(Clone, PartialEq, Eq)]
pub enum Mode {
    /// The bridge asks (`getUpdates`); works behind any NAT.
    Polling,
    /// Telegram posts each update to `url` (public, HTTPS), which reaches
    /// the bridge's server on `listen`; `secret` is the
    /// `X-Telegram-Bot-Api-Secret-Token` Telegram sends with each.
    Webhook {
        url: String,
        listen: SocketAddr,
        secret: String,
    },
}

impl fmt::Debug for Mode {
    // The secret authenticates Telegram to us: never in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Polling => f.write_str("Polling"),
            Self::Webhook { url, listen, .. } => f
                .debug_struct("Webhook")
                .field("url", url)
                .field("listen", listen)
                .field("secret", &"<hidden>")
                .finish(),
        }
    }
}

/// One bot account.
#[derive(Clone, PartialEq, Eq)]
pub struct TelegramSettings {
    /// The bot token from @BotFather. Never printed: [`fmt::Debug`] hides it.
    pub token: String,
    /// The Bot API base URL, without the `/bot<token>` part.
    pub api_url: String,
    /// The account name in the channel layer (`default` when one bot).
    pub account: String,
    /// How long one long poll waits on the server.
    pub poll_timeout: Duration,
    pub mode: Mode,
}

impl TelegramSettings {
    /// Settings for `token` with every default: the real Bot API, account
    /// `default`, long polling of 30 s.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            api_url: DEFAULT_API_URL.to_string(),
            account: "default".to_string(),
            poll_timeout: DEFAULT_POLL_TIMEOUT,
            mode: Mode::Polling,
        }
    }
}

impl fmt::Debug for TelegramSettings {
    // The token is the bot: whoever reads it can act as the bot.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("token", &"<hidden>")
            .field("api_url", &self.api_url)
            .field("account", &self.account)
            .field("poll_timeout", &self.poll_timeout)
            .field("mode", &self.mode)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_token_and_the_secret() {
        let mut s = TelegramSettings::new("123456:SECRET-TOKEN");
        s.mode = Mode::Webhook {
            url: "https://example.org/tg".into(),
            listen: DEFAULT_WEBHOOK_LISTEN,
            secret: "hook-secret".into(),
        };
        let shown = format!("{s:?}");
        assert!(!shown.contains("SECRET-TOKEN"), "{shown}");
        assert!(!shown.contains("hook-secret"), "{shown}");
        assert!(shown.contains("https://example.org/tg"), "{shown}");
    }

    #[test]
    fn defaults() {
        let s = TelegramSettings::new("t");
        assert_eq!(s.api_url, "https://api.telegram.org");
        assert_eq!(s.account, "default");
        assert_eq!(s.poll_timeout, Duration::from_secs(30));
        assert_eq!(s.mode, Mode::Polling);
    }
}
