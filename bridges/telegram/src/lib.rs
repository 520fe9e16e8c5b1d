//! The Telegram bridge (SPEC §11): a bot on the Bot API as a
//! [`pincer_channel::Platform`], and the reader that feeds its updates to
//! a [`pincer_channel::Bridge`]. Built up over the next commits.

mod api;
mod error;
mod me;
mod settings;
mod updates;

pub use error::ConnectError;
pub use settings::{
    DEFAULT_API_URL, DEFAULT_POLL_TIMEOUT, DEFAULT_WEBHOOK_LISTEN, Mode, TelegramSettings,
};
