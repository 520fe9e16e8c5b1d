//! Shared support for the end-to-end tests: the real binaries in temporary
//! homes ([`harness`]), our scripted LLM ([`scripted`]), the real test
//! peers installed by `tests/setup.sh` ([`peers`]) and among them the
//! Telegram Bot API emulator ([`telegram`]) and the Discord server
//! crabline ([`discord`]); our own Discord server for what crabline lacks
//! ([`discord_fake`]); a private D-Bus with a fake systemd and logind
//! ([`systemd`]); the minimal Bot API the 200-chat load bench runs
//! against instead ([`bot_api`]); and what the bridge load benches share
//! ([`load`]).

pub mod bot_api;
pub mod discord;
pub mod discord_fake;
pub mod harness;
pub mod load;
pub mod no_landlock;
pub mod peers;
pub mod requests;
pub mod scripted;
pub mod systemd;
pub mod telegram;
