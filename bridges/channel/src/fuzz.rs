//! Entry points for the coverage-guided fuzzer (`fuzz/`, the guide's
//! hardening chapter): each takes the fuzzer's bytes, feeds them to a
//! parser or renderer of this crate that faces untrusted text, and panics
//! only where a promise the code makes is broken. Not used by pincerd.
//!
//! [`replay`] runs a target over its committed corpus and the crashes
//! the fuzzer found (`fuzz/corpus/<target>`, `fuzz/regressions/<target>`),
//! which is how every crash found stays a regression test.

use std::path::{Path, PathBuf};

use crate::message::{Capabilities, Formatting};

/// The fuzzer's bytes as text; invalid UTF-8 replaced, as a platform or a
/// model's stream decoder would.
pub fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// A model's answer rendered for every platform: never a panic, and the
/// HTML always within the subset [`crate::html_check`] describes.
pub fn format(data: &[u8]) {
    let md = text(data);
    let html = crate::format::render(&md, Formatting::Html);
    if let Some(why) = crate::html_check::problem(&html) {
        panic!("render wrote HTML a platform rejects: {why}");
    }
    crate::format::render(&md, Formatting::Plain);
    crate::format::render(&md, Formatting::Markdown);
}

/// An answer cut into messages: the first byte picks the limits (2 to 65
/// characters, and 3 to 6 lines or none), the rest is the text. Every
/// chunk keeps to the limits, and no character but whitespace is lost
/// (or reordered) across the chunks.
pub fn chunks(data: &[u8]) {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let max_chars = 2 + usize::from(knob & 0x3f);
    let max_lines = (knob & 0x40 != 0).then_some(3 + usize::from(knob >> 7) * 3);
    let input = text(rest);
    let out = crate::chunk::chunks(&input, max_chars, max_lines);
    for chunk in &out {
        let chars = chunk.chars().count();
        assert!(
            chars <= max_chars,
            "a chunk of {chars} > {max_chars} characters: {chunk:?}"
        );
        if let Some(lines) = max_lines {
            let n = chunk.split('\n').count();
            assert!(n <= lines, "a chunk of {n} > {lines} lines: {chunk:?}");
        }
        assert!(!chunk.trim().is_empty(), "a whitespace-only chunk");
    }
    // Fence lines may be added; the input's own characters come in order.
    let mut kept = out
        .iter()
        .flat_map(|c| c.chars())
        .filter(|c| !c.is_whitespace());
    for c in input.chars().filter(|c| !c.is_whitespace()) {
        assert!(
            kept.any(|k| k == c),
            "{c:?} of the input is missing from the chunks {out:?}"
        );
    }
    // Within a platform's limits, UTF-16 counted too.
    let caps = Capabilities {
        max_chars,
        max_lines,
        edits: false,
        typing: None,
        edit_every: std::time::Duration::ZERO,
        threads: false,
        formatting: Formatting::Plain,
    };
    for chunk in crate::chunk::chunks_for(&input, &caps) {
        let units = chunk.encode_utf16().count();
        assert!(units <= max_chars, "{units} UTF-16 units > {max_chars}");
    }
}

/// The committed inputs of `target`: its corpus and its regressions, from
/// the repository's `fuzz/` folder.
pub fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for kind in ["corpus", "regressions"] {
        if let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) {
            files.extend(dir.flatten().map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    files.sort();
    files
}

/// Runs `f` over every committed input of `target`, naming the file that
/// panics; how many there were.
pub fn replay(target: &str, f: fn(&[u8])) -> usize {
    let files = inputs(target);
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let run = std::panic::catch_unwind(|| f(&data));
        assert!(
            run.is_ok(),
            "fuzz target {target} fails on {}",
            file.display()
        );
    }
    files.len()
}

/// Text and names from people, made fit for the model's message
/// ([`crate::untrusted`]): no neutralised line starts, after blanks, with
/// the bracket pincer's own lines start with; a display name is one line
/// of at most [`crate::untrusted::MAX_NAME_CHARS`] characters with no
/// bracket or parenthesis.
pub fn untrusted(data: &[u8]) {
    let input = text(data);
    let out = crate::untrusted::neutralise(&input);
    for line in out.split('\n') {
        let start = line.trim_start();
        assert!(
            !start.starts_with(['[', '<']),
            "a neutralised line still starts with a bracket: {line:?}"
        );
    }
    let name = crate::untrusted::display_name(&input);
    let n = name.chars().count();
    assert!(
        n <= crate::untrusted::MAX_NAME_CHARS,
        "a name of {n} characters"
    );
    assert!(
        !name.contains(|c: char| c.is_control() || "[]()".contains(c)),
        "{name:?} could break out of a header"
    );
}
