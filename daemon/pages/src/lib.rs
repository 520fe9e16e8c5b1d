//! pincer-pages: memory pincerd no longer uses, handed back to the system
//! at the two moments it is known to be done with some: when start-up is
//! over (the config's parse, the migrations, the schedules brought into
//! the store) and when the embedding model is unloaded.
//!
//! Two kinds of pages stay counted in a process's RSS after their use:
//! - **the allocator's free pages**: glibc keeps freed memory in per-thread
//!   arenas (the model's weights and inference buffers were allocated on
//!   several threads: about 19 MB of them stayed);
//! - **code pages**, mapped from the executable: every page of code the
//!   process ever ran stays resident until the kernel needs the memory.
//!   Measured with `pincer-idle-rss` (a 1,000-chunk index, both bridges):
//!   a minute after the model's unload pincerd held 27.9 MB, of which
//!   22.6 MB were its own code pages that inference had run through
//!   (candle's kernels, the tokenizer); start-up's code (the config's
//!   parse, the migrations, 1,000 schedules' cron parsing) is run once and
//!   kept alike.
//!
//! [`give_back`] hands back both. Dropping code pages loses nothing: they
//! stay in the page cache, and the few an idle daemon runs fault back in
//! (a minor fault each, no disk read).

/// Hands back the allocator's free pages, then drops the executable's
/// code pages from the process's map (Linux; elsewhere nothing).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists and
    // may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    drop_code_pages();
}

/// Drops the pages of the executable's code (its `r-xp` mappings) from the
/// process's map. Code is never written, so nothing is lost:
/// `MADV_DONTNEED` on a private file mapping that was never written reads
/// the file again on the next access (the inode this process mapped, also
/// after an upgrade replaced the file). A debugger's breakpoints are
/// writes to code and would be dropped with it.
#[cfg(target_os = "linux")]
fn drop_code_pages() {
    let (Ok(maps), Ok(exe)) = (
        std::fs::read_to_string("/proc/self/maps"),
        std::fs::read_link("/proc/self/exe"),
    ) else {
        return;
    };
    let exe = exe.to_string_lossy();
    for (start, end) in code_ranges(&maps, &exe) {
        // SAFETY: the range is a whole mapping of this process's own
        // executable code, mapped read-only and private; dropping its pages
        // changes no byte the process can read.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The `(start, end)` of each mapping in `maps` (the text of
/// `/proc/self/maps`) that is executable code of the file `exe`.
#[cfg(target_os = "linux")]
fn code_ranges(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            // address perms offset dev inode path (the path may hold spaces)
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?.trim_start();
            if perms != "r-xp" || path != exe {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start < end).then_some((start, end))
        })
        .collect()
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    #[test]
    fn only_the_executables_code_mappings_are_chosen() {
        let maps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 123 /usr/bin/pincerd
55d0c0100000-55d0c1a00000 r-xp 00100000 fd:01 123 /usr/bin/pincerd
55d0c1a00000-55d0c2000000 r--p 01a00000 fd:01 123 /usr/bin/pincerd
55d0c2000000-55d0c2100000 rw-p 02000000 fd:01 123 /usr/bin/pincerd
7f0000000000-7f0000200000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000400000-7f0000500000 rw-p 00000000 00:00 0 
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
";
        assert_eq!(
            code_ranges(maps, "/usr/bin/pincerd"),
            vec![(0x55d0c0100000, 0x55d0c1a00000)]
        );
        assert!(code_ranges(maps, "/usr/bin/pincer").is_empty());
    }

    #[test]
    fn a_replaced_executable_is_still_found() {
        let maps = "5600-5700 r-xp 00001000 fd:01 9 /opt/pincer/bin/pincerd (deleted)\n";
        assert_eq!(
            code_ranges(maps, "/opt/pincer/bin/pincerd (deleted)"),
            vec![(0x5600, 0x5700)]
        );
    }

    /// The resident kB of the mapping that starts at `start`, from
    /// `/proc/self/smaps`.
    fn resident_kb(start: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let header = format!("{start:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&header));
        lines
            .find_map(|l| l.strip_prefix("Rss:"))
            .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// The process's own code, dropped while it runs: it goes on running,
    /// and the resident part of its code mapping falls.
    #[test]
    fn dropping_the_code_pages_of_this_process_keeps_it_running() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let ranges = code_ranges(&maps, &exe.to_string_lossy());
        assert!(!ranges.is_empty(), "this test's own code is mapped");
        let before: usize = ranges.iter().map(|r| resident_kb(r.0)).sum();
        drop_code_pages();
        let after: usize = ranges.iter().map(|r| resident_kb(r.0)).sum();
        // Tests running beside this one fault their own code back in; without
        // the drop, the resident pages could only have grown.
        assert!(
            after < before,
            "resident code {before} kB before, {after} kB after"
        );
    }
}
