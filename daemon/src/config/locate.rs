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

pub(super) fn problem_from_toml(
    path: &Path,
    text: &str,
    span: Range<usize>,
    message: &str,
) -> Problem {
    let (line, column) = line_col(text, span.start);
    let mut key = key_path_at(text, span.start);
    let mut reason = message.trim().to_string();
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
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The table header (`agents.main`) that governs the line holding `offset`.
fn key_path_at_header(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let before = text.get(..offset)?;
    // The line holding the offset may itself be the header.
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let upto = text.get(..line_end).unwrap_or(before);
    upto.lines().rev().find_map(|l| {
        let l = l.trim();
        let inner = l
            .strip_prefix("[[")
            .and_then(|r| r.split("]]").next())
            .or_else(|| l.strip_prefix('[').and_then(|r| r.split(']').next()))?;
        Some(inner.trim().replace(['"', '\''], ""))
    })
}

/// On a table header line, the header's dotted key up to the end of the
/// segment holding `offset` (`[a.b.c]` with `offset` on `b`: `a.b`).
fn header_key_upto(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let open = line.find('[')?;
    if !line[..open].trim().is_empty() {
        return None;
    }
    let inner = open + line[open..].find(|c| c != '[')?;
    let at = offset - line_start;
    if at < inner {
        return None;
    }
    let end = line[at..].find(['.', ']']).map_or(line.len(), |i| at + i);
    let key: Vec<String> = line[inner..end]
        .split('.')
        .map(|s| s.trim().replace(['"', '\''], ""))
        .collect();
    Some(key.join("."))
}

/// The dotted key at `offset`: the governing header plus the key written on
/// that line, when the line is `key = value`.
fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().replace(['"', '\''], ""))
        .filter(|k| !k.is_empty() && !k.starts_with('['));
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
        let (line, column) = line_col(self.text, span.start);
        ConfigError::Invalid(Box::new(Problem {
            path: self
                .path
                .map_or_else(|| PathBuf::from("<default config>"), Path::to_path_buf),
            line,
            column,
            key: key_path_at(self.text, span.start),
            reason: reason.into(),
        }))
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
