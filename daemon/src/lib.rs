//! pincerd, the pincer daemon: the library behind the `pincerd` binary.
//!
//! The dependency direction is one-way (SPEC §1): [`server`] calls into
//! [`agent`]; the agent calls [`tools`], [`llm`] and [`session`]; nothing
//! low calls back up. [`daemon`] wires them together and owns start-up,
//! reload and shutdown. See ARCHITECTURE.md for the map.

pub mod agent;
pub mod channels;
pub mod children;
pub mod config;
pub mod context;
pub mod daemon;
pub mod doctor;
#[doc(hidden)]
pub mod fuzz;
pub mod home;
pub mod launch;
pub mod lifecycle;
pub mod llm;
pub mod logging;
pub mod memory;
#[cfg(feature = "local-embedder")]
pub mod model_fetch;
pub mod routing;
pub mod sandbox;
pub mod schedule;
pub mod server;
pub mod session;
pub mod sqlite;
pub mod tools;
pub mod util;
pub mod workflow;
pub mod workspace;
