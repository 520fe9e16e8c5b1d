//! When a schedule fires (SPEC §13a): a cron expression in a time zone, an
//! interval, or one instant. Parsing says what is wrong in a sentence; the
//! next fire time after an instant is computed here and nowhere else.
//!
//! Cron expressions are croner's (5 fields, or 6 with seconds first; no
//! year field), with the system's time zone database (a copy built in
//! where the system has none). At DST changes:
//!
//! - An expression with a **fixed hour** (its hour field does not start
//!   with `*`: `30 8 * * *`, `*/15 1 * * *`, `0 1,13 * * *`) is about the
//!   wall clock: each of its local times fires once a day. One that does
//!   not exist that day (the spring gap) fires once, at the first instant
//!   after the gap; one that exists twice (the autumn fold) fires once, in
//!   its first pass.
//! - An expression with a wildcard or stepped hour (`0 * * * *`,
//!   `0 */2 * * *`) is about real time: it fires at every real instant that
//!   matches — in both passes of a fold, and not at the times a gap
//!   removes.
//!
//! The tests compare this with two oracles, cronsim (Debian cron's rules)
//! and croniter; the differences are listed in the guide's docs/src/schedules.md.

use std::fmt;
use std::str::FromStr;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp, Zoned};

/// The shortest `every` interval: a schedule is not a busy loop.
pub const MIN_EVERY: SignedDuration = SignedDuration::from_secs(10);

/// When a schedule fires.
#[derive(Clone)]
pub enum When {
    /// A cron expression in a time zone.
    Cron {
        expr: String,
        cron: Box<Cron>,
        zone: TimeZone,
        /// Fixed-hour: evaluated on the wall clock (see the module doc).
        fixed: bool,
    },
    /// Every `interval`, counted from `anchor` (when the schedule was made).
    Every {
        interval: SignedDuration,
        anchor: Timestamp,
    },
    /// Once.
    At { at: Timestamp, zone: TimeZone },
}

/// Why a `cron`, `every`, `at` or `tz` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    #[error("`{expr}` is not a cron expression: {why}")]
    Cron { expr: String, why: String },
    #[error(
        "`{expr}` has {fields} fields; a cron expression has 5 (minute hour day month weekday) or 6 (seconds first)"
    )]
    Fields { expr: String, fields: usize },
    #[error(
        "`{zone}` is not a time zone this machine knows ({why}); use an IANA name such as Europe/London"
    )]
    Zone { zone: String, why: String },
    #[error("`{text}` is not an interval ({why}); write e.g. \"30m\", \"2h\" or \"1h 30m\"")]
    Interval { text: String, why: String },
    #[error("an interval of `{text}` is shorter than the shortest, 10 s")]
    TooShort { text: String },
    #[error(
        "`{text}` is not an instant ({why}); write e.g. \"2026-12-24 18:00\" (in the schedule's time zone) or \"2026-12-24T17:00:00Z\""
    )]
    Instant { text: String, why: String },
}

impl When {
    /// A cron expression in `zone` (the host's zone when `None`).
    pub fn cron(expr: &str, zone: Option<&str>) -> Result<Self, WhenError> {
        let fields = expr.split_whitespace().count();
        let nickname = expr.trim_start().starts_with('@');
        if !nickname && !(5..=6).contains(&fields) {
            return Err(WhenError::Fields {
                expr: expr.to_string(),
                fields,
            });
        }
        // croner reads a field of commas alone as the empty set and then
        // searches for seconds before it finds no time (found by fuzzing).
        if !nickname
            && let Some(empty) = expr
                .split_whitespace()
                .find(|f| f.split(',').all(str::is_empty))
        {
            return Err(WhenError::Cron {
                expr: expr.to_string(),
                why: format!("the field `{empty}` names no value"),
            });
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| WhenError::Cron {
                expr: expr.to_string(),
                why: e.to_string(),
            })?;
        let parts: Vec<&str> = expr.split_whitespace().collect();
        let fixed = if nickname {
            // `@daily` and the like are midnight; `@hourly` is not fixed.
            !expr.trim().eq_ignore_ascii_case("@hourly")
        } else {
            // The hour is the fourth field from the end.
            parts
                .get(parts.len().saturating_sub(4))
                .is_some_and(|hour| !hour.starts_with('*'))
        };
        Ok(Self::Cron {
            expr: expr.trim().to_string(),
            cron: Box::new(cron),
            zone: zone_named(zone)?,
            fixed,
        })
    }

    /// Every `text` (`30m`, `2h`, `1h 30m`, ISO 8601 `PT2H`), counted from
    /// `anchor`.
    pub fn every(text: &str, anchor: Timestamp) -> Result<Self, WhenError> {
        let interval = SignedDuration::from_str(text.trim()).map_err(|e| WhenError::Interval {
            text: text.to_string(),
            why: e.to_string(),
        })?;
        if interval < MIN_EVERY {
            return Err(WhenError::TooShort {
                text: text.to_string(),
            });
        }
        Ok(Self::Every { interval, anchor })
    }

    /// Once at `text`: an RFC 3339 instant, or a local date and time in
    /// `zone` (the host's when `None`). A local time that does not exist
    /// (a DST gap) is the first instant after the gap; one that exists
    /// twice is its first pass.
    pub fn at(text: &str, zone: Option<&str>) -> Result<Self, WhenError> {
        let zone = zone_named(zone)?;
        let bad = |why: String| WhenError::Instant {
            text: text.to_string(),
            why,
        };
        let at = match Timestamp::from_str(text.trim()) {
            Ok(at) => at,
            Err(_) => {
                let civil =
                    jiff::civil::DateTime::from_str(text.trim()).map_err(|e| bad(e.to_string()))?;
                instant_of(&zone, civil).ok_or_else(|| bad("it is out of range".into()))?
            }
        };
        Ok(Self::At { at, zone })
    }

    /// The first fire time strictly after `t`, if there is one.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Self::Cron {
                cron,
                zone,
                fixed: false,
                ..
            } => {
                let from = t.to_zoned(zone.clone());
                cron.find_next_occurrence(&from, false)
                    .ok()
                    .map(|z: Zoned| z.timestamp())
            }
            Self::Cron {
                cron,
                zone,
                fixed: true,
                ..
            } => {
                // Wall-clock times after `t`'s, each at its instant; one
                // whose instant is not after `t` (a fold's first pass seen
                // from its second, a gap already fired) is passed over.
                let mut civil = t.to_zoned(zone.clone()).datetime();
                for _ in 0..SEARCH_LIMIT {
                    civil = cron.find_next_occurrence(&civil, false).ok()?;
                    let at = instant_of(zone, civil)?;
                    if at > t {
                        return Some(at);
                    }
                }
                None
            }
            Self::Every { interval, anchor } => {
                if t < *anchor {
                    return Some(*anchor);
                }
                let since = t.duration_since(*anchor).as_nanos();
                let step = interval.as_nanos();
                let n = since / step + 1;
                let offset = SignedDuration::try_from_nanos_i128(n * step)?;
                anchor.checked_add(offset).ok()
            }
            Self::At { at, .. } => (*at > t).then_some(*at),
        }
    }

    /// The most recent fire time after `after` and at or before `t`: the
    /// one fire a missed stretch runs under the `once` policy.
    pub fn last_in(&self, after: Timestamp, t: Timestamp) -> Option<Timestamp> {
        let last = match self {
            Self::Cron {
                cron,
                zone,
                fixed: false,
                ..
            } => {
                let from = t.to_zoned(zone.clone());
                cron.find_previous_occurrence(&from, true)
                    .ok()
                    .map(|z: Zoned| z.timestamp())?
            }
            Self::Cron {
                cron,
                zone,
                fixed: true,
                ..
            } => {
                // From a wall clock a fold ahead of `t`'s: in a fold's
                // second pass, a time later on the wall clock fired
                // before `t`.
                let mut civil = t
                    .checked_add(MAX_FOLD)
                    .ok()?
                    .to_zoned(zone.clone())
                    .datetime();
                let mut inclusive = true;
                let mut found = None;
                for _ in 0..SEARCH_LIMIT {
                    civil = cron.find_previous_occurrence(&civil, inclusive).ok()?;
                    inclusive = false;
                    let at = instant_of(zone, civil)?;
                    if at <= after {
                        break;
                    }
                    if at <= t {
                        found = Some(at);
                        break;
                    }
                }
                found?
            }
            Self::Every { interval, anchor } => {
                if t < *anchor {
                    return None;
                }
                let n = t.duration_since(*anchor).as_nanos() / interval.as_nanos();
                let offset = SignedDuration::try_from_nanos_i128(n * interval.as_nanos())?;
                anchor.checked_add(offset).ok()?
            }
            Self::At { at, .. } => *at,
        };
        (last > after && last <= t).then_some(last)
    }

    /// Whether a cron expression has a fixed hour: evaluated on the wall
    /// clock at DST changes (see the module doc).
    pub fn fixed_hour(&self) -> bool {
        matches!(self, Self::Cron { fixed: true, .. })
    }

    /// The time zone the schedule's times are shown (and, for cron, run) in.
    pub fn zone(&self) -> TimeZone {
        match self {
            Self::Cron { zone, .. } | Self::At { zone, .. } => zone.clone(),
            Self::Every { .. } => TimeZone::system(),
        }
    }

    /// The zone's IANA name (or how jiff names it).
    pub fn zone_name(&self) -> String {
        zone_label(&self.zone())
    }

    /// The kind's name: `cron`, `every` or `at`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cron { .. } => "cron",
            Self::Every { .. } => "every",
            Self::At { .. } => "at",
        }
    }

    /// The expression as written: the cron text, the interval, the instant.
    pub fn text(&self) -> String {
        match self {
            Self::Cron { expr, .. } => expr.clone(),
            Self::Every { interval, .. } => format!("{interval:#}"),
            Self::At { at, zone } => at.to_zoned(zone.clone()).to_string(),
        }
    }
}

impl fmt::Debug for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.kind(), self.text(), self.zone_name())
    }
}

/// How many wall-clock matches a search looks at before it gives up.
const SEARCH_LIMIT: usize = 10_000;

/// Longer than any fold (the longest in use is an hour).
const MAX_FOLD: SignedDuration = SignedDuration::from_hours(3);

/// The instant a wall-clock time fires at in `zone`: a time in a gap at
/// the first instant after it, a time in a fold in its first pass.
fn instant_of(zone: &TimeZone, civil: jiff::civil::DateTime) -> Option<Timestamp> {
    let local = zone.to_ambiguous_zoned(civil);
    match local.offset() {
        AmbiguousOffset::Gap { .. } => {
            // The gap's own transition: at or before the time read with
            // the offset before it.
            let after = local.compatible().ok()?.timestamp();
            let just_after = after.checked_add(SignedDuration::from_nanos(1)).ok()?;
            zone.preceding(just_after).next().map(|t| t.timestamp())
        }
        _ => local.earlier().ok().map(|z| z.timestamp()),
    }
}

/// The zone named `name`, or the host's.
pub fn zone_named(name: Option<&str>) -> Result<TimeZone, WhenError> {
    match name {
        None => Ok(TimeZone::system()),
        Some(name) => TimeZone::get(name).map_err(|e| WhenError::Zone {
            zone: name.to_string(),
            why: e.to_string(),
        }),
    }
}

/// How a zone is shown: its IANA name, else its offset.
pub fn zone_label(zone: &TimeZone) -> String {
    zone.iana_name().map_or_else(
        || Timestamp::now().to_zoned(zone.clone()).offset().to_string(),
        str::to_string,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn nexts(w: &When, from: &str, n: usize) -> Vec<String> {
        let mut t = at(from);
        let mut out = Vec::new();
        for _ in 0..n {
            t = w.next_after(t).unwrap();
            out.push(t.to_zoned(w.zone()).to_string());
        }
        out
    }

    #[test]
    fn a_field_of_commas_alone_is_refused_at_once() {
        let started = std::time::Instant::now();
        for expr in ["0 , * * 1-5", ", 9 * * *", "0 0 ,, * *"] {
            let e = When::cron(expr, Some("UTC")).unwrap_err();
            assert!(e.to_string().contains("names no value"), "{e}");
        }
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        // A trailing comma beside a value still reads as the value.
        assert!(When::cron("0 1, * * *", Some("UTC")).is_ok());
    }

    #[test]
    fn five_fields_are_minute_first_and_six_have_seconds_first() {
        let five = When::cron("30 8 * * mon-fri", Some("Europe/London")).unwrap();
        // Friday 2026-11-27 → Monday.
        assert_eq!(
            nexts(&five, "2026-11-27T09:00:00Z", 2),
            [
                "2026-11-30T08:30:00+00:00[Europe/London]",
                "2026-12-01T08:30:00+00:00[Europe/London]"
            ]
        );
        let six = When::cron("15 30 8 * * *", Some("UTC")).unwrap();
        assert_eq!(
            nexts(&six, "2026-11-27T09:00:00Z", 1),
            ["2026-11-28T08:30:15+00:00[UTC]"]
        );
    }

    #[test]
    fn bad_expressions_zones_and_intervals_are_sentences() {
        let e = When::cron("* * *", None).unwrap_err();
        assert!(e.to_string().contains("has 3 fields"), "{e}");
        let e = When::cron("0 0 1 1 * 2030", None).unwrap_err();
        assert!(matches!(e, WhenError::Cron { .. }), "{e}");
        let e = When::cron("61 * * * *", None).unwrap_err();
        assert!(e.to_string().contains("is not a cron expression"), "{e}");
        let e = When::cron("0 8 * * *", Some("Mars/Olympus")).unwrap_err();
        assert!(
            e.to_string().contains("`Mars/Olympus` is not a time zone"),
            "{e}"
        );
        let e = When::every("soon", Timestamp::UNIX_EPOCH).unwrap_err();
        assert!(e.to_string().contains("is not an interval"), "{e}");
        let e = When::every("5s", Timestamp::UNIX_EPOCH).unwrap_err();
        assert!(e.to_string().contains("shorter than"), "{e}");
        let e = When::at("tomorrow", None).unwrap_err();
        assert!(e.to_string().contains("is not an instant"), "{e}");
    }

    #[test]
    fn a_fixed_time_in_a_spring_gap_fires_once_after_it_and_once_in_a_doubled_hour() {
        // New York: 2026-03-08 02:00 → 03:00; 2026-11-01 02:00 → 01:00.
        let w = When::cron("30 2 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            nexts(&w, "2026-03-07T12:00:00Z", 3),
            [
                "2026-03-08T03:00:00-04:00[America/New_York]",
                "2026-03-09T02:30:00-04:00[America/New_York]",
                "2026-03-10T02:30:00-04:00[America/New_York]",
            ]
        );
        let w = When::cron("30 1 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            nexts(&w, "2026-10-31T12:00:00Z", 2),
            [
                "2026-11-01T01:30:00-04:00[America/New_York]",
                "2026-11-02T01:30:00-05:00[America/New_York]",
            ]
        );
    }

    #[test]
    fn fixed_hours_with_lists_fire_once_per_gap_and_once_per_fold() {
        let w = When::cron("0,30 2 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            nexts(&w, "2026-03-07T12:00:00Z", 3),
            [
                "2026-03-08T03:00:00-04:00[America/New_York]",
                "2026-03-09T02:00:00-04:00[America/New_York]",
                "2026-03-09T02:30:00-04:00[America/New_York]",
            ]
        );
        let w = When::cron("0 1,3 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            nexts(&w, "2026-11-01T04:00:00Z", 3),
            [
                "2026-11-01T01:00:00-04:00[America/New_York]",
                "2026-11-01T03:00:00-05:00[America/New_York]",
                "2026-11-02T01:00:00-05:00[America/New_York]",
            ]
        );
        // Seen from the fold's second pass, the fire of its first is the
        // last one.
        let w = When::cron("30 1 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            w.last_in(at("2026-10-30T00:00:00Z"), at("2026-11-01T06:40:00Z")),
            Some(at("2026-11-01T05:30:00Z"))
        );
    }

    #[test]
    fn a_time_at_the_start_of_a_half_hour_gap_fires_at_its_end() {
        // Lord Howe: 2025-10-05 02:00 (+10:30) → 02:30 (+11).
        let w = When::cron("0 2 * * *", Some("Australia/Lord_Howe")).unwrap();
        assert_eq!(
            w.next_after(at("2025-10-04T14:00:00Z")),
            Some(at("2025-10-04T15:30:00Z"))
        );
    }

    #[test]
    fn a_stepped_minute_in_a_fixed_hour_fires_once_per_wall_time() {
        let w = When::cron("*/30 1 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            nexts(&w, "2026-11-01T04:00:00Z", 3),
            [
                "2026-11-01T01:00:00-04:00[America/New_York]",
                "2026-11-01T01:30:00-04:00[America/New_York]",
                "2026-11-02T01:00:00-05:00[America/New_York]",
            ]
        );
        // Every minute of an hour a gap removes: once, after it.
        let w = When::cron("* 2 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            nexts(&w, "2026-03-08T06:00:00Z", 2),
            [
                "2026-03-08T03:00:00-04:00[America/New_York]",
                "2026-03-09T02:00:00-04:00[America/New_York]",
            ]
        );
        // A stepped hour is real time: both passes of the fold.
        let w = When::cron("30 */1 * * *", Some("America/New_York")).unwrap();
        assert!(!w.fixed_hour());
        assert_eq!(
            nexts(&w, "2026-11-01T05:00:00Z", 2),
            [
                "2026-11-01T01:30:00-04:00[America/New_York]",
                "2026-11-01T01:30:00-05:00[America/New_York]",
            ]
        );
    }

    #[test]
    fn a_wildcard_hour_fires_every_real_hour_across_dst() {
        let w = When::cron("0 * * * *", Some("America/New_York")).unwrap();
        // Fall back: 01:00 twice.
        assert_eq!(
            nexts(&w, "2026-11-01T04:30:00Z", 3),
            [
                "2026-11-01T01:00:00-04:00[America/New_York]",
                "2026-11-01T01:00:00-05:00[America/New_York]",
                "2026-11-01T02:00:00-05:00[America/New_York]",
            ]
        );
        // Spring forward: no 02:00.
        assert_eq!(
            nexts(&w, "2026-03-08T06:30:00Z", 2),
            [
                "2026-03-08T03:00:00-04:00[America/New_York]",
                "2026-03-08T04:00:00-04:00[America/New_York]",
            ]
        );
    }

    #[test]
    fn every_counts_from_its_anchor_and_at_fires_once() {
        let w = When::every("90m", at("2026-11-27T00:00:00Z")).unwrap();
        assert_eq!(
            w.next_after(at("2026-11-27T02:00:00Z")),
            Some(at("2026-11-27T03:00:00Z"))
        );
        assert_eq!(
            w.next_after(at("2026-11-26T02:00:00Z")),
            Some(at("2026-11-27T00:00:00Z"))
        );
        let once = When::at("2026-12-24 18:00", Some("Europe/Paris")).unwrap();
        assert_eq!(
            once.next_after(at("2026-12-01T00:00:00Z")),
            Some(at("2026-12-24T17:00:00Z"))
        );
        assert_eq!(once.next_after(at("2026-12-24T17:00:00Z")), None);
        let gap = When::at("2026-03-29 02:30", Some("Europe/Paris")).unwrap();
        // In the spring gap (02:00 → 03:00): the first instant after it.
        assert_eq!(
            gap.next_after(Timestamp::UNIX_EPOCH),
            Some(at("2026-03-29T01:00:00Z"))
        );
    }

    #[test]
    fn the_last_missed_occurrence_is_found() {
        let w = When::cron("0 8 * * *", Some("UTC")).unwrap();
        assert_eq!(
            w.last_in(at("2026-11-20T09:00:00Z"), at("2026-11-27T07:00:00Z")),
            Some(at("2026-11-26T08:00:00Z"))
        );
        assert_eq!(
            w.last_in(at("2026-11-26T09:00:00Z"), at("2026-11-27T07:00:00Z")),
            None
        );
        // At `t` itself counts.
        assert_eq!(
            w.last_in(at("2026-11-26T09:00:00Z"), at("2026-11-27T08:00:00Z")),
            Some(at("2026-11-27T08:00:00Z"))
        );
        let e = When::every("10s", at("2026-11-27T00:00:00Z")).unwrap();
        assert_eq!(
            e.last_in(at("2026-11-20T00:00:00Z"), at("2026-11-27T00:01:05Z")),
            Some(at("2026-11-27T00:01:00Z"))
        );
        assert_eq!(
            e.last_in(at("2026-11-20T00:00:00Z"), at("2026-11-26T00:00:00Z")),
            None
        );
    }
}
