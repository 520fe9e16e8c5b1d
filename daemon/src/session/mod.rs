//! Sessions (SPEC §6): keys ([`key`]), whose a session is ([`principal`]),
//! append-only JSONL transcripts ([`transcript`]), the SQLite registry
//! ([`registry`]) and the report of turns a crash interrupted
//! ([`interrupted`]). The per-session
//! turn queue lives with the agent (`agent::hub`) because it runs turns.

pub mod interrupted;
pub mod key;
pub mod principal;
pub mod registry;
pub mod retention;
pub mod transcript;

pub use key::SessionKey;
pub use principal::Principal;
