//! Low-level scanning of tag-like markup in model text: opening tags with
//! attributes, closing tags, code fences. Everything works on byte offsets
//! that are always char boundaries (tags are ASCII), and nothing here can
//! panic on any input.

/// An opening tag found at some offset: `<name attr="v" …>` or `<name …/>`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenTag<'a> {
    pub name: &'a str,
    pub attrs: Vec<(&'a str, String)>,
    /// Offset just past the `>`.
    pub end: usize,
    pub self_closing: bool,
}

/// Characters allowed in a tag name: enough for tool and parameter names
/// such as `math.factorial`, `mcp__time__now`, `get-weather` or `año`.
pub fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
}

/// Parses an opening tag starting at `at` (which holds `<`). `None` when
/// the text there is not a complete opening tag (a closing tag, prose such
/// as `a < b`, or a tag cut off by the end of the text).
pub fn open_tag(text: &str, at: usize) -> Option<OpenTag<'_>> {
    let rest = text.get(at..)?;
    let after = rest.strip_prefix('<')?;
    let name_len = after
        .char_indices()
        .find(|(_, c)| !is_name_char(*c))
        .map(|(i, _)| i)
        .unwrap_or(after.len());
    if name_len == 0 {
        return None;
    }
    let name = &after[..name_len];
    let mut pos = at + 1 + name_len;
    let mut attrs = Vec::new();
    loop {
        let tail = text.get(pos..)?;
        let trimmed = tail.trim_start();
        pos += tail.len() - trimmed.len();
        if let Some(t) = trimmed.strip_prefix("/>") {
            let _ = t;
            return Some(OpenTag {
                name,
                attrs,
                end: pos + 2,
                self_closing: true,
            });
        }
        if trimmed.starts_with('>') {
            return Some(OpenTag {
                name,
                attrs,
                end: pos + 1,
                self_closing: false,
            });
        }
        // An attribute must directly follow whitespace.
        if pos == at + 1 + name_len || !text[..pos].ends_with(char::is_whitespace) {
            return None;
        }
        let key_len = trimmed
            .char_indices()
            .find(|(_, c)| !is_name_char(*c))
            .map(|(i, _)| i)?;
        if key_len == 0 {
            return None;
        }
        let key = &trimmed[..key_len];
        pos += key_len;
        let tail = text.get(pos..)?;
        let trimmed = tail.trim_start().strip_prefix('=')?.trim_start();
        pos += tail.len() - trimmed.len();
        let quote = trimmed.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let body = &trimmed[1..];
        let close = body.find(quote)?;
        attrs.push((key, unescape(&body[..close])));
        pos += 1 + close + 1;
    }
}

/// Finds `</name>` (whitespace allowed before `>`) at or after `from`;
/// returns (start of the closing tag, offset just past it).
pub fn close_tag(text: &str, name: &str, from: usize) -> Option<(usize, usize)> {
    let mut search = from;
    while let Some(rel) = text.get(search..)?.find("</") {
        let start = search + rel;
        let after = &text[start + 2..];
        if let Some(rest) = after.strip_prefix(name) {
            let trimmed = rest.trim_start();
            if trimmed.starts_with('>') {
                let end = start + 2 + name.len() + (rest.len() - trimmed.len()) + 1;
                return Some((start, end));
            }
        }
        search = start + 2;
    }
    None
}

/// The five XML entities, decoded (attribute values use them for quotes).
pub fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Escapes a value for an attribute.
pub fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

/// Removes one surrounding Markdown code fence (```json … ```), if any,
/// and surrounding whitespace.
pub fn strip_fence(s: &str) -> &str {
    let t = s.trim();
    let Some(inner) = t.strip_prefix("```") else {
        return t;
    };
    // Skip the info string (json, xml, …) up to the end of the line.
    let inner = match inner.find('\n') {
        Some(nl) if inner[..nl].chars().all(|c| c.is_ascii_alphanumeric()) => &inner[nl + 1..],
        _ => inner,
    };
    inner.trim_end().strip_suffix("```").unwrap_or(inner).trim()
}

/// Whether the text ends with a proper prefix of `<tag` (a tag cut off by
/// the end of a stream), for one of `names`.
pub fn ends_with_partial_tag(text: &str, names: &[&str]) -> bool {
    let Some(lt) = text.rfind('<') else {
        return false;
    };
    let tail = &text[lt + 1..];
    if tail.is_empty() {
        return false;
    }
    let name_part = tail.trim_start_matches('/');
    names.iter().any(|n| {
        (n.starts_with(name_part) && name_part.len() < n.len())
            || (name_part.starts_with(n) && !name_part.contains('>'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_tags_with_attributes() {
        let t = r#"x <read path="a &quot;b&quot;.txt" limit='3'> y"#;
        let tag = open_tag(t, 2).unwrap();
        assert_eq!(tag.name, "read");
        assert_eq!(
            tag.attrs,
            vec![
                ("path", "a \"b\".txt".to_string()),
                ("limit", "3".to_string())
            ]
        );
        assert_eq!(&t[tag.end..], " y");
        assert!(!tag.self_closing);
        let tag = open_tag("<ls />", 0).unwrap();
        assert!(tag.self_closing);
        assert_eq!(tag.end, 6);
    }

    #[test]
    fn non_tags_are_not_tags() {
        for t in [
            "a < b",
            "<",
            "<read",
            "<read path=\"x",
            "</read>",
            "<read path>",
            "<a\"b>",
        ] {
            let at = t.find('<').unwrap();
            assert_eq!(open_tag(t, at), None, "{t}");
        }
    }

    #[test]
    fn closing_tags() {
        let t = "<a>x</ab></a >";
        assert_eq!(close_tag(t, "a", 3), Some((9, 14)));
        assert_eq!(close_tag(t, "b", 0), None);
    }

    #[test]
    fn fences() {
        assert_eq!(strip_fence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(strip_fence("  {\"a\":1} "), "{\"a\":1}");
        assert_eq!(strip_fence("```{\"a\":1}```"), "{\"a\":1}");
        assert_eq!(strip_fence("```json\n{\"a\":1}"), "{\"a\":1}");
    }

    #[test]
    fn partial_tags_at_the_end() {
        assert!(ends_with_partial_tag("text <tool_ca", &["tool_call"]));
        assert!(ends_with_partial_tag("text <tool_call", &["tool_call"]));
        assert!(!ends_with_partial_tag("a < b", &["tool_call"]));
        assert!(!ends_with_partial_tag("done", &["tool_call"]));
    }
}
