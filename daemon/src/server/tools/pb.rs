//! The Tools service's wire types and their conversions. `pincer.v1` is
//! re-exported here, so the handlers name its messages `pb::X`; an answer
//! to an approval is checked into a [`DecideInput`], and a tool's verdict,
//! an MCP server's state, an audit row and a waiting request go out as
//! their messages, long texts capped ([`fit`]). Our `PendingApproval` is
//! named by its path: imported, it would hide the message of that name.

pub(super) use pincer_proto::v1::*;

use std::time::SystemTime;

use pincer_proto::v1 as pb;

use crate::server::fit;
use crate::server::request::RequestError;
use crate::session::registry::AuditRecord;
use crate::tools::ToolSource;
use crate::tools::approvals::{Decision, HaltAsk, Subject};
use crate::tools::arguments::shorten;
use crate::tools::mcp::ServerStatus;
use crate::tools::policy::Verdict;

/// An answer to a waiting request, checked: the id and one decision.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct DecideInput {
    /// As typed; the approvals trim it.
    pub id: String,
    pub decision: Decision,
}

impl TryFrom<pb::DecideRequest> for DecideInput {
    type Error = RequestError;

    fn try_from(req: pb::DecideRequest) -> Result<Self, RequestError> {
        let given = [
            !req.edit_json.is_empty(),
            !req.revise.is_empty(),
            !req.input_json.is_empty(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(RequestError::SeveralAnswers);
        }
        if req.always && !req.allow {
            return Err(RequestError::AlwaysDeny);
        }
        let decision = if !req.edit_json.is_empty() {
            Decision::Edit(
                Decision::json(&req.edit_json, "edited data").map_err(RequestError::Answer)?,
            )
        } else if !req.revise.is_empty() {
            Decision::Revise(req.revise)
        } else if !req.input_json.is_empty() {
            Decision::Answer(
                Decision::json(&req.input_json, "input").map_err(RequestError::Answer)?,
            )
        } else if req.allow {
            Decision::Allow { always: req.always }
        } else {
            Decision::Deny
        };
        Ok(Self {
            id: req.id,
            decision,
        })
    }
}

/// `core`, `mcp:<server>` or `plugin:<id>`.
fn source_label(source: &ToolSource) -> String {
    match source {
        ToolSource::Core => "core".into(),
        ToolSource::Mcp { server } => format!("mcp:{server}"),
        ToolSource::Plugin { id, .. } => format!("plugin:{id}"),
    }
}

/// A tool and the policy's verdict on it.
impl From<&Verdict<'_>> for pb::ToolInfo {
    fn from(v: &Verdict<'_>) -> Self {
        pb::ToolInfo {
            name: v.tool.name.clone(),
            description: v.tool.description.clone(),
            source: source_label(&v.tool.source),
            groups: v.tool.groups.clone(),
            optional: v.tool.flags.optional,
            dedupe: v.tool.flags.dedupe,
            owner_only: v.tool.flags.owner_only,
            offered: v.removed.is_none(),
            removed_by: v
                .removed
                .as_ref()
                .map(|r| r.layer.clone())
                .unwrap_or_default(),
            reason: v
                .removed
                .as_ref()
                .map(|r| r.reason.clone())
                .unwrap_or_default(),
            parameters_json: v.tool.parameters.to_string(),
            asks: v.asks,
        }
    }
}

impl From<ServerStatus> for pb::McpServerStatus {
    fn from(s: ServerStatus) -> Self {
        pb::McpServerStatus {
            name: s.name,
            state: s.state,
            tools: s.tools as u32,
        }
    }
}

/// One audit row and its time.
pub(super) fn audit_row((ts, r): (String, AuditRecord)) -> pb::AuditRow {
    // A model names its calls, so a call id can be of any length.
    let short = |s: String| fit::text(s, 300);
    pb::AuditRow {
        ts,
        session_key: short(r.session_key),
        agent: r.agent,
        sender: short(r.sender),
        tool: short(r.tool),
        call_id: short(r.call_id),
        args_hash: r.args_hash,
        outcome: r.outcome,
        duration_ms: r.duration_ms,
        decided_by: short(r.decided_by),
        detail: fit::text(r.detail, fit::NOTE_CHARS),
        // Already masked and capped when recorded.
        arguments: r.arguments,
    }
}

/// A waiting request as the CLI lists it.
pub(super) fn pending_approval(
    p: crate::tools::approvals::PendingApproval,
    now: SystemTime,
) -> pb::PendingApproval {
    let secs = |a: SystemTime, b: SystemTime| a.duration_since(b).map(|d| d.as_secs()).unwrap_or(0);
    let json = |v: &serde_json::Value| shorten(&v.to_string(), fit::EVENT_CHARS).into_owned();
    let mut out = pb::PendingApproval {
        age_s: secs(now, p.requested_at),
        expires_in_s: secs(p.expires_at, now),
        id: p.id,
        session_key: p.session_key,
        agent: p.agent,
        requester: p
            .requester
            .map(|r| format!("{} ({}:{})", r.name, r.channel, r.sender_id))
            .unwrap_or_default(),
        ..Default::default()
    };
    match p.subject {
        Subject::Call {
            tool, arguments, ..
        } => {
            out.kind = "call".into();
            out.tool = tool;
            out.arguments_json = shorten(&arguments, fit::EVENT_CHARS).into_owned();
        }
        Subject::Step(halt) => {
            out.kind = halt.ask.kind().into();
            out.run = halt.run;
            out.workflow = halt.workflow;
            out.step = halt.step;
            out.prompt = fit::text(halt.prompt, fit::NOTE_CHARS);
            match halt.ask {
                HaltAsk::Approval {
                    data,
                    approvers,
                    quorum,
                    votes,
                    edit,
                    revisions_left,
                    initiator,
                } => {
                    out.data_json = data.as_ref().map(json).unwrap_or_default();
                    out.initiator = initiator.unwrap_or_default();
                    out.approvers = approvers;
                    out.quorum = quorum;
                    out.votes = votes;
                    out.edit = edit;
                    out.revisions_left = revisions_left;
                }
                HaltAsk::Input { schema } => {
                    out.schema_json = schema.as_ref().map(json).unwrap_or_default();
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::tools::approvals::{Halt, PendingApproval};
    use crate::tools::policy::Removal;
    use crate::tools::{ToolDef, ToolFlags, ToolOutput};

    fn decide(f: impl FnOnce(&mut pb::DecideRequest)) -> Result<DecideInput, RequestError> {
        let mut req = pb::DecideRequest {
            id: " ab12cd34 ".into(),
            ..Default::default()
        };
        f(&mut req);
        DecideInput::try_from(req)
    }

    #[test]
    fn each_answer_parses_into_its_decision() {
        let allow = decide(|r| {
            r.allow = true;
            r.always = true;
        })
        .unwrap();
        assert_eq!(allow.id, " ab12cd34 ");
        assert_eq!(allow.decision, Decision::Allow { always: true });
        assert_eq!(decide(|_| {}).unwrap().decision, Decision::Deny);
        assert_eq!(
            decide(|r| r.edit_json = r#"{"a":1}"#.into())
                .unwrap()
                .decision,
            Decision::Edit(serde_json::json!({"a": 1}))
        );
        assert_eq!(
            decide(|r| r.revise = "shorter".into()).unwrap().decision,
            Decision::Revise("shorter".into())
        );
        assert_eq!(
            decide(|r| r.input_json = "[1]".into()).unwrap().decision,
            Decision::Answer(serde_json::json!([1]))
        );
    }

    #[test]
    fn a_contradictory_or_broken_answer_is_refused() {
        let two = decide(|r| {
            r.edit_json = "{}".into();
            r.revise = "x".into();
        })
        .unwrap_err();
        assert_eq!(
            two.to_string(),
            "give at most one of edit_json, revise and input_json"
        );
        let always = decide(|r| r.always = true).unwrap_err();
        assert_eq!(
            always.to_string(),
            "`always` goes with allow: a call can be allowed always, never denied always"
        );
        let edit = decide(|r| r.edit_json = "{".into()).unwrap_err();
        assert!(
            edit.to_string()
                .starts_with("the edited data is not JSON: "),
            "{edit}"
        );
        let input = decide(|r| r.input_json = "nope".into()).unwrap_err();
        assert!(
            input.to_string().starts_with("the input is not JSON: "),
            "{input}"
        );
        assert_eq!(
            tonic::Status::from(input).code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn a_verdict_keeps_its_fields() {
        let tool = ToolDef::dynamic(
            "search",
            "finds things",
            serde_json::json!({"type": "object"}),
            vec!["web".into()],
            ToolFlags {
                dedupe: true,
                ..ToolFlags::default()
            },
            ToolSource::Mcp {
                server: "web".into(),
            },
            Arc::new(|_, _| Box::pin(async { ToolOutput::ok("") })),
        );
        let verdict = Verdict {
            tool: &tool,
            removed: Some(Removal {
                layer: "agent".into(),
                reason: "denied".into(),
            }),
            asks: false,
        };
        let info = pb::ToolInfo::from(&verdict);
        assert_eq!(info.name, "search");
        assert_eq!(info.source, "mcp:web");
        assert_eq!(info.groups, ["web"]);
        assert!(info.dedupe && !info.optional && !info.owner_only);
        assert!(!info.offered);
        assert_eq!(
            (info.removed_by.as_str(), info.reason.as_str()),
            ("agent", "denied")
        );
        assert_eq!(info.parameters_json, r#"{"type":"object"}"#);
        assert_eq!(
            source_label(&ToolSource::Plugin {
                id: "p".into(),
                server: "s".into()
            }),
            "plugin:p"
        );
        assert_eq!(source_label(&ToolSource::Core), "core");
    }

    #[test]
    fn an_audit_row_keeps_its_fields_and_caps_names() {
        let row = audit_row((
            "2026-01-01T00:00:00Z".into(),
            AuditRecord {
                session_key: "agent:main:main".into(),
                agent: "main".into(),
                sender: "owner".into(),
                tool: "exec".into(),
                call_id: "c".repeat(1000),
                args_hash: "h".into(),
                outcome: "ok".into(),
                duration_ms: 12,
                decided_by: "policy".into(),
                detail: String::new(),
                arguments: "{}".into(),
            },
        ));
        assert_eq!(row.ts, "2026-01-01T00:00:00Z");
        assert_eq!((row.tool.as_str(), row.outcome.as_str()), ("exec", "ok"));
        assert_eq!((row.duration_ms, row.arguments.as_str()), (12, "{}"));
        assert!(row.call_id.chars().count() < 1000);
    }

    #[test]
    fn a_waiting_call_and_halt_keep_their_fields() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let waiting = |subject| PendingApproval {
            id: "ab12cd34".into(),
            agent: "main".into(),
            session_key: "agent:main:main".into(),
            requested_at: now - Duration::from_secs(30),
            expires_at: now + Duration::from_secs(90),
            requester: None,
            subject,
        };
        let call = pending_approval(
            waiting(Subject::Call {
                session_id: "s".into(),
                tool: "exec".into(),
                arguments: r#"{"cmd":"ls"}"#.into(),
            }),
            now,
        );
        assert_eq!((call.id.as_str(), call.kind.as_str()), ("ab12cd34", "call"));
        assert_eq!((call.age_s, call.expires_in_s), (30, 90));
        assert_eq!(
            (call.tool.as_str(), call.arguments_json.as_str()),
            ("exec", r#"{"cmd":"ls"}"#)
        );
        let halt = pending_approval(
            waiting(Subject::Step(Halt {
                run: "r1".into(),
                workflow: "w".into(),
                step: "publish".into(),
                seq: 3,
                prompt: "ok?".into(),
                ask: HaltAsk::Approval {
                    data: Some(serde_json::json!({"x": 1})),
                    approvers: vec!["owner".into()],
                    quorum: 1,
                    votes: Vec::new(),
                    edit: true,
                    revisions_left: 2,
                    initiator: None,
                },
            })),
            now,
        );
        assert_eq!(halt.kind, "approval");
        assert_eq!(
            (
                halt.run.as_str(),
                halt.workflow.as_str(),
                halt.step.as_str()
            ),
            ("r1", "w", "publish")
        );
        assert_eq!(halt.data_json, r#"{"x":1}"#);
        assert_eq!((halt.quorum, halt.revisions_left, halt.edit), (1, 2, true));
    }
}
