//! Shared support for the end-to-end tests: the real binaries in temporary
//! homes ([`harness`]), our scripted LLM ([`scripted`]), the real test
//! peers installed by `tests/setup.sh` ([`peers`]) and among them the
//! Telegram Bot API emulator ([`telegram`]) and the Discord server
//! crabline ([`discord`]); our own Discord server for what crabline lacks
//! ([`discord_fake`]); a private D-Bus with a fake systemd and logind
//! ([`systemd`]); the minimal Bot API the 200-chat load bench runs
//! against instead ([`bot_api`]); what the bridge load benches share
//! ([`load`]); and an embeddings endpoint without a model
//! ([`embeddings`]) and the notes a bench's memory index is made of
//! ([`notes`]).

pub mod bot_api;
pub mod discord;
pub mod discord_fake;
pub mod embeddings;
pub mod harness;
pub mod load;
pub mod no_landlock;
pub mod notes;
pub mod peers;
pub mod requests;
pub mod scripted;
pub mod systemd;
pub mod telegram;
