//! What the running kernel offers the sandbox, found once at start with
//! two harmless system calls (no process is started): Landlock's ABI
//! version and whether seccomp filters exist.

/// Whether commands can be sandboxed here, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Available {
        /// The kernel's Landlock ABI version (Linux 6.18 has 7).
        landlock_abi: i64,
    },
    /// A sentence's end: "… because <this>".
    Unavailable(String),
    /// The kernel has it but pincerd's launcher is missing (the sentence
    /// says where it was looked for): `exec` is refused unless the sandbox
    /// is off.
    NoLauncher(String),
}

#[cfg(target_os = "linux")]
pub fn kernel() -> Support {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call
    // only returns the ABI version; nothing is read or written.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi < 1 {
        let e = std::io::Error::last_os_error();
        return Support::Unavailable(match e.raw_os_error() {
            Some(libc::ENOSYS) => {
                "this kernel has no Landlock (it needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK)".into()
            }
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` boot parameter)".into()
            }
            Some(libc::EPERM) => {
                "the system refuses Landlock's system calls (a container's seccomp profile?)".into()
            }
            _ => format!("Landlock cannot be used ({e})"),
        });
    }
    // A null filter program fails with EFAULT where seccomp filters exist,
    // EINVAL where the kernel has none; nothing is installed either way.
    // SAFETY: the kernel reads no memory through a null pointer here.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            std::ptr::null::<libc::c_void>(),
            0,
            0,
        )
    };
    let e = std::io::Error::last_os_error();
    if r == 0 || e.raw_os_error() != Some(libc::EFAULT) {
        return Support::Unavailable(match e.raw_os_error() {
            Some(libc::EINVAL) => {
                "this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER)".into()
            }
            _ => format!("seccomp filters cannot be used ({e})"),
        });
    }
    Support::Available { landlock_abi: abi }
}

#[cfg(not(target_os = "linux"))]
pub fn kernel() -> Support {
    Support::Unavailable(
        "the sandbox uses Linux's Landlock and seccomp, and this system is not Linux".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machines this project runs on (Linux 6.18) have both; a
    /// developer machine without them sees which is missing here.
    #[test]
    #[cfg(target_os = "linux")]
    fn this_kernel_offers_the_sandbox() {
        match kernel() {
            Support::Available { landlock_abi } => assert!(landlock_abi >= 1),
            Support::Unavailable(why) | Support::NoLauncher(why) => {
                panic!("no sandbox on this machine: {why}")
            }
        }
    }
}
