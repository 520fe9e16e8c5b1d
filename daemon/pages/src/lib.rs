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
//!   kept alike, and so is the read-only data (constants, unwind tables)
//!   any of it read: 4.4 MB of `r--p` after the unload once the code was
//!   dropped.
//!
//! [`give_back`] hands back both. Dropping the executable's pages loses
//! nothing where the process never wrote them: they stay in the page
//! cache, and the few an idle daemon uses fault back in (a minor fault
//! each, no disk read).

/// Hands back the allocator's free pages, then drops the executable's
/// clean pages from the process's map (Linux; elsewhere nothing).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists and
    // may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    drop_clean_pages();
}

/// Drops the pages of the executable's mappings that hold only what the
/// file holds — its code (`r-xp`) and its read-only data (`r--p`) — from
/// the process's map. `MADV_DONTNEED` on a private file mapping reads the
/// file again on the next access (the inode this process mapped, also
/// after an upgrade replaced the file), so where no page was ever written
/// nothing is lost. Where one was, it is a copy of the process's own and
/// the mapping is left alone: the relocated pointers of `.data.rel.ro`
/// (RELRO: written by the loader, then made read-only) would go back to
/// the file's unrelocated bytes. A debugger's breakpoints are such copies
/// too. The executable's mappings are never unmapped while it runs, so the
/// ranges read from smaps are still these mappings when they are dropped.
#[cfg(target_os = "linux")]
fn drop_clean_pages() {
    let (Ok(smaps), Ok(exe)) = (
        std::fs::read_to_string("/proc/self/smaps"),
        std::fs::read_link("/proc/self/exe"),
    ) else {
        return;
    };
    let exe = exe.to_string_lossy();
    for (start, end) in clean_ranges(&smaps, &exe) {
        // SAFETY: the range is a whole read-only private mapping of this
        // process's executable with no page of its own (see above):
        // dropping its pages changes no byte the process can read.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The `(start, end)` of each mapping in `smaps` (the text of
/// `/proc/self/smaps`) of the file `exe` that is private, not writable,
/// and has no page of its own, resident (`Anonymous`) or swapped out. A
/// mapping whose `Anonymous` count is missing or unreadable is kept.
#[cfg(target_os = "linux")]
fn clean_ranges(smaps: &str, exe: &str) -> Vec<(usize, usize)> {
    /// The mapping whose fields are being read, while it qualifies.
    struct Candidate {
        range: (usize, usize),
        owned_kb: u64,
        anonymous_read: bool,
    }
    let mut ranges = Vec::new();
    let mut current: Option<Candidate> = None;
    let mut finish = |current: Option<Candidate>| {
        if let Some(c) = current.filter(|c| c.anonymous_read && c.owned_kb == 0) {
            ranges.push(c.range);
        }
    };
    for line in smaps.lines() {
        if let Some((range, perms, path)) = mapping(line) {
            // A header: the mapping before it is complete.
            finish(current.take());
            current = (matches!(perms, "r-xp" | "r--p") && path == exe).then_some(Candidate {
                range,
                owned_kb: 0,
                anonymous_read: false,
            });
            continue;
        }
        let (Some(c), Some((field @ ("Anonymous" | "Swap"), kb))) =
            (current.as_mut(), line.split_once(':'))
        else {
            continue;
        };
        // "    12 kB"
        match kb.trim().trim_end_matches("kB").trim().parse::<u64>() {
            Ok(kb) => {
                c.owned_kb += kb;
                c.anonymous_read |= field == "Anonymous";
            }
            Err(_) => c.owned_kb += 1,
        }
    }
    finish(current);
    ranges
}

/// A smaps header line (`address perms offset dev inode path`, as in
/// `/proc/self/maps`) as its range, permissions and path; `None` for the
/// field lines between headers.
#[cfg(target_os = "linux")]
fn mapping(line: &str) -> Option<((usize, usize), &str, &str)> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    // The path may hold spaces ("... (deleted)"); anonymous mappings have none.
    let path = fields.nth(3).unwrap_or("").trim_start();
    (start < end).then_some(((start, end), perms, path))
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    /// A smaps entry: the header and the fields `clean_ranges` reads.
    fn entry(header: &str, anonymous_kb: u64, swap_kb: u64) -> String {
        format!(
            "{header}\nSize:               1024 kB\nRss:                 512 kB\n\
             Anonymous:      {anonymous_kb:>8} kB\nAnonHugePages:         0 kB\n\
             Swap:           {swap_kb:>8} kB\nVmFlags: rd mr mw me\n"
        )
    }

    #[test]
    fn only_the_executables_read_only_mappings_without_pages_of_their_own_are_chosen() {
        let smaps = [
            entry("55d0c0000000-55d0c0100000 r--p 00000000 fd:01 123 /usr/bin/pincerd", 0, 0),
            entry("55d0c0100000-55d0c1a00000 r-xp 00100000 fd:01 123 /usr/bin/pincerd", 0, 0),
            entry("55d0c1a00000-55d0c1e00000 r--p 01a00000 fd:01 123 /usr/bin/pincerd", 0, 0),
            // RELRO: relocated by the loader, then made read-only.
            entry("55d0c1e00000-55d0c2000000 r--p 01e00000 fd:01 123 /usr/bin/pincerd", 1536, 0),
            // Written, then swapped out: still the process's own.
            entry("55d0c2000000-55d0c2010000 r--p 02000000 fd:01 123 /usr/bin/pincerd", 0, 8),
            entry("55d0c2010000-55d0c2100000 rw-p 02010000 fd:01 123 /usr/bin/pincerd", 0, 0),
            entry("7f0000000000-7f0000200000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6", 0, 0),
            entry("7f0000400000-7f0000500000 rw-p 00000000 00:00 0 ", 64, 0),
            entry("7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]", 0, 0),
        ]
        .concat();
        assert_eq!(
            clean_ranges(&smaps, "/usr/bin/pincerd"),
            vec![
                (0x55d0c0000000, 0x55d0c0100000),
                (0x55d0c0100000, 0x55d0c1a00000),
                (0x55d0c1a00000, 0x55d0c1e00000),
            ]
        );
        assert!(clean_ranges(&smaps, "/usr/bin/pincer").is_empty());
    }

    #[test]
    fn a_replaced_executable_is_still_found() {
        let smaps = entry(
            "5600-5700 r-xp 00001000 fd:01 9 /opt/pincer/bin/pincerd (deleted)",
            0,
            0,
        );
        assert_eq!(
            clean_ranges(&smaps, "/opt/pincer/bin/pincerd (deleted)"),
            vec![(0x5600, 0x5700)]
        );
    }

    #[test]
    fn the_last_mapping_counts_too_and_an_unread_count_keeps_it() {
        let last = entry("5600-5700 r--p 00001000 fd:01 9 /usr/bin/pincerd", 0, 0);
        assert_eq!(
            clean_ranges(&last, "/usr/bin/pincerd"),
            vec![(0x5600, 0x5700)]
        );
        let odd = last.replace("Anonymous:             0 kB", "Anonymous: many");
        assert!(clean_ranges(&odd, "/usr/bin/pincerd").is_empty(), "{odd}");
        // A kernel whose smaps has no such field: nothing says it is clean.
        let without: String = last
            .lines()
            .filter(|l| !l.starts_with("Anonymous:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            clean_ranges(&without, "/usr/bin/pincerd").is_empty(),
            "{without}"
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

    /// The process's own code and read-only data, dropped while it runs:
    /// it goes on running — calls through relocated pointers (RELRO) too —
    /// and the resident part of those mappings falls.
    #[test]
    fn dropping_the_clean_pages_of_this_process_keeps_it_running() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let clean = || {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            clean_ranges(&smaps, &exe.to_string_lossy())
        };
        let ranges = clean();
        assert!(
            ranges.len() >= 2,
            "this test's code and read-only data are mapped: {ranges:?}"
        );
        let before: usize = ranges.iter().map(|r| resident_kb(r.0)).sum();
        drop_clean_pages();
        let after: usize = ranges.iter().map(|r| resident_kb(r.0)).sum();
        // Tests running beside this one fault their own pages back in;
        // without the drop, the resident pages could only have grown.
        assert!(
            after < before,
            "resident {before} kB before, {after} kB after"
        );
        // A trait object's vtable and a table of function pointers live in
        // the relocated read-only data, which must have been left alone.
        let shown: Vec<Box<dyn std::fmt::Display>> = vec![Box::new(1u8), Box::new("two")];
        let joined: Vec<String> = shown.iter().map(|d| d.to_string()).collect();
        assert_eq!(joined, ["1", "two"]);
        static OPS: [fn(u32) -> u32; 2] = [u32::wrapping_neg, u32::reverse_bits];
        assert_eq!(OPS[std::hint::black_box(1)](1), 1 << 31);
        assert_eq!(clean(), ranges, "the same mappings are still clean");
    }
}
