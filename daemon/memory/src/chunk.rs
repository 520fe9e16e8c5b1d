//! Markdown-aware chunking (SPEC §10: ~400 tokens, 80 overlap) that keeps
//! the line range of every chunk, so a hit can be quoted as `path:12-30`
//! and read again with `memory_get`.
//!
//! A heading starts a new chunk (a new topic needs no overlap); fenced code
//! blocks are not split unless they alone exceed the size; inside long
//! sections chunks end at blank lines where possible and the next chunk
//! repeats the last lines of the previous one. Tokens are counted as
//! characters / 4, which is close enough for sizing.

use sha2::{Digest, Sha256};

/// How big chunks are, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSize {
    pub tokens: usize,
    pub overlap: usize,
}

impl Default for ChunkSize {
    fn default() -> Self {
        Self {
            tokens: 400,
            overlap: 80,
        }
    }
}

/// One piece of a file, with its 1-based inclusive line range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
    pub hash: String,
}

const CHARS_PER_TOKEN: usize = 4;

/// Splits `text` into chunks.
pub fn chunk_markdown(text: &str, size: ChunkSize) -> Vec<Chunk> {
    let max = size.tokens.max(16) * CHARS_PER_TOKEN;
    let overlap = (size.overlap * CHARS_PER_TOKEN).min(max / 2);
    let mut out = Vec::new();
    let mut current: Vec<(usize, &str)> = Vec::new();
    let mut current_len = 0;
    let mut in_fence: Option<&str> = None;

    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        let fence_marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        let is_heading = in_fence.is_none() && is_heading(trimmed);
        if is_heading && !current.is_empty() {
            flush(&mut out, &current);
            current.clear();
            current_len = 0;
        }
        if current_len + line.len() + 1 > max && !current.is_empty() {
            // Prefer to end at the last blank line when it is not too early
            // and what follows it still fits beside the new line.
            let cut = current
                .iter()
                .rposition(|(_, l)| l.trim().is_empty())
                .filter(|&i| in_fence.is_none() && i > current.len() / 2)
                .map(|i| i + 1)
                .filter(|&cut| lines_len(&current[cut..]) + line.len() < max)
                .unwrap_or(current.len());
            let (done, rest) = current.split_at(cut);
            flush(&mut out, done);
            let room = max.saturating_sub(lines_len(rest) + line.len() + 1);
            let mut carried = overlap_tail(done, overlap.min(room));
            carried.extend_from_slice(rest);
            current = carried;
            current_len = lines_len(&current);
        }
        if line.len() + 1 > max {
            // One line longer than a chunk: cut it on character boundaries.
            flush(&mut out, &current);
            current.clear();
            current_len = 0;
            for piece in split_long_line(line, max) {
                push_chunk(&mut out, number, number, piece.to_string());
            }
            continue;
        }
        current.push((number, line));
        current_len += line.len() + 1;
        match (in_fence, fence_marker) {
            (None, Some(m)) => in_fence = Some(m),
            (Some(open), Some(m)) if m == open => in_fence = None,
            _ => {}
        }
    }
    flush(&mut out, &current);
    out
}

fn lines_len(lines: &[(usize, &str)]) -> usize {
    lines.iter().map(|(_, l)| l.len() + 1).sum()
}

fn is_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with([' ', '\t'])
}

fn overlap_tail<'a>(lines: &[(usize, &'a str)], budget: usize) -> Vec<(usize, &'a str)> {
    let mut taken = 0;
    let mut start = lines.len();
    while start > 0 {
        let len = lines[start - 1].1.len() + 1;
        if taken + len > budget {
            break;
        }
        taken += len;
        start -= 1;
    }
    lines[start..].to_vec()
}

fn flush(out: &mut Vec<Chunk>, lines: &[(usize, &str)]) {
    // Leading and trailing blank lines carry nothing.
    let first = lines.iter().position(|(_, l)| !l.trim().is_empty());
    let last = lines.iter().rposition(|(_, l)| !l.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return;
    };
    let kept = &lines[first..=last];
    let text = kept.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
    push_chunk(out, kept[0].0, kept[kept.len() - 1].0, text);
}

fn push_chunk(out: &mut Vec<Chunk>, start_line: usize, end_line: usize, text: String) {
    if text.trim().is_empty() {
        return;
    }
    let hash = text_hash(&text);
    out.push(Chunk {
        start_line,
        end_line,
        text,
        hash,
    });
}

fn split_long_line(line: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = line;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// The hash that keys chunks and the embedding cache: hex SHA-256.
pub fn text_hash(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small() -> ChunkSize {
        ChunkSize {
            tokens: 20,
            overlap: 5,
        }
    }

    #[test]
    fn headings_start_chunks_and_line_ranges_are_exact() {
        let text = "# Title\nintro line\n\n## Pets\nThe cat is called Miso.\n\n## Work\nI work on pincer.\n";
        let chunks = chunk_markdown(text, ChunkSize::default());
        let ranges: Vec<_> = chunks.iter().map(|c| (c.start_line, c.end_line)).collect();
        assert_eq!(ranges, vec![(1, 2), (4, 5), (7, 8)]);
        assert_eq!(chunks[1].text, "## Pets\nThe cat is called Miso.");
    }

    #[test]
    fn long_sections_split_with_overlap() {
        let text: String = (1..=40)
            .map(|i| format!("line number {i:02} here\n"))
            .collect();
        let chunks = chunk_markdown(&text, small());
        assert!(chunks.len() > 3, "{chunks:?}");
        for pair in chunks.windows(2) {
            assert!(pair[1].start_line <= pair[0].end_line, "overlap: {pair:?}");
            assert!(pair[1].start_line > pair[0].start_line);
        }
        assert_eq!(chunks[0].start_line, 1);
        assert_eq!(chunks.last().unwrap().end_line, 40);
        for c in &chunks {
            let expected: Vec<String> = (c.start_line..=c.end_line)
                .map(|i| format!("line number {i:02} here"))
                .collect();
            assert_eq!(c.text, expected.join("\n"));
        }
    }

    #[test]
    fn a_heading_inside_a_code_fence_is_not_a_heading() {
        let text = "# Notes\n```sh\n# not a heading\necho hi\n```\nafter\n";
        let chunks = chunk_markdown(text, ChunkSize::default());
        assert_eq!(chunks.len(), 1);
        assert_eq!((chunks[0].start_line, chunks[0].end_line), (1, 6));
    }

    #[test]
    fn a_line_longer_than_a_chunk_is_cut_on_char_boundaries() {
        let line = "日本語".repeat(200);
        let chunks = chunk_markdown(&format!("a\n{line}\nb"), small());
        assert!(chunks.iter().filter(|c| c.start_line == 2).count() > 1);
        let joined: String = chunks
            .iter()
            .filter(|c| c.start_line == 2)
            .map(|c| c.text.as_str())
            .collect();
        assert_eq!(joined, line);
    }

    #[test]
    fn blank_input_has_no_chunks() {
        assert!(chunk_markdown("\n\n   \n", ChunkSize::default()).is_empty());
    }

    proptest! {
        #[test]
        fn every_non_blank_line_is_in_a_chunk_whose_range_holds_it(
            lines in proptest::collection::vec("[a-z #`]{0,120}", 0..80)
        ) {
            let text = lines.join("\n");
            let chunks = chunk_markdown(&text, small());
            for (i, line) in lines.iter().enumerate() {
                if line.trim().is_empty() { continue; }
                let n = i + 1;
                prop_assert!(
                    chunks.iter().any(|c| c.start_line <= n && n <= c.end_line && c.text.contains(line.as_str()) || (c.start_line == n && line.contains(c.text.as_str()))),
                    "line {} {:?} not covered", n, line
                );
            }
            for c in &chunks {
                prop_assert!(c.start_line <= c.end_line);
                prop_assert!(c.text.len() <= 20 * 4 + 1 || c.start_line == c.end_line);
            }
        }
    }
}
