//! Small helpers shared across modules: time stamps (and how a chat shows
//! one: [`moment`]), text capping, and reading a file that must be a
//! regular one.

/// The current time as RFC 3339 (UTC).
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| String::from("1970-01-01T00:00:00Z"))
}

/// A stored RFC 3339 time stamp as a person reads it in a chat: how long
/// before `now` it was, and the time on the clock of `now`'s time zone (the
/// daemon's local time; tests pass a fixed one): `just now (14:03)`,
/// `5 min ago (14:03)`, `3 h ago (11:02)`, `2 days ago (3 Jun 14:03)`,
/// the year added when it is not `now`'s. A stamp that does not parse is
/// shown as it is. The one place chats format a past moment.
pub fn moment<Tz: chrono::TimeZone>(rfc3339: &str, now: &chrono::DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    use chrono::Datelike;
    let Ok(then) = chrono::DateTime::parse_from_rfc3339(rfc3339.trim()) else {
        return rfc3339.to_string();
    };
    let then = then.with_timezone(&now.timezone());
    let secs = now
        .clone()
        .signed_duration_since(then.clone())
        .num_seconds();
    let clock = then.format("%H:%M").to_string();
    let date = if then.year() == now.year() {
        then.format("%-d %b %H:%M").to_string()
    } else {
        then.format("%-d %b %Y %H:%M").to_string()
    };
    match secs {
        ..0 => format!("at {date}"),
        0..60 => format!("just now ({clock})"),
        60..3_600 => format!("{} min ago ({clock})", secs / 60),
        3_600..86_400 => format!("{} h ago ({clock})", secs / 3_600),
        86_400..172_800 => format!("yesterday ({date})"),
        _ => format!("{} days ago ({date})", secs / 86_400),
    }
}

/// Caps `text` at about `max_chars` characters by keeping the head and the
/// tail (2:1) around a marker that says how much was left out.
pub fn cap_head_tail(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_chars = max_chars * 2 / 3;
    let tail_chars = max_chars - head_chars;
    let omitted = total - head_chars - tail_chars;
    let head: String = text.chars().take(head_chars).collect();
    let tail: String = text.chars().skip(total - tail_chars).collect();
    format!("{head}\n[… {omitted} characters omitted …]\n{tail}")
}

/// Caps every string in `value` (keys excepted) longer than `max_chars`
/// with [`cap_head_tail`]; returns how many characters were left out.
pub fn cap_json_strings(value: &mut serde_json::Value, max_chars: usize) -> u64 {
    use serde_json::Value;
    match value {
        Value::String(s) if s.len() > max_chars => {
            let total = s.chars().count();
            if total <= max_chars {
                return 0;
            }
            *s = cap_head_tail(s, max_chars);
            (total - max_chars) as u64
        }
        Value::Array(items) => items
            .iter_mut()
            .map(|v| cap_json_strings(v, max_chars))
            .sum(),
        Value::Object(map) => map
            .values_mut()
            .map(|v| cap_json_strings(v, max_chars))
            .sum(),
        _ => 0,
    }
}

/// The first `max_chars` characters, with `…` when cut (for display).
pub fn preview(text: &str, max_chars: usize) -> String {
    let mut out: String = text.chars().take(max_chars).collect();
    if text.chars().nth(max_chars).is_some() {
        out.push('…');
    }
    out
}

/// Opens `path` for reading so that nothing can block or redirect the
/// open: `O_NONBLOCK` (a FIFO returns at once), `O_NOFOLLOW` (a symlink in
/// the last part is refused with ELOOP), `O_NOCTTY`. The caller checks
/// the descriptor's type.
pub fn open_without_blocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
}

/// The bytes of the regular file at `path`, at most `max_bytes` of them.
/// Opened without blocking and checked on the descriptor, so a FIFO or
/// device put where a file was expected (even between a check and the
/// read) is refused at once instead of blocking the caller.
pub fn read_regular(path: &std::path::Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_without_blocking(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_reads_as_how_long_ago_and_the_local_clock() {
        use chrono::TimeZone;
        let zone = chrono::FixedOffset::east_opt(2 * 3600).unwrap();
        let now = zone.with_ymd_and_hms(2026, 6, 5, 14, 30, 0).unwrap();
        let cases = [
            ("2026-06-05T12:29:40Z", "just now (14:29)"),
            ("2026-06-05T12:25:00Z", "5 min ago (14:25)"),
            ("2026-06-05T09:02:00+00:00", "3 h ago (11:02)"),
            ("2026-06-04T10:00:00Z", "yesterday (4 Jun 12:00)"),
            ("2026-06-01T12:03:00Z", "4 days ago (1 Jun 14:03)"),
            ("2025-12-31T23:00:00Z", "155 days ago (1 Jan 01:00)"),
            ("2024-06-01T12:03:00Z", "734 days ago (1 Jun 2024 14:03)"),
            ("2026-06-05T13:00:00Z", "at 5 Jun 15:00"),
            ("not a time", "not a time"),
        ];
        for (stamp, shown) in cases {
            assert_eq!(moment(stamp, &now), shown, "{stamp}");
        }
    }

    #[test]
    fn cap_keeps_head_and_tail_and_counts_the_gap() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let capped = cap_head_tail(&text, 90);
        assert!(capped.starts_with(&text[..60]));
        assert!(capped.ends_with(&text[970..]));
        assert!(capped.contains("910 characters omitted"));
        assert_eq!(cap_head_tail("short", 90), "short");
    }

    #[test]
    fn json_strings_are_capped_wherever_they_are() {
        let mut v =
            serde_json::json!({"a": "x".repeat(100), "b": [1, "y".repeat(50)], "short": "ok"});
        assert_eq!(cap_json_strings(&mut v, 30), 70 + 20);
        assert!(v["a"].as_str().unwrap().contains("70 characters omitted"));
        assert!(
            v["b"][1]
                .as_str()
                .unwrap()
                .contains("20 characters omitted")
        );
        assert_eq!(v["short"], "ok");
    }

    #[test]
    fn cap_is_char_safe() {
        let text = "数".repeat(500);
        let capped = cap_head_tail(&text, 30);
        assert!(capped.contains("470 characters omitted"));
        assert_eq!(preview("数据库", 2), "数据…");
    }

    #[test]
    fn read_regular_refuses_a_fifo_at_once_and_caps_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("AGENTS.md");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(read_regular(&fifo, 100).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let file = dir.path().join("a.md");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_regular(&file, 4).unwrap(), b"0123");
    }
}
