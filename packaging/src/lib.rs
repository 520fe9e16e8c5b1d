//! pincer's service definitions and their installers (SPEC §12): the
//! systemd user unit and the launchd LaunchAgent, rendered from templates
//! (`render`), and the service managers that load them behind one trait
//! (`manager`): systemd over D-Bus (`systemd`) and launchctl (`launchd`).
//! `install` holds the flows the CLI's `pincer service` verbs run.

pub mod env_file;
pub mod error;
pub mod install;
pub mod journal;
pub mod launchd;
pub mod manager;
pub mod render;
pub mod systemd;

pub use error::ServiceError;
pub use manager::{Manager, Status};
pub use render::{LAUNCHD_LABEL, Spec, UNIT_NAME};
