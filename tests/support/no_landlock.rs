//! A seccomp filter that makes this machine look like one whose kernel has
//! no Landlock: `landlock_create_ruleset` (and the other Landlock calls)
//! fail with ENOSYS, everything else is allowed. Used to test what pincerd
//! does where the exec sandbox cannot be had.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

pub fn filter() -> BpfProgram {
    let rules = [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ]
    .into_iter()
    .map(|nr| (nr, Vec::new()))
    .collect::<BTreeMap<_, _>>();
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        TargetArch::x86_64
    };
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .expect("the no-Landlock filter builds")
}
