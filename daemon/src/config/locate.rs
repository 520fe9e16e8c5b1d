//! Locating problems: a TOML error or a bad value becomes a [`ConfigError`]
//! naming the file, line, column and dotted key, with the nearest valid key
//! when a key is unknown. Every other loader reports through [`Locator`].

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A configuration problem, located in the file where possible.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read the config file: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Box<Problem>),
}

/// Where and why the config is invalid.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    /// Dotted key, e.g. `agents.main.model`.
    pub key: Option<String>,
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path.display(), self.line, self.column)?;
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        f.write_str(&self.reason)
    }
}

impl ConfigError {
    /// The located problem, if the file was readable.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Invalid(p) => Some(p),
            Self::Read { .. } => None,
        }
    }
}

pub fn problem_from_toml(path: &Path, text: &str, span: Range<usize>, message: &str) -> Problem {
    let (line, column) = line_col(text, span.start);
    let mut key = key_path_at(text, span.start);
    let mut reason = in_words(message.trim());
    if let Some(field) = between(message, "unknown field `", "`") {
        let expected = expected_names(message);
        // On a header line the unknown name is the segment under the
        // offset, which need not be the header's last one
        // (`[channels.discord]` is an unknown `channels`).
        key = Some(match header_key_upto(text, span.start) {
            Some(k) if k.rsplit('.').next() == Some(field) => k,
            _ => replace_last_segment(key, field),
        });
        reason = format!("unknown key `{field}`");
        match nearest(field, &expected) {
            Some(best) => reason.push_str(&format!(" (did you mean `{best}`?)")),
            None if !expected.is_empty() => {
                reason.push_str(&format!("; valid keys here: {}", expected.join(", ")))
            }
            None => {}
        }
    } else if let Some(field) = between(message, "missing field `", "`") {
        reason = format!("missing required key `{field}` in this table");
        key = key_path_at_header(text, span.start).map(|t| format!("{t}.{field}"));
    }
    Problem {
        path: path.to_path_buf(),
        line,
        column,
        key,
        reason,
    }
}

/// serde's type names in a wrong-type message said as a person would
/// (`expected u32` → `expected a whole number from 0 to 4294967295`); any
/// other message is kept as it is.
pub(super) fn in_words(message: &str) -> String {
    if message == "wanted string or table" {
        // An enum's value (`kind = 3`).
        return "expected one of this key's names, as text in quotes".into();
    }
    let Some((found, expected)) = message.split_once(", expected ") else {
        return message.to_string();
    };
    let (out_of_range, found) = if let Some(f) = found.strip_prefix("invalid type: ") {
        (false, f)
    } else if let Some(f) = found.strip_prefix("invalid value: ") {
        (true, f)
    } else {
        return message.to_string();
    };
    let Some(expected) = expected_in_words(expected, out_of_range) else {
        return message.to_string();
    };
    let found = if out_of_range {
        // The value is of the right kind, only too large or small.
        found
            .split_once(' ')
            .map_or(found, |(_, v)| v)
            .trim_matches('`')
            .to_string()
    } else {
        found_in_words(found)
    };
    format!("expected {expected}, not {found}")
}

/// A serde "expected" as words; `None` for one we do not know.
fn expected_in_words(expected: &str, out_of_range: bool) -> Option<String> {
    let whole = |range: String| {
        if out_of_range {
            format!("a whole number {range}")
        } else {
            "a whole number".to_string()
        }
    };
    Some(match expected {
        "u8" => whole(format!("from 0 to {}", u8::MAX)),
        "u16" => whole(format!("from 0 to {}", u16::MAX)),
        "u32" => whole(format!("from 0 to {}", u32::MAX)),
        "u64" | "usize" => whole("of 0 or more".into()),
        "i8" => whole(format!("from {} to {}", i8::MIN, i8::MAX)),
        "i16" => whole(format!("from {} to {}", i16::MIN, i16::MAX)),
        "i32" => whole(format!("from {} to {}", i32::MIN, i32::MAX)),
        "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a string" | "a borrowed string" | "a character" => "text in quotes".into(),
        "a sequence" => "a list, such as [\"a\", \"b\"]".into(),
        "a map" => "a table".into(),
        e if e.starts_with("struct ") => "a table".into(),
        _ => return None,
    })
}

/// The value serde found, as words: `string "x"` is the text "x",
/// `integer `3`` the whole number 3.
fn found_in_words(found: &str) -> String {
    let value = |f: &str| f.trim().trim_matches('`').to_string();
    if let Some(v) = found.strip_prefix("string ") {
        format!("the text {}", v.trim())
    } else if let Some(v) = found.strip_prefix("integer ") {
        format!("the whole number {}", value(v))
    } else if let Some(v) = found.strip_prefix("floating point ") {
        format!("the number {}", value(v))
    } else if let Some(v) = found.strip_prefix("boolean ") {
        value(v)
    } else {
        match found {
            "sequence" => "a list".into(),
            "map" => "a table".into(),
            other => other.to_string(),
        }
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

/// The backquoted names after "expected" in a serde message.
fn expected_names(message: &str) -> Vec<String> {
    let Some(at) = message.find("expected") else {
        return Vec::new();
    };
    message[at..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The candidate closest to `word` (a misspelt key or name), if one is
/// close enough to be what was meant.
pub fn nearest(word: &str, candidates: &[String]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.clone())
}

fn replace_last_segment(path: Option<String>, field: &str) -> String {
    match path {
        Some(p) => match p.rsplit_once('.') {
            Some((table, _)) => format!("{table}.{field}"),
            None => field.to_string(),
        },
        None => field.to_string(),
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// One segment of a dotted key as written (`agents`, `"bob's"`), its
/// quotes taken off, and where it is in the text parsed.
struct Segment {
    name: String,
    at: Range<usize>,
}

/// The dotted key at the start of `s` (after blanks), up to what ends it
/// outside quotes: `]`, `=`, a `#` comment or the line's end. Quotes are
/// part of the syntax, not of the name (`"bob's"` is `bob's`), and a
/// comment after an unclosed header is no part of the key.
fn dotted_key(s: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut name = String::new();
    let mut from = None;
    let mut chars = s.char_indices().peekable();
    let mut push = |name: &mut String, from: &mut Option<usize>, to: usize| {
        if let Some(start) = from.take() {
            out.push(Segment {
                name: std::mem::take(name).trim().to_string(),
                at: start..to,
            });
        }
    };
    while let Some((i, c)) = chars.next() {
        match c {
            ']' | '=' | '#' | '\n' => {
                push(&mut name, &mut from, i);
                return out;
            }
            '.' => push(&mut name, &mut from, i),
            '"' | '\'' => {
                from.get_or_insert(i);
                let mut end = s.len();
                while let Some((j, q)) = chars.next() {
                    if q == c {
                        end = j + 1;
                        break;
                    }
                    if q == '\\' && c == '"' {
                        if let Some((_, escaped)) = chars.next() {
                            name.push(escaped);
                        }
                        continue;
                    }
                    name.push(q);
                }
                if end == s.len() {
                    push(&mut name, &mut from, end);
                    return out;
                }
            }
            c if c.is_whitespace() => {
                if from.is_some() {
                    name.push(c);
                }
            }
            c => {
                from.get_or_insert(i);
                name.push(c);
            }
        }
    }
    push(&mut name, &mut from, s.len());
    out
}

fn joined(segments: &[Segment]) -> String {
    segments
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

/// Where a table header's key starts on `line` (after `[` or `[[`), if
/// the line is a header.
fn header_start(line: &str) -> Option<usize> {
    let open = line.find('[')?;
    if !line[..open].trim().is_empty() {
        return None;
    }
    Some(open + line[open..].find(|c| c != '[')?)
}

/// The table header (`agents.main`) that governs the line holding `offset`.
fn key_path_at_header(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    // The line holding the offset may itself be the header.
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let upto = text.get(..line_end)?;
    upto.lines().rev().find_map(|l| {
        let inner = header_start(l)?;
        Some(joined(&dotted_key(&l[inner..])))
    })
}

/// On a table header line, the header's dotted key up to the end of the
/// segment holding `offset` (`[a.b.c]` with `offset` on `b`: `a.b`).
fn header_key_upto(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let inner = header_start(line)?;
    let at = (offset - line_start).checked_sub(inner)?;
    let segments: Vec<Segment> = dotted_key(&line[inner..])
        .into_iter()
        .filter(|s| s.at.start <= at)
        .collect();
    (!segments.is_empty()).then(|| joined(&segments))
}

/// The dotted key at `offset`: the governing header plus the key written on
/// that line, when the line is `key = value`.
fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let key = match dotted_key(line) {
        segments if header_start(line).is_none() && !segments.is_empty() => {
            // Only a key that an `=` ends: a line of an array is no key.
            let end = segments.last().map_or(0, |s| s.at.end);
            line[end..]
                .trim_start()
                .starts_with('=')
                .then(|| joined(&segments))
        }
        _ => None,
    };
    let table = key_path_at_header(text, offset);
    match (table, key) {
        (Some(t), Some(k)) => Some(format!("{t}.{k}")),
        (None, Some(k)) => Some(k),
        (Some(t), None) => Some(t),
        (None, None) => None,
    }
}

pub(super) struct Locator<'a> {
    pub(super) path: Option<&'a Path>,
    pub(super) text: &'a str,
}

impl Locator<'_> {
    pub(super) fn at(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid(Box::new(self.problem(span, reason)))
    }

    /// The located problem itself (also a place for a warning).
    pub(super) fn problem(&self, span: Range<usize>, reason: impl Into<String>) -> Problem {
        let (line, column) = line_col(self.text, span.start);
        Problem {
            path: self
                .path
                .map_or_else(|| PathBuf::from("<default config>"), Path::to_path_buf),
            line,
            column,
            key: key_path_at(self.text, span.start),
            reason: reason.into(),
        }
    }
}

pub(super) fn header_span(text: &str, header: &str) -> Range<usize> {
    let needle = format!("[{header}]");
    text.find(&needle).map_or(0..0, |i| i..i + needle.len())
}

pub(super) fn join_keys<V>(map: &BTreeMap<String, V>) -> String {
    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
    if keys.is_empty() {
        "none".into()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("数据\nx", 7), (2, 1));
        assert_eq!(line_col("", 10), (1, 1));
    }
}
