//! The Schedules service's wire types and their conversions. `pincer.v1`
//! is re-exported here, so the handlers name its messages `pb::X`; an add
//! or an edit is checked into an [`AddInput`] or an [`EditInput`] (its JSON
//! read), a history request becomes a [`HistoryInput`], and a schedule and
//! its fires go out as their messages, times in the schedule's zone.

pub(super) use pincer_proto::v1::*;

use jiff::Timestamp;
use pincer_proto::v1 as pb;
use serde_json::{Map, Value};

use crate::config::schedules::ScheduleFields;
use crate::schedule::manage::View;
use crate::schedule::store::{FireRow, Source};
use crate::server::request::RequestError;

/// Ledger rows shown when the request names no limit.
const DEFAULT_HISTORY: u32 = 20;

/// A schedule to make, checked: its name trimmed, its fields read.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct AddInput {
    pub name: String,
    pub fields: ScheduleFields,
}

impl TryFrom<pb::AddScheduleRequest> for AddInput {
    type Error = RequestError;

    fn try_from(req: pb::AddScheduleRequest) -> Result<Self, RequestError> {
        let fields =
            serde_json::from_value(Value::Object(object("fields_json", &req.fields_json)?))
                .map_err(|source| RequestError::BadSchedule {
                    name: req.name.clone(),
                    source,
                })?;
        Ok(Self {
            name: req.name.trim().to_string(),
            fields,
        })
    }
}

/// A change to a schedule, checked: the keys to set, as JSON.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct EditInput {
    pub name: String,
    pub patch: Map<String, Value>,
}

impl TryFrom<pb::EditScheduleRequest> for EditInput {
    type Error = RequestError;

    fn try_from(req: pb::EditScheduleRequest) -> Result<Self, RequestError> {
        Ok(Self {
            patch: object("patch_json", &req.patch_json)?,
            name: req.name,
        })
    }
}

/// A history request with its limit (0: [`DEFAULT_HISTORY`]).
#[derive(Debug, PartialEq)]
pub(super) struct HistoryInput {
    pub name: String,
    pub limit: u32,
}

impl From<pb::ScheduleHistoryRequest> for HistoryInput {
    fn from(req: pb::ScheduleHistoryRequest) -> Self {
        Self {
            name: req.name,
            limit: if req.limit == 0 {
                DEFAULT_HISTORY
            } else {
                req.limit
            },
        }
    }
}

/// The JSON object in field `what` (empty: no keys).
fn object(what: &'static str, json: &str) -> Result<Map<String, Value>, RequestError> {
    match serde_json::from_str::<Value>(if json.trim().is_empty() { "{}" } else { json }) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(RequestError::NotObject { what }),
        Err(source) => Err(RequestError::NotJson { what, source }),
    }
}

impl From<&View> for pb::ScheduleInfo {
    fn from(v: &View) -> Self {
        let (kind, expr, zone, agent, deliver, misfire, problem) = match &v.spec {
            Ok(s) => (
                s.when.kind().to_string(),
                s.when.text(),
                s.when.zone_name(),
                s.agent.clone(),
                s.deliver.to_string(),
                s.misfire.as_str().to_string(),
                String::new(),
            ),
            Err(e) => (
                String::new(),
                String::new(),
                String::new(),
                v.row.fields.agent.clone().unwrap_or_default(),
                v.row.fields.deliver.clone().unwrap_or_default(),
                String::new(),
                e.to_string(),
            ),
        };
        let next = v.next();
        pb::ScheduleInfo {
            name: v.row.name.clone(),
            source: match v.row.source {
                Source::Config => "config",
                Source::Made => "made",
            }
            .into(),
            principal: v.row.principal.clone(),
            kind,
            expr,
            zone,
            target: v.target(),
            agent,
            deliver,
            state: v.state().into(),
            next_at_ms: next.map_or(0, Timestamp::as_millisecond),
            next_local: next.map(|n| v.local(n)).unwrap_or_default(),
            failures: v.row.failures,
            disabled: v.row.disabled.clone().unwrap_or_default(),
            last: v.last.as_ref().map(|f| fire(f, Some(v))),
            fields_json: serde_json::to_string(&v.row.fields).unwrap_or_default(),
            problem,
            misfire,
        }
    }
}

pub(super) fn fire(f: &FireRow, view: Option<&View>) -> pb::FireInfo {
    pb::FireInfo {
        id: f.id,
        due_at_ms: f.due_at.as_millisecond(),
        due_local: view.map_or_else(|| f.due_at.to_string(), |v| v.local(f.due_at)),
        attempt: f.attempt,
        state: f.state.as_str().into(),
        ended_at_ms: f.ended_at.map_or(0, Timestamp::as_millisecond),
        missed: f.missed.map_or(0, |(n, _)| n),
        detail: f.detail.clone().unwrap_or_default(),
        output: f.output.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schedules::FieldError;
    use crate::schedule::store::FireState;
    use crate::schedule::store::ScheduleRow;

    fn add(name: &str, json: &str) -> Result<AddInput, RequestError> {
        AddInput::try_from(pb::AddScheduleRequest {
            name: name.into(),
            fields_json: json.into(),
        })
    }

    #[test]
    fn an_add_reads_its_fields() {
        let input = add(" daily ", r#"{"every": "1h", "prompt": "hi"}"#).unwrap();
        assert_eq!(input.name, "daily");
        assert_eq!(input.fields.every.as_deref(), Some("1h"));
        assert_eq!(input.fields.prompt.as_deref(), Some("hi"));
        assert_eq!(add("x", " ").unwrap().fields, ScheduleFields::default());
    }

    #[test]
    fn each_bad_add_says_what_is_wrong() {
        assert_eq!(
            add("x", "[1]").unwrap_err().to_string(),
            "fields_json must be a JSON object"
        );
        let not_json = add("x", "{").unwrap_err().to_string();
        assert!(
            not_json.starts_with("fields_json is not JSON: "),
            "{not_json}"
        );
        let unknown = add(" x ", r#"{"evry": "1h"}"#).unwrap_err().to_string();
        assert!(
            unknown.starts_with("schedule ` x `: unknown field `evry`"),
            "{unknown}"
        );
    }

    #[test]
    fn an_edit_reads_its_patch() {
        let edit = |json: &str| {
            EditInput::try_from(pb::EditScheduleRequest {
                name: "daily".into(),
                patch_json: json.into(),
            })
        };
        let input = edit(r#"{"every": "2h"}"#).unwrap();
        assert_eq!(input.name, "daily");
        assert_eq!(input.patch["every"], "2h");
        assert_eq!(
            edit("\"2h\"").unwrap_err().to_string(),
            "patch_json must be a JSON object"
        );
        assert!(
            edit("2h")
                .unwrap_err()
                .to_string()
                .starts_with("patch_json is not JSON: ")
        );
    }

    #[test]
    fn history_defaults_to_twenty_fires() {
        let history = |limit| {
            HistoryInput::from(pb::ScheduleHistoryRequest {
                name: "daily".into(),
                limit,
            })
        };
        assert_eq!(history(0).limit, DEFAULT_HISTORY);
        assert_eq!(
            history(5),
            HistoryInput {
                name: "daily".into(),
                limit: 5
            }
        );
    }

    #[test]
    fn a_schedule_that_no_longer_checks_keeps_its_fields_and_problem() {
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        let fire = FireRow {
            id: 7,
            schedule: "daily".into(),
            due_at: at,
            attempt: 1,
            state: FireState::Failed,
            claimed_at: at,
            ended_at: None,
            missed: Some((3, at)),
            detail: Some("exit 1".into()),
            output: None,
        };
        let view = View {
            row: ScheduleRow {
                name: "daily".into(),
                source: Source::Made,
                fields: ScheduleFields {
                    every: Some("1h".into()),
                    agent: Some("gone".into()),
                    prompt: Some("hi".into()),
                    ..ScheduleFields::default()
                },
                principal: "owner".into(),
                chat: None,
                created_at: at,
                next_at: None,
                paused: true,
                failures: 2,
                disabled: None,
                retry: None,
                retries: 0,
            },
            spec: Err(FieldError {
                key: "agent",
                why: "no agent `gone`".into(),
            }),
            last: Some(fire),
        };
        let info = pb::ScheduleInfo::from(&view);
        assert_eq!(
            (info.name.as_str(), info.source.as_str()),
            ("daily", "made")
        );
        assert_eq!(
            (info.agent.as_str(), info.problem.as_str()),
            ("gone", "no agent `gone`")
        );
        assert_eq!((info.state.as_str(), info.next_at_ms), ("paused", 0));
        assert_eq!(info.target, "prompt: hi");
        assert_eq!(info.failures, 2);
        assert!(info.fields_json.contains(r#""every":"1h""#));
        let last = info.last.unwrap();
        assert_eq!(
            (last.id, last.state.as_str(), last.missed),
            (7, "failed", 3)
        );
        assert_eq!(last.due_at_ms, 1_800_000_000_000);
        assert_eq!(last.due_local, at.to_string());
        assert_eq!((last.detail.as_str(), last.output.as_str()), ("exit 1", ""));
    }
}
