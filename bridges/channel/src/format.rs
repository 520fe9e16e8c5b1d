//! Rendering a Markdown answer in a platform's format (SPEC §11:
//! "Markdown rendered to the platform's format with a plain-text retry if
//! the platform rejects the formatting").
//!
//! [`render`] parses the Markdown with `pulldown-cmark` (CommonMark plus
//! strikethrough, tables and task lists) and writes the events out itself,
//! per [`Formatting`]:
//!
//! - [`Formatting::Markdown`]: the input as it is (Discord reads Markdown),
//!   except tables, which Discord does not draw: each is put in a code
//!   block as written, so its columns stay aligned in a fixed-width font.
//! - [`Formatting::Html`]: the HTML subset Telegram's `parse_mode = HTML`
//!   accepts, and nothing else:
//!
//!   | Markdown | Telegram HTML |
//!   |---|---|
//!   | `**bold**`, `*italic*`, `~~struck~~` | `<b>`, `<i>`, `<s>` |
//!   | `` `code` `` | `<code>` (escaped text inside a link: Telegram nests no entity in a link but bold/italic/strike) |
//!   | fenced or indented code | `<pre><code class="language-x">` (`<pre>` without a language) |
//!   | `[text](url)` | `<a href="url">text</a>` for `http`, `https`, `tg` and `mailto` URLs; any other URL (relative, `javascript:`, …) or a link inside a link: `text (url)` as text |
//!   | `# heading` | the heading as a bold line |
//!   | lists | one line per item, `• ` or `1. ` (the list's own numbering), an item's other lines and nested lists indented by the width of its marker; task items `[x] `/`[ ] ` |
//!   | `> quote` | `<blockquote>` (a quote inside a quote adds no tag: Telegram nests no blockquote) |
//!   | `---` | a line `———` |
//!   | tables | one line per row, cells joined by ` \| `, the header row bold (no alignment: proportional fonts would break it anyway) |
//!   | `![alt](url)` | `alt (url)` as text |
//!   | raw HTML, inline or block | the HTML as escaped text |
//!   | soft and hard line breaks | a newline |
//!
//!   Blocks are separated by a blank line (list items of a tight list by a
//!   single newline). Telegram's nesting rules are kept: a style already
//!   open is not opened again (`**a **b** c**` is one `<b>`), no code or
//!   link inside a link, no blockquote inside a blockquote. (Bold or
//!   italic around inline code, and code inside a quote, are written as
//!   such: Telegram's documentation is ambiguous there; what it would not
//!   take is what the plain-text retry is for.)
//!
//!   All text is escaped (`&` `<` `>` as entities, and `"` too inside
//!   `href`, where whitespace and control characters are percent-encoded),
//!   so the output is valid whatever the input: unclosed emphasis stays
//!   literal text, every tag written is one of the allowed ones and is
//!   closed, in order.
//!
//!   Raw HTML is never passed through: the answer is model output, which
//!   is untrusted (it may quote a web page or be steered by one), and
//!   Telegram rejects a whole message for one tag it does not know or one
//!   left open. Escaped, `<script>` reads as what it is.
//! - [`Formatting::Plain`]: the same structure with no markup at all — the
//!   text, list prefixes, heading and table lines, code as is (without the
//!   fences), links as `text (url)` (only the URL when it is the text),
//!   quotes as lines prefixed `> `. This is the retry when a platform
//!   rejects the formatted message.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use crate::message::Formatting;

/// Renders `markdown` in `formatting` (see the module documentation).
pub fn render(markdown: &str, formatting: Formatting) -> String {
    let html = match formatting {
        Formatting::Markdown => return tables_as_code(markdown),
        Formatting::Html => true,
        Formatting::Plain => false,
    };
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut renderer = Renderer::new(html);
    for event in Parser::new_ext(markdown, options) {
        renderer.event(event);
    }
    renderer.out
}

/// `markdown` with each table fenced as a code block, verbatim; the rest
/// untouched.
fn tables_as_code(markdown: &str) -> String {
    let tables: Vec<std::ops::Range<usize>> = Parser::new_ext(
        markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
    )
    .into_offset_iter()
    .filter(|(event, _)| matches!(event, Event::Start(Tag::Table(_))))
    .map(|(_, range)| range)
    .collect();
    if tables.is_empty() {
        return markdown.to_owned();
    }
    let mut out = String::with_capacity(markdown.len() + tables.len() * 8);
    let mut at = 0;
    for range in tables {
        out.push_str(&markdown[at..range.start]);
        let table = markdown[range.clone()].trim_end_matches(['\n', '\r']);
        out.push_str("```\n");
        out.push_str(table);
        out.push_str("\n```");
        if markdown[range.clone()].len() > table.len() {
            out.push('\n');
        }
        at = range.end;
    }
    out.push_str(&markdown[at..]);
    out
}

/// Only these URL schemes become `<a href>`; Telegram accepts them and
/// none of them runs code.
const LINK_SCHEMES: [&str; 4] = ["http", "https", "tg", "mailto"];

fn allowed_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once(':') else {
        return false;
    };
    !rest.is_empty()
        && LINK_SCHEMES
            .iter()
            .any(|allowed| scheme.eq_ignore_ascii_case(allowed))
}

/// Escapes text for Telegram HTML; `quote` also escapes `"` (attributes).
fn escape_into(out: &mut String, text: &str, quote: bool) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if quote => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// Escapes a URL for `href`: as an attribute, and with whitespace and
/// control characters percent-encoded (Telegram takes no space in a URL).
fn escape_url_into(out: &mut String, url: &str) {
    for c in url.chars() {
        if c.is_whitespace() || c.is_control() {
            let mut utf8 = [0; 4];
            for byte in c.encode_utf8(&mut utf8).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            escape_into(out, c.encode_utf8(&mut [0; 4]), true);
        }
    }
}

/// A block that prefixes the lines inside it.
enum Container {
    /// A block quote: `> ` per line in plain text, nothing in HTML (the
    /// tag says it).
    Quote,
    /// A list item: its continuation lines are indented by this many
    /// spaces (the width of its marker).
    Item(usize),
}

/// An open link or image.
struct Link {
    /// Where its text starts in the output.
    start: usize,
    url: String,
    /// Written as `<a href>` (HTML, allowed scheme, not inside another).
    tag: bool,
}

struct Renderer {
    html: bool,
    out: String,
    containers: Vec<Container>,
    /// The next number of each open list (`None`: bullets).
    lists: Vec<Option<u64>>,
    links: Vec<Link>,
    /// Newlines owed before the next block (2: a blank line).
    pending: usize,
    /// Nothing written yet in the current container: the next block
    /// starts right here.
    fresh: bool,
    /// The output ends a line: the next content writes the line prefix.
    line_start: bool,
    /// Open block quotes; only the outermost is a tag.
    quotes: usize,
    /// Inside a code block (HTML: whether `<code>` was opened in `<pre>`).
    code: Option<bool>,
    /// A line ended by a code or HTML block's newline, not written yet:
    /// written before more text, dropped at the block's end.
    owed: bool,
    /// Cells written in the current table row.
    cells: usize,
    /// Open `<b>`, `<i>`, `<s>` (headings and table headers count as
    /// bold): a style already open is not opened again.
    styles: [usize; 3],
}

/// The inline styles, as indices into `Renderer::styles`.
#[derive(Clone, Copy)]
enum Style {
    Bold,
    Italic,
    Strike,
}

impl Style {
    fn tags(self) -> (&'static str, &'static str) {
        match self {
            Self::Bold => ("<b>", "</b>"),
            Self::Italic => ("<i>", "</i>"),
            Self::Strike => ("<s>", "</s>"),
        }
    }
}

impl Renderer {
    fn new(html: bool) -> Self {
        Self {
            html,
            out: String::new(),
            containers: Vec::new(),
            lists: Vec::new(),
            links: Vec::new(),
            pending: 0,
            fresh: true,
            line_start: true,
            quotes: 0,
            code: None,
            owed: false,
            cells: 0,
            styles: [0; 3],
        }
    }

    /// Is an `<a>` open (no entity but bold/italic/strike may go inside)?
    fn in_tag_link(&self) -> bool {
        self.links.iter().any(|link| link.tag)
    }

    /// Writes the prefix of the current line if it is not written yet.
    fn prefix(&mut self) {
        if !self.line_start {
            return;
        }
        self.line_start = false;
        for container in &self.containers {
            match container {
                Container::Quote if !self.html => self.out.push_str("> "),
                Container::Quote => {}
                Container::Item(width) => self.out.extend(std::iter::repeat_n(' ', *width)),
            }
        }
    }

    /// Ends the current line.
    fn newline(&mut self) {
        self.out.push('\n');
        self.line_start = true;
    }

    /// Writes markup (HTML only) or literal output, after the line prefix.
    fn raw(&mut self, s: &str) {
        self.prefix();
        self.out.push_str(s);
        self.fresh = false;
    }

    /// Writes markup in HTML mode, nothing in plain mode.
    fn tag(&mut self, s: &str) {
        if self.html {
            self.raw(s);
        }
    }

    /// Opens a style (HTML), unless it is open already.
    fn open(&mut self, style: Style) {
        let depth = &mut self.styles[style as usize];
        *depth += 1;
        if *depth == 1 {
            self.tag(style.tags().0);
        }
    }

    /// Closes a style (HTML) opened by [`Self::open`].
    fn close(&mut self, style: Style) {
        let depth = &mut self.styles[style as usize];
        if *depth == 0 {
            return;
        }
        *depth -= 1;
        if *depth == 0 {
            self.tag(style.tags().1);
        }
    }

    /// Writes text (escaped in HTML), newlines included.
    fn text(&mut self, text: &str) {
        if self.owed {
            self.owed = false;
            self.newline();
        }
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            if line.is_empty() {
                continue;
            }
            self.prefix();
            if self.html {
                escape_into(&mut self.out, line, false);
            } else {
                self.out.push_str(line);
            }
            self.fresh = false;
        }
    }

    /// Writes the text of a code or HTML block, whose lines come with
    /// their newline: the last one is owed, not written.
    fn owing_text(&mut self, text: &str) {
        match text.strip_suffix('\n') {
            Some(line) => {
                self.text(line);
                self.owed = true;
            }
            None => self.text(text),
        }
    }

    /// Starts a block: the newlines owed, at least one, unless nothing was
    /// written in the current container yet.
    fn block(&mut self) {
        self.owed = false;
        if self.fresh {
            self.pending = 0;
            return;
        }
        let mut owed = self.pending.max(1);
        if self.line_start {
            owed -= 1;
        }
        for _ in 0..owed {
            self.newline();
        }
        self.pending = 0;
    }

    /// Ends a block: the next one comes after `newlines` newlines.
    fn end_block(&mut self, newlines: usize) {
        self.pending = self.pending.max(newlines);
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.code.is_some() && self.html => {
                // Inside <pre>: no line prefix, the code as it is.
                escape_into(&mut self.out, &text, false);
            }
            Event::Text(text) if self.code.is_some() => self.owing_text(&text),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let tagged = self.html && !self.in_tag_link();
                if tagged {
                    self.raw("<code>");
                }
                self.text(&code);
                if tagged {
                    self.raw("</code>");
                }
            }
            Event::Html(html) => self.owing_text(&html),
            Event::InlineHtml(html) => self.text(&html),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::FootnoteReference(name) => {
                self.text("[");
                self.text(&name);
                self.text("]");
            }
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.block();
                self.raw("———");
                self.end_block(2);
            }
            Event::TaskListMarker(done) => self.raw(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::Heading { .. } | Tag::HtmlBlock => {
                self.block();
                if matches!(tag, Tag::Heading { .. }) {
                    self.open(Style::Bold);
                }
            }
            Tag::BlockQuote(_) => {
                self.block();
                if self.quotes == 0 {
                    self.tag("<blockquote>");
                }
                self.quotes += 1;
                self.containers.push(Container::Quote);
                self.fresh = true;
            }
            Tag::CodeBlock(kind) => {
                self.block();
                self.code = Some(false);
                if self.html {
                    let language = match &kind {
                        CodeBlockKind::Fenced(info) => {
                            info.split_whitespace().next().unwrap_or("").to_owned()
                        }
                        CodeBlockKind::Indented => String::new(),
                    };
                    if language.is_empty() {
                        self.raw("<pre>");
                    } else {
                        self.raw("<pre><code class=\"language-");
                        escape_into(&mut self.out, &language, true);
                        self.out.push_str("\">");
                    }
                    self.code = Some(!language.is_empty());
                }
            }
            Tag::List(first) => {
                self.block();
                self.lists.push(first);
            }
            Tag::Item => {
                self.block();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n = n.saturating_add(1);
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                self.raw(&marker);
                self.containers
                    .push(Container::Item(marker.chars().count()));
                self.fresh = true;
            }
            Tag::Table(_) => self.block(),
            Tag::TableHead => {
                self.cells = 0;
                self.open(Style::Bold);
            }
            Tag::TableRow => {
                self.newline();
                self.cells = 0;
            }
            Tag::TableCell => {
                if self.cells > 0 {
                    self.raw(" | ");
                }
                self.cells += 1;
            }
            Tag::Emphasis => self.open(Style::Italic),
            Tag::Strong => self.open(Style::Bold),
            Tag::Strikethrough => self.open(Style::Strike),
            Tag::Link { dest_url, .. } => {
                let tag = self.html && !self.in_tag_link() && allowed_url(&dest_url);
                if tag {
                    self.raw("<a href=\"");
                    escape_url_into(&mut self.out, &dest_url);
                    self.out.push_str("\">");
                }
                self.prefix();
                self.links.push(Link {
                    start: self.out.len(),
                    url: dest_url.into_string(),
                    tag,
                });
            }
            Tag::Image { dest_url, .. } => {
                self.prefix();
                self.links.push(Link {
                    start: self.out.len(),
                    url: dest_url.into_string(),
                    tag: false,
                });
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.block(),
            Tag::Superscript | Tag::Subscript => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.end_block(2),
            TagEnd::HtmlBlock => {
                self.owed = false;
                self.end_block(2);
            }
            TagEnd::Heading(_) => {
                self.close(Style::Bold);
                self.end_block(2);
            }
            TagEnd::BlockQuote(_) => {
                self.containers.pop();
                self.quotes = self.quotes.saturating_sub(1);
                if self.quotes == 0 {
                    self.tag("</blockquote>");
                }
                self.end_block(2);
            }
            TagEnd::CodeBlock => {
                let code_tag = self.code.take().unwrap_or(false);
                self.owed = false;
                if self.html {
                    // The code's last newline is not part of the message.
                    if self.out.ends_with('\n') {
                        self.out.pop();
                    }
                    self.line_start = false;
                    self.out
                        .push_str(if code_tag { "</code></pre>" } else { "</pre>" });
                    self.fresh = false;
                }
                self.end_block(2);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                // A nested list ends its item's line, not a paragraph.
                self.end_block(if self.lists.is_empty() { 2 } else { 1 });
            }
            TagEnd::Item => {
                self.containers.pop();
                self.end_block(1);
            }
            TagEnd::Table => self.end_block(2),
            TagEnd::TableHead => self.close(Style::Bold),
            TagEnd::Emphasis => self.close(Style::Italic),
            TagEnd::Strong => self.close(Style::Bold),
            TagEnd::Strikethrough => self.close(Style::Strike),
            TagEnd::Link | TagEnd::Image => {
                let Some(link) = self.links.pop() else {
                    return;
                };
                let text = self.out.get(link.start..).unwrap_or("");
                let mut url = String::new();
                if self.html {
                    escape_into(&mut url, &link.url, false);
                } else {
                    url.push_str(&link.url);
                }
                if link.tag {
                    // A link with no text shows its URL.
                    if text.is_empty() {
                        self.raw(&url);
                    }
                    self.raw("</a>");
                    return;
                }
                let bare = url.strip_prefix("mailto:").unwrap_or(&url);
                if url.is_empty() || text == url || text == bare {
                    return;
                }
                if text.is_empty() {
                    self.raw(&url);
                } else {
                    self.raw(" (");
                    self.raw(&url);
                    self.raw(")");
                }
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.end_block(2),
            TagEnd::TableRow | TagEnd::TableCell | TagEnd::Superscript | TagEnd::Subscript => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn html(md: &str) -> String {
        render(md, Formatting::Html)
    }

    fn plain(md: &str) -> String {
        render(md, Formatting::Plain)
    }

    #[test]
    fn markdown_is_returned_unchanged() {
        let md = "# T\n\n**b** <x> & `c`\n";
        assert_eq!(render(md, Formatting::Markdown), md);
    }

    #[test]
    fn markdown_tables_become_code_blocks_as_written() {
        let md = "Prices:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nThat's all.";
        assert_eq!(
            render(md, Formatting::Markdown),
            "Prices:\n\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n\nThat's all."
        );
        // A table already in a code block is text, not a table.
        let fenced = "```\n| a | b |\n|---|---|\n```\n";
        assert_eq!(render(fenced, Formatting::Markdown), fenced);
    }

    #[test]
    fn inline_styles() {
        let md = "**bold** *italic* _it_ ~~gone~~ `a<b>&c`";
        assert_eq!(
            html(md),
            "<b>bold</b> <i>italic</i> <i>it</i> <s>gone</s> <code>a&lt;b&gt;&amp;c</code>"
        );
        assert_eq!(plain(md), "bold italic it gone a<b>&c");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            html("a < b && c > d \"q\""),
            "a &lt; b &amp;&amp; c &gt; d \"q\""
        );
        assert_eq!(plain("a < b && c > d"), "a < b && c > d");
    }

    #[test]
    fn paragraphs_and_breaks() {
        let md = "one\ntwo  \nthree\n\nfour";
        assert_eq!(html(md), "one\ntwo\nthree\n\nfour");
        assert_eq!(plain(md), "one\ntwo\nthree\n\nfour");
    }

    #[test]
    fn code_blocks() {
        let md = "```rust\nfn main() { a < b }\n\nx\n```\n\n```\nplain\n```\n\n    indented & x\n";
        assert_eq!(
            html(md),
            "<pre><code class=\"language-rust\">fn main() { a &lt; b }\n\nx</code></pre>\n\n\
             <pre>plain</pre>\n\n<pre>indented &amp; x</pre>"
        );
        assert_eq!(
            plain(md),
            "fn main() { a < b }\n\nx\n\nplain\n\nindented & x"
        );
    }

    #[test]
    fn code_language_is_escaped() {
        assert_eq!(
            html("```a\"><b>\nx\n```"),
            "<pre><code class=\"language-a&quot;&gt;&lt;b&gt;\">x</code></pre>"
        );
    }

    #[test]
    fn links() {
        let md = "[site](https://example.com/?a=1&b=\"2\") [me](mailto:a@b.c) \
                  [t](tg://user?id=1) [bad](javascript:alert(1)) [rel](/x) <https://auto.io>";
        assert_eq!(
            html(md),
            "<a href=\"https://example.com/?a=1&amp;b=&quot;2&quot;\">site</a> \
             <a href=\"mailto:a@b.c\">me</a> <a href=\"tg://user?id=1\">t</a> \
             bad (javascript:alert(1)) rel (/x) <a href=\"https://auto.io\">https://auto.io</a>"
        );
        assert_eq!(
            plain(md),
            "site (https://example.com/?a=1&b=\"2\") me (mailto:a@b.c) t (tg://user?id=1) \
             bad (javascript:alert(1)) rel (/x) https://auto.io"
        );
        assert_eq!(plain("<a@b.c>"), "a@b.c");
    }

    #[test]
    fn href_whitespace_is_percent_encoded() {
        assert_eq!(
            html("[a](<https://x.y/a b\u{a0}>)"),
            "<a href=\"https://x.y/a%20b%C2%A0\">a</a>"
        );
    }

    #[test]
    fn code_inside_a_link_is_text_and_images_are_alt_plus_url() {
        assert_eq!(
            html("[`x` **y**](https://a.b)"),
            "<a href=\"https://a.b\">x <b>y</b></a>"
        );
        assert_eq!(
            html("![a cat](https://c.at/x.png) ![](https://c.at/y.png)"),
            "a cat (https://c.at/x.png) https://c.at/y.png"
        );
        assert_eq!(
            html("[![alt](https://i.png)](https://l.ink)"),
            "<a href=\"https://l.ink\">alt (https://i.png)</a>"
        );
        assert_eq!(
            plain("![a cat](https://c.at/x.png)"),
            "a cat (https://c.at/x.png)"
        );
    }

    #[test]
    fn a_style_already_open_is_not_opened_again() {
        assert_eq!(
            html("# **bold** head\n\n**a *b **c** d* e** ***x***"),
            "<b>bold head</b>\n\n<b>a <i>b c d</i> e</b> <i><b>x</b></i>"
        );
    }

    #[test]
    fn empty_links_show_the_url() {
        assert_eq!(
            html("[](https://x.y) [](/rel)"),
            "<a href=\"https://x.y\">https://x.y</a> /rel"
        );
        assert_eq!(plain("[](https://x.y) [](/rel)"), "https://x.y /rel");
    }

    #[test]
    fn headings_are_bold_lines() {
        let md = "# Title\n## Sub *x*\ntext";
        assert_eq!(html(md), "<b>Title</b>\n\n<b>Sub <i>x</i></b>\n\ntext");
        assert_eq!(plain(md), "Title\n\nSub x\n\ntext");
    }

    #[test]
    fn lists() {
        let md = "- a\n- b\n  - c\n  - d\n- e\n\n3. x\n4. y\n";
        let expected = "• a\n• b\n  • c\n  • d\n• e\n\n3. x\n4. y";
        assert_eq!(html(md), expected);
        assert_eq!(plain(md), expected);
        assert_eq!(
            html("- **a**\n- [x] done\n- [ ] todo"),
            "• <b>a</b>\n• [x] done\n• [ ] todo"
        );
    }

    #[test]
    fn loose_lists_and_continuations() {
        let md = "1. first\n   more\n\n   second para\n2. two\n";
        assert_eq!(plain(md), "1. first\n   more\n\n   second para\n\n2. two");
    }

    #[test]
    fn blockquotes() {
        let md = "> quoted **b**\n> more\n>\n> > inner\n\nafter";
        assert_eq!(
            html(md),
            "<blockquote>quoted <b>b</b>\nmore\n\ninner</blockquote>\n\nafter"
        );
        assert_eq!(plain(md), "> quoted b\n> more\n\n> > inner\n\nafter");
    }

    #[test]
    fn rules_and_tables() {
        let md = "a\n\n---\n\n| h1 | h2 |\n|---|:-:|\n| x | *y* |\n| z | |\n";
        assert_eq!(html(md), "a\n\n———\n\n<b>h1 | h2</b>\nx | <i>y</i>\nz | ");
        assert_eq!(plain(md), "a\n\n———\n\nh1 | h2\nx | y\nz | ");
    }

    #[test]
    fn raw_html_is_escaped_never_passed_through() {
        let md =
            "hi <script>alert(1)</script> <b onclick=\"x()\">b</b>\n\n<div>\nblock & co\n</div>\n";
        assert_eq!(
            html(md),
            "hi &lt;script&gt;alert(1)&lt;/script&gt; &lt;b onclick=\"x()\"&gt;b&lt;/b&gt;\n\n\
             &lt;div&gt;\nblock &amp; co\n&lt;/div&gt;"
        );
        assert_eq!(
            plain(md),
            "hi <script>alert(1)</script> <b onclick=\"x()\">b</b>\n\n<div>\nblock & co\n</div>"
        );
    }

    #[test]
    fn unclosed_markup_stays_text() {
        assert_eq!(html("**open *and `tick"), "**open *and `tick");
        assert_eq!(html("```\nnever closed"), "<pre>never closed</pre>");
    }

    fn check_telegram_html(out: &str) -> Result<(), String> {
        crate::html_check::problem(out).map_or(Ok(()), Err)
    }

    #[test]
    fn checker_rejects_bad_html() {
        assert!(check_telegram_html("<b>x</b> &amp; <a href=\"h\">y</a>").is_ok());
        for bad in [
            "<b>x",
            "<b><i>x</b></i>",
            "<b><b>x</b></b>",
            "<a href=\"h\"><code>x</code></a>",
            "<div>x</div>",
            "a & b",
            "a > b",
            "<b onclick=\"x\">y</b>",
        ] {
            assert!(check_telegram_html(bad).is_err(), "{bad}");
        }
    }

    /// The letters of `s` (digits are left out: an ordered list is
    /// renumbered from its first number, `1. 1.` renders `1. 2.`).
    fn letters(s: &str) -> Vec<char> {
        s.chars().filter(|c| c.is_alphabetic()).collect()
    }

    fn is_subsequence(needle: &[char], hay: &[char]) -> bool {
        let mut hay = hay.iter();
        needle.iter().all(|c| hay.any(|h| h == c))
    }

    /// Markdown syntax pieces, raw HTML and URLs.
    const PIECES: [&str; 31] = [
        "<",
        ">",
        "&",
        "*",
        "**",
        "_",
        "`",
        "```",
        "[",
        "]",
        "(",
        ")",
        "~~",
        "!",
        "# ",
        "- ",
        "1. ",
        "> ",
        "|",
        "---",
        "\n",
        "\n\n",
        "    ",
        " ",
        "\"",
        "<b>",
        "</i>",
        "<a href=\"x\">",
        "&amp;",
        "http://h.io",
        "javascript:x",
    ];

    /// Markdown-ish strings: syntax pieces, words, newlines and anything.
    fn markdownish() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                4 => proptest::sample::select(PIECES.to_vec()).prop_map(str::to_owned),
                3 => "[a-z0-9]{1,5}",
                1 => any::<String>(),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    /// Like [`markdownish`], without `&` and `:` (entities and link
    /// reference definitions drop input characters by design).
    fn markdownish_words() -> impl Strategy<Value = String> {
        let pieces: Vec<&str> = PIECES
            .iter()
            .copied()
            .filter(|p| !p.contains(['&', ':']))
            .collect();
        proptest::collection::vec(
            prop_oneof![
                4 => proptest::sample::select(pieces).prop_map(str::to_owned),
                3 => "[a-zA-Z0-9\u{e9}\u{4e2d}]{1,5}",
                1 => "[a-z <>*_`\\[\\]()!#|~\"\n-]{0,8}",
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn html_is_always_valid_for_telegram(md in markdownish()) {
            let out = html(&md);
            prop_assert!(check_telegram_html(&out).is_ok(), "{:?}", check_telegram_html(&out));
        }

        #[test]
        fn html_is_valid_for_arbitrary_strings(md in any::<String>()) {
            let out = html(&md);
            prop_assert!(check_telegram_html(&out).is_ok(), "{:?}", check_telegram_html(&out));
        }

        #[test]
        fn plain_adds_no_markup(md in markdownish()) {
            let out = plain(&md);
            for c in ['<', '&', '*', '`', '_', '[', ']'] {
                prop_assert!(
                    md.contains(c) || !out.contains(c),
                    "{:?} introduced in {:?}", c, out
                );
            }
        }

        #[test]
        fn markdown_without_tables_is_the_identity(md in any::<String>()) {
            prop_assume!(!md.contains('|'));
            prop_assert_eq!(render(&md, Formatting::Markdown), md);
        }

        #[test]
        fn plain_keeps_the_words_in_order(md in markdownish_words()) {
            // What Markdown drops by design: a fenced block's info string
            // and a link's title. Inputs where they could occur are left out.
            let info_string = md.lines().any(|line| {
                ["```", "~~~"].iter().any(|fence| {
                    line.find(fence)
                        .is_some_and(|at| line[at..].chars().any(char::is_alphabetic))
                })
            });
            let title = md.contains("](") && (md.contains(" (") || md.contains("\n(")
                || md.contains(" \"") || md.contains("\n\"") || md.contains("\t"));
            // And a table's cells beyond its header's count (GFM drops
            // them: `|a\n|-\n|b|c` has no `c`); inputs with a delimiter
            // row are left out.
            let table = md.lines().any(|line| {
                let line = line.trim();
                line.contains('-') && line.chars().all(|c| "|-: \t".contains(c))
            });
            prop_assume!(!info_string && !title && !table);
            let out = plain(&md);
            prop_assert!(is_subsequence(&letters(&md), &letters(&out)), "{:?}", out);
        }
    }
}
