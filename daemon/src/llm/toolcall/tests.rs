use serde_json::{Value, json};

use super::render::{render_call, render_mcp_call, to_text_request};
use super::stream::DisplayFilter;
use super::*;
use crate::config::ToolFormat;
use crate::llm::{Message, Part, Request, Role, ToolCall};

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "offset": {"type": "integer"},
                "limit": {"type": ["integer", "null"]}}, "required": ["path"]})
            .into(),
        },
        ToolSpec {
            name: "mcp__time__get_current_time".into(),
            description: "Now".into(),
            parameters: json!({"type": "object", "properties": {"timezone": {"type": "string"}}})
                .into(),
        },
        ToolSpec {
            name: "set".into(),
            description: "Typed values".into(),
            parameters: json!({"type": "object", "properties": {
                "flag": {"type": "boolean"}, "ratio": {"type": "number"},
                "items": {"type": "array"}, "opts": {"type": "object"}, "any": {}}})
            .into(),
        },
    ]
}

fn one(text: &str) -> ParsedCall {
    let p = parse(text, &tools());
    assert!(p.problems.is_empty(), "{text}: {:?}", p.problems);
    assert_eq!(p.calls.len(), 1, "{text}: {p:?}");
    p.calls.into_iter().next().unwrap()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn hermes_forms() {
    let want = ParsedCall {
        name: "read".into(),
        arguments: args(json!({"path": "a.txt"})),
    };
    for text in [
        r#"<tool_call>{"name": "read", "arguments": {"path": "a.txt"}}</tool_call>"#,
        "<tool_call>\n```json\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n```\n</tool_call>",
        r#"<tool_call>{"name":"read","parameters":{"path":"a.txt"}}</tool_call>"#,
        r#"<tool_call>{"name":"read","arguments":"{\"path\": \"a.txt\"}"}</tool_call>"#,
        r#"<tool_call>{"type":"function","function":{"name":"read","arguments":{"path":"a.txt"}}}</tool_call>"#,
        // Stopped at the stop sequence: no closing tag, but whole JSON.
        r#"<tool_call>{"name": "read", "arguments": {"path": "a.txt"}}"#,
        "<tool_call>\n<function=read>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call>",
        "<function=read><parameter=path>a.txt</parameter></function>",
    ] {
        assert_eq!(one(text), want, "{text}");
    }
}

/// Small models told to write `<tool_call>{json}</tool_call>` also write
/// the element form inside it; for a tool offered this turn it is read
/// like the bare element form.
#[test]
fn the_element_form_inside_tool_call_is_read_for_offered_tools() {
    let want = ParsedCall {
        name: "read".into(),
        arguments: args(json!({"path": "a.txt"})),
    };
    for text in [
        "<tool_call><read><path>a.txt</path></read></tool_call>",
        "<tool_call>\n<read>\n<path>a.txt</path>\n</read>\n</tool_call>",
        "<tool_call>\n```xml\n<read path=\"a.txt\"/>\n```\n</tool_call>",
        "<tool_call><READ><path>a.txt</path></READ></tool_call>",
        "<tool_call><use_mcp_tool><server_name>pincer</server_name><tool_name>read</tool_name><arguments>{\"path\": \"a.txt\"}</arguments></use_mcp_tool></tool_call>",
        // Stopped at `</tool_call>` as the stop sequence, the element whole.
        "<tool_call><read><path>a.txt</path></read>",
    ] {
        assert_eq!(one(text), want, "{text}");
    }
    let p = parse(
        "I'll read both.\n<tool_call>\n<read><path>a</path></read>\n<read><path>b</path><limit>3</limit></read>\n</tool_call>",
        &tools(),
    );
    assert_eq!(p.problems, Vec::<String>::new());
    let got: Vec<&Map<String, Value>> = p.calls.iter().map(|c| &c.arguments).collect();
    assert_eq!(
        got,
        [
            &args(json!({"path": "a"})),
            &args(json!({"path": "b", "limit": 3}))
        ]
    );
    assert_eq!(p.prose, "I'll read both.");
}

/// Inside `<tool_call>`, an element that is not an offered tool, text
/// beside the elements or an element cut off is markup that could not be
/// read (the reply is rolled back), never a call.
#[test]
fn elements_inside_tool_call_that_are_not_offered_tools_are_problems() {
    for (text, says) in [
        (
            "<tool_call><exec><command>ls</command></exec></tool_call>",
            "<exec> is not a tool offered here",
        ),
        (
            "<tool_call><read><path>a</path></read> and more</tool_call>",
            "text beside",
        ),
        (
            "<tool_call><read><path>a</path></tool_call>",
            "no closing </read>",
        ),
        (
            "<tool_call><tool_call>{}</tool_call>",
            "<tool_call> is not a tool offered here",
        ),
    ] {
        let p = parse(text, &tools());
        assert!(p.calls.is_empty(), "{text}: {p:?}");
        assert!(
            p.problems.iter().any(|e| e.contains(says)),
            "{text}: {:?}",
            p.problems
        );
    }
}

#[test]
fn several_calls_and_prose_around_them() {
    let text = "Let me look.\n<tool_call>\n[{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}},{\"name\":\"read\",\"arguments\":{\"path\":\"b\"}}]\n</tool_call>\n<tool_call>{\"name\":\"read\",\"arguments\":{\"path\":\"c\"}}</tool_call>\nBack soon.";
    let p = parse(text, &tools());
    assert_eq!(p.problems, Vec::<String>::new());
    let paths: Vec<&Value> = p.calls.iter().map(|c| &c.arguments["path"]).collect();
    assert_eq!(paths, [&json!("a"), &json!("b"), &json!("c")]);
    assert_eq!(p.prose, "Let me look.\n\nBack soon.");
}

#[test]
fn xml_forms_are_typed_by_the_schema() {
    assert_eq!(
        one(
            "<read>\n<path>\nnotes/a b.md\n</path>\n<offset>3</offset>\n<limit>10</limit>\n</read>"
        )
        .arguments,
        args(json!({"path": "notes/a b.md", "offset": 3, "limit": 10}))
    );
    assert_eq!(
        one(r#"<read path="x.md" offset="2"/>"#).arguments,
        args(json!({"path": "x.md", "offset": 2}))
    );
    assert_eq!(
        one(r#"<read>{"path": "x.md"}</read>"#).arguments,
        args(json!({"path": "x.md"}))
    );
    assert_eq!(
        one("<set><flag>True</flag><ratio>0.5</ratio><items>[1, 2]</items><opts>{\"a\": null}</opts><any>7</any></set>").arguments,
        args(json!({"flag": true, "ratio": 0.5, "items": [1, 2], "opts": {"a": null}, "any": 7}))
    );
    // A wrong type stays text, for validation to report.
    assert_eq!(
        one("<read><path>a</path><offset>ten</offset></read>").arguments["offset"],
        json!("ten")
    );
    // Strings keep inner markup and whitespace.
    assert_eq!(
        one("<read><path>  <b>x</b> </path></read>").arguments["path"],
        json!("  <b>x</b> ")
    );
}

#[test]
fn mirothinker_form_resolves_namespaced_and_core_tools() {
    let c = one(&render_mcp_call(
        "time",
        "get_current_time",
        &args(json!({"timezone": "UTC"})),
    ));
    assert_eq!(c.name, "mcp__time__get_current_time");
    assert_eq!(c.arguments, args(json!({"timezone": "UTC"})));
    let c = one(
        "<use_mcp_tool><server_name>pincer</server_name><tool_name>read</tool_name><arguments>```json\n{\"path\":\"a\"}\n```</arguments></use_mcp_tool>",
    );
    assert_eq!(c.name, "read");
    let c =
        one("<use_mcp_tool><server_name>x</server_name><tool_name>nope</tool_name></use_mcp_tool>");
    assert_eq!(c.name, "nope");
    assert!(c.arguments.is_empty());
}

#[test]
fn prose_is_not_a_call() {
    for text in [
        "Use the <read> tool to see files. a < b and c > d.",
        "<think>I could call <tool_call>{\"name\":\"read\"}</tool_call></think>The answer is 4.",
        "Write `<b>bold</b>` in HTML.",
        "",
        "<",
        "<<<>>>",
    ] {
        let p = parse(text, &tools());
        assert!(p.calls.is_empty(), "{text}: {p:?}");
        assert!(p.problems.is_empty(), "{text}: {p:?}");
    }
}

#[test]
fn broken_markup_is_a_problem_not_a_call() {
    for text in [
        "<tool_call>{\"name\": \"read\", \"arguments\": {\"pa",
        "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>not json</tool_call>",
        "<tool_call></tool_call>",
        "<tool_call>{\"name\":\"read\",\"arguments\":[1]}</tool_call>",
        "<use_mcp_tool><tool_name>read</tool_name><arguments>{bad</arguments></use_mcp_tool>",
        "<use_mcp_tool><tool_name>read</tool_name>",
        "<read><path>a.txt",
        "<read><path>a</read>",
        "<read>just words</read>",
        "text </tool_call>",
        "calling now <tool_ca",
        "<function=read><parameter=path>a",
    ] {
        let p = parse(text, &tools());
        assert!(p.calls.is_empty(), "{text}: {p:?}");
        assert!(!p.problems.is_empty(), "{text}: no problem reported");
    }
}

#[test]
fn rendered_calls_parse_back() {
    let a = args(json!({"path": "dir/x.md", "offset": 5, "limit": null}));
    for format in [ToolFormat::Hermes, ToolFormat::Xml] {
        let text = render_call(format, None, "read", &a);
        assert_eq!(one(&text).arguments, a, "{format:?}: {text}");
    }
}

#[test]
fn text_requests_carry_tools_in_the_prompt_and_results_as_user_text() {
    let req = Request {
        system: "Be brief.".into(),
        messages: vec![
            Message::user("hi"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Text("Looking.".into()),
                    Part::ToolCall(ToolCall {
                        id: "call_0".into(),
                        name: "read".into(),
                        arguments: "{\"path\":\"a\"}".into(),
                    }),
                ],
            },
            Message {
                role: Role::User,
                parts: vec![Part::ToolResult {
                    call_id: "call_0".into(),
                    name: "read".into(),
                    content: "1\thello".into(),
                    is_error: false,
                }],
            },
        ],
        tools: tools(),
    };
    for format in [ToolFormat::Hermes, ToolFormat::Xml] {
        let out = to_text_request(&req, format);
        assert!(out.tools.is_empty());
        assert!(out.system.starts_with("Be brief.\n\n# Tools"));
        assert!(out.system.contains("mcp__time__get_current_time"));
        let Part::Text(assistant) = &out.messages[1].parts[0] else {
            panic!()
        };
        let reparsed = parse(assistant, &tools());
        assert_eq!(reparsed.prose, "Looking.");
        assert_eq!(reparsed.calls[0].name, "read");
        let Part::Text(result) = &out.messages[2].parts[0] else {
            panic!()
        };
        assert_eq!(
            result,
            "<tool_result name=\"read\" call_id=\"call_0\">\n1\thello\n</tool_result>"
        );
        // Deterministic, so prompt caches hit.
        assert_eq!(out.system, to_text_request(&req, format).system);
    }
}

#[test]
fn text_requests_keep_a_messages_images_after_its_text() {
    let image = Part::Image {
        media_type: "image/jpeg".into(),
        data: "/9j/".into(),
    };
    let req = Request {
        system: String::new(),
        messages: vec![Message {
            role: Role::User,
            parts: vec![
                Part::Text("look [photo saved as inbox/a.jpg (3 bytes)]".into()),
                image.clone(),
            ],
        }],
        tools: tools(),
    };
    for format in [ToolFormat::Hermes, ToolFormat::Xml] {
        let out = to_text_request(&req, format);
        assert_eq!(
            out.messages[0].parts,
            vec![
                Part::Text("look [photo saved as inbox/a.jpg (3 bytes)]".into()),
                image.clone()
            ],
            "{format:?}"
        );
    }
}

/// Feeds `text` to a display filter split at every byte boundary pair.
fn filtered(text: &str, at: usize) -> String {
    let mut f = DisplayFilter::new(&tools());
    let mut out = f.push(&text[..at]);
    out.push_str(&f.push(&text[at..]));
    out.push_str(&f.finish());
    out
}

#[test]
fn the_display_filter_hides_calls_and_keeps_prose_wherever_the_stream_splits() {
    let cases = [
        (
            "Sure. <tool_call>{\"name\":\"read\",\"arguments\":{}}</tool_call> Done.",
            "Sure.  Done.",
        ),
        ("a < b, <b>ok</b> <rea", "a < b, <b>ok</b> <rea"),
        (
            "x <read path=\"a\"/> y <read><path>b</path></read>z",
            "x  y z",
        ),
        (
            "<function=read><parameter=path>a</parameter></function>!",
            "!",
        ),
        ("héllo <use_mcp_tool>…</use_mcp_tool>ü", "héllo ü"),
    ];
    for (text, want) in cases {
        for at in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
            assert_eq!(filtered(text, at), want, "{text:?} split at {at}");
        }
    }
}

#[test]
fn hostile_input_stays_linear() {
    // Each of these would be quadratic with a naive rescan per tag.
    for unit in [
        "<read>",
        "<tool_call>",
        "<use_mcp_tool>",
        "<read path=\"a\">",
        "</tool_call>",
        "<",
    ] {
        let text = unit.repeat(200_000 / unit.len());
        let started = std::time::Instant::now();
        let p = parse(&text, &tools());
        assert!(p.calls.is_empty());
        let mut f = DisplayFilter::new(&tools());
        for chunk in text.as_bytes().chunks(7) {
            f.push(std::str::from_utf8(chunk).unwrap());
        }
        f.finish();
        // Generous: a quadratic scan of 200 KB takes minutes.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{unit}"
        );
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Fragments that make parsers work: tags of every form, JSON pieces,
    /// fences, multi-byte text.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("<tool_call>".to_string()),
            Just("</tool_call>".to_string()),
            Just("<use_mcp_tool>".to_string()),
            Just("</use_mcp_tool>".to_string()),
            Just("<server_name>time</server_name>".to_string()),
            Just("<tool_name>".to_string()),
            Just("<arguments>".to_string()),
            Just("<read>".to_string()),
            Just("</read>".to_string()),
            Just("<path>".to_string()),
            Just("</path>".to_string()),
            Just("<read path=\"".to_string()),
            Just("/>".to_string()),
            Just("<function=read>".to_string()),
            Just("<parameter=path>".to_string()),
            Just("</parameter>".to_string()),
            Just("<think>".to_string()),
            Just("</think>".to_string()),
            Just("{\"name\": \"read\", \"arguments\": {".to_string()),
            Just("\"path\": \"a\"}}".to_string()),
            Just("```json\n".to_string()),
            Just("```".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just("日本語 ".to_string()),
            "\\PC{0,8}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn parse_never_panics_on_markup_soup(parts in prop::collection::vec(fragment(), 0..24)) {
            let text = parts.concat();
            let p = parse(&text, &tools());
            // Every call it returns names a tool and carries an object.
            for c in &p.calls {
                prop_assert!(!c.name.is_empty());
            }
        }

        #[test]
        fn parse_never_panics_on_any_text(text in "\\PC{0,300}") {
            let _ = parse(&text, &tools());
        }

        #[test]
        fn display_filter_never_panics_and_loses_no_plain_text(
            parts in prop::collection::vec(fragment(), 0..16),
            split in 0usize..400,
        ) {
            let text = parts.concat();
            let mut at = split.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let shown = filtered(&text, at);
            if !text.contains('<') {
                prop_assert_eq!(shown, text);
            }
        }
    }
}
