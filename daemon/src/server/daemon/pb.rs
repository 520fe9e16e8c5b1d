//! The Daemon service's wire types and their conversions. `pincer.v1` is
//! re-exported here, so the handlers name its messages `pb::X`; a logs
//! request becomes a [`LogsInput`], and the status's agents, providers
//! and failed parts, and doctor's findings, go out as their messages.

pub(super) use pincer_proto::v1::*;

use pincer_proto::v1 as pb;

use crate::config::{AgentSettings, ProviderSettings};
use crate::llm::windows::ContextWindow;

/// Log lines sent when a request names none and does not follow.
const DEFAULT_LINES: usize = 50;

/// A logs request as the tail takes it.
#[derive(Debug, PartialEq)]
pub(super) struct LogsInput {
    /// The last lines to send first.
    pub lines: usize,
    /// Then keep sending new ones.
    pub follow: bool,
}

impl From<pb::LogsRequest> for LogsInput {
    fn from(req: pb::LogsRequest) -> Self {
        // Following with no lines asked for starts at the end.
        let lines = if req.lines == 0 && !req.follow {
            DEFAULT_LINES
        } else {
            req.lines as usize
        };
        Self {
            lines,
            follow: req.follow,
        }
    }
}

/// An agent as the status lists it: its first model and provider.
impl From<&AgentSettings> for pb::AgentInfo {
    fn from(a: &AgentSettings) -> Self {
        pb::AgentInfo {
            id: a.id.clone(),
            model: a
                .models
                .first()
                .map(|m| m.model.clone())
                .unwrap_or_default(),
            provider: a
                .models
                .first()
                .map(|m| m.provider.clone())
                .unwrap_or_default(),
            workspace: a.workspace.display().to_string(),
            context_window: a.context_window(),
        }
    }
}

impl From<&ProviderSettings> for pb::ProviderInfo {
    fn from(p: &ProviderSettings) -> Self {
        pb::ProviderInfo {
            id: p.name.clone(),
            kind: p.kind.as_str().into(),
            base_url: p.base_url.clone(),
            api_key_env: p.api_key.env_var().unwrap_or_default().into(),
            tool_format: p.tool_format.as_str().into(),
        }
    }
}

/// A lifecycle part that could not start, and why.
pub(super) fn part_failure((part, reason): (&'static str, String)) -> pb::PartFailure {
    pb::PartFailure {
        part: part.into(),
        reason,
    }
}

impl From<crate::doctor::Finding> for pb::Finding {
    fn from(f: crate::doctor::Finding) -> Self {
        pb::Finding {
            level: f.level.as_str().into(),
            subject: f.subject,
            message: f.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::doctor::{Finding, Level};
    use crate::home::Home;

    #[test]
    fn logs_default_to_the_last_fifty_lines_unless_followed() {
        let logs = |lines, follow| LogsInput::from(pb::LogsRequest { lines, follow });
        assert_eq!(
            logs(0, false),
            LogsInput {
                lines: 50,
                follow: false
            }
        );
        assert_eq!(
            logs(0, true),
            LogsInput {
                lines: 0,
                follow: true
            }
        );
        assert_eq!(logs(7, false).lines, 7);
    }

    #[test]
    fn agents_and_providers_keep_their_fields() {
        let config = crate::config::load::parse(
            &Home::at("/tmp/pincer-server-daemon-test"),
            Path::new("/h/config.toml"),
            "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n\
             [models.default]\nprovider = \"p\"\nmodel = \"big\"\ncontext_window = 128000\n\n\
             [agents.main]\n",
            &|| None,
        )
        .unwrap();
        let agent = pb::AgentInfo::from(config.agent("main").unwrap());
        assert_eq!(agent.id, "main");
        assert_eq!(
            (agent.model.as_str(), agent.provider.as_str()),
            ("big", "p")
        );
        assert_eq!(agent.context_window, 128_000);
        let provider = pb::ProviderInfo::from(&config.providers["p"]);
        assert_eq!(provider.id, "p");
        assert_eq!(provider.kind, "openai");
        assert_eq!(provider.base_url, "http://127.0.0.1:9/v1");
    }

    #[test]
    fn a_finding_and_a_failure_keep_their_fields() {
        let f = pb::Finding::from(Finding {
            level: Level::Warn,
            subject: "memory".into(),
            message: "no embedder".into(),
        });
        assert_eq!(f.level, Level::Warn.as_str());
        assert_eq!(
            (f.subject.as_str(), f.message.as_str()),
            ("memory", "no embedder")
        );
        let p = part_failure(("mcp", "did not start".into()));
        assert_eq!(
            (p.part.as_str(), p.reason.as_str()),
            ("mcp", "did not start")
        );
    }
}
