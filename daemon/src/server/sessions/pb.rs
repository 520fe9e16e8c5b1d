//! The Sessions service's wire types and their conversions. `pincer.v1`
//! is re-exported here, so the handlers name its messages `pb::X`; a
//! history request becomes a [`HistoryInput`], a session's status a
//! `SessionInfo` (its error notes capped), a compaction's outcome a
//! `CompactResponse`.

pub(super) use pincer_proto::v1::*;

use pincer_proto::v1 as pb;

use crate::agent::compaction::Compacted;
use crate::agent::hub::sessions::SessionStatus;
use crate::server::fit;

/// A history request as the hub takes it: 0 means no limit, and a
/// `before` past what this machine can count means "from the end".
#[derive(Debug, PartialEq)]
pub(super) struct HistoryInput {
    pub agent: String,
    pub session: String,
    pub limit: usize,
    pub before: usize,
}

impl From<pb::HistoryRequest> for HistoryInput {
    fn from(req: pb::HistoryRequest) -> Self {
        Self {
            agent: req.agent,
            session: req.session,
            limit: req.limit as usize,
            before: usize::try_from(req.before).unwrap_or(usize::MAX),
        }
    }
}

impl From<SessionStatus> for pb::SessionInfo {
    fn from(s: SessionStatus) -> Self {
        let row = s.row;
        pb::SessionInfo {
            running: s.running,
            key: row.key,
            id: row.id,
            agent: row.agent,
            channel: row.channel,
            created_at: row.created_at,
            updated_at: row.updated_at,
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
            compactions: row.compactions,
            last_error: fit::text(row.last_error.unwrap_or_default(), fit::NOTE_CHARS),
            failure_summary: fit::text(row.failure_summary.unwrap_or_default(), fit::NOTE_CHARS),
            entries: s.entries,
        }
    }
}

impl From<Compacted> for pb::CompactResponse {
    fn from(outcome: Compacted) -> Self {
        match outcome {
            Compacted::Done {
                tokens_before,
                tokens_after,
                summary,
            } => pb::CompactResponse {
                compacted: true,
                tokens_before,
                tokens_after,
                summary,
                note: String::new(),
            },
            Compacted::Nothing => pb::CompactResponse {
                compacted: false,
                note: "nothing to compact: the history since the last compaction is a single turn or empty".into(),
                ..Default::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Principal;
    use crate::session::registry::SessionRow;

    #[test]
    fn a_history_request_keeps_its_page() {
        let input = HistoryInput::from(pb::HistoryRequest {
            agent: "main".into(),
            session: "s".into(),
            limit: 20,
            before: 7,
        });
        assert_eq!(
            input,
            HistoryInput {
                agent: "main".into(),
                session: "s".into(),
                limit: 20,
                before: 7,
            }
        );
    }

    #[test]
    fn a_session_keeps_its_fields() {
        let status = SessionStatus {
            row: SessionRow {
                key: "agent:main:main".into(),
                id: "id1".into(),
                agent: "main".into(),
                channel: "cli".into(),
                created_at: "2026-01-01".into(),
                updated_at: "2026-01-02".into(),
                input_tokens: 10,
                output_tokens: 20,
                compactions: 1,
                last_error: Some("x".repeat(fit::NOTE_CHARS * 2)),
                failure_summary: None,
                principal: Principal::Owner,
                parent: None,
                spawn_layer: None,
            },
            running: true,
            entries: 5,
        };
        let info = pb::SessionInfo::from(status);
        assert_eq!(info.key, "agent:main:main");
        assert_eq!(info.id, "id1");
        assert_eq!((info.input_tokens, info.output_tokens), (10, 20));
        assert_eq!((info.compactions, info.entries), (1, 5));
        assert!(info.running);
        assert!(info.last_error.chars().count() < fit::NOTE_CHARS * 2);
        assert_eq!(info.failure_summary, "");
    }

    #[test]
    fn a_compaction_says_what_it_did() {
        let done = pb::CompactResponse::from(Compacted::Done {
            tokens_before: 900,
            tokens_after: 100,
            summary: "sum".into(),
        });
        assert!(done.compacted);
        assert_eq!((done.tokens_before, done.tokens_after), (900, 100));
        assert_eq!(done.summary, "sum");
        assert!(done.note.is_empty());
        let nothing = pb::CompactResponse::from(Compacted::Nothing);
        assert!(!nothing.compacted);
        assert!(nothing.note.starts_with("nothing to compact"));
    }
}
