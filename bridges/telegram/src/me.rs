//! The bot's own identity, from `getMe`: its id (replies to the bot, text
//! mentions), its user name (`@mentions`, `/cmd@name`) and whether it sees
//! every group message (privacy mode off).

use serde::Deserialize;
use serde_json::Value;

/// What `getMe` says of the bot. Read leniently: only `id` is required
/// (telegram-test-api's `getMe` lacks `is_bot` and the `can_*` fields).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Me {
    pub(crate) id: i64,
    #[serde(default)]
    pub(crate) username: String,
    #[serde(default)]
    pub(crate) can_read_all_group_messages: bool,
}

/// `getMe` answered something that is not a user.
#[derive(Debug, thiserror::Error)]
#[error("Telegram's answer to getMe does not describe a bot ({0})")]
pub(crate) struct NotABot(#[source] serde_json::Error);

impl Me {
    /// Reads `getMe`'s result.
    pub(crate) fn from_result(result: Value) -> Result<Self, NotABot> {
        serde_json::from_value(result).map_err(NotABot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_full_and_a_bare_get_me_are_read() {
        let me = Me::from_result(json!({
            "id": 123456, "is_bot": true, "first_name": "Pincer", "username": "pincer_bot",
            "can_join_groups": true, "can_read_all_group_messages": true,
            "supports_inline_queries": false
        }))
        .unwrap();
        assert_eq!(me.id, 123456);
        assert_eq!(me.username, "pincer_bot");
        assert!(me.can_read_all_group_messages);
        let bare =
            Me::from_result(json!({"username": "TestNameBot", "first_name": "T", "id": 666}))
                .unwrap();
        assert!(!bare.can_read_all_group_messages);
        assert!(Me::from_result(json!(null)).is_err());
    }
}
