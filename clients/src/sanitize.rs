//! Text a terminal would act on, made visible instead (issue 14). Whatever
//! the CLI prints for people passes [`sanitize`] in `out.rs`, because most
//! of it comes from a model, a tool, a transcript, a log or pincerd, and a
//! reply holding `ESC ]0;…BEL ESC[2J` would otherwise set the window title,
//! clear the screen or erase the tool-call lines above it.
//!
//! Each character a terminal may act on is shown as its code point the way
//! Rust writes it, `\u{1b}` for ESC: one form for every class, readable in
//! any font, and the user sees that something was there. That covers the C0
//! controls but `\n` and `\t` (`\r` too when it ends a line as `\r\n`; alone
//! it moves back to the start of the line and lets the next text overwrite
//! it), DEL, the C1 controls U+0080–U+009F (some terminals read U+009B as
//! CSI and U+009D as OSC) and the bidi embeddings, overrides and isolates
//! U+202A–U+202E and U+2066–U+2069, which reorder text so it reads as
//! something else. No escape-sequence parser is needed: without its ESC (or
//! its C1 introducer) the rest of a sequence is plain text, so it stays on
//! screen as the evidence of what was attempted.

use std::borrow::Cow;

/// `s` with every character a terminal may act on shown as `\u{…}`;
/// borrowed when there is none (the common case).
pub fn sanitize(s: &str) -> Cow<'_, str> {
    let Some(first) = s
        .char_indices()
        .find(|&(i, c)| acts(c) && !line_end(s, i, c))
        .map(|(i, _)| i)
    else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 16);
    out.push_str(&s[..first]);
    for (i, c) in s[first..].char_indices() {
        if acts(c) && !line_end(&s[first..], i, c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Serialized JSON with the characters serde_json leaves raw but a
/// terminal may act on (DEL, C1 controls, bidi overrides) written as
/// `\uXXXX` escapes: the same data for a JSON reader, nothing for a
/// terminal that shows `--json` output. Such characters can only stand
/// inside JSON strings, where the escape means the same character.
pub fn json_escape(json: &str) -> Cow<'_, str> {
    if !json.chars().any(acts) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if acts(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal may act on `c` rather than show it.
fn acts(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// `c` at byte `i` of `s` is the `\r` of a `\r\n`.
fn line_end(s: &str, i: usize, c: char) -> bool {
    c == '\r' && s.as_bytes().get(i + 1) == Some(&b'\n')
}

/// Text that arrives in pieces (a reply as the model streams it): a `\r`
/// that ends a piece waits for the next one, so a `\r\n` split between two
/// pieces stays a line end.
#[derive(Debug, Default)]
pub struct Pieces {
    cr_waiting: bool,
}

impl Pieces {
    /// What to print for `piece`, sanitized.
    pub fn next(&mut self, piece: &str) -> String {
        let mut text = String::with_capacity(piece.len() + 1);
        if std::mem::take(&mut self.cr_waiting) {
            text.push('\r');
        }
        text.push_str(piece);
        if text.ends_with('\r') {
            text.pop();
            self.cr_waiting = true;
        }
        sanitize(&text).into_owned()
    }

    /// What is left to print when no piece follows: a waiting `\r`, shown.
    pub fn finish(&mut self) -> String {
        if std::mem::take(&mut self.cr_waiting) {
            sanitize("\r").into_owned()
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &str) -> String {
        sanitize(s).into_owned()
    }

    #[test]
    fn plain_and_multibyte_text_is_kept_as_it_is() {
        for s in [
            "",
            "hello, world",
            "tabs\tand\nnew lines\r\nstay",
            "日本語のテキスト、ünïcödé, emoji 🦀👩‍💻, e\u{301}, ✓ ✗ ⚙ ·",
            "no-break\u{a0}space, right-to-left text עברית العربية",
        ] {
            assert!(matches!(sanitize(s), Cow::Borrowed(_)), "{s:?}");
        }
        assert_eq!(shown("🦀\x1b🦀"), "🦀\\u{1b}🦀");
    }

    #[test]
    fn escape_sequences_lose_their_introducer_and_stay_visible() {
        // CSI: clear the screen, move up, erase the line, colours.
        assert_eq!(
            shown("\x1b[2J\x1b[1A\x1b[2K\x1b[31mred"),
            "\\u{1b}[2J\\u{1b}[1A\\u{1b}[2K\\u{1b}[31mred"
        );
        // OSC: the window title, ended by BEL or by ST.
        assert_eq!(shown("\x1b]0;PWNED\x07"), "\\u{1b}]0;PWNED\\u{7}");
        assert_eq!(
            shown("\x1b]8;;http://evil\x1b\\link"),
            "\\u{1b}]8;;http://evil\\u{1b}\\link"
        );
        // DCS.
        assert_eq!(shown("\x1bP1$r\x1b\\"), "\\u{1b}P1$r\\u{1b}\\");
    }

    #[test]
    fn c0_controls_but_new_line_and_tab_are_shown() {
        for b in (0u8..0x20).filter(|b| !matches!(b, b'\n' | b'\t' | b'\r')) {
            let c = char::from(b);
            assert_eq!(shown(&format!("a{c}b")), format!("a\\u{{{b:x}}}b"));
        }
        assert_eq!(
            shown("bell\x07 back\x08space"),
            "bell\\u{7} back\\u{8}space"
        );
    }

    #[test]
    fn a_lone_carriage_return_is_shown_and_a_crlf_kept() {
        assert_eq!(shown("real\rFAKE"), "real\\u{d}FAKE");
        assert_eq!(shown("line\r\nnext"), "line\r\nnext");
        assert_eq!(shown("a\r\r\nb"), "a\\u{d}\r\nb");
        assert_eq!(shown("end\r"), "end\\u{d}");
        assert_eq!(shown("\r"), "\\u{d}");
    }

    #[test]
    fn del_and_c1_controls_are_shown() {
        assert_eq!(shown("x\x7fy"), "x\\u{7f}y");
        for c in '\u{80}'..='\u{9f}' {
            assert_eq!(shown(&format!("a{c}b")), format!("a\\u{{{:x}}}b", c as u32));
        }
        // U+009B is CSI, U+009D is OSC for a terminal that reads C1.
        assert_eq!(
            shown("\u{9b}2J\u{9d}0;t\u{9c}"),
            "\\u{9b}2J\\u{9d}0;t\\u{9c}"
        );
    }

    #[test]
    fn bidi_overrides_and_isolates_are_shown() {
        for c in ('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}') {
            assert_eq!(shown(&format!("a{c}b")), format!("a\\u{{{:x}}}b", c as u32));
        }
        assert_eq!(shown("invoice\u{202e}fdp.exe"), "invoice\\u{202e}fdp.exe");
        // Their neighbours are ordinary text.
        assert_eq!(
            shown("\u{2029}\u{202f}\u{2065}\u{206a}"),
            "\u{2029}\u{202f}\u{2065}\u{206a}"
        );
    }

    #[test]
    fn sanitized_text_is_left_alone_by_a_second_pass() {
        let once = shown("\x1b]0;PWNED\x07\r\u{9b}\u{202e}");
        assert_eq!(shown(&once), once);
    }

    #[test]
    fn a_crlf_split_between_pieces_stays_a_line_end() {
        let mut p = Pieces::default();
        assert_eq!(p.next("one\r"), "one");
        assert_eq!(p.next("\ntwo"), "\r\ntwo");
        assert_eq!(p.next("\r"), "");
        assert_eq!(p.next("FAKE"), "\\u{d}FAKE");
        assert_eq!(p.next("three\r"), "three");
        assert_eq!(p.finish(), "\\u{d}");
        assert_eq!(p.finish(), "");
        // An escape sequence split between pieces is shown in pieces.
        assert_eq!(p.next("\x1b"), "\\u{1b}");
        assert_eq!(p.next("[2J"), "[2J");
    }

    #[test]
    fn json_keeps_its_data_and_hides_what_a_terminal_acts_on() {
        let value = serde_json::json!({"text": "a\u{7f}b\u{9b}c\u{202e}d\u{1b}e ✓"});
        let text = value.to_string();
        let escaped = json_escape(&text);
        assert!(
            !escaped
                .chars()
                .any(|c| matches!(c, '\u{7f}' | '\u{9b}' | '\u{202e}' | '\u{1b}')),
            "{escaped}"
        );
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back, value);
    }
}
