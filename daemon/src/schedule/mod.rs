//! Schedules (SPEC §13a): when each schedule fires ([`crate::config::when`]),
//! the pure rules of what a due deadline means ([`plan`]), their ledger in
//! SQLite ([`store`]), and the wall clock they wait on ([`clock`]).

pub mod book;
pub mod clock;
pub mod fire;
pub mod heartbeat;
pub mod manage;
pub mod plan;
pub mod scheduler;
pub mod store;
pub mod tick;
pub mod trigger;
pub mod watchers;
