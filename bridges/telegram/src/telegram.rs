//! One connected bot ([`Telegram`]): [`connect`] checks the token with
//! `getMe`, and the calls about the bot itself live here (its webhook, its
//! command list) for the daemon and `pincer doctor`. Sending is the
//! platform's ([`crate::platform`]); reading, the reader's
//! ([`crate::poll`], [`crate::webhook`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use pincer_channel::host::COMMANDS;
use serde_json::Value;
use teloxide_core::payloads::{DeleteWebhook, GetMe, GetWebhookInfo, SetMyCommands, SetWebhook};
use teloxide_core::types::{AllowedUpdate, BotCommand};

use crate::api::Api;
use crate::error::ConnectError;
use crate::me::Me;
use crate::settings::TelegramSettings;

/// The longest wait for `getMe` at start (a dead network must not hold
/// the daemon's start for the client's full minute).
const CONNECT_WAIT: Duration = Duration::from_secs(15);

/// One bot account on the Bot API, ready to send and read.
pub struct Telegram {
    pub(crate) api: Api,
    pub(crate) me: Me,
    pub(crate) settings: TelegramSettings,
}

impl fmt::Debug for Telegram {
    // No token: the Bot and the settings both hold it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telegram")
            .field("account", &self.settings.account)
            .field("bot", &self.me.username)
            .field("bot_id", &self.me.id)
            .field("api_url", &self.api.base())
            .finish()
    }
}

/// Builds the bot for `settings` and checks its token with `getMe`.
pub async fn connect(settings: TelegramSettings) -> Result<Arc<Telegram>, ConnectError> {
    let token = settings.token.trim();
    if token.is_empty() {
        return Err(ConnectError::BadToken("the token is empty".into()));
    }
    if token.contains(['/', '?', '#']) || token.contains(char::is_whitespace) {
        return Err(ConnectError::BadToken(
            "the token holds characters a bot token never has".into(),
        ));
    }
    let api = Api::new(token, &settings.api_url).map_err(|e| ConnectError::Other(e.to_string()))?;
    let answer = tokio::time::timeout(CONNECT_WAIT, api.call(&GetMe::new()))
        .await
        .map_err(|_| {
            ConnectError::Unreachable(format!(
                "{}: getMe got no answer within {} s",
                api.base(),
                CONNECT_WAIT.as_secs()
            ))
        })?
        .map_err(|f| ConnectError::from_failure(f, api.base()))?;
    let me = Me::from_result(answer).map_err(|e| ConnectError::Other(e.to_string()))?;
    tracing::info!(account = %settings.account, bot = %me.username, "connected to Telegram");
    Ok(Arc::new(Telegram { api, me, settings }))
}

impl Telegram {
    /// The bot's user id (from `getMe`).
    pub fn bot_id(&self) -> i64 {
        self.me.id
    }

    /// The bot's user name without `@` (from `getMe`).
    pub fn username(&self) -> &str {
        &self.me.username
    }

    /// Whether the bot sees every group message (privacy mode off in
    /// @BotFather); otherwise it sees only mentions, replies and commands.
    pub fn can_read_all_group_messages(&self) -> bool {
        self.me.can_read_all_group_messages
    }

    pub fn settings(&self) -> &TelegramSettings {
        &self.settings
    }

    fn failed(&self, what: &str, f: crate::api::Failure) -> ConnectError {
        match ConnectError::from_failure(f, self.api.base()) {
            ConnectError::Other(why) => ConnectError::Other(format!("{what}: {why}")),
            other => other,
        }
    }

    /// The URL of the webhook set on the bot, if any: while one is set,
    /// Telegram refuses polling (409).
    pub async fn webhook_info(&self) -> Result<Option<String>, ConnectError> {
        let info = self
            .api
            .call(&GetWebhookInfo::new())
            .await
            .map_err(|f| self.failed("cannot read the bot's webhook", f))?;
        Ok(info
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .map(str::to_string))
    }

    /// Removes the bot's webhook (updates not yet delivered are kept for
    /// polling).
    pub async fn delete_webhook(&self) -> Result<(), ConnectError> {
        self.api
            .call(&DeleteWebhook::new())
            .await
            .map(drop)
            .map_err(|f| self.failed("cannot delete the bot's webhook", f))
    }

    /// Sets the command list Telegram shows in the chat's menu.
    pub async fn register_commands(&self) -> Result<(), ConnectError> {
        let commands = COMMANDS
            .iter()
            .map(|(name, about)| BotCommand::new(*name, *about));
        self.api
            .call(&SetMyCommands::new(commands))
            .await
            .map(drop)
            .map_err(|f| self.failed("cannot register the bot's commands", f))
    }

    /// Points the bot's webhook at `url`, with `secret` in each delivery.
    pub(crate) async fn set_webhook(&self, url: &str, secret: &str) -> Result<(), ConnectError> {
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            ConnectError::Other(format!("the webhook url `{url}` is not a URL ({e})"))
        })?;
        let mut payload = SetWebhook::new(parsed);
        payload.secret_token = Some(secret.to_string());
        payload.allowed_updates = Some(vec![
            AllowedUpdate::Message,
            AllowedUpdate::EditedMessage,
            AllowedUpdate::CallbackQuery,
        ]);
        self.api
            .call(&payload)
            .await
            .map(drop)
            .map_err(|f| self.failed("cannot set the bot's webhook", f))
    }
}
