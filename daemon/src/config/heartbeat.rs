//! The heartbeat (SPEC §13a): `[heartbeat.<agent id>]` — how often the
//! agent checks in on `HEARTBEAT.md`, in which hours, where a report
//! goes and which answer means "nothing to report". Off for an agent
//! without the table.

use std::time::Duration;

use jiff::civil::Time;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::schedules::{Delivery, FieldError, delivery, fault};

pub use super::file::HeartbeatFields;

/// The interval when none is written, and the least one.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(30 * 60);
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// The answer that means "nothing to report" when none is written.
pub const DEFAULT_OK_TOKEN: &str = "HEARTBEAT_OK";

/// A checked heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatSpec {
    pub agent: String,
    pub every: Duration,
    /// From, to (to before from: across midnight); `None`: always.
    pub active: Option<(Time, Time)>,
    pub zone: TimeZone,
    pub deliver: Delivery,
    pub ok_token: String,
}

impl HeartbeatFields {
    /// Checks the heartbeat of agent `agent` (`agents`: the configured
    /// ids).
    pub fn check(&self, agent: &str, agents: &[&str]) -> Result<HeartbeatSpec, FieldError> {
        if !agents.contains(&agent) {
            return Err(fault(
                "",
                format!(
                    "there is no agent `{agent}` (agents: {})",
                    agents.join(", ")
                ),
            ));
        }
        let every = match &self.every {
            None => DEFAULT_EVERY,
            Some(t) => t
                .trim()
                .parse::<SignedDuration>()
                .ok()
                .and_then(|d| Duration::try_from(d).ok())
                .filter(|d| *d >= MIN_EVERY)
                .ok_or_else(|| {
                    fault(
                        "every",
                        format!("`{t}` is not an interval of at least 1s: write e.g. \"30m\""),
                    )
                })?,
        };
        let active = match &self.active_hours {
            None => None,
            Some(text) => Some(hours(text)?),
        };
        let zone =
            super::when::zone_named(self.tz.as_deref()).map_err(|e| fault("tz", e.to_string()))?;
        let ok_token = self
            .ok_token
            .clone()
            .unwrap_or_else(|| DEFAULT_OK_TOKEN.into());
        if ok_token.trim().is_empty() {
            return Err(fault("ok_token", "`ok_token` is empty"));
        }
        Ok(HeartbeatSpec {
            agent: agent.to_string(),
            every,
            active,
            zone,
            deliver: delivery(self.deliver.as_deref())?,
            ok_token: ok_token.trim().to_string(),
        })
    }
}

/// `08:00-22:00` into its two times.
fn hours(text: &str) -> Result<(Time, Time), FieldError> {
    let bad = || {
        fault(
            "active_hours",
            format!("`{text}` is not a span of hours: write e.g. \"08:00-22:00\""),
        )
    };
    let (from, to) = text.split_once('-').ok_or_else(bad)?;
    let from: Time = from.trim().parse().map_err(|_| bad())?;
    let to: Time = to.trim().parse().map_err(|_| bad())?;
    if from == to {
        return Err(bad());
    }
    Ok((from, to))
}

impl HeartbeatSpec {
    /// Whether `t` is within the active hours.
    pub fn active_at(&self, t: Timestamp) -> bool {
        let Some((from, to)) = self.active else {
            return true;
        };
        let now = t.to_zoned(self.zone.clone()).time();
        if from < to {
            from <= now && now < to
        } else {
            now >= from || now < to
        }
    }

    /// The next beat after one at `t`: `every` later, or when the active
    /// hours next begin.
    pub fn next_after(&self, t: Timestamp) -> Timestamp {
        let step = SignedDuration::try_from(self.every).unwrap_or(SignedDuration::from_mins(30));
        let next = t.checked_add(step).unwrap_or(t);
        if self.active_at(next) {
            return next;
        }
        let Some((from, _)) = self.active else {
            return next;
        };
        // The next `from` on the wall clock after `next`.
        let z = next.to_zoned(self.zone.clone());
        let today = z.date().to_datetime(from);
        match self.zone.to_ambiguous_zoned(today).compatible() {
            Ok(s) if s.timestamp() > next => s.timestamp(),
            _ => z
                .date()
                .tomorrow()
                .ok()
                .and_then(|d| {
                    self.zone
                        .to_ambiguous_zoned(d.to_datetime(from))
                        .compatible()
                        .ok()
                })
                .map_or(next, |s| s.timestamp()),
        }
    }
}

/// Checks every `[heartbeat.*]`, located at its table.
pub(super) fn from_file(
    loc: &super::locate::Locator<'_>,
    file: &super::file::ConfigFile,
    agents: &[&str],
) -> Result<Vec<HeartbeatSpec>, super::locate::ConfigError> {
    let mut out = Vec::new();
    for (agent, section) in &file.heartbeat {
        let spec = section.get_ref().check(agent, agents).map_err(|e| {
            let key = if e.key.is_empty() {
                String::new()
            } else {
                format!(" {}", e.key)
            };
            loc.at(
                section.span(),
                format!("[heartbeat.{agent}]{key}: {}", e.why),
            )
        })?;
        out.push(spec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Result<HeartbeatSpec, FieldError> {
        let f: HeartbeatFields = toml::from_str(text).unwrap();
        f.check("main", &["main"])
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn beats_keep_to_the_active_hours_in_their_zone() {
        let s = spec("every = \"30m\"\nactive_hours = \"08:00-22:00\"\ntz = \"Europe/Paris\"\n")
            .unwrap();
        // 21:45 in Paris: the next beat would be 22:15, so 08:00 next day.
        assert_eq!(
            s.next_after(at("2026-11-27T20:45:00Z")),
            at("2026-11-28T07:00:00Z")
        );
        assert_eq!(
            s.next_after(at("2026-11-27T09:00:00Z")),
            at("2026-11-27T09:30:00Z")
        );
        // Across midnight.
        let n = spec("active_hours = \"22:00-06:00\"\ntz = \"UTC\"\n").unwrap();
        assert!(n.active_at(at("2026-11-27T23:00:00Z")));
        assert!(n.active_at(at("2026-11-27T05:59:00Z")));
        assert!(!n.active_at(at("2026-11-27T12:00:00Z")));
        assert_eq!(n.ok_token, "HEARTBEAT_OK");
    }

    #[test]
    fn bad_fields_are_named() {
        for (text, key) in [
            ("every = \"soon\"\n", "every"),
            ("every = \"100ms\"\n", "every"),
            ("active_hours = \"8 to 10\"\n", "active_hours"),
            ("active_hours = \"08:00-08:00\"\n", "active_hours"),
            ("tz = \"Mars/Olympus\"\n", "tz"),
            ("deliver = \"slack:x\"\n", "deliver"),
            ("ok_token = \" \"\n", "ok_token"),
        ] {
            assert_eq!(spec(text).unwrap_err().key, key, "{text}");
        }
        let f = HeartbeatFields::default();
        assert!(
            f.check("nope", &["main"])
                .unwrap_err()
                .why
                .contains("no agent")
        );
    }
}
