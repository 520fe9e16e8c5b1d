//! The model's answer as a person reads it. In a terminal it is Markdown
//! rendered with termimad (headings, emphasis, inline code, fenced code,
//! lists, quotes, tables, rules); anywhere else (a pipe, a file, `NO_COLOR`)
//! it is the text exactly as the model wrote it. `out.rs` decides which
//! look a stream gets and writes what this module returns.
//!
//! The answer arrives in deltas that split lines, words and characters
//! anywhere, so the renderer works on complete lines: a line inside a
//! ``` fence is code (kept exact, never reflowed or parsed as Markdown),
//! and a table's rows wait until the table ends so it is laid out once, as
//! a table. The rendered output therefore does not depend on where the
//! deltas were cut. A model writes a paragraph as one long line, so the
//! line being received is shown as it comes (the live preview, as typed),
//! then erased and replaced by its rendering when it ends.
//!
//! Control characters are shown (`sanitize.rs`) before anything is
//! rendered: termimad only ever sees inert text, so the only escape
//! sequences reaching the terminal are its own colours and attributes.

use termimad::minimad::Alignment;
use termimad::{CompoundStyle, MadSkin};

use crate::sanitize::Pieces;

/// How an answer is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// As the model wrote it (control characters shown).
    Plain,
    /// Markdown rendered for a terminal `width` columns wide; `live`: the
    /// line being received is shown raw until it ends.
    Terminal { width: usize, live: bool },
}

/// One answer, fed delta by delta; each call returns what to print now.
/// A turn's answer can come from several model calls (text, tool calls,
/// more text): [`Reply::next_segment`] marks where one ends, and the next
/// one's text starts after a blank line, in both looks.
pub struct Reply {
    pieces: Pieces,
    render: Render,
    /// Line ends at the end of the text so far (`None`: no text yet).
    trailing_newlines: Option<usize>,
    /// A model call ended: the next text starts a segment.
    segment_break: bool,
}

enum Render {
    /// Whether the last text printed left the cursor inside a line.
    Plain {
        mid_line: bool,
    },
    Markdown(Box<Markdown>),
}

impl Reply {
    pub fn new(look: Look) -> Self {
        let render = match look {
            Look::Plain => Render::Plain { mid_line: false },
            Look::Terminal { width, live } => {
                Render::Markdown(Box::new(Markdown::new(width, live)))
            }
        };
        Reply {
            pieces: Pieces::default(),
            render,
            trailing_newlines: None,
            segment_break: false,
        }
    }

    /// The model call that wrote the text so far ended (it called tools,
    /// or is tried again): text that follows is another segment.
    pub fn next_segment(&mut self) {
        self.segment_break = true;
    }

    /// What to print for the next delta of the answer.
    pub fn text(&mut self, piece: &str) -> String {
        let mut shown = self.pieces.next(piece);
        if !shown.is_empty() {
            if std::mem::take(&mut self.segment_break)
                && let Some(ends) = self.trailing_newlines
            {
                // A blank line between segments: "A.\n\nB", never "A.B".
                shown.insert_str(0, &"\n".repeat(2usize.saturating_sub(ends)));
            }
            let ends = shown.len() - shown.trim_end_matches('\n').len();
            self.trailing_newlines = Some(if ends == shown.len() {
                self.trailing_newlines.unwrap_or(0) + ends
            } else {
                ends
            });
        }
        match &mut self.render {
            Render::Plain { mid_line } => {
                if !shown.is_empty() {
                    *mid_line = !shown.ends_with('\n');
                }
                shown
            }
            Render::Markdown(md) => md.text(&shown),
        }
    }

    /// Before a note (a tool call) goes to stderr: what to print so the
    /// answer so far is on screen, and whether the cursor is still inside
    /// a line of the answer. Markdown renders its partial line and any
    /// table now; plain text is already out, maybe without its line end.
    pub fn break_for_note(&mut self) -> (String, bool) {
        match &mut self.render {
            Render::Plain { mid_line } => (String::new(), *mid_line),
            Render::Markdown(md) => {
                // The partial line is rendered as if it had ended.
                if let Some(ends) = &mut self.trailing_newlines {
                    *ends = (*ends).max(1);
                }
                (md.flush(), false)
            }
        }
    }

    /// The turn ended: the rest of the answer, ending its last line.
    /// Plain text gets the line end it lacks (none when nothing was
    /// printed: a failed turn leaves stdout empty).
    pub fn end(&mut self) -> String {
        // No segment follows: the line end is not one.
        self.segment_break = false;
        match &mut self.render {
            Render::Plain { mid_line: true } => self.text("\n"),
            Render::Plain { mid_line: false } => String::new(),
            Render::Markdown(md) => {
                let rest = self.pieces.finish();
                let mut out = md.text(&rest);
                out.push_str(&md.flush());
                md.fence = None;
                out
            }
        }
    }

    /// What is left when no delta follows (a `\r` the answer ended on,
    /// shown; Markdown's partial line and table).
    pub fn finish(&mut self) -> String {
        let rest = self.pieces.finish();
        match &mut self.render {
            Render::Plain { .. } => rest,
            Render::Markdown(md) => {
                let mut out = md.text(&rest);
                out.push_str(&md.flush());
                out
            }
        }
    }
}

/// A code fence that is open: its character and length, which the
/// closing fence must repeat at least as often (CommonMark).
#[derive(Debug, Clone, Copy)]
struct Fence {
    mark: char,
    len: usize,
}

impl Fence {
    /// The fence `line` opens, if it is one: up to three spaces, then
    /// three or more backticks or tildes (a backtick fence's info string
    /// holds no backtick).
    fn opened_by(line: &str) -> Option<Fence> {
        let rest = strip_indent(line)?;
        let mark = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
        let len = rest.chars().take_while(|&c| c == mark).count();
        let info = &rest[len * mark.len_utf8()..];
        (len >= 3 && !(mark == '`' && info.contains('`'))).then_some(Fence { mark, len })
    }

    /// Whether `line` closes this fence: the same character at least as
    /// often, nothing but spaces after it.
    fn closed_by(self, line: &str) -> bool {
        let Some(rest) = strip_indent(line) else {
            return false;
        };
        let len = rest.chars().take_while(|&c| c == self.mark).count();
        len >= self.len && rest[len * self.mark.len_utf8()..].trim().is_empty()
    }
}

/// `line` without its indentation, when that is at most three spaces.
fn strip_indent(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches(' ');
    (line.len() - rest.len() <= 3).then_some(rest)
}

/// The terminal renderer: complete lines in, styled lines out.
struct Markdown {
    skin: MadSkin,
    width: usize,
    /// The line being received, not yet ended.
    line: String,
    /// The open code fence, if inside one.
    fence: Option<Fence>,
    /// Rows of the table being received.
    table: Vec<String>,
    /// Live previews on, and the raw text of the partial line on screen.
    live: bool,
    preview: String,
}

impl Markdown {
    fn new(width: usize, live: bool) -> Self {
        let mut skin = MadSkin::default();
        // A chat reads top to bottom at the left margin: no centred title.
        for header in &mut skin.headers {
            header.align = Alignment::Left;
            header.add_attr(termimad::crossterm::style::Attribute::Bold);
        }
        Markdown {
            skin,
            width: width.max(20),
            line: String::new(),
            fence: None,
            table: Vec::new(),
            live,
            preview: String::new(),
        }
    }

    /// Takes sanitized text; returns the lines it completed, rendered, and
    /// the live preview of the line it leaves open.
    fn text(&mut self, shown: &str) -> String {
        let mut out = String::new();
        let mut rest = shown;
        let completes = rest.contains('\n');
        if completes {
            out.push_str(&self.erase_preview());
        }
        while let Some(end) = rest.find('\n') {
            self.line.push_str(&rest[..end]);
            let line = std::mem::take(&mut self.line);
            out.push_str(&self.complete(&line));
            rest = &rest[end + 1..];
        }
        self.line.push_str(rest);
        // A table row waits for its table; the rest is shown as it comes.
        if self.live && !self.line.starts_with('|') {
            let new = if completes { self.line.as_str() } else { rest };
            out.push_str(new);
            self.preview.push_str(new);
        }
        out
    }

    /// Moves back over the preview on screen and clears it.
    fn erase_preview(&mut self) -> String {
        if self.preview.is_empty() {
            return String::new();
        }
        let rows = rows_of(&std::mem::take(&mut self.preview), self.width);
        let mut out = String::from("\r");
        if rows > 1 {
            out.push_str(&format!("\x1b[{}A", rows - 1));
        }
        out.push_str("\x1b[J");
        out
    }

    /// Renders the partial line (as if it had ended) and the table.
    fn flush(&mut self) -> String {
        let mut out = self.erase_preview();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            out.push_str(&self.complete(&line));
        }
        out.push_str(&self.table());
        out
    }

    /// One complete line.
    fn complete(&mut self, line: &str) -> String {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(fence) = self.fence {
            if fence.closed_by(line) {
                self.fence = None;
            }
            return self.code(line);
        }
        if line.starts_with('|') {
            self.table.push(line.to_string());
            return String::new();
        }
        let mut out = self.table();
        if let Some(fence) = Fence::opened_by(line) {
            self.fence = Some(fence);
            out.push_str(&self.code(line));
        } else if line.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str(&self.skin.text(line, Some(self.width)).to_string());
        }
        out
    }

    /// A line of a code block (its fences too): its text exactly, styled
    /// as code, wrapped by the terminal rather than reflowed.
    fn code(&self, line: &str) -> String {
        let style: &CompoundStyle = &self.skin.code_block.compound_style;
        format!("{}\n", style.apply_to(line))
    }

    /// The table received so far, laid out (empty when there is none).
    fn table(&mut self) -> String {
        if self.table.is_empty() {
            return String::new();
        }
        let rows = std::mem::take(&mut self.table).join("\n");
        self.skin.text(&rows, Some(self.width)).to_string()
    }
}

/// How many terminal rows `text` (one line, no line end) takes on a
/// terminal `width` columns wide, wrapping as terminals do: a character
/// that does not fit starts the next row; tabs stop every 8 columns.
fn rows_of(text: &str, width: usize) -> usize {
    use unicode_width::UnicodeWidthChar;
    let width = width.max(1);
    let (mut rows, mut col) = (1, 0);
    for c in text.chars() {
        let w = match c {
            '\t' => 8 - col % 8,
            c => c.width().unwrap_or(0),
        };
        if col + w > width {
            rows += 1;
            col = 0;
        }
        col = (col + w).min(width);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERM: Look = Look::Terminal {
        width: 80,
        live: false,
    };
    const LIVE: Look = Look::Terminal {
        width: 80,
        live: true,
    };

    #[test]
    fn the_line_being_received_shows_at_once_and_is_replaced_by_its_rendering() {
        let mut reply = Reply::new(LIVE);
        assert_eq!(reply.text("thinking **ha"), "thinking **ha");
        assert_eq!(reply.text("rd**"), "rd**");
        let done = reply.text(" now\nnext");
        // Back to the start of the preview's row, cleared, then the line
        // rendered (bold styled), then the next line's preview.
        assert!(done.starts_with("\r\x1b[J"), "{done:?}");
        assert!(!done.contains("**"), "{done:?}");
        assert!(done.contains("\x1b[1m"), "{done:?}");
        assert!(done.ends_with("next"), "{done:?}");
        let end = reply.end();
        assert!(
            end.starts_with("\r\x1b[J") && end.contains("next\n"),
            "{end:?}"
        );

        // A preview that wrapped onto a second row is erased from its first.
        let mut reply = Reply::new(LIVE);
        let long = "x".repeat(100);
        assert_eq!(reply.text(&long), long);
        assert!(reply.text("\n").starts_with("\r\x1b[1A\x1b[J"));

        // A table row waits for its table: no preview to flicker.
        let mut reply = Reply::new(LIVE);
        assert_eq!(reply.text("| a | b"), "");
    }

    #[test]
    fn rows_wrap_as_a_terminal_does() {
        assert_eq!(rows_of("", 80), 1);
        assert_eq!(rows_of(&"x".repeat(80), 80), 1);
        assert_eq!(rows_of(&"x".repeat(81), 80), 2);
        // A wide character that does not fit moves to the next row.
        assert_eq!(rows_of("你好", 3), 2);
        assert_eq!(rows_of("\tab", 8), 2);
    }

    /// Everything printed for `deltas`, fed in order, turn ended.
    fn render(look: Look, deltas: &[&str]) -> String {
        let mut reply = Reply::new(look);
        let mut out: String = deltas.iter().map(|d| reply.text(d)).collect();
        out.push_str(&reply.end());
        out.push_str(&reply.finish());
        out
    }

    /// `s` without its SGR sequences (`ESC [ … m`).
    fn strip_sgr(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    const ANSWER: &str = "# Plan\n\nSome **bold** and *italic* and `code`.\n\n- one\n- two\n\n> quoted\n\n```rust\nfn main() {\n    let x = **not bold**;  \n\tprintln!(\"# not a heading\");\n}\n```\n\n| name | size |\n|------|-----:|\n| a.txt | 12 |\n| b.txt | 345 |\n\n---\nDone.";

    #[test]
    fn plain_text_is_the_model_text_byte_for_byte() {
        assert_eq!(render(Look::Plain, &[ANSWER]), format!("{ANSWER}\n"));
        assert!(!render(Look::Plain, &["# Title\n**bold**"]).contains('\x1b'));
    }

    #[test]
    fn headings_and_bold_get_sgr_codes_in_a_terminal_only() {
        for line in ["# Title", "some **bold** word"] {
            let styled = render(TERM, &[line]);
            assert!(styled.contains("\x1b["), "{line}: {styled:?}");
            assert!(
                !styled.contains("**") && !styled.contains("# "),
                "{styled:?}"
            );
            assert_eq!(render(Look::Plain, &[line]), format!("{line}\n"));
        }
    }

    #[test]
    fn a_fence_keeps_its_text_exactly() {
        let styled = render(TERM, &[ANSWER]);
        let visible = strip_sgr(&styled);
        for line in [
            "```rust",
            "fn main() {",
            "    let x = **not bold**;  ",
            "\tprintln!(\"# not a heading\");",
            "}",
            "```",
        ] {
            assert!(
                visible.lines().any(|l| l == line),
                "{line:?} not kept in {visible}"
            );
        }
        // After the fence, Markdown is rendered again.
        assert!(!visible.contains("**bold**"), "{visible}");
        assert!(visible.contains("Done."), "{visible}");
    }

    #[test]
    fn a_table_split_over_deltas_is_laid_out_once() {
        let table = "| name | size |\n|------|-----:|\n| a.txt | 12 |\n| b.txt | 345 |\n";
        let deltas = [
            "| na",
            "me | size |\n|---",
            "---|-----:|\n| a.txt | 12 |\n| b.t",
            "xt | 345 |\n",
            "after",
        ];
        let mut reply = Reply::new(TERM);
        // Nothing is printed while the table is still arriving.
        for d in &deltas[..4] {
            assert_eq!(reply.text(d), "", "{d:?}");
        }
        let mut out = reply.text(deltas[4]);
        out.push_str(&reply.end());
        let visible = strip_sgr(&out);
        assert!(!visible.contains("|---"), "{visible}");
        assert!(visible.contains('│') || visible.contains('─'), "{visible}");
        assert_eq!(visible.matches("a.txt").count(), 1, "{visible}");
        assert_eq!(visible.matches("name").count(), 1, "{visible}");
        assert_eq!(out, render(TERM, &[table, "after"]));
    }

    #[test]
    fn control_characters_are_shown_in_both_looks() {
        let attack = "# \x1b]0;PWNED\x07title\n**\x1b[2J** \u{9b}2J \u{202e}x\rFAKE\n```\n\x1b[1A\n```\n| \x1b[31m | b |\n";
        for look in [Look::Plain, TERM] {
            let out = render(look, &[attack]);
            let foreign = strip_sgr(&out);
            assert!(
                !foreign.contains(['\x1b', '\x07', '\r', '\u{9b}', '\u{202e}']),
                "{look:?}: {out:?}"
            );
            assert!(
                foreign.contains("\\u{1b}]0;PWNED\\u{7}title"),
                "{look:?}: {foreign}"
            );
            assert!(foreign.contains("\\u{1b}[1A"), "{look:?}: {foreign}");
            // Every ESC left is one of termimad's SGR sequences.
            for seq in out.split('\x1b').skip(1) {
                let end = seq.find('m').unwrap_or(seq.len());
                assert!(
                    seq.starts_with('[')
                        && seq[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
                    "{look:?}: not an SGR sequence: {seq:?}"
                );
            }
        }
    }

    #[test]
    fn delta_boundaries_do_not_change_the_output() {
        for look in [Look::Plain, TERM] {
            let whole = render(look, &[ANSWER]);
            let chars: Vec<String> = ANSWER.chars().map(String::from).collect();
            let one_by_one: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(render(look, &one_by_one), whole, "{look:?}");
            for cut in [1, 7, 40, 97, 150, ANSWER.len() - 1] {
                let cut = (cut..).find(|&i| ANSWER.is_char_boundary(i)).unwrap_or(cut);
                let (a, b) = ANSWER.split_at(cut);
                assert_eq!(render(look, &[a, b]), whole, "{look:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn a_partial_line_waits_for_its_end_in_a_terminal() {
        let mut reply = Reply::new(TERM);
        assert_eq!(reply.text("Let me **lo"), "");
        let (now, mid_line) = reply.break_for_note();
        assert!(!mid_line);
        assert!(strip_sgr(&now).contains("Let me lo"), "{now:?}");
        let mut plain = Reply::new(Look::Plain);
        assert_eq!(plain.text("Let me"), "Let me");
        assert_eq!(plain.break_for_note(), (String::new(), true));
        assert_eq!(plain.text(" look.\n"), " look.\n");
        assert_eq!(plain.break_for_note(), (String::new(), false));
    }

    /// Everything printed for segments of deltas, with a note (a tool
    /// call) between them, as `render.rs` drives it.
    fn render_segments(look: Look, segments: &[&[&str]]) -> String {
        let mut reply = Reply::new(look);
        let mut out = String::new();
        for (i, deltas) in segments.iter().enumerate() {
            if i > 0 {
                out.push_str(&reply.break_for_note().0);
                reply.next_segment();
            }
            out.extend(deltas.iter().map(|d| reply.text(d)));
        }
        out.push_str(&reply.end());
        out.push_str(&reply.finish());
        out
    }

    #[test]
    fn segments_are_kept_apart_by_one_blank_line() {
        let plain = |segments: &[&[&str]]| render_segments(Look::Plain, segments);
        assert_eq!(
            plain(&[&["Running", " it."], &["Hello", " from exec."]]),
            "Running it.\n\nHello from exec.\n"
        );
        assert_eq!(plain(&[&["One.\n"], &["Two."]]), "One.\n\nTwo.\n");
        assert_eq!(plain(&[&["One.\n\n"], &["Two.\n"]]), "One.\n\nTwo.\n");
        // Calls that wrote nothing add nothing.
        assert_eq!(plain(&[&[], &["Only."], &[]]), "Only.\n");
        assert_eq!(plain(&[&[""], &[]]), "");
        // In a terminal: the partial line rendered at the note, then one
        // blank line before the next call's text.
        let styled = strip_sgr(&render_segments(TERM, &[&["Running it."], &["Hello."]]));
        let lines: Vec<&str> = styled.lines().map(str::trim_end).collect();
        assert_eq!(lines, ["Running it.", "", "Hello."], "{styled:?}");
        let styled = strip_sgr(&render_segments(TERM, &[&["One.\n"], &["Two."]]));
        let lines: Vec<&str> = styled.lines().map(str::trim_end).collect();
        assert_eq!(lines, ["One.", "", "Two."], "{styled:?}");
    }

    #[test]
    fn fences_follow_commonmark() {
        assert!(Fence::opened_by("```").is_some());
        assert!(Fence::opened_by("   ~~~~ python").is_some());
        assert!(Fence::opened_by("    ```").is_none());
        assert!(Fence::opened_by("``").is_none());
        assert!(Fence::opened_by("``` a`b").is_none());
        let f = Fence::opened_by("````").unwrap();
        assert!(!f.closed_by("```"));
        assert!(f.closed_by("`````  "));
        assert!(!f.closed_by("~~~~"));
        assert!(!f.closed_by("```` x"));
    }
}
