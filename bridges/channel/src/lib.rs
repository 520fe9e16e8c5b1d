//! The channel layer (SPEC §11): what every chat bridge shares, whatever
//! the platform. A bridge (Telegram, Discord: crates of their own) turns
//! platform events into an [`Inbound`] message and delivers replies within
//! the platform's [`Capabilities`]; everything between — who may talk to
//! the agent, which messages were already handled, how a long answer is
//! cut — is decided here once, so both bridges behave the same.
//!
//! This crate knows no platform and nothing of the daemon: the daemon
//! reaches it (and it the daemon) through narrow seams.

pub mod access;
pub mod answer;
pub mod approval;
pub mod bridge;
pub mod chunk;
pub mod context;
pub mod format;
#[doc(hidden)]
pub mod fuzz;
pub mod health;
pub mod host;
mod html_check;
pub mod ledger;
pub mod message;
pub mod pairings;
pub mod platform;
pub mod reconnect;
pub mod untrusted;

pub use access::{
    AccessPolicy, Approved, Decided, Decision, Denied, DmPolicy, GroupRule, GuildRule, KnownSender,
    Pairing, PairingError, PendingCode, PendingView,
};
pub use bridge::{Bridge, BridgeError, BridgeSettings};

/// Unix seconds now: the clock of the ledger, the pairing codes and the
/// health (0 if the clock is before 1970).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
pub use chunk::{chunks, chunks_for, chunks_within};
pub use context::{ContextBuffer, ContextKey, ContextLine};
pub use format::render;
pub use health::{Health, HealthSnapshot};
pub use host::{
    Answerer, ApprovalAnswer, ApprovalEnd, ApprovalOutcome, ApprovalRequest, ChatPerson, Command,
    HaltKind, HaltRequest, Host, HostError, Requester, TurnEvent,
};
pub use ledger::{
    Chunk, Claim, Key, Ledger, LedgerError, RETENTION_SECS, SharedLedger, Unanswered,
};
pub use message::{Attachment, Capabilities, ChatKind, Formatting, Inbound, Sender};
pub use pairings::{Pairings, PairingsError};
/// The opened folder [`Host::inbox`] answers (the workspace opener's).
pub use pincer_fs::{Dir, FsError};
pub use platform::{BoxFuture, Button, ButtonPress, Event, Incoming, Platform, SendError, Target};
pub use reconnect::{Backoff, Ended, pause, supervise};
pub use untrusted::{display_name, neutralise};
