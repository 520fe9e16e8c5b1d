//! The parts of Discord's message object the bridge reads, deserialized as
//! Discord sends them (snowflakes as strings; fields it may leave out
//! optional). Our own types rather than serenity's `Message`: that one's
//! deserializer brings every object a message can hold (embeds,
//! components, stickers, polls, interaction metadata, …) into pincerd for
//! the dozen fields used here. serenity still supplies the permission
//! model (`check.rs`).

use serde::Deserialize;

/// A message (MESSAGE_CREATE, or one of a channel's history).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Message {
    pub id: String,
    pub channel_id: String,
    pub guild_id: Option<String>,
    pub author: User,
    /// The author as a guild member (their roles); gateway messages in a
    /// guild have it, history does not.
    pub member: Option<Member>,
    /// Empty without the Message Content intent, unless the bot is
    /// mentioned.
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub mentions: Vec<User>,
    /// The message this one replies to (its author: a reply to the bot
    /// addresses it).
    pub referenced_message: Option<Box<Replied>>,
    pub message_reference: Option<Reference>,
    #[serde(default)]
    pub attachments: Vec<FileAttachment>,
}

impl Message {
    /// The id as a number: snowflakes grow with time, so this orders
    /// messages (as text, `"99" > "100"`).
    pub fn number(&self) -> u64 {
        self.id.parse().unwrap_or(0)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct User {
    pub id: String,
    /// Always sent by Discord; a message is not dropped for lacking it.
    #[serde(default)]
    pub username: String,
    /// The display name, where the user set one.
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

impl User {
    /// The name people see.
    pub fn shown_name(&self) -> &str {
        self.global_name.as_deref().unwrap_or(&self.username)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Member {
    #[serde(default)]
    pub roles: Vec<String>,
}

/// The replied-to message, of which only the author is read.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Replied {
    pub author: User,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Reference {
    pub message_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FileAttachment {
    pub url: String,
    pub filename: String,
    pub content_type: Option<String>,
    pub size: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message as Discord's docs show it, with fields the bridge does
    /// not read (they are ignored, and missing optional ones are fine).
    #[test]
    fn a_discord_message_object_reads_into_what_the_bridge_uses() {
        let json = serde_json::json!({
            "id": "1234567890123456789", "channel_id": "42", "guild_id": "7",
            "type": 19, "tts": false, "pinned": false, "timestamp": "2026-11-26T10:00:00.000000+00:00",
            "author": {"id": "11", "username": "ann", "global_name": "Ann", "discriminator": "0", "avatar": null},
            "member": {"roles": ["5", "6"], "joined_at": "2026-01-01T00:00:00+00:00", "deaf": false, "mute": false},
            "content": "<@99> hi", "mentions": [{"id": "99", "username": "pincer", "global_name": null, "bot": true}],
            "mention_roles": [], "mention_everyone": false, "embeds": [{"title": "x"}], "components": [],
            "referenced_message": {"id": "1", "channel_id": "42", "author": {"id": "99", "username": "pincer", "bot": true}, "content": ""},
            "message_reference": {"type": 0, "message_id": "1", "channel_id": "42"},
            "attachments": [{"id": "3", "filename": "a.png", "size": 10, "url": "https://cdn/a.png", "proxy_url": "p", "content_type": "image/png"}],
        });
        let m: Message = serde_json::from_value(json).unwrap();
        assert_eq!(m.number(), 1_234_567_890_123_456_789);
        assert_eq!(m.author.shown_name(), "Ann");
        assert_eq!(m.member.unwrap().roles, ["5", "6"]);
        assert!(m.mentions[0].bot);
        assert_eq!(m.referenced_message.unwrap().author.id, "99");
        assert_eq!(
            m.message_reference.unwrap().message_id.as_deref(),
            Some("1")
        );
        assert_eq!(m.attachments[0].size, 10);
        // A DM message from history: no guild, no member, no content key.
        let dm: Message = serde_json::from_value(serde_json::json!({
            "id": "5", "channel_id": "8", "author": {"id": "11", "username": "ann"},
        }))
        .unwrap();
        assert!(dm.guild_id.is_none() && dm.member.is_none() && dm.content.is_empty());
    }
}
