//! What the HTML that [`crate::format::render`] writes must be, as a
//! check: the tests and the fuzz target (`crate::fuzz::format`) hold every
//! output to it. The subset is the strictest a platform takes (Telegram's
//! parse mode: it rejects a whole message for one tag it does not know or
//! one left open).

const ALLOWED_TAGS: [&str; 12] = [
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
];

/// Why `out` is not valid Telegram HTML (`None` when it is). Valid: only
/// allowed tags (and `blockquote`), closed in order, none inside itself,
/// no code in a link; entities only `&lt;` `&gt;` `&amp;` `&quot;`; no
/// `<` or `>` outside tags.
pub(crate) fn problem(out: &str) -> Option<String> {
    walk(out).err()
}

fn walk(out: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = out;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest
                    .find('>')
                    .ok_or_else(|| format!("unclosed tag in {out:?}"))?;
                let inner = &rest[1..end];
                if inner.contains('<') {
                    return Err(format!("bare < in {out:?}"));
                }
                if let Some(name) = inner.strip_prefix('/') {
                    let open = stack.pop().ok_or_else(|| format!("stray </{name}>"))?;
                    if open != name {
                        return Err(format!("</{name}> closes <{open}> in {out:?}"));
                    }
                } else {
                    let (name, attrs) = inner.split_once(' ').unwrap_or((inner, ""));
                    let attrs_ok = match name {
                        "a" => attrs
                            .strip_prefix("href=\"")
                            .and_then(|a| a.strip_suffix('"'))
                            .is_some_and(|url| !url.contains('"')),
                        "code" => {
                            attrs.is_empty()
                                || (attrs.starts_with("class=\"language-")
                                    && attrs.ends_with('"')
                                    && stack.last().map(String::as_str) == Some("pre"))
                        }
                        "blockquote" => {
                            attrs.is_empty() && !stack.iter().any(|t| t == "blockquote")
                        }
                        _ => attrs.is_empty() && ALLOWED_TAGS.contains(&name),
                    };
                    if !attrs_ok {
                        return Err(format!("tag <{inner}> not allowed in {out:?}"));
                    }
                    check_entities(attrs)?;
                    // Telegram nests no entity in itself, nor code in
                    // a link or a link in code.
                    let clash = stack.iter().any(|open| {
                        open == name
                            || (name == "a" && ["code", "pre"].contains(&open.as_str()))
                            || (open == "a" && ["code", "pre"].contains(&name))
                    });
                    if clash {
                        return Err(format!("<{inner}> nested badly in {out:?}"));
                    }
                    stack.push(name.to_owned());
                }
                rest = &rest[end + 1..];
            }
            '>' => return Err(format!("bare > in {out:?}")),
            _ => {
                let end = rest.find(['<', '>']).unwrap_or(rest.len());
                check_entities(&rest[..end])?;
                rest = &rest[end..];
            }
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("unclosed {stack:?} in {out:?}"))
    }
}

fn check_entities(text: &str) -> Result<(), String> {
    for (i, _) in text.match_indices('&') {
        let tail = &text[i..];
        if !["&lt;", "&gt;", "&amp;", "&quot;"]
            .iter()
            .any(|entity| tail.starts_with(entity))
        {
            return Err(format!("bare & in {text:?}"));
        }
    }
    Ok(())
}
