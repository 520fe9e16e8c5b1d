//! The Telegram bridge (SPEC §11): a bot on the Bot API as a
//! [`pincer_channel::Platform`], and the reader that feeds its updates to
//! a [`pincer_channel::Bridge`]. The readers come in the next commit.

mod api;
mod download;
mod error;
mod me;
mod platform;
mod settings;
mod telegram;
mod updates;

#[cfg(test)]
mod testing;

pub use error::ConnectError;
pub use platform::{MAX_BUTTON_DATA, MAX_CHARS};
pub use settings::{
    DEFAULT_API_URL, DEFAULT_POLL_TIMEOUT, DEFAULT_WEBHOOK_LISTEN, Mode, TelegramSettings,
};
pub use telegram::{Telegram, connect};
