//! Telegram's own keys of `[channels.telegram]`: `mode`,
//! `poll_timeout_secs` and `[channels.telegram.webhook]` into
//! [`TelegramSettings`], and the same keys refused in another channel's
//! table.

use std::net::SocketAddr;
use std::time::Duration;

use toml::Spanned;

use super::super::file::{ChannelSection, WebhookSection};
use super::super::locate::ConfigError;
use super::super::secret::{MissingSecret, SecretSource};
use super::super::url::check_http_url;
use super::Parser;

/// `[channels.telegram]`'s own keys.
#[derive(Debug, Clone, PartialEq)]
pub struct TelegramSettings {
    pub mode: TelegramMode,
}

/// How Telegram's updates arrive (`mode`).
#[derive(Debug, Clone, PartialEq)]
pub enum TelegramMode {
    /// `getUpdates` long polling (the default) with `poll_timeout_secs`
    /// (default 30, 1..=50).
    Polling { timeout: Duration },
    /// Telegram calls `[channels.telegram.webhook] url`.
    Webhook(WebhookSettings),
}

/// `[channels.telegram.webhook]`, in webhook mode.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSettings {
    /// `url`: the public https URL Telegram posts updates to.
    pub url: String,
    /// `listen` (default `127.0.0.1:8443`): where pincerd accepts them. The
    /// listener speaks plain HTTP, so a non-loopback address must sit
    /// behind a TLS-terminating proxy.
    pub listen: SocketAddr,
    /// `secret_env` or `secret_file`: the secret token Telegram sends in
    /// `X-Telegram-Bot-Api-Secret-Token` (required).
    pub secret_source: SecretSource,
}

impl WebhookSettings {
    /// The secret token, read now; the error names its variable or file.
    pub fn secret(&self) -> Result<String, MissingSecret> {
        self.secret_source
            .read_for("[channels.telegram.webhook]", "secret token")
    }
}

/// `[channels.telegram.webhook]` checked, each key still optional.
#[derive(Default)]
struct WebhookKeys {
    url: Option<String>,
    listen: Option<SocketAddr>,
    secret: Option<SecretSource>,
}

impl Parser<'_> {
    pub(super) fn telegram(&self, s: &ChannelSection) -> Result<TelegramSettings, ConfigError> {
        let timeout = match &s.poll_timeout_secs {
            Some(n) if !(1..=50).contains(n.get_ref()) => {
                return Err(self.err(
                    n.span(),
                    "poll_timeout_secs must be between 1 and 50 (Telegram holds a poll at most 50 s)",
                ));
            }
            Some(n) => Duration::from_secs(*n.get_ref()),
            None => Duration::from_secs(30),
        };
        // Checked whenever written, used only in webhook mode.
        let webhook = match &s.webhook {
            Some(w) => Some(self.webhook(w.get_ref())?),
            None => None,
        };
        let mode = match &s.mode {
            None => TelegramMode::Polling { timeout },
            Some(m) => match m.get_ref().trim() {
                "polling" => TelegramMode::Polling { timeout },
                "webhook" => {
                    let WebhookKeys {
                        url,
                        listen,
                        secret,
                    } = webhook.unwrap_or_default();
                    let Some(url) = url else {
                        return Err(self.err(
                            m.span(),
                            "webhook mode needs the public https URL Telegram calls: [channels.telegram.webhook] url = \"https://…\"",
                        ));
                    };
                    let Some(secret) = secret else {
                        return Err(self.err(
                            m.span(),
                            "webhook mode needs a secret token: [channels.telegram.webhook] secret_env = \"NAME\" or secret_file = \"file\"",
                        ));
                    };
                    TelegramMode::Webhook(WebhookSettings {
                        url,
                        listen: listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8443))),
                        secret_source: secret,
                    })
                }
                other => {
                    return Err(self.err(
                        m.span(),
                        format!("unknown mode `{other}`: use polling or webhook"),
                    ));
                }
            },
        };
        Ok(TelegramSettings { mode })
    }

    fn webhook(&self, w: &WebhookSection) -> Result<WebhookKeys, ConfigError> {
        let url = match &w.url {
            Some(u) => {
                let value = u.get_ref().trim().to_string();
                check_http_url(&value).map_err(|why| self.err(u.span(), why.to_string()))?;
                if !value.starts_with("https://") {
                    return Err(self.err(
                        u.span(),
                        format!("`{value}` is not https: Telegram calls webhooks over https only"),
                    ));
                }
                Some(value)
            }
            None => None,
        };
        let listen = match &w.listen {
            Some(l) => Some(l.get_ref().trim().parse::<SocketAddr>().map_err(|_| {
                self.err(
                    l.span(),
                    format!(
                        "`{}` is not an address and port such as \"127.0.0.1:8443\"",
                        l.get_ref()
                    ),
                )
            })?),
            None => None,
        };
        let secret = self.secret(
            (w.secret_env.as_ref(), "secret_env"),
            (w.secret_file.as_ref(), "secret_file"),
        )?;
        Ok(WebhookKeys {
            url,
            listen,
            secret,
        })
    }

    /// Telegram's own keys in another channel's table.
    pub(super) fn refuse_telegram_keys(&self, s: &ChannelSection) -> Result<(), ConfigError> {
        let spans = [
            ("mode", s.mode.as_ref().map(Spanned::span)),
            (
                "poll_timeout_secs",
                s.poll_timeout_secs.as_ref().map(Spanned::span),
            ),
            ("webhook", s.webhook.as_ref().map(Spanned::span)),
        ];
        for (key, span) in spans {
            if let Some(span) = span {
                return Err(self.err(
                    span,
                    format!(
                        "`{key}` is a Telegram setting; [channels.{}] has no `{key}`",
                        self.name
                    ),
                ));
            }
        }
        Ok(())
    }
}
