//! The exec sandbox: whether `exec` runs sandboxed under the config, and
//! if not, why.

use super::{Finding, Level, finding};
use crate::config::Config;

/// Whether `exec` runs sandboxed under the config, and if not, why.
pub(super) fn check_sandbox(config: &Config) -> Finding {
    let settings = &config.tools.exec_sandbox;
    let support = crate::sandbox::probe();
    let level = if support.active(settings) {
        Level::Ok
    } else if settings.mode == crate::config::ExecSandboxMode::Required {
        Level::Error
    } else {
        Level::Warn
    };
    finding(level, "sandbox", support.sentence(settings))
}
