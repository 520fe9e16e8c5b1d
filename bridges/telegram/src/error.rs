//! Bot API failures sorted for their readers: [`ConnectError`] for
//! `pincer doctor` and the daemon's start, [`SendError`] for the bridge's
//! retry loop. Every message is a sentence a user can act on.

use pincer_channel::SendError;
use serde_json::Value;
use std::time::Duration;
use teloxide_core::ApiError;

use crate::api::Failure;

/// Why [`crate::connect`] could not reach the bot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// `getMe` was refused as unauthorised: the token is wrong or revoked.
    #[error(
        "Telegram does not accept the bot token ({0}); check the token under [channels.telegram] (@BotFather gives it)"
    )]
    BadToken(String),
    /// No answer from the Bot API: the network, DNS, TLS, a timeout.
    #[error("cannot reach the Telegram Bot API: {0}")]
    Unreachable(String),
    /// Anything else (a malformed api_url, an unexpected answer).
    #[error("{0}")]
    Other(String),
}

impl ConnectError {
    pub(crate) fn from_failure(f: Failure, base: &str) -> Self {
        match f {
            Failure::Network(why) => Self::Unreachable(format!("{base}: {why}")),
            Failure::Api {
                status,
                description,
                ..
            } if is_bad_token(status, &description) => {
                Self::BadToken(format!("{status} {description}"))
            }
            Failure::Api {
                status,
                description,
                ..
            } => Self::Other(format!(
                "the Telegram Bot API at {base} refused getMe ({status}): {description}"
            )),
        }
    }
}

/// 401 Unauthorized (a wrong token) or 404 Not Found (a token the API
/// does not route at all).
pub(crate) fn is_bad_token(status: u16, description: &str) -> bool {
    matches!(status, 401 | 404) || matches!(api_error(description), Some(ApiError::InvalidToken))
}

/// teloxide's reading of a Bot API error description.
fn api_error(description: &str) -> Option<ApiError> {
    serde_json::from_value(Value::String(description.to_string())).ok()
}

/// The formatting was refused ("Bad Request: can't parse entities: …"):
/// teloxide's `CantParseEntities`, or the same words anywhere (an API
/// server that words the start differently).
pub(crate) fn is_formatting(description: &str) -> bool {
    matches!(api_error(description), Some(ApiError::CantParseEntities(_)))
        || description
            .to_ascii_lowercase()
            .contains("can't parse entities")
}

/// An edit that changes nothing: the message already reads so.
pub(crate) fn is_not_modified(f: &Failure) -> bool {
    match f {
        Failure::Api { description, .. } => {
            matches!(api_error(description), Some(ApiError::MessageNotModified))
                || description.contains("message is not modified")
        }
        Failure::Network(_) => false,
    }
}

/// Sorts a failed call by what the bridge does next: a 429 waits as told,
/// a refused formatting is sent again as plain text, the network and 5xx
/// are tried again, every other refusal is final.
pub(crate) fn send_error(f: Failure) -> SendError {
    match f {
        Failure::Network(why) => SendError::Transient(why),
        Failure::Api {
            retry_after: Some(secs),
            ..
        } => SendError::RetryAfter(Duration::from_secs(secs)),
        Failure::Api { description, .. } if is_formatting(&description) => {
            SendError::Formatting(description)
        }
        Failure::Api {
            status,
            description,
            ..
        } if status >= 500 || status == 429 => {
            SendError::Transient(format!("Telegram failed ({status}): {description}"))
        }
        Failure::Api {
            status,
            description,
            ..
        } if is_bad_token(status, &description) => SendError::Permanent(format!(
            "Telegram does not accept the bot token ({status} {description})"
        )),
        Failure::Api {
            status,
            description,
            ..
        } => SendError::Permanent(format!("Telegram refused it ({status}): {description}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, description: &str, retry_after: Option<u64>) -> Failure {
        Failure::Api {
            status,
            description: description.into(),
            retry_after,
        }
    }

    #[test]
    fn a_429_waits_as_told() {
        assert_eq!(
            send_error(api(429, "Too Many Requests: retry after 7", Some(7))),
            SendError::RetryAfter(Duration::from_secs(7))
        );
        assert!(matches!(
            send_error(api(429, "Too Many Requests", None)),
            SendError::Transient(_)
        ));
    }

    #[test]
    fn refused_formatting_is_sent_again_as_plain_text() {
        let teloxide_words =
            "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0";
        assert_eq!(
            send_error(api(400, teloxide_words, None)),
            SendError::Formatting(teloxide_words.into())
        );
        let other_words = "Can't parse entities: can't find end of the entity";
        assert!(matches!(
            send_error(api(400, other_words, None)),
            SendError::Formatting(_)
        ));
    }

    #[test]
    fn the_network_and_5xx_are_tried_again() {
        assert!(matches!(
            send_error(Failure::Network("the request to Telegram timed out".into())),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(502, "Bad Gateway", None)),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(
                500,
                "API method 'sendChatAction' is not supported.",
                None
            )),
            SendError::Transient(_)
        ));
    }

    #[test]
    fn other_refusals_are_final() {
        for (status, text) in [
            (400, "Bad Request: chat not found"),
            (403, "Forbidden: bot was blocked by the user"),
            (401, "Unauthorized"),
            (404, "Not Found"),
        ] {
            assert!(
                matches!(send_error(api(status, text, None)), SendError::Permanent(_)),
                "{status} {text}"
            );
        }
        let SendError::Permanent(why) = send_error(api(401, "Unauthorized", None)) else {
            panic!("401 is final");
        };
        assert!(why.contains("bot token"), "{why}");
    }

    #[test]
    fn connect_errors_are_sorted_for_doctor() {
        let base = "https://api.telegram.org";
        assert!(matches!(
            ConnectError::from_failure(api(401, "Unauthorized", None), base),
            ConnectError::BadToken(_)
        ));
        assert!(matches!(
            ConnectError::from_failure(api(404, "Not Found", None), base),
            ConnectError::BadToken(_)
        ));
        assert!(matches!(
            ConnectError::from_failure(Failure::Network("could not connect".into()), base),
            ConnectError::Unreachable(_)
        ));
        assert!(matches!(
            ConnectError::from_failure(api(500, "Internal Server Error", None), base),
            ConnectError::Other(_)
        ));
        let text = ConnectError::BadToken("401 Unauthorized".into()).to_string();
        assert!(
            text.starts_with("Telegram does not accept the bot token"),
            "{text}"
        );
    }

    #[test]
    fn unchanged_edits_are_recognised() {
        assert!(is_not_modified(&api(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
            None
        )));
        assert!(!is_not_modified(&api(
            400,
            "Bad Request: chat not found",
            None
        )));
    }
}
