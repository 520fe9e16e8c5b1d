//! Rollback (SPEC §7, from MiroThinker): some replies are better dropped
//! and asked again than answered — tool-call markup that did not parse, a
//! refusal matching the configured keywords, an identical repeat of a
//! `dedupe` tool's call, a call to a tool that does not exist. The dropped
//! reply never enters the history; the model gets a short note saying what
//! was wrong. The turn allows a limited number in a row and then goes on
//! with what it has.

use std::collections::HashSet;

use crate::llm::Reply;
use crate::tools::ToolDef;

/// Why a reply is dropped, and the note that asks again.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    /// Short reason for the transcript and the client.
    pub reason: String,
    /// What the model is told before it is asked again.
    pub note: String,
}

/// The key under which a `dedupe` tool's call counts as already made.
pub fn dedupe_key(tool: &ToolDef, raw_arguments: &str) -> String {
    let canonical = tool
        .prepare(raw_arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| raw_arguments.trim().to_string());
    format!("{}\u{0}{canonical}", tool.name)
}

/// Decides whether `reply` should be rolled back. `offered` are the tools
/// of this turn; `exists` tells whether a name is a tool at all (a tool the
/// policy removed is not "unknown": the call gets the policy's answer);
/// `done` holds the dedupe keys of calls already made in the turn.
pub fn check(
    reply: &Reply,
    offered: &[&ToolDef],
    exists: &dyn Fn(&str) -> bool,
    done: &HashSet<String>,
    refusal_keywords: &[String],
) -> Option<Rollback> {
    if !reply.markup_problems.is_empty() {
        return Some(Rollback {
            reason: "tool-call markup that could not be read".into(),
            note: format!(
                "[pincer] Your last reply was discarded because its tool-call markup could not be read: {}. Write each call again, complete and well-formed, or answer in plain text.",
                reply.markup_problems.join("; ")
            ),
        });
    }
    if reply.tool_calls.is_empty() {
        let lower = reply.text.to_lowercase();
        let hit = refusal_keywords
            .iter()
            .find(|k| !k.is_empty() && lower.contains(&k.to_lowercase()))?;
        return Some(Rollback {
            reason: format!("refusal (matched {hit:?})"),
            note: "[pincer] Your last reply was discarded as a refusal. Reconsider the request: use the tools available to make progress, or explain concretely what is missing.".into(),
        });
    }
    let unknown: Vec<&str> = reply
        .tool_calls
        .iter()
        .filter(|c| !offered.iter().any(|t| t.name == c.name) && !exists(&c.name))
        .map(|c| c.name.as_str())
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        return Some(Rollback {
            reason: format!(
                "unknown tool `{}`",
                crate::util::preview(&unknown.join("`, `"), 200)
            ),
            note: format!(
                "[pincer] Your last reply was discarded: it called {} which do not exist. The tools available are: {}.",
                unknown
                    .iter()
                    .map(|n| format!("`{}`", crate::util::preview(n, 100)))
                    .collect::<Vec<_>>()
                    .join(", "),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        });
    }
    let mut seen = HashSet::new();
    for call in &reply.tool_calls {
        let Some(tool) = offered.iter().find(|t| t.name == call.name) else {
            continue;
        };
        if !tool.flags.dedupe {
            continue;
        }
        let key = dedupe_key(tool, &call.arguments);
        if done.contains(&key) || !seen.insert(key) {
            return Some(Rollback {
                reason: format!("repeated `{}` call", call.name),
                note: format!(
                    "[pincer] Your last reply was discarded: it repeated a `{}` call with the same arguments as before in this turn; its result is already above. Use that result, or call it with different arguments.",
                    call.name
                ),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{FinishReason, ToolCall};
    use crate::session::transcript::Usage;
    use crate::tools::{ToolFlags, ToolOutput, ToolRegistry};

    fn reply(text: &str, calls: &[(&str, &str)], problems: &[&str]) -> Reply {
        Reply {
            text: text.into(),
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (n, a))| ToolCall {
                    id: format!("c{i}"),
                    name: n.to_string(),
                    arguments: a.to_string(),
                })
                .collect(),
            usage: Usage::default(),
            finish: FinishReason::Stop,
            markup_problems: problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn each_reason_and_the_absence_of_one() {
        let registry = ToolRegistry::core();
        let mut search = ToolDef::typed(
            "search",
            "s",
            &["web"],
            ToolFlags {
                dedupe: true,
                ..Default::default()
            },
            |_: serde_json::Value, _| async { ToolOutput::ok("") },
        );
        search.flags.dedupe = true;
        let mut offered: Vec<&ToolDef> = registry.all().iter().collect();
        offered.push(&search);
        let keywords = vec!["I'm sorry, but I can't".to_string()];
        let exists = |name: &str| name == "denied_tool";
        let mut done = HashSet::new();
        // A tool that exists but is not offered is left to the policy.
        let denied = reply("", &[("denied_tool", "{}")], &[]);
        assert_eq!(check(&denied, &offered, &exists, &done, &keywords), None);

        let ok = reply("fine", &[("read", "{\"path\":\"a\"}")], &[]);
        assert_eq!(check(&ok, &offered, &exists, &done, &keywords), None);
        assert_eq!(
            check(
                &reply("The answer.", &[], &[]),
                &offered,
                &exists,
                &done,
                &keywords
            ),
            None
        );

        let r = check(
            &reply("x", &[], &["cut off"]),
            &offered,
            &exists,
            &done,
            &keywords,
        )
        .unwrap();
        assert!(r.note.contains("cut off"));
        let r = check(
            &reply("i'M SORRY, BUT I CAN'T do that", &[], &[]),
            &offered,
            &exists,
            &done,
            &keywords,
        )
        .unwrap();
        assert!(r.reason.contains("refusal"));
        let r = check(
            &reply("", &[("teleport", "{}")], &[]),
            &offered,
            &exists,
            &done,
            &keywords,
        )
        .unwrap();
        assert!(
            r.note.contains("`teleport`") && r.note.contains("read, write"),
            "{}",
            r.note
        );

        // The same search twice in one reply, or again later: rolled back;
        // the same arguments in another order are the same call.
        let twice = reply(
            "",
            &[
                ("search", "{\"q\":1,\"n\":2}"),
                ("search", "{\"n\":2,\"q\":1}"),
            ],
            &[],
        );
        assert!(check(&twice, &offered, &exists, &done, &keywords).is_some());
        done.insert(dedupe_key(&search, "{\"q\":1,\"n\":2}"));
        let again = reply("", &[("search", "{\"n\": 2, \"q\": 1}")], &[]);
        assert!(
            check(&again, &offered, &exists, &done, &keywords)
                .unwrap()
                .reason
                .contains("repeated")
        );
        let other = reply("", &[("search", "{\"q\":3}")], &[]);
        assert_eq!(check(&other, &offered, &exists, &done, &keywords), None);
        // Tools without `dedupe` may repeat.
        let reads = reply(
            "",
            &[("read", "{\"path\":\"a\"}"), ("read", "{\"path\":\"a\"}")],
            &[],
        );
        assert_eq!(check(&reads, &offered, &exists, &done, &keywords), None);
    }
}
