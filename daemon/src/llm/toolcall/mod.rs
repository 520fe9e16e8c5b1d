//! Tool calls written as text (SPEC §7). One tool definition is offered in
//! three formats: `native` (the provider's JSON tool calling, handled by the
//! wire modules), `hermes` (`<tool_call>{"name":…,"arguments":…}</tool_call>`)
//! and `xml` (`<tool_name><param>…</param></tool_name>`, and MiroThinker's
//! `<use_mcp_tool>` form).
//!
//! For providers configured with a text format, [`render::to_text_request`]
//! describes the tools in the system prompt and turns the conversation's
//! calls and results into text; [`parse`] reads calls back out of a reply.
//! The parser accepts every text form whichever text format was
//! configured (the element form, bare or inside `<tool_call>`, only for the
//! tools offered), tolerates code fences, prose, whitespace and a
//! `<tool_call>` cut off after complete contents, and reports
//! markup it could not read as problems (the agent loop rolls such replies
//! back) instead of failing. [`stream::DisplayFilter`] keeps call markup out
//! of the text streamed to clients. None of this runs for `native`
//! providers: there, calls come only from the provider's structured tool
//! calls, and markup in the text (a quoted call, or one repeated from a
//! fetched page) stays text, so data cannot become a call.

mod hermes;
pub mod render;
pub mod scan;
pub mod stream;
mod xml;

use serde_json::{Map, Value};

use super::ToolSpec;

/// A call read from text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// A reply's text split into prose and calls.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// The text with every recognised call removed.
    pub prose: String,
    pub calls: Vec<ParsedCall>,
    /// Call markup that could not be read, as sentences for the model.
    pub problems: Vec<String>,
}

/// Why call markup could not be read: a clause for the model, completed
/// by the parser's "a <tag> call could not be read: …".
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("it is empty; put {{\"name\": …, \"arguments\": {{…}}}} inside")]
    Empty,
    #[error("its JSON is not valid ({0})")]
    BadJson(serde_json::Error),
    #[error("it holds no call")]
    NoCall,
    #[error("it has text beside its tool elements; write one element per call and nothing else")]
    TextBesideElements,
    #[error("<{0}> is not a tool offered here; call one of the listed tools")]
    NotOffered(String),
    #[error("<{0}> inside it has no closing </{0}> tag")]
    InnerUnclosed(String),
    #[error("each call must be a JSON object with `name` and `arguments`")]
    NotAnObject,
    #[error("the call has no `name` string")]
    NoName,
    #[error("the `arguments` of `{0}` must be a JSON object")]
    ArgumentsNotAnObject(String),
    #[error("it does not start with <function=")]
    NotAFunction,
    #[error("its <function=…> tag is not closed")]
    FunctionTagOpen,
    #[error("the function has no name")]
    NoFunctionName,
    #[error("<function={0}> has no </function>")]
    NoFunctionEnd(String),
    #[error("a <parameter=…> tag is not closed")]
    ParameterTagOpen,
    #[error("<parameter={0}> has no </parameter>")]
    NoParameterEnd(String),
    #[error("the body of <{0}> is neither parameter elements nor a JSON object")]
    BodyNeither(String),
    #[error(
        "<{0}> holds text but no parameter elements; write each parameter as <name>value</name> inside <{0}>"
    )]
    TextWithoutParameters(String),
    #[error("<{0}> has no closing </{0}> tag")]
    ChildUnclosed(String),
    #[error("<use_mcp_tool> needs a <tool_name>")]
    NoToolName,
    #[error("<arguments> must hold a JSON object")]
    McpArgumentsNotAnObject,
    #[error("<arguments> is not valid JSON ({0})")]
    McpArgumentsBadJson(serde_json::Error),
}

/// Wrapper tags of the text forms (besides tags named after tools).
const HERMES: &str = "tool_call";
const MCP: &str = "use_mcp_tool";
const QWEN_FUNCTION: &str = "<function=";
const THINK: &str = "think";

enum Kind<'t> {
    Hermes,
    Mcp,
    Tool(&'t ToolSpec),
}

/// The tool a tag names: exact match first, then ignoring case.
pub(crate) fn find_tool<'t>(tools: &'t [ToolSpec], name: &str) -> Option<&'t ToolSpec> {
    tools
        .iter()
        .find(|t| t.name == name)
        .or_else(|| tools.iter().find(|t| t.name.eq_ignore_ascii_case(name)))
}

/// Reads every tool call out of `text`. `tools` are the tools offered: tags
/// named after them are calls, and their schemas type the values written
/// as XML text.
pub fn parse(text: &str, tools: &[ToolSpec]) -> Parsed {
    let mut out = Parsed::default();
    let mut prose = String::new();
    let mut copied = 0;
    let mut pos = 0;
    // Tags named after tools that have no closing tag further on: later
    // ones cannot have one either, so they are prose without another scan
    // (keeps hostile input linear).
    let mut unclosed: Vec<&str> = Vec::new();
    while let Some(rel) = text.get(pos..).and_then(|t| t.find('<')) {
        let at = pos + rel;
        let rest = &text[at..];
        if rest.starts_with("<think>") {
            // Reasoning may mention calls; they are not calls.
            pos = scan::close_tag(text, THINK, at + 7).map_or(text.len(), |(_, end)| end);
            continue;
        }
        if rest.starts_with(QWEN_FUNCTION) {
            prose.push_str(&text[copied..at]);
            let (content, end, complete) = body(text, "function", at);
            match (complete, hermes::qwen_function(content, tools)) {
                (true, Ok(call)) => out.calls.push(call),
                (complete, Err(e)) => out.problems.push(cut_or(complete, "function", Some(&e))),
                (false, Ok(_)) => out.problems.push(cut_or(false, "function", None)),
            }
            pos = end;
            copied = end;
            continue;
        }
        let Some(tag) = scan::open_tag(text, at) else {
            pos = at + 1;
            continue;
        };
        let kind = match tag.name {
            HERMES => Kind::Hermes,
            MCP => Kind::Mcp,
            name => match find_tool(tools, name) {
                Some(spec) if !unclosed.contains(&name) => Kind::Tool(spec),
                _ => {
                    pos = at + 1;
                    continue;
                }
            },
        };
        let (content, end, complete) = if tag.self_closing {
            ("", tag.end, true)
        } else {
            match scan::close_tag(text, tag.name, tag.end) {
                Some((close, end)) => (&text[tag.end..close], end, true),
                None => (&text[tag.end..], text.len(), false),
            }
        };
        // The error is `None` for a call cut off with nothing more to say.
        let result: Result<Vec<ParsedCall>, Option<ParseError>> = match kind {
            // A model stopped at `</tool_call>` as its stop sequence still
            // wrote a complete call: accept it when its JSON is whole.
            Kind::Hermes => hermes::calls(content, tools).map_err(Some),
            Kind::Mcp if complete => xml::mcp_call(content, tools).map(|c| vec![c]).map_err(Some),
            Kind::Mcp => Err(None),
            Kind::Tool(spec) => {
                if !complete && !xml::has_param_child(content, spec) && tag.attrs.is_empty() {
                    // `<read>` mentioned in prose, not a call.
                    unclosed.push(tag.name);
                    pos = at + 1;
                    continue;
                }
                if complete {
                    xml::element_call(spec, &tag.attrs, content)
                        .map(|c| vec![c])
                        .map_err(Some)
                } else {
                    Err(None)
                }
            }
        };
        prose.push_str(&text[copied..at]);
        match result {
            Ok(calls) => out.calls.extend(calls),
            Err(e) => out.problems.push(cut_or(complete, tag.name, e.as_ref())),
        }
        pos = end;
        copied = end;
    }
    prose.push_str(&text[copied..]);
    let outside_thinking = without_think(&prose);
    for stray in ["</tool_call>", "</use_mcp_tool>", "</function>"] {
        if outside_thinking.contains(stray) {
            out.problems.push(format!(
                "the reply has a `{stray}` without its opening tag; write each call as one complete element"
            ));
        }
    }
    if scan::ends_with_partial_tag(text, &[HERMES, MCP]) {
        out.problems
            .push("the reply ends in the middle of a tool-call tag".to_string());
    }
    out.prose = tidy(&prose);
    out
}

/// The element starting at `at` through its closing tag (or to the end of
/// the text when it has none), where the text continues, and whether it
/// was closed.
fn body<'a>(text: &'a str, name: &str, at: usize) -> (&'a str, usize, bool) {
    match scan::close_tag(text, name, at) {
        Some((_, end)) => (&text[at..end], end, true),
        None => (&text[at..], text.len(), false),
    }
}

fn cut_or(complete: bool, tag: &str, error: Option<&ParseError>) -> String {
    match (complete, error) {
        (true, Some(e)) => format!("a <{tag}> call could not be read: {e}"),
        (true, None) => format!("a <{tag}> call could not be read"),
        (false, Some(e)) => {
            format!("a <{tag}> call was cut off before its closing </{tag}> tag: {e}")
        }
        (false, None) => format!("a <{tag}> call was cut off before its closing </{tag}> tag"),
    }
}

/// `text` without its `<think>…</think>` blocks.
fn without_think(text: &str) -> String {
    let mut out = String::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find("<think>") {
        let at = pos + rel;
        out.push_str(&text[pos..at]);
        pos = scan::close_tag(text, THINK, at + 7).map_or(text.len(), |(_, end)| end);
    }
    out.push_str(&text[pos..]);
    out
}

/// Prose left after removing calls: no empty code fences, no runs of blank
/// lines, trimmed.
fn tidy(prose: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in prose.lines() {
        let t = line.trim();
        // A fence that wrapped a call is now empty: drop both of its lines.
        if t == "```"
            && let Some(last) = lines.last()
            && last.trim().starts_with("```")
        {
            lines.pop();
            continue;
        }
        if t.is_empty() && lines.last().is_some_and(|l| l.trim().is_empty()) {
            continue;
        }
        lines.push(line);
    }
    lines.join("\n").trim().to_string()
}

/// The JSON type a parameter's schema names (the first non-null one).
pub(crate) fn param_type<'s>(spec: &'s ToolSpec, param: &str) -> Option<&'s str> {
    let schema = spec.parameters.get("properties")?.get(param)?;
    schema_type(schema)
}

fn schema_type(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
            .and_then(|alts| alts.iter().find_map(schema_type)),
    }
}

/// A parameter value written as text, typed by its schema: strings stay
/// text; numbers, booleans, arrays and objects are read as JSON when they
/// parse (otherwise the text is kept and validation reports the mismatch).
pub(crate) fn coerce(raw: &str, ty: Option<&str>) -> Value {
    let trimmed = raw.trim();
    // `null` is null whatever the type: the text form has no other way to
    // write it, and models mean "none" by it.
    if trimmed == "null" {
        return Value::Null;
    }
    match ty {
        Some("string") => Value::String(trim_one_newline(raw).to_string()),
        Some("integer" | "number") => serde_json::from_str::<Value>(trimmed)
            .ok()
            .filter(Value::is_number)
            .unwrap_or_else(|| Value::String(trimmed.to_string())),
        Some("boolean") => match trimmed.to_ascii_lowercase().as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::String(trimmed.to_string()),
        },
        Some("array" | "object") => serde_json::from_str::<Value>(scan::strip_fence(trimmed))
            .ok()
            .filter(|v| v.is_array() || v.is_object())
            .unwrap_or_else(|| Value::String(trimmed.to_string())),
        // Untyped: JSON (also a quoted string) is read as such, anything
        // else is text.
        _ => match serde_json::from_str::<Value>(trimmed) {
            Ok(v) => v,
            _ => Value::String(trim_one_newline(raw).to_string()),
        },
    }
}

/// Models put values on their own line: `<path>\nx.txt\n</path>`. One
/// newline on each side is layout, not content.
fn trim_one_newline(s: &str) -> &str {
    let s = s
        .strip_prefix("\r\n")
        .or_else(|| s.strip_prefix('\n'))
        .unwrap_or(s);
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .unwrap_or(s)
}

#[cfg(test)]
mod tests;
