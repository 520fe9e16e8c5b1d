//! One line of pincerd's log file as `pincer logs` shows it. pincerd writes
//! one JSON object a line (`daemon/src/logging.rs`: `timestamp`, `level`,
//! `target`, `fields` with the `message`, `spans`); [`LogLine::parse`]
//! reads it into its fields, and also reads a line of the text format an
//! older pincerd wrote (`TIME LEVEL target: message`) as far as it goes.
//! Anything else (a line appended by hand) is a message of its own.
//!
//! For people a line reads as the text format did: time, level, spans,
//! target, message, then the fields as `key=value`. For `--json` it is one
//! object: `time`, `level`, `target`, `message`, `fields` (the event's
//! other fields, their JSON types kept) and `spans` (outermost first, each
//! with its `name` and fields).

use serde_json::{Map, Value, json};

/// The fields of one log line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// RFC 3339 (empty for a line that has none).
    pub time: String,
    /// TRACE, DEBUG, INFO, WARN, ERROR (empty when unknown).
    pub level: String,
    /// The module that logged it (empty when unknown).
    pub target: String,
    pub message: String,
    /// The event's fields but the message.
    pub fields: Map<String, Value>,
    pub spans: Vec<Value>,
}

const LEVELS: &[&str] = &["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];

impl LogLine {
    pub fn parse(line: &str) -> LogLine {
        Self::from_json(line)
            .or_else(|| Self::from_text(line))
            .unwrap_or_else(|| LogLine {
                time: String::new(),
                level: String::new(),
                target: String::new(),
                message: line.to_string(),
                fields: Map::new(),
                spans: Vec::new(),
            })
    }

    /// A line of the JSON format.
    fn from_json(line: &str) -> Option<LogLine> {
        let Value::Object(mut v) = serde_json::from_str(line).ok()? else {
            return None;
        };
        let text = |v: &mut Map<String, Value>, key: &str| match v.remove(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let time = text(&mut v, "timestamp")?;
        let level = text(&mut v, "level")?;
        let target = text(&mut v, "target").unwrap_or_default();
        let mut fields = match v.remove("fields") {
            Some(Value::Object(f)) => f,
            _ => Map::new(),
        };
        let message = match fields.remove("message") {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let spans = match v.remove("spans") {
            Some(Value::Array(s)) => s,
            _ => Vec::new(),
        };
        Some(LogLine {
            time,
            level,
            target,
            message,
            fields,
            spans,
        })
    }

    /// A line of the text format: `TIME LEVEL [spans: ]target: message`;
    /// its fields stay in the message (the text cannot tell them apart).
    fn from_text(line: &str) -> Option<LogLine> {
        let mut words = line.split_whitespace();
        let time = words.next()?;
        let level = words.next()?;
        if !LEVELS.contains(&level) || chrono::DateTime::parse_from_rfc3339(time).is_err() {
            return None;
        }
        let rest = line[line.find(level)? + level.len()..].trim_start();
        // The target is the last `a::b: ` before the message (spans, when
        // any, come first and end in `}: ` or a name).
        let (target, message) = rest
            .split_once(": ")
            .filter(|(t, _)| {
                !t.is_empty()
                    && t.split("::").all(|p| {
                        !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                    })
            })
            .unwrap_or(("", rest));
        Some(LogLine {
            time: time.to_string(),
            level: level.to_string(),
            target: target.to_string(),
            message: message.to_string(),
            fields: Map::new(),
            spans: Vec::new(),
        })
    }

    /// The line for `--json`.
    pub fn to_json(&self) -> Value {
        json!({
            "time": self.time,
            "level": self.level,
            "target": self.target,
            "message": self.message,
            "fields": self.fields,
            "spans": self.spans,
        })
    }

    /// The line for people, as the text format writes it.
    pub fn to_text(&self) -> String {
        if self.level.is_empty() {
            return self.message.clone();
        }
        let mut out = format!("{} {:>5} ", self.time, self.level);
        for span in &self.spans {
            let name = span.get("name").and_then(Value::as_str).unwrap_or("span");
            out.push_str(name);
            if let Value::Object(fields) = span {
                let fields: Vec<String> = fields
                    .iter()
                    .filter(|(k, _)| *k != "name")
                    .map(|(k, v)| format!("{k}={}", shown(v)))
                    .collect();
                if !fields.is_empty() {
                    out.push_str(&format!("{{{}}}", fields.join(" ")));
                }
            }
            out.push(':');
        }
        if !self.spans.is_empty() {
            out.push(' ');
        }
        if !self.target.is_empty() {
            out.push_str(&self.target);
            out.push_str(": ");
        }
        out.push_str(&self.message);
        for (k, v) in &self.fields {
            out.push_str(&format!(" {k}={}", shown(v)));
        }
        out
    }
}

/// A field's value as the text format shows it: a string as it is,
/// anything else as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_line_becomes_fields_and_reads_as_text() {
        let line = r#"{"timestamp":"2026-11-20T10:11:12.345678Z","level":"WARN","fields":{"message":"turn failed","session":"agent:main:main","code":"provider","calls":3},"target":"pincer_daemon::agent::turn","spans":[{"name":"turn","id":7}]}"#;
        let l = LogLine::parse(line);
        assert_eq!(
            l.to_json(),
            json!({
                "time": "2026-11-20T10:11:12.345678Z",
                "level": "WARN",
                "target": "pincer_daemon::agent::turn",
                "message": "turn failed",
                "fields": {"session": "agent:main:main", "code": "provider", "calls": 3},
                "spans": [{"name": "turn", "id": 7}],
            })
        );
        let text = l.to_text();
        assert!(
            text.starts_with(
                "2026-11-20T10:11:12.345678Z  WARN turn{id=7}: pincer_daemon::agent::turn: turn failed "
            ),
            "{text}"
        );
        // In the order the JSON map keeps them.
        for field in [" session=agent:main:main", " code=provider", " calls=3"] {
            assert!(text.contains(field), "{text}");
        }
    }

    #[test]
    fn an_older_text_line_keeps_its_time_level_and_target() {
        let line = "2026-11-20T10:11:12.345678Z  INFO pincer_daemon::daemon: config reloaded (SIGHUP) agents=2";
        let l = LogLine::parse(line);
        assert_eq!(l.time, "2026-11-20T10:11:12.345678Z");
        assert_eq!(l.level, "INFO");
        assert_eq!(l.target, "pincer_daemon::daemon");
        assert_eq!(l.message, "config reloaded (SIGHUP) agents=2");
        assert_eq!(l.to_text(), line);
    }

    #[test]
    fn anything_else_is_a_message_of_its_own() {
        for line in [
            "appended by hand",
            "INFO tool said something",
            r#"{"not": "a log line"}"#,
            "",
        ] {
            let l = LogLine::parse(line);
            assert_eq!(l.message, line);
            assert_eq!((l.level.as_str(), l.time.as_str()), ("", ""));
            assert_eq!(l.to_text(), line);
            assert_eq!(l.to_json()["message"], line);
        }
    }
}
