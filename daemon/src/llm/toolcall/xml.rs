//! The XML forms: an element named after the tool with one child element
//! (or attribute) per parameter, and MiroThinker's
//! `<use_mcp_tool><server_name/><tool_name/><arguments>{json}</arguments></use_mcp_tool>`.

use serde_json::{Map, Value};

use super::{ParseError, ParsedCall, ToolSpec, coerce, find_tool, param_type, scan};

/// `<tool a="v"><p>value</p></tool>`. Values are typed by the schema; an
/// element whose whole body is a JSON object takes that object as its
/// arguments.
pub fn element_call(
    spec: &ToolSpec,
    attrs: &[(&str, String)],
    content: &str,
) -> Result<ParsedCall, ParseError> {
    let mut arguments = Map::new();
    for (key, value) in attrs {
        arguments.insert((*key).to_string(), coerce(value, param_type(spec, key)));
    }
    let children = children(content)?;
    if children.is_empty() {
        let body = scan::strip_fence(content);
        if body.starts_with('{') {
            match serde_json::from_str::<Value>(body) {
                Ok(Value::Object(map)) => arguments.extend(map),
                _ => {
                    return Err(ParseError::BodyNeither(spec.name.clone()));
                }
            }
        } else if !body.is_empty() {
            return Err(ParseError::TextWithoutParameters(spec.name.clone()));
        }
    }
    for (param, raw) in children {
        let ty = param_type(spec, param);
        arguments.insert(param.to_string(), coerce(raw, ty));
    }
    Ok(ParsedCall {
        name: spec.name.clone(),
        arguments,
    })
}

/// Whether `content` opens an element named after one of the tool's
/// parameters (tells a call cut off mid-way from a tag named in prose).
pub fn has_param_child(content: &str, spec: &ToolSpec) -> bool {
    let Some(props) = spec.parameters.get("properties").and_then(Value::as_object) else {
        return false;
    };
    props.keys().any(|p| content.contains(&format!("<{p}>")))
}

/// The child elements of `content`, in order, as (name, raw text). Text
/// between children is ignored; a child without its closing tag is an
/// error.
fn children(content: &str) -> Result<Vec<(&str, &str)>, ParseError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(rel) = content.get(pos..).and_then(|t| t.find('<')) {
        let at = pos + rel;
        let Some(tag) = scan::open_tag(content, at) else {
            pos = at + 1;
            continue;
        };
        if tag.self_closing {
            out.push((tag.name, ""));
            pos = tag.end;
            continue;
        }
        let (close, end) = scan::close_tag(content, tag.name, tag.end)
            .ok_or_else(|| ParseError::ChildUnclosed(tag.name.to_string()))?;
        out.push((tag.name, &content[tag.end..close]));
        pos = end;
    }
    Ok(out)
}

/// MiroThinker's form. The server and tool names are matched to a tool
/// offered as `mcp__<server>__<tool>` or, failing that, to the tool name
/// alone (core tools).
pub fn mcp_call(content: &str, tools: &[ToolSpec]) -> Result<ParsedCall, ParseError> {
    let mut server = None;
    let mut tool = None;
    let mut args = None;
    for (name, raw) in children(content)? {
        match name {
            "server_name" => server = Some(raw.trim()),
            "tool_name" => tool = Some(raw.trim()),
            "arguments" => args = Some(raw),
            _ => {}
        }
    }
    let tool = tool
        .filter(|t| !t.is_empty())
        .ok_or(ParseError::NoToolName)?;
    let arguments = match args.map(scan::strip_fence) {
        None | Some("") => Map::new(),
        Some(body) => match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(ParseError::McpArgumentsNotAnObject),
            Err(e) => return Err(ParseError::McpArgumentsBadJson(e)),
        },
    };
    let server = server.unwrap_or("").trim_start_matches("mcp:");
    let namespaced = format!("mcp__{server}__{tool}");
    let name = find_tool(tools, &namespaced)
        .or_else(|| find_tool(tools, tool))
        .map_or_else(|| tool.to_string(), |s| s.name.clone());
    Ok(ParsedCall { name, arguments })
}
