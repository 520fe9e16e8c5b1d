//! [`Discord`]: one connected bot — its REST client, who it is, and what
//! it learned of the channels it sees — and [`connect`], which checks the
//! token (`/users/@me`) and reads the gateway's address
//! (`/gateway/bot`) before anything listens.
//!
//! A failed connect says whether trying again can help: a refused token
//! is [`Ended::Fatal`] (the bridge stops with the fix in one sentence and
//! never loops), an unreachable API is [`Ended::Retry`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pincer_channel::Ended;
use serde_json::Value;

use crate::rest::{Rest, RestError};
use crate::settings::DiscordSettings;

/// What a refused token (401) gets: the fix in one sentence.
pub(crate) const BAD_TOKEN: &str = "Discord refused the bot token (401): copy the token again from the Developer Portal (Bot → Reset Token) into DISCORD_BOT_TOKEN or token_file";

/// A slash command's answer is due in its interaction for 15 minutes.
pub(crate) const INTERACTION_TTL: Duration = Duration::from_secs(14 * 60);

/// What the bridge knows of a channel: whether it is a thread (then its
/// parent) and its guild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelInfo {
    pub guild_id: Option<String>,
    /// Set for a thread or a forum post: the channel it hangs under.
    pub parent_id: Option<String>,
    /// Discord's channel type (1 DM, 0 text, 11 public thread, 15 forum…).
    pub kind: u64,
}

impl ChannelInfo {
    pub fn is_thread(&self) -> bool {
        matches!(self.kind, 10..=12)
    }

    pub fn from_json(v: &Value) -> Option<(String, Self)> {
        let id = v["id"].as_str()?.to_string();
        Some((
            id,
            Self {
                guild_id: v["guild_id"].as_str().map(str::to_string),
                parent_id: v["parent_id"].as_str().map(str::to_string),
                kind: v["type"].as_u64().unwrap_or(0),
            },
        ))
    }
}

/// A slash command waiting for its answer (deferred when it came).
#[derive(Debug, Clone)]
pub(crate) struct PendingCommand {
    /// The channel it was run in.
    pub channel: String,
    pub token: String,
    pub at: tokio::time::Instant,
}

/// Which of the `pending` commands (by message id) a send to `channel`
/// replying to `reply_to` answers: [`Discord::take_command`].
fn answered_command(
    pending: &HashMap<String, PendingCommand>,
    channel: &str,
    reply_to: Option<&str>,
) -> Option<String> {
    match reply_to {
        Some(id) => pending
            .get(id)
            .filter(|p| p.channel == channel)
            .map(|_| id.to_string()),
        None => pending
            .iter()
            .filter(|(_, p)| p.channel == channel)
            .min_by_key(|(_, p)| p.at)
            .map(|(id, _)| id.clone()),
    }
}

/// The message id a slash command has as an inbound message (`i` and the
/// interaction's id): what its answer's target replies to in a guild.
pub(crate) fn command_message_id(interaction_id: &str) -> String {
    format!("i{interaction_id}")
}

/// Whether `id` is a slash command's [`command_message_id`] rather than a
/// Discord message's (a snowflake, all digits).
pub(crate) fn is_command_message_id(id: &str) -> bool {
    id.starts_with('i')
}

/// One connected Discord bot.
pub struct Discord {
    pub(crate) settings: DiscordSettings,
    pub(crate) rest: Rest,
    /// The bot's user id and name.
    pub(crate) user_id: String,
    pub(crate) username: String,
    /// The application id (slash commands, interaction follow-ups).
    pub(crate) application_id: String,
    /// The gateway's address, from `/gateway/bot`.
    pub(crate) gateway_url: String,
    pub(crate) channels: Mutex<HashMap<String, ChannelInfo>>,
    /// The DM channel opened with each user.
    pub(crate) dms: Mutex<HashMap<String, String>>,
    /// Slash commands awaiting their answer, by their message id (`i…`).
    pub(crate) commands: Mutex<HashMap<String, PendingCommand>>,
    /// Members' roles by (guild, user), for messages that come without
    /// them (catch-up reads history, which has no `member`).
    pub(crate) roles: Mutex<HashMap<(String, String), Vec<String>>>,
}

impl std::fmt::Debug for Discord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discord")
            .field("user", &self.username)
            .field("gateway_url", &self.gateway_url)
            .finish()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Checks the token and reads the gateway's address.
pub async fn connect(settings: DiscordSettings) -> Result<Arc<Discord>, Ended> {
    let rest =
        Rest::new(&settings.api_url, &settings.token).map_err(|e| Ended::Fatal(e.to_string()))?;
    let me = rest.get("/users/@me").await.map_err(|e| match e {
        RestError::Unauthorized => Ended::Fatal(BAD_TOKEN.into()),
        e => Ended::Retry(format!("cannot reach Discord at {}: {e}", settings.api_url)),
    })?;
    let user_id = me["id"].as_str().unwrap_or_default().to_string();
    let username = me["username"].as_str().unwrap_or_default().to_string();
    if user_id.is_empty() {
        return Err(Ended::Retry(format!(
            "{} answered /users/@me without an id: is api_url Discord's origin?",
            settings.api_url
        )));
    }
    // The gateway's address: without it serenity would fall back to
    // Discord's own gateway, whatever api_url says.
    let gateway = rest
        .get("/gateway/bot")
        .await
        .map_err(|e| Ended::Retry(format!("cannot read the gateway's address: {e}")))?;
    let Some(gateway_url) = gateway["url"].as_str().map(str::to_string) else {
        return Err(Ended::Retry(
            "Discord answered /gateway/bot without a url".into(),
        ));
    };
    let application_id = match rest.get("/oauth2/applications/@me").await {
        Ok(app) => app["id"].as_str().map(str::to_string),
        Err(_) => None,
    }
    // A bot's application id is its user id unless Discord says otherwise.
    .unwrap_or_else(|| user_id.clone());
    Ok(Arc::new(Discord {
        settings,
        rest,
        user_id,
        username,
        application_id,
        gateway_url,
        channels: Mutex::new(HashMap::new()),
        dms: Mutex::new(HashMap::new()),
        commands: Mutex::new(HashMap::new()),
        roles: Mutex::new(HashMap::new()),
    }))
}

impl Discord {
    /// The bot's user name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The bot's user id.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// What `channel_id` is, asking Discord the first time.
    pub(crate) async fn channel_info(&self, channel_id: &str) -> Option<ChannelInfo> {
        if let Some(info) = lock(&self.channels).get(channel_id).cloned() {
            return Some(info);
        }
        let v = self
            .rest
            .get(&format!("/channels/{channel_id}"))
            .await
            .ok()?;
        let (_, info) = ChannelInfo::from_json(&v)?;
        lock(&self.channels).insert(channel_id.to_string(), info.clone());
        Some(info)
    }

    /// A member's roles in a guild: as the message says (and then
    /// remembered), else as remembered, else asked of Discord.
    pub(crate) async fn member_roles(
        &self,
        guild: &str,
        user: &str,
        given: Option<Vec<String>>,
    ) -> Vec<String> {
        let key = (guild.to_string(), user.to_string());
        if let Some(roles) = given {
            lock(&self.roles).insert(key, roles.clone());
            return roles;
        }
        if let Some(roles) = lock(&self.roles).get(&key).cloned() {
            return roles;
        }
        let roles: Vec<String> = match self
            .rest
            .get(&format!("/guilds/{guild}/members/{user}"))
            .await
        {
            Ok(member) => member["roles"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_string))
                .collect(),
            Err(e) => {
                tracing::warn!(guild, user, "discord: cannot read a member's roles: {e}");
                return Vec::new();
            }
        };
        lock(&self.roles).insert(key, roles.clone());
        roles
    }

    /// The slash command a send to `channel` answers, taken (still
    /// answerable): in a guild the one the target replies to, so another
    /// message's answer in the same channel never fills it; in a DM, whose
    /// answers reply to nothing, the channel's oldest.
    pub(crate) fn take_command(
        &self,
        channel: &str,
        reply_to: Option<&str>,
    ) -> Option<PendingCommand> {
        let mut pending = lock(&self.commands);
        pending.retain(|_, p| p.at.elapsed() < INTERACTION_TTL);
        let key = answered_command(&pending, channel, reply_to)?;
        pending.remove(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_answered_by_its_own_reply_not_by_another_in_its_channel() {
        let t0 = tokio::time::Instant::now();
        let command = |channel: &str, secs| PendingCommand {
            channel: channel.into(),
            token: "t".into(),
            at: t0 + std::time::Duration::from_secs(secs),
        };
        let pending = HashMap::from([
            ("i1".to_string(), command("c", 1)),
            ("i2".to_string(), command("c", 0)),
            ("i3".to_string(), command("dm", 2)),
        ]);
        // A guild answer to someone's message fills no command.
        assert_eq!(answered_command(&pending, "c", Some("555")), None);
        assert_eq!(
            answered_command(&pending, "c", Some("i1")).as_deref(),
            Some("i1")
        );
        // Not one of another channel.
        assert_eq!(answered_command(&pending, "x", Some("i1")), None);
        // A DM's answer replies to nothing: the channel's oldest command.
        assert_eq!(answered_command(&pending, "c", None).as_deref(), Some("i2"));
        assert_eq!(
            answered_command(&pending, "dm", None).as_deref(),
            Some("i3")
        );
        assert_eq!(answered_command(&pending, "x", None), None);
    }
}
