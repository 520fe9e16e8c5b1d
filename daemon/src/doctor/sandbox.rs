//! The exec sandbox: whether `exec` runs sandboxed under the config, and
//! if not, why (the kernel, or pincerd's launcher missing).

use super::{Finding, Level, finding};
use crate::config::{Config, ExecSandboxMode};
use crate::sandbox::Support;

/// Whether `exec` runs sandboxed under the config, and if not, why: an
/// error where `exec` is refused (the sandbox required and not had, or
/// pincerd's launcher missing).
pub(super) fn check_sandbox(config: &Config) -> Finding {
    let settings = &config.tools.exec_sandbox;
    let support = crate::sandbox::probe();
    let refused = match settings.mode {
        ExecSandboxMode::Off => false,
        ExecSandboxMode::Required => true,
        ExecSandboxMode::Auto => matches!(support, Support::NoLauncher(_)),
    };
    let level = if support.active(settings) {
        Level::Ok
    } else if refused {
        Level::Error
    } else {
        Level::Warn
    };
    finding(level, "sandbox", support.sentence(settings))
}
