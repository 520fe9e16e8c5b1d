//! Entry points for the coverage-guided fuzzer (`fuzz/`, the guide's
//! hardening chapter), and [`TARGETS`], the one list of them: this
//! crate's parsers that face a model, a config file, a workflow file or a
//! gRPC client, the memory index's Markdown chunker, and the channel
//! layer's and each bridge's own. Each target panics only where a promise
//! of the code is broken; what it asserts beyond "no panic" is in its
//! doc. Not used by pincerd; `tests/fuzz_corpus.rs` replays the committed
//! corpus and regressions of every target.

use std::path::Path;

use jiff::Timestamp;
use serde_json::json;

use crate::config::when::When;
use crate::llm::ToolSpec;
use crate::llm::sse::SseDecoder;
use pincer_channel::fuzz::text;

/// A fuzz target: its name (its folder under `fuzz/corpus`) and entry.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    Target {
        name: "toolcall",
        run: toolcall,
    },
    Target {
        name: "sse",
        run: sse,
    },
    Target {
        name: "config",
        run: config,
    },
    Target {
        name: "workflow",
        run: workflow,
    },
    Target {
        name: "template",
        run: template,
    },
    Target {
        name: "when",
        run: when,
    },
    Target {
        name: "patch",
        run: patch,
    },
    Target {
        name: "addresses",
        run: addresses,
    },
    Target {
        name: "memory_chunks",
        run: memory_chunks,
    },
    Target {
        name: "grpc",
        run: crate::server::fuzz::requests,
    },
    Target {
        name: "format",
        run: pincer_channel::fuzz::format,
    },
    Target {
        name: "chunks",
        run: pincer_channel::fuzz::chunks,
    },
    Target {
        name: "untrusted",
        run: pincer_channel::fuzz::untrusted,
    },
    #[cfg(feature = "telegram")]
    Target {
        name: "telegram_update",
        run: pincer_telegram::fuzz::update,
    },
    #[cfg(feature = "discord")]
    Target {
        name: "discord_gateway",
        run: pincer_discord::fuzz::gateway,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// A model's reply read for tool calls written as text (Hermes, MCP and
/// tool-named XML tags, Qwen's `<function=…>`), with two tools offered.
pub fn toolcall(data: &[u8]) {
    let tools = [
        ToolSpec {
            name: "read".into(),
            description: String::new(),
            parameters: std::sync::Arc::new(json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"]
            })),
        },
        ToolSpec {
            name: "exec".into(),
            description: String::new(),
            parameters: std::sync::Arc::new(json!({
                "type": "object",
                "properties": {"command": {"type": "string"}, "background": {"type": "boolean"}}
            })),
        },
    ];
    crate::llm::toolcall::parse(&text(data), &tools);
}

/// A provider's event stream: the first byte says where the network
/// splits it; the events are the same either way.
pub fn sse(data: &[u8]) {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let mut whole = SseDecoder::new();
    let mut once = whole.push(body);
    once.extend(whole.finish());
    let at = usize::from(cut).min(body.len());
    let mut split = SseDecoder::new();
    let mut twice = split.push(&body[..at]);
    twice.extend(split.push(&body[at..]));
    twice.extend(split.finish());
    assert_eq!(
        once, twice,
        "the events depend on where the stream was split"
    );
}

/// `config.toml` as a person writes it: loaded or refused with a problem,
/// never a panic.
pub fn config(data: &[u8]) {
    let home = crate::home::Home::at("/nonexistent/pincer-fuzz");
    let path = Path::new("/nonexistent/pincer-fuzz/config.toml");
    let _ = crate::config::load::parse(&home, path, &text(data), &|| None);
}

/// A workflow file: checked into a workflow or refused with problems.
pub fn workflow(data: &[u8]) {
    use crate::workflow::check::{Context, ToolStatus};
    let cx = Context {
        name: "fuzz",
        path: Path::new("/nonexistent/workflows/fuzz.toml"),
        workflows: &["other".to_string()],
        tools: &|name| match name {
            "exec" => ToolStatus::Removed {
                layer: "global".into(),
                reason: "denied".into(),
            },
            _ => ToolStatus::Offered,
        },
    };
    let _ = crate::workflow::check::check(&cx, &text(data));
}

/// A workflow's template and expression: checked, rendered and evaluated
/// against a run's values, on fuel (a template cannot loop for ever).
pub fn template(data: &[u8]) {
    let t = crate::workflow::template::Templates::new();
    let source = text(data);
    let ctx = json!({
        "inputs": {"folder": "notes", "n": 3, "list": [1, "two", null]},
        "steps": {"list": {"output": {"count": 4, "items": ["a", "b"]}, "status": "ok"}},
        "run": {"id": "r1", "workflow": "fuzz"},
    });
    let _ = t.check_template(&source);
    let _ = t.check_expression(&source);
    let _ = t.render(&source, &ctx);
    let _ = t.eval(&source, &ctx);
    let _ = t.render_value(&json!({"a": source.as_ref(), "b": [source.as_ref()]}), &ctx);
}

/// A schedule's `cron`, `every` and `at` as the model or a person writes
/// them: where one is read, its next fire time is after the time asked
/// and its text reads back into the same schedule.
pub fn when(data: &[u8]) {
    let text = text(data);
    let now = Timestamp::from_second(1_790_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let read = [
        When::cron(&text, Some("UTC")),
        When::cron(&text, Some("Europe/London")),
        When::every(&text, now),
        When::at(&text, Some("America/New_York")),
    ];
    for when in read.into_iter().flatten() {
        if let Some(next) = when.next_after(now) {
            assert!(
                next > now,
                "{} fires at {next}, not after {now}",
                when.text()
            );
        }
    }
}

/// An `apply_patch` body from a model.
pub fn patch(data: &[u8]) {
    let _ = crate::tools::patch::parse(&text(data));
}

/// Session keys, principals and chat addresses as a model or a client
/// writes them; an address read is written back as the same address.
pub fn addresses(data: &[u8]) {
    let text = text(data);
    let _ = crate::session::SessionKey::parse(&text);
    let _ = crate::session::Principal::parse(&text);
    if let Ok(address) = crate::tools::origin::ChatAddress::parse(&text) {
        let again = crate::tools::origin::ChatAddress::parse(&address.to_string());
        assert_eq!(again.ok(), Some(address), "an address does not read back");
    }
}

/// A memory note cut into the index's chunks; the first byte picks the
/// chunk size. Every chunk's lines are in order.
pub fn memory_chunks(data: &[u8]) {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let size = pincer_memory::chunk::ChunkSize {
        tokens: 8 + usize::from(knob & 0x7f),
        overlap: usize::from(knob >> 7) * 4,
    };
    for chunk in pincer_memory::chunk::chunk_markdown(&text(rest), size) {
        assert!(
            chunk.start_line <= chunk.end_line,
            "a chunk from line {} to {}",
            chunk.start_line,
            chunk.end_line
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regression tests of the fuzzer's finds: every target over its
    /// committed corpus (`fuzz/corpus/<target>`) and every input that once
    /// crashed it (`fuzz/regressions/<target>`).
    #[test]
    fn every_target_passes_its_corpus_and_regressions() {
        for t in TARGETS {
            let n = pincer_channel::fuzz::replay(t.name, t.run);
            assert!(n > 0, "fuzz/corpus/{} has no seed", t.name);
        }
    }

    #[test]
    fn targets_have_one_name_each() {
        let mut names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TARGETS.len());
        assert!(target("sse").is_some() && target("nope").is_none());
    }
}
