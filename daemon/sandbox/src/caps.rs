//! Every capability dropped before the command runs: a daemon running as
//! root starts commands that keep uid 0 but none of its powers.

/// Why the capabilities could not be dropped; the launcher then runs
/// nothing.
#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    #[error("cannot drop capability {cap}: {source}")]
    Drop {
        cap: libc::c_ulong,
        source: std::io::Error,
    },
    #[error("cannot drop capabilities: {0}")]
    Clear(std::io::Error),
}

/// Empties the capability bounding set (so no later `exec`, not even of a
/// root-owned program by a root daemon, gains a capability), the ambient
/// set, and the process's own sets.
pub fn drop_all() -> Result<(), CapsError> {
    // SAFETY: prctl with integer arguments only changes this process's
    // capability sets.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    let mut cap: libc::c_ulong = 0;
    loop {
        // SAFETY: as above.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Past the last capability this kernel knows.
                Some(libc::EINVAL) => break,
                // No CAP_SETPCAP: an unprivileged process, whose bounding
                // set cannot matter (it has nothing to gain on exec).
                Some(libc::EPERM) => break,
                _ => return Err(CapsError::Drop { cap, source: e }),
            }
        }
        cap += 1;
    }
    clear_sets()
}

/// Empties the effective, permitted and inheritable sets now (a root
/// process keeps its capabilities until the next `exec` otherwise).
fn clear_sets() -> Result<(), CapsError> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data are the layout capset(2) documents for
    // version 3 (two data structs), and live across the call.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r != 0 {
        return Err(CapsError::Clear(std::io::Error::last_os_error()));
    }
    Ok(())
}
