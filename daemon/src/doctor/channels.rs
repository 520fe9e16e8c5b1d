//! The chat bridges, asked directly: Telegram's bot (`getMe`, a webhook
//! that blocks polling, group privacy) and Discord's through
//! `pincer_discord::check` (the token, each allowlisted channel's
//! visibility and the bot's permissions there, open guilds, mention-only
//! mode); `pincer doctor --fix` deletes a webhook that blocks polling.

use super::{Finding, Level, finding};
use crate::config::Config;

/// One chat channel, asked directly: on Telegram (`getMe`,
/// `getWebhookInfo`) the token, the API, a webhook that swallows the
/// updates a poll waits for, and the group privacy mode that hides
/// un-mentioned group messages; on Discord the token, each allowlisted
/// channel the bot must see and answer in, and mention-only mode.
pub async fn check_channel(channel: &crate::config::ChannelSettings) -> Vec<Finding> {
    let subject = format!("channel {}", channel.name);
    match channel.name.as_str() {
        #[cfg(feature = "telegram")]
        "telegram" => check_telegram(channel, subject).await,
        #[cfg(feature = "discord")]
        "discord" => check_discord(channel, subject).await,
        other => {
            if let Err(why) = channel.token() {
                return vec![finding(Level::Error, subject, why.to_string())];
            }
            vec![finding(
                Level::Warn,
                subject,
                format!(
                    "this pincerd was built without the {other} bridge; the channel does not run"
                ),
            )]
        }
    }
}

/// The channel's bot, asked with `getMe`; the error is the sentence (a
/// token not found, refused, an API not reached).
#[cfg(feature = "telegram")]
async fn connect_telegram(
    channel: &crate::config::ChannelSettings,
) -> Result<std::sync::Arc<pincer_telegram::Telegram>, String> {
    let token = channel.token().map_err(|e| e.to_string())?;
    let mut settings = pincer_telegram::TelegramSettings::new(token);
    settings.api_url = channel.api_url.clone();
    pincer_telegram::connect(settings)
        .await
        .map_err(|e| e.to_string())
}

/// Whether the channel reads its updates by polling (a webhook left on
/// the bot then keeps the poll empty).
#[cfg(feature = "telegram")]
fn polls(channel: &crate::config::ChannelSettings) -> bool {
    !matches!(
        channel.telegram.as_ref().map(|t| &t.mode),
        Some(crate::config::TelegramMode::Webhook(_))
    )
}

#[cfg(feature = "telegram")]
async fn check_telegram(channel: &crate::config::ChannelSettings, subject: String) -> Vec<Finding> {
    let telegram = match connect_telegram(channel).await {
        Ok(t) => t,
        Err(why) => return vec![finding(Level::Error, subject, why)],
    };
    let mut out = vec![finding(
        Level::Ok,
        subject.clone(),
        format!(
            "the bot @{} answers at {}",
            telegram.username(),
            channel.api_url
        ),
    )];
    match telegram.webhook_info().await {
        Ok(Some(url)) if polls(channel) => out.push(finding(
            Level::Error,
            subject.clone(),
            format!(
                "a webhook is set on the bot ({url}) while pincerd polls, so Telegram hands no messages to the poll; delete it with `pincer doctor --fix`, or set mode = \"webhook\""
            ),
        )),
        Ok(_) => {}
        Err(e) => out.push(finding(Level::Warn, subject.clone(), e.to_string())),
    }
    let wants_context = !channel.groups.is_empty()
        && (channel.context_messages > 0
            || channel
                .groups
                .values()
                .any(|g| !g.require_mention.unwrap_or(channel.require_mention)));
    if wants_context && !telegram.can_read_all_group_messages() {
        out.push(finding(
            Level::Warn,
            subject,
            "the bot's group privacy mode is on, so Telegram sends it only commands, mentions and replies in groups: un-mentioned messages never arrive as context and require_mention = false has no effect; turn it off in @BotFather (/setprivacy, Disable), then remove the bot from each group and add it again",
        ));
    }
    out
}

/// The Discord bot, asked over REST (`pincer_discord::check`): the token,
/// each allowlisted channel (one the bot cannot see, or cannot answer in,
/// with what to do), each guild listened to in every channel, and what
/// `message_content = false` means. A fatal gateway close (4004, 4014)
/// the running bridge recorded is its health's finding (`bridge discord`).
#[cfg(feature = "discord")]
async fn check_discord(channel: &crate::config::ChannelSettings, subject: String) -> Vec<Finding> {
    let token = match channel.token() {
        Ok(t) => t,
        Err(why) => return vec![finding(Level::Error, subject, why.to_string())],
    };
    let mut settings = pincer_discord::DiscordSettings::new(token);
    settings.api_url = channel.api_url.clone();
    (settings.channels, settings.open_guilds) = channel.listened();
    let report = match pincer_discord::check(&settings).await {
        Ok(r) => r,
        Err(why) => return vec![finding(Level::Error, subject, why.to_string())],
    };
    let mut out = vec![finding(
        Level::Ok,
        subject.clone(),
        format!("the bot @{} answers at {}", report.bot, channel.api_url),
    )];
    for c in &report.channels {
        let name = c
            .name
            .as_ref()
            .map_or(String::new(), |n| format!(" (#{n})"));
        out.push(match &c.access {
            pincer_discord::Access::Ok => finding(
                Level::Ok,
                subject.clone(),
                format!("the bot can read and answer in channel {}{name}", c.id),
            ),
            pincer_discord::Access::Hidden => finding(
                Level::Error,
                subject.clone(),
                format!(
                    "the bot cannot see channel {}: invite it to the channel's guild (the invite link in the guide, docs/src/channels/discord.md), give it View Channel and Send Messages in that channel, or check the id in [channels.discord]",
                    c.id
                ),
            ),
            pincer_discord::Access::Missing(perms) => finding(
                Level::Error,
                subject.clone(),
                format!(
                    "the bot cannot answer in channel {}{name}: it lacks {}; give its role these permissions in the channel's settings (Permissions)",
                    c.id,
                    perms.join(", ")
                ),
            ),
            pincer_discord::Access::Unknown(why) => finding(
                Level::Warn,
                subject.clone(),
                format!("could not check channel {}: {why}", c.id),
            ),
        });
    }
    for g in &report.guilds {
        match &g.joined {
            Ok(true) => {}
            Ok(false) => out.push(finding(
                Level::Error,
                subject.clone(),
                format!(
                    "the bot is not in guild {}: invite it with the link in the guide (docs/src/channels/discord.md), or check the id in [channels.discord.guilds]",
                    g.id
                ),
            )),
            Err(why) => out.push(finding(
                Level::Warn,
                subject.clone(),
                format!("could not check guild {}: {why}", g.id),
            )),
        }
    }
    if channel.discord.as_ref().is_some_and(|d| !d.message_content) {
        let why = "message_content = false: the bot runs mention-only, so in guild channels Discord hands it only messages that mention it or reply to it (and DMs), and un-mentioned messages never reach it as context";
        let listens = !(channel.groups.is_empty() && channel.guilds.is_empty());
        let unmentioned = !channel.require_mention
            || channel
                .groups
                .values()
                .any(|g| g.require_mention == Some(false))
            || channel.guilds.values().any(|g| {
                g.require_mention == Some(false)
                    || g.roles
                        .iter()
                        .any(|(_, r)| r.require_mention == Some(false))
            });
        out.push(if listens && unmentioned {
            finding(
                Level::Warn,
                subject,
                format!(
                    "{why}; require_mention = false has no effect: enable Message Content Intent in the Developer Portal (Bot → Privileged Gateway Intents) and set message_content = true"
                ),
            )
        } else {
            finding(Level::Ok, subject, why)
        });
    }
    out
}

/// Deletes a webhook set on a polling channel's bot (`pincer doctor
/// --fix`): one finding (subject `fixed`) per thing done or not done.
pub async fn fix_channels(config: &Config) -> Vec<Finding> {
    #[cfg_attr(not(feature = "telegram"), allow(unused_mut))]
    let mut done = Vec::new();
    #[cfg(feature = "telegram")]
    for channel in config
        .channels
        .values()
        .filter(|c| c.enabled && c.name == "telegram" && polls(c))
    {
        let telegram = match connect_telegram(channel).await {
            Ok(t) => t,
            Err(why) => {
                done.push(finding(
                    Level::Warn,
                    "fixed",
                    format!("telegram: nothing done: {why}"),
                ));
                continue;
            }
        };
        if let Ok(Some(url)) = telegram.webhook_info().await {
            done.push(match telegram.delete_webhook().await {
                Ok(()) => finding(
                    Level::Ok,
                    "fixed",
                    format!(
                        "telegram: deleted the webhook {url}; the poll receives messages again"
                    ),
                ),
                Err(e) => finding(
                    Level::Error,
                    "fixed",
                    format!("telegram: could not delete the webhook {url}: {e}"),
                ),
            });
        }
    }
    #[cfg(not(feature = "telegram"))]
    let _ = config;
    done
}
