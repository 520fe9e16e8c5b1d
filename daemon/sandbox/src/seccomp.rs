//! The launcher's seccomp filter: system calls a sandboxed command may not
//! make; each fails with `EACCES` (the command sees "permission denied").
//!
//! - `socket(AF_UNIX, …)`, always: Landlock on kernels before ABI 9 does
//!   not govern `connect()` to a pathname socket, and pincerd's socket
//!   (or systemd's user bus, which can start programs outside any
//!   sandbox) must be out of reach. `socketpair` stays: it reaches no one.
//! - every `socket` call when the network is off.
//! - io_uring, whose operations would make sockets behind the filter's back.
//!
//! On x86_64 the same numbers are also refused with the x32 bit set (the
//! x32 ABI shares the architecture tag, so a filter keyed by number alone
//! would let `socket | 0x40000000` through); other architectures' calls
//! are killed by the filter's architecture check.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "riscv64")]
const ARCH: TargetArch = TargetArch::riscv64;

/// The x32 ABI's flag on system call numbers.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

/// Why the filter could not be had; the launcher then runs nothing.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("cannot build the seccomp filter: {0}")]
    Build(seccompiler::BackendError),
    #[error("cannot compile the seccomp filter: {0}")]
    Compile(seccompiler::BackendError),
    #[error("cannot install the seccomp filter: {0}")]
    Install(seccompiler::Error),
}

/// The filter for a command with or without network access.
pub fn filter(network: bool) -> Result<BpfProgram, SeccompError> {
    let fail = SeccompError::Build;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let socket_rules = if network {
        let unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_UNIX as u64,
        )
        .map_err(fail)?;
        vec![SeccompRule::new(vec![unix]).map_err(fail)?]
    } else {
        // No rule: every call of it is refused.
        Vec::new()
    };
    rules.insert(libc::SYS_socket, socket_rules);
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(nr, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    {
        let x32: Vec<(i64, Vec<SeccompRule>)> = rules
            .iter()
            .map(|(nr, r)| (nr | X32_BIT, r.clone()))
            .collect();
        rules.extend(x32);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        ARCH,
    )
    .map_err(fail)?;
    filter.try_into().map_err(SeccompError::Compile)
}

/// Installs `program` on the calling thread (and sets `no_new_privs`).
pub fn apply(program: &BpfProgram) -> Result<(), SeccompError> {
    seccompiler::apply_filter(program).map_err(SeccompError::Install)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_filters_build() {
        assert!(!filter(true).unwrap().is_empty());
        assert!(!filter(false).unwrap().is_empty());
    }
}
