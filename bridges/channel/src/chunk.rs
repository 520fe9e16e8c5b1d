//! Cutting a long Markdown answer into messages a platform accepts
//! (SPEC §11, Delivery: Telegram 4,000 characters; Discord 2,000
//! characters or 17 lines).
//!
//! [`chunks`] returns the messages in order. The rules:
//!
//! - **Limits.** Every chunk has at most `max_chars` characters (Unicode
//!   scalar values, not bytes) and, when `max_lines` is set, at most that
//!   many lines (`\n`-separated). Limits below 1 count as 1.
//! - **Where to cut.** The cut goes at the best place that still fits, the
//!   latest place of the best kind, in this order: a paragraph boundary (a
//!   blank line, or the edge of a fenced code block), then a line boundary,
//!   then a run of spaces or tabs, and only as a last resort inside a word
//!   (a single over-long word or URL). A word is never cut inside a UTF-8
//!   character, and not before a combining mark or after a zero-width
//!   joiner unless nothing else fits.
//! - **Code blocks.** A fence is a line of three or more backticks or
//!   tildes, indented at most three spaces, with an optional info string
//!   (```` ```rust ````); the block ends at a line of the same character, at
//!   least as long, and nothing else. A block cut across chunks is closed at
//!   the end of one chunk (with its fence, e.g. ```` ``` ````) and reopened
//!   at the start of the next (with its opening line as written, info string
//!   included), so every chunk renders on its own; those lines count
//!   towards the limits. A block still open at the end of the text is
//!   closed too. Fence lines themselves are never cut, and a cut inside a
//!   line leaves no piece that would read as a fence on its own line (an
//!   opening one outside code, the closing one inside) unless nothing
//!   else fits.
//! - **What a cut removes.** Only whitespace, and only at a cut: at a
//!   paragraph cut the line break and the blank lines; at a line cut the
//!   line break; at a space cut the run of spaces and tabs (and the line
//!   break, if the run ends the line); at a hard cut nothing. Blank lines
//!   before the first line with text, and all whitespace at the end of the
//!   text, are dropped: empty or whitespace-only text gives no chunk, and
//!   no chunk is whitespace only. Nothing else is removed, added (besides
//!   the fence lines above) or reordered: what a chunk holds between its
//!   added fence lines is a contiguous piece of the input, verbatim, and
//!   what lies between two pieces is whitespace.
//! - **Absurd limits.** A code block whose opening line, closing line and
//!   one character do not fit in `max_chars` (or when `max_lines` is below
//!   3) is cut as plain text: no text is lost and the limits still hold,
//!   but its chunks may not render as code. With a platform's limits this
//!   needs a fence line of about 2,000 characters. Likewise a chunk that
//!   would start with more indentation than it can hold drops it.

use std::ops::Range;

use crate::message::Capabilities;

/// Cut `text` into messages of at most `max_chars` characters and
/// `max_lines` lines (see the module documentation for the rules).
pub fn chunks(text: &str, max_chars: usize, max_lines: Option<usize>) -> Vec<String> {
    let (doc, pieces) = plan(text, max_chars, max_lines);
    pieces.iter().map(|piece| doc.render(piece)).collect()
}

/// [`chunks`] within a platform's [`Capabilities`], where `max_chars` is
/// also a limit in UTF-16 code units: Telegram counts a message's length
/// that way, so an emoji (one character, two units) counts twice. A chunk
/// over it is cut again, smaller, until every one fits; counting units is
/// never less than counting characters, so this is safe on any platform.
pub fn chunks_for(text: &str, caps: &Capabilities) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in chunks(text, caps.max_chars, caps.max_lines) {
        fit_units(chunk, caps, &mut out);
    }
    out
}

/// [`chunks_for`] with at most `max` messages (at least 1): when the text
/// takes more, the first chunks — at most `max - 1`, fewer only where a
/// piece must be cut again for UTF-16 — and the rest of the text verbatim
/// from where they end (a code block cut there reopened with its opening
/// line), to be sent another way.
pub fn chunks_within(text: &str, caps: &Capabilities, max: usize) -> (Vec<String>, Option<String>) {
    let max = max.max(1);
    let all = chunks_for(text, caps);
    if all.len() <= max {
        return (all, None);
    }
    let (doc, pieces) = plan(text, caps.max_chars, caps.max_lines);
    let mut out = Vec::new();
    for piece in &pieces {
        let mut these = Vec::new();
        fit_units(doc.render(piece), caps, &mut these);
        if out.len() + these.len() >= max {
            let mut rest = String::new();
            if let Some(f) = piece.reopen.and_then(|b| doc.fences.get(b)) {
                rest.push_str(&doc.text[f.line.clone()]);
                rest.push('\n');
            }
            rest.push_str(&doc.text[piece.body.start..]);
            return (out, Some(rest));
        }
        out.extend(these);
    }
    // Not reached: the same pieces made more than `max` chunks above.
    (out, None)
}

fn fit_units(chunk: String, caps: &Capabilities, out: &mut Vec<String>) {
    let units = chunk.encode_utf16().count();
    let chars = chunk.chars().count();
    if units <= caps.max_chars || chars <= 1 {
        out.push(chunk);
        return;
    }
    // As many characters as fit if all were as wide as these, and always
    // fewer than now, so this ends.
    let max = (caps.max_chars * chars / units).clamp(1, chars - 1);
    for piece in chunks(&chunk, max, caps.max_lines) {
        fit_units(piece, caps, out);
    }
}

/// What a line is, for cutting. `usize` is the code block's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Outside code, with some non-whitespace.
    Text,
    /// Outside code, whitespace only: a paragraph separator.
    Blank,
    /// A code block's opening fence line.
    Open(usize),
    /// A line inside a code block (blank or not).
    Code(usize),
    /// A code block's closing fence line.
    Close(usize),
}

#[derive(Debug)]
struct Line {
    start: usize,
    /// Byte offset of the line's end (its `\n`, or the end of the text).
    end: usize,
    kind: Kind,
}

/// A code block's opening line and its fence (byte ranges in the text).
#[derive(Debug)]
struct Fence {
    line: Range<usize>,
    marker: Range<usize>,
}

/// One chunk: an optional reopening fence line, a piece of the input, an
/// optional closing fence (the `usize`s index [`Doc::fences`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    reopen: Option<usize>,
    body: Range<usize>,
    close: Option<usize>,
}

/// Cut kinds, better ones higher.
/// A cut inside a line that leaves a piece reading as a fence line (it
/// would open or close a code block where none was): only if nothing else.
const FENCY: u8 = 0;
const HARD: u8 = 1;
const SPACE: u8 = 2;
/// The line break just before a closing fence (the next chunk would hold
/// only the reopened and closed fence).
const LEAN: u8 = 3;
const LINE: u8 = 4;
const PARAGRAPH: u8 = 5;
/// All the rest of the text.
const ALL: u8 = 6;

#[derive(Debug, Clone)]
struct Cut {
    rank: u8,
    /// Where the body ends (byte offset).
    end: usize,
    /// Where the next chunk starts: a line index and a byte offset in it.
    next: (usize, usize),
    /// The code block the cut is inside of, to be closed.
    close: Option<usize>,
}

struct Doc<'a> {
    text: &'a str,
    lines: Vec<Line>,
    fences: Vec<Fence>,
    max_chars: usize,
    max_lines: usize,
}

fn plan(input: &str, max_chars: usize, max_lines: Option<usize>) -> (Doc<'_>, Vec<Piece>) {
    let max_chars = max_chars.max(1);
    let max_lines = max_lines.unwrap_or(usize::MAX).max(1);
    // Whitespace at the end of the text is dropped.
    let end = input.trim_end().len();
    let doc = Doc::parse(&input[..end], max_chars, max_lines);
    let mut pieces = Vec::new();
    let (mut li, mut pos) = (0, 0);
    loop {
        // Blank lines (outside code) never start a chunk.
        while doc.lines.get(li).is_some_and(|l| l.kind == Kind::Blank) {
            li += 1;
            pos = doc.lines.get(li).map_or(pos, |l| l.start);
        }
        let Some(line) = doc.lines.get(li) else { break };
        match doc.cut(li, pos) {
            Some(cut) => {
                pieces.push(Piece {
                    reopen: doc.inside(li),
                    body: pos..cut.end,
                    close: cut.close,
                });
                (li, pos) = cut.next;
            }
            // Nothing with text fits: the chunk would start with more
            // whitespace than a chunk holds. Drop that whitespace.
            None => match doc.text[pos..line.end].find(|c: char| !c.is_whitespace()) {
                Some(0) => {
                    // Unreachable: a character with the fences around it
                    // always fits (see `Doc::parse`). Never loop: send it.
                    let len = doc.text[pos..].chars().next().map_or(1, char::len_utf8);
                    pieces.push(Piece {
                        reopen: doc.inside(li),
                        body: pos..pos + len,
                        close: doc.inside(li),
                    });
                    pos += len;
                    if pos >= line.end {
                        (li, pos) = doc.next_line(li);
                    }
                }
                Some(skip) => pos += skip,
                None => (li, pos) = doc.next_line(li),
            },
        }
    }
    (doc, pieces)
}

impl<'a> Doc<'a> {
    fn parse(text: &'a str, max_chars: usize, max_lines: usize) -> Self {
        let mut lines = Vec::new();
        let mut fences = Vec::new();
        // Per block: the closing line's length in characters, if closed.
        let mut closers: Vec<Option<usize>> = Vec::new();
        let mut open: Option<(usize, u8, usize)> = None;
        let mut start = 0;
        for raw in text.split('\n') {
            let end = start + raw.len();
            let kind = match open {
                Some((b, c, n)) if is_close(raw, c, n) => {
                    open = None;
                    if let Some(slot) = closers.get_mut(b) {
                        *slot = Some(raw.chars().count());
                    }
                    Kind::Close(b)
                }
                Some((b, ..)) => Kind::Code(b),
                None => match fence_open(raw) {
                    Some((indent, c, n)) => {
                        let b = fences.len();
                        let at = start + indent;
                        fences.push(Fence {
                            line: start..end,
                            marker: at..at + n,
                        });
                        closers.push(None);
                        open = Some((b, c, n));
                        Kind::Open(b)
                    }
                    None if raw.trim().is_empty() => Kind::Blank,
                    None => Kind::Text,
                },
            };
            lines.push(Line { start, end, kind });
            start = end + 1;
        }
        // A block is kept renderable only if a chunk can hold its opening
        // line, one character and the closing fence, and also the reopened
        // opening line with its closing line; otherwise it is plain text.
        let protected: Vec<bool> = fences
            .iter()
            .zip(&closers)
            .map(|(f, closer)| {
                let open = text[f.line.clone()].chars().count();
                let marker = f.marker.len();
                let need = open + 1 + (marker + 2).max(closer.unwrap_or(0));
                need <= max_chars && max_lines >= 3
            })
            .collect();
        for line in &mut lines {
            if let Kind::Open(b) | Kind::Code(b) | Kind::Close(b) = line.kind
                && !protected.get(b).copied().unwrap_or(false)
            {
                line.kind = if text[line.start..line.end].trim().is_empty() {
                    Kind::Blank
                } else {
                    Kind::Text
                };
            }
        }
        Doc {
            text,
            lines,
            fences,
            max_chars,
            max_lines,
        }
    }

    fn render(&self, piece: &Piece) -> String {
        let mut out = String::new();
        if let Some(f) = piece.reopen.and_then(|b| self.fences.get(b)) {
            out.push_str(&self.text[f.line.clone()]);
            out.push('\n');
        }
        out.push_str(&self.text[piece.body.clone()]);
        if let Some(f) = piece.close.and_then(|b| self.fences.get(b)) {
            out.push('\n');
            out.push_str(&self.text[f.marker.clone()]);
        }
        out
    }

    /// The code block a chunk starting at the beginning of (or inside)
    /// line `li` is inside of, to be reopened.
    fn inside(&self, li: usize) -> Option<usize> {
        match self.lines.get(li)?.kind {
            Kind::Code(b) | Kind::Close(b) => Some(b),
            _ => None,
        }
    }

    fn next_line(&self, li: usize) -> (usize, usize) {
        let start = self.lines.get(li + 1).map_or(self.text.len(), |l| l.start);
        (li + 1, start)
    }

    fn fence_chars(&self, b: usize) -> (usize, usize) {
        self.fences.get(b).map_or((0, 0), |f| {
            (self.text[f.line.clone()].chars().count(), f.marker.len())
        })
    }

    /// The rank of a cut at the end of line `l` (not the last line), or
    /// `None` where no chunk should end.
    fn rank_after(&self, l: usize) -> Option<u8> {
        let next = self.lines.get(l + 1).map(|n| n.kind);
        match self.lines.get(l)?.kind {
            Kind::Text => match next {
                Some(Kind::Blank | Kind::Open(_)) => Some(PARAGRAPH),
                _ => Some(LINE),
            },
            Kind::Close(_) => Some(PARAGRAPH),
            Kind::Code(b) if next == Some(Kind::Close(b)) => Some(LEAN),
            Kind::Code(_) => Some(LINE),
            // A chunk ending in an opening fence would hold an empty block.
            Kind::Open(_) | Kind::Blank => None,
        }
    }

    /// The best cut for a chunk starting at byte `pos` of line `li`.
    fn cut(&self, li: usize, pos: usize) -> Option<Cut> {
        let reopen = self.inside(li);
        let (mut chars, mut lines) = match reopen {
            Some(b) => (self.fence_chars(b).0 + 1, 2),
            None => (0, 1),
        };
        let mut ink = false;
        let mut best: Option<Cut> = None;
        let mut consider = |cut: Cut| {
            if best.as_ref().is_none_or(|b| cut.rank >= b.rank) {
                best = Some(cut);
            }
        };
        for (l, line) in self.lines.iter().enumerate().skip(li) {
            if lines > self.max_lines {
                break;
            }
            let seg = if l == li { pos } else { line.start };
            let seg_text = &self.text[seg..line.end];
            let seg_chars = seg_text.chars().count();
            let close = match line.kind {
                Kind::Open(b) | Kind::Code(b) => Some(b),
                _ => None,
            };
            let (close_chars, close_lines) =
                close.map_or((0, 0), |b| (self.fence_chars(b).1 + 1, 1));
            let ink_before = ink;
            ink |= seg_text.chars().any(|c| !c.is_whitespace());
            let last = l + 1 == self.lines.len();
            let rank = if last { Some(ALL) } else { self.rank_after(l) };
            let fits = chars + seg_chars + close_chars <= self.max_chars
                && lines + close_lines <= self.max_lines;
            if fits {
                if let (Some(rank), true) = (rank, ink) {
                    consider(Cut {
                        rank,
                        end: line.end,
                        next: self.next_line(l),
                        close,
                    });
                }
            } else {
                let splittable = matches!(line.kind, Kind::Text | Kind::Code(_));
                if splittable && lines + close_lines <= self.max_lines {
                    let avail = self.max_chars.saturating_sub(chars + close_chars);
                    for cut in self.inside_line(l, seg, avail, ink_before, close) {
                        consider(cut);
                    }
                }
                break;
            }
            chars += seg_chars + 1;
            lines += 1;
        }
        best
    }

    /// Cuts inside line `l` after byte `seg` keeping at most `avail`
    /// characters of it: the last space cut and the last hard cut that
    /// leave no piece reading as a fence line, else the last hard cut.
    fn inside_line(
        &self,
        l: usize,
        seg: usize,
        avail: usize,
        ink_before: bool,
        close: Option<usize>,
    ) -> Vec<Cut> {
        let Some(line) = self.lines.get(l) else {
            return Vec::new();
        };
        let seg_text = &self.text[seg..line.end];
        // A piece of this line alone on a line of a chunk must not read as
        // a fence: inside a block as its closing fence, outside as an
        // opening one.
        let block = close.and_then(|b| self.fences.get(b));
        let fence_like = |piece: &str| match block {
            Some(f) => {
                let marker = self.text[f.marker.clone()].as_bytes();
                marker
                    .first()
                    .is_some_and(|&c| is_close(piece, c, marker.len()))
            }
            None => fence_open(piece).is_some(),
        };
        // Byte offsets in `seg_text` a chunk may end before: a space run's
        // start, and whether a hard cut there keeps a character whole.
        let mut at: Vec<(usize, bool, bool)> = Vec::new();
        let mut ink = ink_before;
        let mut prev: Option<char> = None;
        for (n, (i, c)) in seg_text.char_indices().enumerate() {
            if n > avail {
                break;
            }
            // A cut before byte `i` keeps `n` characters of this line; at
            // `i == 0` the line's start, which the line cut before covers.
            if i > 0 && ink {
                let blank = |c: Option<char>| matches!(c, Some(' ' | '\t'));
                let run_start = blank(Some(c)) && !blank(prev);
                let whole = !extends(c) && prev != Some('\u{200D}');
                at.push((i, run_start, whole));
            }
            ink |= !c.is_whitespace();
            prev = Some(c);
        }
        // Where the next chunk starts after a cut at `i`, and whether the
        // cut leaves a fence-like piece before or after it.
        let next = |i: usize, space: bool| {
            let from = if space {
                seg_text[i..]
                    .find(|c: char| c != ' ' && c != '\t')
                    .map_or(seg_text.len(), |k| i + k)
            } else {
                i
            };
            let tail = seg_text.get(from..).unwrap_or_default();
            let fency = fence_like(&seg_text[..i]) || fence_like(tail);
            if tail.is_empty() {
                (self.next_line(l), fency)
            } else {
                ((l, seg + from), fency)
            }
        };
        let cut = |rank: u8, i: usize, next: (usize, usize)| Cut {
            rank,
            end: seg + i,
            next,
            close,
        };
        let mut cuts = Vec::new();
        let spaces = at.iter().rev().filter(|a| a.1);
        if let Some((i, n)) = spaces
            .map(|a| (a.0, next(a.0, true)))
            .find(|(_, (_, fency))| !fency)
        {
            cuts.push(cut(SPACE, i, n.0));
        }
        let clean = |a: &&(usize, bool, bool)| !next(a.0, false).1;
        let hard = at.iter().rev().filter(|a| a.2).find(clean);
        if let Some(&(i, ..)) = hard.or_else(|| at.iter().rev().find(clean)) {
            cuts.push(cut(HARD, i, next(i, false).0));
        }
        if let Some(&(i, ..)) = at.last() {
            cuts.push(cut(FENCY, i, next(i, false).0));
        }
        cuts
    }
}

/// An opening fence: up to three spaces, then three or more backticks or
/// tildes (an info string after backticks may not contain one). Returns
/// the indent, the fence character and its count.
fn fence_open(line: &str) -> Option<(usize, u8, usize)> {
    let indent = line.bytes().take_while(|&b| b == b' ').count();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = *rest.as_bytes().first()?;
    if c != b'`' && c != b'~' {
        return None;
    }
    let n = rest.bytes().take_while(|&b| b == c).count();
    if n < 3 || (c == b'`' && rest[n..].contains('`')) {
        return None;
    }
    Some((indent, c, n))
}

/// A closing fence for an opening one of `n` times `c`: up to three
/// spaces, at least `n` times `c`, then only whitespace.
fn is_close(line: &str, c: u8, n: usize) -> bool {
    let indent = line.bytes().take_while(|&b| b == b' ').count();
    if indent > 3 {
        return false;
    }
    let rest = &line[indent..];
    let run = rest.bytes().take_while(|&b| b == c).count();
    run >= n && rest[run..].trim().is_empty()
}

/// Characters that belong to the one before (a cut before them would
/// split what reads as one character): combining marks, variation
/// selectors, skin tones, tags, the zero-width joiner.
fn extends(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}'
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{200C}'..='\u{200D}'
        | '\u{20D0}'..='\u{20FF}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FE20}'..='\u{FE2F}'
        | '\u{1F3FB}'..='\u{1F3FF}'
        | '\u{E0020}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs the chunker and checks every invariant the module promises,
    /// returning the chunks. `balanced`: also require that every chunk's
    /// code fences are balanced (limits large enough for the fences).
    fn check(
        input: &str,
        max_chars: usize,
        max_lines: Option<usize>,
        balanced: bool,
    ) -> Vec<String> {
        let (doc, pieces) = plan(input, max_chars, max_lines);
        let out = chunks(input, max_chars, max_lines);
        assert_eq!(out.len(), pieces.len());
        let chars_limit = max_chars.max(1);
        let lines_limit = max_lines.unwrap_or(usize::MAX).max(1);
        if input.trim().is_empty() {
            assert!(out.is_empty(), "{input:?} gave {out:?}");
        } else {
            assert!(!out.is_empty(), "{input:?} gave no chunk");
        }
        let mut cursor = 0;
        for (chunk, piece) in out.iter().zip(&pieces) {
            // Within the limits, never whitespace only.
            assert!(
                chunk.chars().count() <= chars_limit,
                "{chunk:?} over {chars_limit} chars"
            );
            assert!(
                chunk.split('\n').count() <= lines_limit,
                "{chunk:?} over {lines_limit} lines"
            );
            assert!(!chunk.trim().is_empty(), "whitespace-only chunk {chunk:?}");
            // The chunk minus the added fence lines is the input's text at
            // that place, verbatim.
            let mut body = chunk.as_str();
            if let Some(b) = piece.reopen {
                let opener = &input[doc.fences[b].line.clone()];
                assert!(fence_open(opener).is_some(), "reopened with {opener:?}");
                body = body
                    .strip_prefix(opener)
                    .and_then(|r| r.strip_prefix('\n'))
                    .unwrap_or_else(|| panic!("{chunk:?} does not start with {opener:?}"));
            }
            if let Some(b) = piece.close {
                let marker = &input[doc.fences[b].marker.clone()];
                body = body
                    .strip_suffix(marker)
                    .and_then(|r| r.strip_suffix('\n'))
                    .unwrap_or_else(|| panic!("{chunk:?} does not end with {marker:?}"));
            }
            assert_eq!(&input[piece.body.clone()], body);
            // In order, and only whitespace skipped since the last chunk.
            assert!(piece.body.start >= cursor, "out of order");
            let gap = &input[cursor..piece.body.start];
            assert!(gap.trim().is_empty(), "lost {gap:?}");
            cursor = piece.body.end;
            if balanced {
                assert!(fences_balanced(chunk), "unbalanced fences in {chunk:?}");
            }
        }
        assert!(
            input[cursor..].trim().is_empty(),
            "lost the tail {:?}",
            &input[cursor..]
        );
        out
    }

    /// Every code block opened in `chunk` is closed in it.
    fn fences_balanced(chunk: &str) -> bool {
        let mut open: Option<(u8, usize)> = None;
        for line in chunk.split('\n') {
            open = match open {
                Some((c, n)) if is_close(line, c, n) => None,
                Some(o) => Some(o),
                None => fence_open(line).map(|(_, c, n)| (c, n)),
            };
        }
        open.is_none()
    }

    #[test]
    fn a_short_answer_is_one_chunk_and_blank_edges_go() {
        assert_eq!(
            check("\n\n  hello\nworld  \n\n\t\n", 4000, None, true),
            ["  hello\nworld"]
        );
    }

    #[test]
    fn empty_or_whitespace_gives_nothing() {
        for text in ["", " ", "\n\n", " \t\n  \n"] {
            assert!(check(text, 4000, Some(17), true).is_empty());
        }
    }

    #[test]
    fn paragraph_preferred_over_a_later_line() {
        // "aaaa\nbbbb\n\ncccc" fits in 16: a line cut after "cccc" would be
        // later, but the paragraph break wins.
        assert_eq!(
            check("aaaa\nbbbb\n\ncccc\ndddd", 16, None, true),
            ["aaaa\nbbbb", "cccc\ndddd"]
        );
    }

    #[test]
    fn line_preferred_over_a_later_space() {
        assert_eq!(
            check("aaa bbb\nccc ddd", 11, None, true),
            ["aaa bbb", "ccc ddd"]
        );
    }

    #[test]
    fn space_preferred_over_a_hard_cut_and_the_run_goes() {
        assert_eq!(check("aaa   bbbbbb", 8, None, true), ["aaa", "bbbbbb"]);
    }

    #[test]
    fn a_long_word_is_cut_hard() {
        let url = format!("https://example.com/{}", "x".repeat(30));
        let out = check(&format!("see {url}"), 20, None, true);
        assert_eq!(out, ["see", &url[..20], &url[20..40], &url[40..]]);
    }

    #[test]
    fn cuts_count_characters_not_bytes() {
        assert_eq!(
            check(&"語".repeat(7), 3, None, true),
            ["語語語", "語語語", "語"]
        );
        assert_eq!(
            check(&"🦀".repeat(5), 2, None, true),
            ["🦀🦀", "🦀🦀", "🦀"]
        );
    }

    #[test]
    fn a_hard_cut_avoids_splitting_a_combining_mark() {
        // "é" as e + U+0301: a cut after 3 characters would strand an accent.
        let e = "e\u{301}";
        assert_eq!(check(&e.repeat(3), 3, None, true), [e, e, e]);
    }

    #[test]
    fn a_code_block_is_closed_and_reopened_with_its_info_string() {
        let text = "intro\n\n```rust\nlet a = 1;\nlet b = 2;\nlet c = 3;\n```\n\noutro";
        assert_eq!(
            check(text, 30, None, true),
            [
                "intro",
                "```rust\nlet a = 1;\n```",
                "```rust\nlet b = 2;\n```",
                "```rust\nlet c = 3;\n```\n\noutro",
            ]
        );
    }

    #[test]
    fn tilde_fences_and_indented_openers_reopen_as_written() {
        let text = "  ~~~~ py\nx = 1\ny = 2\n  ~~~~";
        assert_eq!(
            check(text, 22, None, true),
            ["  ~~~~ py\nx = 1\n~~~~", "  ~~~~ py\ny = 2\n  ~~~~"]
        );
        // Two characters fewer and the closing line no longer fits after the
        // last code line: the last chunk holds only the reopened fence and
        // the closing line (the cut before a closing line is the worst of
        // the line cuts, yet better than cutting inside a line).
        assert_eq!(
            check(text, 20, None, true),
            [
                "  ~~~~ py\nx = 1\n~~~~",
                "  ~~~~ py\ny = 2\n~~~~",
                "  ~~~~ py\n  ~~~~"
            ]
        );
    }

    #[test]
    fn a_block_left_open_is_closed() {
        assert_eq!(check("```\nabc\n\n", 100, None, true), ["```\nabc\n```"]);
    }

    #[test]
    fn a_cut_inside_a_line_leaves_no_piece_that_reads_as_a_fence() {
        // The space cut would start the next chunk with "```rust", an
        // opening fence; the hard cut after it is taken instead.
        assert_eq!(check("say ```rust", 8, None, true), ["say ```r", "ust"]);
        // Inside code, a piece "~~~~~" alone on its line would close the
        // block early (`check` asserts every chunk's fences balance).
        let out = check("~~~~\n~~~~~ x y\n~~~~", 14, None, true);
        assert!(out.iter().all(|c| !c.contains("\n~~~~~\n")), "{out:?}");
    }

    #[test]
    fn a_code_line_longer_than_a_chunk_is_cut_inside_the_fences() {
        let text = format!("```\n{}\n```", "y".repeat(20));
        let out = check(&text, 16, None, true);
        assert_eq!(
            out,
            ["```\nyyyyyyyy\n```", "```\nyyyyyyyy\n```", "```\nyyyy\n```"]
        );
    }

    #[test]
    fn line_limits_hold_with_the_fence_lines() {
        let text: Vec<String> = (0..20).map(|i| format!("l{i}")).collect();
        let out = check(&text.join("\n"), 2000, Some(17), true);
        assert_eq!(out, [text[..17].join("\n"), text[17..].join("\n")]);

        let code = format!("```\n{}\n```", text.join("\n"));
        let out = check(&code, 2000, Some(17), true);
        // 15 code lines between the fences per chunk: 20 → 15 + 5.
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], format!("```\n{}\n```", text[..15].join("\n")));
        assert_eq!(out[1], format!("```\n{}\n```", text[15..].join("\n")));
    }

    #[test]
    fn nine_thousand_characters_make_three_telegram_messages() {
        let paragraphs: Vec<String> = (0..9).map(|i| format!("{i}{}", "x".repeat(998))).collect();
        let text = paragraphs.join("\n\n");
        assert!(text.chars().count() >= 9000);
        let out = check(&text, 4000, None, true);
        assert_eq!(out.len(), 3);
        for (i, chunk) in out.iter().enumerate() {
            assert_eq!(*chunk, paragraphs[3 * i..3 * i + 3].join("\n\n"));
        }

        let words = "abcd ".repeat(1800);
        let out = check(&words, 4000, None, true);
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|c| c.chars().count() <= 4000));
        assert_eq!(out.join(" "), words.trim_end());
    }

    #[test]
    fn capabilities_carry_the_limits() {
        let discord = Capabilities {
            max_chars: 2000,
            max_lines: Some(17),
            edits: true,
            typing: Some(std::time::Duration::from_secs(4)),
            edit_every: std::time::Duration::from_secs(1),
            threads: true,
            formatting: crate::Formatting::Markdown,
        };
        assert_eq!(chunks_for(&"a\n".repeat(18), &discord).len(), 2);
    }

    #[test]
    fn within_a_bound_the_rest_starts_where_the_kept_chunks_end() {
        let caps = Capabilities {
            max_chars: 40,
            max_lines: None,
            edits: false,
            typing: None,
            edit_every: std::time::Duration::from_secs(1),
            threads: false,
            formatting: crate::Formatting::Plain,
        };
        let paragraphs: Vec<String> = (0..6)
            .map(|i| format!("paragraph {i} {}", "x".repeat(20)))
            .collect();
        let text = paragraphs.join("\n\n");
        assert_eq!(chunks_for(&text, &caps).len(), 6);
        let (kept, rest) = chunks_within(&text, &caps, 6);
        assert_eq!((kept.len(), rest), (6, None), "within the bound: all");
        let (kept, rest) = chunks_within(&text, &caps, 3);
        assert_eq!(kept, paragraphs[..2]);
        assert_eq!(rest.as_deref(), Some(paragraphs[2..].join("\n\n").as_str()));
        let (kept, rest) = chunks_within(&text, &caps, 0);
        assert!(
            kept.is_empty(),
            "a bound of 0 counts as 1: all of it the rest"
        );
        assert_eq!(rest.as_deref(), Some(text.as_str()));

        // A code block cut at the bound is reopened at the rest's start.
        let code: Vec<String> = (0..8).map(|i| format!("let x{i} = {i};")).collect();
        let text = format!("```rust\n{}\n```\nafter", code.join("\n"));
        let (kept, rest) = chunks_within(&text, &caps, 2);
        assert_eq!(kept.len(), 1);
        assert!(kept[0].ends_with("\n```"), "{kept:?}");
        let rest = rest.unwrap();
        assert!(rest.starts_with("```rust\n"), "{rest}");
        assert!(rest.ends_with("\n```\nafter"), "{rest}");
        let shown = kept[0].trim_end_matches("\n```").len() - "```rust\n".len();
        assert_eq!(
            text["```rust\n".len() + shown..].trim_start(),
            &rest["```rust\n".len()..],
            "nothing lost between the kept chunk and the rest"
        );
    }

    #[test]
    fn limits_too_small_for_fences_still_end_and_lose_nothing() {
        let text = "```rust\nfn main() {}\n```\ntext after";
        for max_chars in 0..20 {
            for max_lines in [None, Some(0), Some(1), Some(2), Some(3)] {
                let out = check(text, max_chars, max_lines, false);
                assert!(!out.is_empty());
            }
        }
        // One character per chunk: all of them, in order; 0 counts as 1.
        assert_eq!(check("ab c", 1, None, false), ["a", "b", "c"]);
        assert_eq!(check("ab c", 0, Some(0), false), ["a", "b", "c"]);
    }

    /// Lines of Markdown: text with multibyte words, inline code and long
    /// words, blank lines, and fence lines of both kinds.
    fn markdown() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            "[a-zé語🦀]{1,8}",
            "`[a-z]{1,5}`",
            "[a-z]{20,70}",
            Just("e\u{301}".to_string()),
        ];
        let text_line = (
            prop_oneof![Just(""), Just("  "), Just("    ")],
            prop::collection::vec(word, 1..8),
            prop_oneof![Just(" "), Just("  ")],
        )
            .prop_map(|(indent, words, sep)| format!("{indent}{}", words.join(sep)));
        let line = prop_oneof![
            6 => text_line,
            2 => prop_oneof![Just(String::new()), Just("  ".to_string())],
            2 => prop_oneof![
                Just("```".to_string()),
                Just("```rust".to_string()),
                Just("~~~".to_string()),
                Just("~~~~ py".to_string()),
                Just("````".to_string()),
                Just("   ```".to_string()),
                Just("``` ".to_string()),
            ],
        ];
        (prop::collection::vec(line, 0..40), any::<bool>())
            .prop_map(|(lines, newline)| lines.join("\n") + if newline { "\n" } else { "" })
    }

    proptest! {
        #[test]
        fn any_text_is_cut_within_limits_losing_only_whitespace_at_cuts(
            text in markdown(),
            max_chars in 0usize..120,
            max_lines in prop::option::of(0usize..20),
        ) {
            // Fence lines above are at most 7 characters: any block fits
            // from 16 characters and 3 lines up.
            let balanced = max_chars >= 16 && max_lines.is_none_or(|l| l >= 3);
            check(&text, max_chars, max_lines, balanced);
        }

        #[test]
        fn wide_characters_are_counted_as_telegram_counts_them(
            text in prop::collection::vec(
                prop_oneof![Just("😀"), Just("a"), Just(" "), Just("\n\n"), Just("```\n"), Just("𝕏𝕏")],
                0..400,
            ).prop_map(|v| v.concat()),
            max in 16usize..60,
        ) {
            let caps = Capabilities {
                max_chars: max,
                max_lines: None,
                edits: true,
                typing: Some(std::time::Duration::from_secs(4)),
            edit_every: std::time::Duration::from_secs(1),
                threads: true,
                formatting: crate::message::Formatting::Html,
            };
            let out = chunks_for(&text, &caps);
            for c in &out {
                prop_assert!(c.encode_utf16().count() <= max, "{c:?} is over {max} units");
            }
            let kept: String = out.concat().chars().filter(|c| !c.is_whitespace() && *c != '`').collect();
            let want: String = text.chars().filter(|c| !c.is_whitespace() && *c != '`').collect();
            prop_assert_eq!(kept, want, "no text lost or reordered");
        }

        #[test]
        fn platform_limits_on_long_text(
            text in prop::collection::vec(markdown(), 1..6).prop_map(|v| v.join("\n")),
            discord in any::<bool>(),
        ) {
            let (chars, lines) = if discord { (2000, Some(17)) } else { (4000, None) };
            check(&text, chars, lines, true);
        }
    }
}
