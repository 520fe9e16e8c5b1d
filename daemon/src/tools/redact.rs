//! Secret redaction (SPEC §8.4): tool results, before the model or the
//! transcript sees them, and a call's arguments, before the audit table
//! keeps them, lose the values of secret environment variables and
//! provider keys, and anything shaped like a well-known API key.

use std::sync::LazyLock;

use regex::Regex;

/// Replaces every secret.
pub const MASK: &str = "[REDACTED]";

/// Shorter values are not treated as secrets (they would mask ordinary
/// words).
const MIN_SECRET_LEN: usize = 8;

static KEY_SHAPED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}",
        r"|gh[pousr]_[A-Za-z0-9]{36,}",
        r"|github_pat_[A-Za-z0-9_]{22,}",
        r"|xox[abprs]-[A-Za-z0-9\-]{10,}",
        r"|AKIA[0-9A-Z]{16}",
        r"|AIza[0-9A-Za-z_\-]{35}",
        r"|\b[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}\b",
    ))
    .ok()
});

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Literal secret values, longest first (so a value containing another
    /// is masked whole).
    values: Vec<String>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// The values of these environment variables, where set.
    pub fn from_env(names: &[String], extra: impl IntoIterator<Item = String>) -> Self {
        Self::new(
            names
                .iter()
                .filter_map(|n| std::env::var(n).ok())
                .chain(extra),
        )
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        match KEY_SHAPED.as_ref() {
            Some(re) if re.is_match(&out) => re.replace_all(&out, MASK).into_owned(),
            _ => out,
        }
    }
}

impl Redactor {
    /// A call's arguments with every secret masked: in JSON, each string
    /// value on its own (a secret with a quote or a backslash is written
    /// escaped, and would not match in the text), then written compact;
    /// anything else as text.
    pub fn redact_arguments(&self, raw: &str) -> String {
        let Ok(mut value) = serde_json::from_str::<serde_json::Value>(raw) else {
            return self.redact(raw);
        };
        self.redact_strings(&mut value);
        value.to_string()
    }

    fn redact_strings(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.redact(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_strings(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_strings(v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_lose_their_secrets_in_json_and_in_text() {
        let r = Redactor::new(["pass\"word-123".to_string()]);
        let raw = serde_json::json!({
            "command": "curl -H 'x: pass\"word-123' -d sk-proj-abcdefghijklmnopqrstuvwx",
            "env": ["pass\"word-123"],
            "n": 3,
        })
        .to_string();
        let out = r.redact_arguments(&raw);
        assert!(
            !out.contains("word-123") && !out.contains("sk-proj"),
            "{out}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["command"], "curl -H 'x: [REDACTED]' -d [REDACTED]");
        assert_eq!(v["env"][0], "[REDACTED]");
        assert_eq!(v["n"], 3);
        assert_eq!(
            r.redact_arguments("{not json pass\"word-123"),
            "{not json [REDACTED]"
        );
    }

    #[test]
    fn values_and_key_shapes_are_masked() {
        let r = Redactor::new(["hunter2-very-secret".to_string(), "short".to_string()]);
        let text = "pw=hunter2-very-secret key=sk-proj-abcdefghijklmnopqrstuvwx aws=AKIAABCDEFGHIJKLMNOP short stays";
        let out = r.redact(text);
        assert_eq!(
            out,
            "pw=[REDACTED] key=[REDACTED] aws=[REDACTED] short stays"
        );
        let bot = "token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 end";
        assert_eq!(r.redact(bot), "token [REDACTED] end");
        assert_eq!(r.redact("nothing here"), "nothing here");
    }
}
