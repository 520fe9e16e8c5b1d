//! Sessions (SPEC §6): keys ([`key`]), append-only JSONL transcripts
//! ([`transcript`]) and the SQLite registry ([`registry`]). The per-session
//! turn queue lives with the agent (`agent::hub`) because it runs turns.

pub mod key;
pub mod registry;
pub mod transcript;

pub use key::SessionKey;
