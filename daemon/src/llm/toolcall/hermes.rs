//! The Hermes form: a JSON object (or an array of them) inside
//! `<tool_call>…</tool_call>`, as Qwen- and Hermes-tuned models write it;
//! and the Qwen3-Coder form `<function=name><parameter=p>v</parameter></function>`.
//! Small models also put the XML element form of a tool inside
//! `<tool_call>`; that is read too, for the tools offered in the turn.

use serde_json::{Map, Value};

use super::{MCP, ParseError, ParsedCall, ToolSpec, coerce, find_tool, param_type, scan, xml};

/// The calls inside one `<tool_call>` element.
pub fn calls(content: &str, tools: &[ToolSpec]) -> Result<Vec<ParsedCall>, ParseError> {
    let body = scan::strip_fence(content);
    if body.starts_with(super::QWEN_FUNCTION) {
        return qwen_function(body, tools).map(|c| vec![c]);
    }
    if body.is_empty() {
        return Err(ParseError::Empty);
    }
    if body.starts_with('<') {
        return elements(body, tools);
    }
    // Usually one object; some models put several objects or an array.
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    for value in &mut stream {
        match value {
            Ok(v) => values.push(v),
            Err(e) => return Err(ParseError::BadJson(e)),
        }
    }
    let mut out = Vec::new();
    for value in values {
        match value {
            Value::Array(items) => {
                for item in items {
                    out.push(call_from_json(item)?);
                }
            }
            other => out.push(call_from_json(other)?),
        }
    }
    if out.is_empty() {
        return Err(ParseError::NoCall);
    }
    Ok(out)
}

/// Elements instead of JSON: `<read><path>a</path></read>` for a tool
/// offered in the turn, or `<use_mcp_tool>…</use_mcp_tool>`, one or more,
/// with only whitespace between them. Nothing here calls back into the
/// parser, so nested `<tool_call>` tags cannot recurse.
fn elements(body: &str, tools: &[ToolSpec]) -> Result<Vec<ParsedCall>, ParseError> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &body[pos..];
        pos += rest.len() - rest.trim_start().len();
        if pos >= body.len() {
            return Ok(out);
        }
        let tag = scan::open_tag(body, pos).ok_or(ParseError::TextBesideElements)?;
        let spec = if tag.name == MCP {
            None
        } else {
            Some(
                find_tool(tools, tag.name)
                    .ok_or_else(|| ParseError::NotOffered(tag.name.to_string()))?,
            )
        };
        let (content, end) = if tag.self_closing {
            ("", tag.end)
        } else {
            let (close, end) = scan::close_tag(body, tag.name, tag.end)
                .ok_or_else(|| ParseError::InnerUnclosed(tag.name.to_string()))?;
            (&body[tag.end..close], end)
        };
        out.push(match spec {
            Some(spec) => xml::element_call(spec, &tag.attrs, content)?,
            None => xml::mcp_call(content, tools)?,
        });
        pos = end;
    }
}

/// `{"name": …, "arguments": {…}}`, also with `parameters` for `arguments`,
/// arguments encoded as a JSON string, or the OpenAI shape
/// `{"type": "function", "function": {…}}`.
fn call_from_json(value: Value) -> Result<ParsedCall, ParseError> {
    let Value::Object(mut obj) = value else {
        return Err(ParseError::NotAnObject);
    };
    if let Some(Value::Object(inner)) = obj.remove("function") {
        return call_from_json(Value::Object(inner));
    }
    let name = match obj.remove("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_string(),
        _ => return Err(ParseError::NoName),
    };
    let args = ["arguments", "parameters", "args", "input"]
        .iter()
        .find_map(|k| obj.remove(*k));
    let arguments = match args {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(Value::String(s)) if s.trim().is_empty() => Map::new(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(map)) => map,
            _ => {
                return Err(ParseError::ArgumentsNotAnObject(name));
            }
        },
        Some(_) => {
            return Err(ParseError::ArgumentsNotAnObject(name));
        }
    };
    Ok(ParsedCall { name, arguments })
}

/// `<function=name><parameter=p>value</parameter>…</function>`; `text`
/// starts at `<function=`. Values are typed by the tool's schema.
pub fn qwen_function(text: &str, tools: &[ToolSpec]) -> Result<ParsedCall, ParseError> {
    let rest = text
        .strip_prefix(super::QWEN_FUNCTION)
        .ok_or(ParseError::NotAFunction)?;
    let gt = rest.find('>').ok_or(ParseError::FunctionTagOpen)?;
    let name = rest[..gt].trim().trim_matches('"').to_string();
    if name.is_empty() {
        return Err(ParseError::NoFunctionName);
    }
    let body = &rest[gt + 1..];
    let body = match scan::close_tag(body, "function", 0) {
        Some((close, _)) => &body[..close],
        None => return Err(ParseError::NoFunctionEnd(name)),
    };
    let spec = find_tool(tools, &name);
    let mut arguments = Map::new();
    let mut pos = 0;
    while let Some(rel) = body[pos..].find("<parameter=") {
        let start = pos + rel + "<parameter=".len();
        let gt = body[start..]
            .find('>')
            .ok_or(ParseError::ParameterTagOpen)?;
        let param = body[start..start + gt].trim().trim_matches('"').to_string();
        let value_start = start + gt + 1;
        let (close, end) = scan::close_tag(body, "parameter", value_start)
            .ok_or_else(|| ParseError::NoParameterEnd(param.clone()))?;
        let ty = spec.and_then(|s| param_type(s, &param));
        arguments.insert(param, coerce(&body[value_start..close], ty));
        pos = end;
    }
    Ok(ParsedCall {
        name: spec.map_or(name, |s| s.name.clone()),
        arguments,
    })
}
