//! What `pincer doctor` asks Discord about one bot, over REST only (no
//! gateway): whether the token is taken (`GET /users/@me`: the bot's
//! name), for each allowlisted channel whether the bot can see it and
//! answer there, and for each guild listened to in every channel whether
//! the bot is in it.
//!
//! A channel the bot cannot see answers 403 or 404 to `GET
//! /channels/{id}` (Discord does not tell a channel that does not exist
//! from one hidden from the bot). For one it sees, its permissions there
//! are computed as Discord documents it ("Permission Overwrites"): the
//! guild's `@everyone` role and the bot's roles, everything for the
//! guild's owner or an administrator, then the channel's overwrites for
//! `@everyone`, the bot's roles and the bot itself, in that order (a
//! thread's are its parent's). Answering needs View Channel, Send
//! Messages (Send Messages in Threads in a thread or forum) and Read
//! Message History (a reply quotes the message it answers; catch-up reads
//! what was missed).

use serde_json::Value;
use serenity::model::channel::{PermissionOverwrite, PermissionOverwriteType};
use serenity::model::permissions::Permissions;

use crate::discord::BAD_TOKEN;
use crate::rest::{ClientError, Rest, RestError};
use crate::settings::DiscordSettings;

/// What Discord says about the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The bot's user name.
    pub bot: String,
    /// Each allowlisted channel, in the settings' order.
    pub channels: Vec<ChannelCheck>,
    /// Each guild listened to in every channel.
    pub guilds: Vec<GuildCheck>,
}

/// One allowlisted channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelCheck {
    pub id: String,
    /// `#name`, when the bot can see it.
    pub name: Option<String>,
    pub access: Access,
}

/// Whether the bot can answer in a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// It can see the channel and answer there.
    Ok,
    /// Discord answered 403 or 404: the bot is not in the channel's guild,
    /// may not view it, or the id is wrong.
    Hidden,
    /// It sees the channel but lacks these permissions there (Discord's
    /// names: "Send Messages", …).
    Missing(Vec<&'static str>),
    /// It could not be told (the network, an answer not understood).
    Unknown(String),
}

/// One guild listened to in every channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuildCheck {
    pub id: String,
    /// `Ok(true)`: the bot is a member; `Ok(false)`: Discord answered
    /// 403 or 404; `Err`: it could not be told.
    pub joined: Result<bool, RestError>,
}

/// Why the bot could not be asked about at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `/users/@me` answered 401.
    #[error("{}", BAD_TOKEN)]
    BadToken,
    /// `/users/@me` failed otherwise: the network, the origin, a 5xx.
    #[error("cannot reach Discord at {api_url}: {source}")]
    Unreachable { api_url: String, source: RestError },
}

/// Asks Discord about the bot of `settings`: the error is the sentence a
/// refused token or an unreachable API gets.
pub async fn check(settings: &DiscordSettings) -> Result<Report, CheckError> {
    let rest = Rest::new(&settings.api_url, &settings.token)?;
    let me = rest.get("/users/@me").await.map_err(|e| match e {
        RestError::Unauthorized => CheckError::BadToken,
        source => CheckError::Unreachable {
            api_url: settings.api_url.clone(),
            source,
        },
    })?;
    let bot_id = me["id"].as_str().unwrap_or_default().to_string();
    let bot = me["username"].as_str().unwrap_or_default().to_string();
    let mut channels = Vec::new();
    for id in &settings.channels {
        channels.push(channel(&rest, &bot_id, id).await);
    }
    let mut guilds = Vec::new();
    for id in &settings.open_guilds {
        let joined = match rest.get(&format!("/guilds/{id}")).await {
            Ok(_) => Ok(true),
            Err(RestError::Refused {
                status: 403 | 404, ..
            }) => Ok(false),
            Err(e) => Err(e),
        };
        guilds.push(GuildCheck {
            id: id.clone(),
            joined,
        });
    }
    Ok(Report {
        bot,
        channels,
        guilds,
    })
}

async fn channel(rest: &Rest, bot_id: &str, id: &str) -> ChannelCheck {
    let check = |name: Option<String>, access| ChannelCheck {
        id: id.to_string(),
        name,
        access,
    };
    let info = match rest.get(&format!("/channels/{id}")).await {
        Ok(v) => v,
        Err(RestError::Refused {
            status: 403 | 404, ..
        }) => return check(None, Access::Hidden),
        Err(e) => return check(None, Access::Unknown(e.to_string())),
    };
    let name = info["name"].as_str().map(str::to_string);
    let access = match access(rest, bot_id, &info).await {
        Ok(access) => access,
        Err(why) => Access::Unknown(why),
    };
    check(name, access)
}

/// The bot's access to a channel it can fetch.
async fn access(rest: &Rest, bot_id: &str, info: &Value) -> Result<Access, String> {
    let Some(guild_id) = info["guild_id"].as_str() else {
        // Not a guild channel (a DM, a group DM): no permissions apply.
        return Ok(Access::Ok);
    };
    let kind = info["type"].as_u64().unwrap_or(0);
    let in_thread = matches!(kind, 10..=12);
    // A thread's overwrites are its parent's.
    let overwrites_of = if in_thread {
        let parent = info["parent_id"].as_str().unwrap_or_default();
        rest.get(&format!("/channels/{parent}"))
            .await
            .map_err(|e| format!("cannot read the thread's parent channel: {e}"))?
    } else {
        info.clone()
    };
    let overwrites: Vec<PermissionOverwrite> =
        serde_json::from_value(overwrites_of["permission_overwrites"].clone()).unwrap_or_default();
    let guild = rest
        .get(&format!("/guilds/{guild_id}"))
        .await
        .map_err(|e| format!("cannot read the channel's guild: {e}"))?;
    let member = rest
        .get(&format!("/guilds/{guild_id}/members/{bot_id}"))
        .await
        .map_err(|e| format!("cannot read the bot's roles in the guild: {e}"))?;
    let roles: Vec<String> = member["roles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    let granted = permissions(&guild, guild_id, bot_id, &roles, &overwrites);
    let send = if in_thread || matches!(kind, 15 | 16) {
        Permissions::SEND_MESSAGES_IN_THREADS
    } else {
        Permissions::SEND_MESSAGES
    };
    let needed = Permissions::VIEW_CHANNEL | send | Permissions::READ_MESSAGE_HISTORY;
    let missing = needed - granted;
    Ok(if missing.is_empty() {
        Access::Ok
    } else {
        Access::Missing(names(missing))
    })
}

/// The names the Developer Portal and the server settings show for the
/// permissions this check asks for.
fn names(missing: Permissions) -> Vec<&'static str> {
    [
        (Permissions::VIEW_CHANNEL, "View Channel"),
        (Permissions::SEND_MESSAGES, "Send Messages"),
        (
            Permissions::SEND_MESSAGES_IN_THREADS,
            "Send Messages in Threads",
        ),
        (Permissions::READ_MESSAGE_HISTORY, "Read Message History"),
    ]
    .into_iter()
    .filter(|(p, _)| missing.contains(*p))
    .map(|(_, name)| name)
    .collect()
}

/// The bot's permissions in a channel with these overwrites, from the
/// guild object (`owner_id`, `roles` with their `permissions`) and the
/// bot's role ids (Discord's documented order).
fn permissions(
    guild: &Value,
    guild_id: &str,
    bot_id: &str,
    bot_roles: &[String],
    overwrites: &[PermissionOverwrite],
) -> Permissions {
    if guild["owner_id"].as_str() == Some(bot_id) {
        return Permissions::all();
    }
    let role_bits = |id: &str| -> Permissions {
        guild["roles"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["id"].as_str() == Some(id))
            .and_then(|r| r["permissions"].as_str())
            .and_then(|p| p.parse().ok())
            .map_or(Permissions::empty(), Permissions::from_bits_truncate)
    };
    // The @everyone role's id is the guild's.
    let mut granted = role_bits(guild_id);
    for role in bot_roles {
        granted |= role_bits(role);
    }
    if granted.contains(Permissions::ADMINISTRATOR) {
        return Permissions::all();
    }
    let is = |kind: &PermissionOverwriteType, id: &str| match kind {
        PermissionOverwriteType::Role(r) => r.to_string() == id,
        PermissionOverwriteType::Member(u) => u.to_string() == id,
        _ => false,
    };
    // @everyone's overwrite, then the bot's roles' together, then the
    // bot's own: each denies, then allows.
    for o in overwrites
        .iter()
        .filter(|o| matches!(o.kind, PermissionOverwriteType::Role(_)) && is(&o.kind, guild_id))
    {
        granted = (granted - o.deny) | o.allow;
    }
    let (mut deny, mut allow) = (Permissions::empty(), Permissions::empty());
    for o in overwrites.iter().filter(|o| {
        matches!(o.kind, PermissionOverwriteType::Role(_))
            && bot_roles.iter().any(|r| is(&o.kind, r))
    }) {
        deny |= o.deny;
        allow |= o.allow;
    }
    granted = (granted - deny) | allow;
    for o in overwrites
        .iter()
        .filter(|o| matches!(o.kind, PermissionOverwriteType::Member(_)) && is(&o.kind, bot_id))
    {
        granted = (granted - o.deny) | o.allow;
    }
    granted
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GUILD: &str = "10";
    const BOT: &str = "20";
    const ROLE: &str = "30";

    fn guild(everyone: Permissions, role: Permissions, owner: &str) -> Value {
        json!({
            "id": GUILD, "owner_id": owner,
            "roles": [
                {"id": GUILD, "permissions": everyone.bits().to_string()},
                {"id": ROLE, "permissions": role.bits().to_string()},
            ],
        })
    }

    fn overwrites(v: Value) -> Vec<PermissionOverwrite> {
        serde_json::from_value(v).unwrap()
    }

    const TALK: Permissions = Permissions::VIEW_CHANNEL
        .union(Permissions::SEND_MESSAGES)
        .union(Permissions::READ_MESSAGE_HISTORY);

    #[test]
    fn roles_add_up_and_overwrites_apply_everyone_then_roles_then_the_member() {
        let g = guild(Permissions::VIEW_CHANNEL, Permissions::SEND_MESSAGES, "1");
        let roles = [ROLE.to_string()];
        assert_eq!(
            permissions(&g, GUILD, BOT, &roles, &[]),
            Permissions::VIEW_CHANNEL | Permissions::SEND_MESSAGES
        );
        assert_eq!(
            permissions(&g, GUILD, BOT, &[], &[]),
            Permissions::VIEW_CHANNEL
        );
        // @everyone may not send here; the bot's role may again; the bot
        // itself may not view.
        let send = Permissions::SEND_MESSAGES.bits().to_string();
        let view = Permissions::VIEW_CHANNEL.bits().to_string();
        let o = overwrites(json!([
            {"id": GUILD, "type": 0, "allow": "0", "deny": send},
            {"id": ROLE, "type": 0, "allow": send, "deny": "0"},
        ]));
        assert_eq!(
            permissions(&g, GUILD, BOT, &roles, &o),
            Permissions::VIEW_CHANNEL | Permissions::SEND_MESSAGES
        );
        assert_eq!(
            permissions(&g, GUILD, BOT, &[], &o),
            Permissions::VIEW_CHANNEL
        );
        let mut o = o;
        o.extend(overwrites(json!([
            {"id": BOT, "type": 1, "allow": "0", "deny": view},
        ])));
        assert_eq!(
            permissions(&g, GUILD, BOT, &roles, &o),
            Permissions::SEND_MESSAGES
        );
    }

    #[test]
    fn the_owner_and_administrators_have_everything() {
        let deny_all = overwrites(json!([
            {"id": GUILD, "type": 0, "allow": "0", "deny": TALK.bits().to_string()},
        ]));
        let owned = guild(Permissions::empty(), Permissions::empty(), BOT);
        assert_eq!(
            permissions(&owned, GUILD, BOT, &[], &deny_all),
            Permissions::all()
        );
        let admin = guild(Permissions::empty(), Permissions::ADMINISTRATOR, "1");
        assert_eq!(
            permissions(&admin, GUILD, BOT, &[ROLE.to_string()], &deny_all),
            Permissions::all()
        );
    }
}
