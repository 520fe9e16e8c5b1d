//! Tool-call parser robustness on real data: every ground-truth call of the
//! BFCL v4 simple, multiple, parallel and live categories (PyPI `bfcl-eval`,
//! Apache-2.0, fetched by `tests/setup.sh`) is rendered into each text form
//! (hermes, hermes with an array, Qwen3-Coder, xml, MiroThinker's
//! `use_mcp_tool`) and into OpenAI and Anthropic streams, then mutated
//! (whitespace, code fences, prose around it, truncation at every byte for a
//! sample, wrong types). The parsers must return exactly the ground truth or
//! a clean error — never a different call. The counts per category are
//! printed as a table (`tests/run.sh` shows it).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use pincer_daemon::config::ToolFormat;
use pincer_daemon::llm::sse::SseDecoder;
use pincer_daemon::llm::toolcall::{self, render};
use pincer_daemon::llm::{Delta, ReplyBuilder, ToolSpec, anthropic, openai};
use pincer_daemon::tools::{ToolDef, ToolFlags, ToolOutput, ToolSource};
use serde_json::{Map, Value, json};

const CATEGORIES: &[&str] = &[
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
];

/// Every how many entries one gets the truncation-at-every-byte mutation.
const TRUNCATION_SAMPLE: usize = 25;

fn data_dir() -> PathBuf {
    let peers = std::env::var_os("PINCER_TEST_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/pincer-test")
        });
    let dir = peers.join("bfcl/bfcl_eval/data");
    assert!(
        dir.join("BFCL_v4_simple_python.json").is_file(),
        "the BFCL data is missing from {}; fetch it with `bash tests/setup.sh` (it downloads the bfcl-eval wheel from PyPI)",
        dir.display()
    );
    dir
}

fn read_lines(path: PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// BFCL's schema dialect (`dict`, `float`, `tuple`, `any`) as JSON Schema.
fn json_schema(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, val) in map {
                let val = match (k.as_str(), val) {
                    // Java and JavaScript entries use their own type names.
                    ("type", Value::String(t)) => match t.as_str() {
                        "dict" | "object" | "HashMap" | "Map" => json!("object"),
                        "float" | "double" | "number" => json!("number"),
                        "integer" | "int" | "long" | "short" | "byte" => json!("integer"),
                        "tuple" | "array" | "Array" | "ArrayList" | "List" => json!("array"),
                        "string" | "String" | "char" => json!("string"),
                        "boolean" | "Boolean" => json!("boolean"),
                        _ => continue,
                    },
                    ("properties", Value::Object(props)) => Value::Object(
                        props
                            .iter()
                            .map(|(p, s)| (p.clone(), json_schema(s)))
                            .collect(),
                    ),
                    ("items", s) => json_schema(s),
                    ("default" | "optional" | "format", _) => continue,
                    (_, other) => other.clone(),
                };
                out.insert(k.clone(), val);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn specs(entry: &Value) -> Vec<ToolSpec> {
    entry["function"]
        .as_array()
        .expect("function list")
        .iter()
        .map(|f| ToolSpec {
            name: f["name"].as_str().unwrap().to_string(),
            description: f["description"].as_str().unwrap_or_default().to_string(),
            parameters: json_schema(&f["parameters"]).into(),
        })
        .collect()
}

/// The ground truth as calls: each parameter takes its first accepted
/// value; `""` alone means "may be omitted".
fn expected(answer: &Value) -> Vec<(String, Map<String, Value>)> {
    answer["ground_truth"]
        .as_array()
        .expect("ground_truth")
        .iter()
        .map(|call| {
            let (name, params) = call.as_object().unwrap().iter().next().unwrap();
            let mut args = Map::new();
            for (p, accepted) in params.as_object().unwrap() {
                if let Some(v) = accepted
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| *v != &json!(""))
                {
                    args.insert(p.clone(), v.clone());
                }
            }
            (name.clone(), args)
        })
        .collect()
}

type Calls = Vec<(String, Map<String, Value>)>;

fn parsed_calls(text: &str, tools: &[ToolSpec]) -> (Calls, Vec<String>) {
    let p = toolcall::parse(text, tools);
    (
        p.calls.into_iter().map(|c| (c.name, c.arguments)).collect(),
        p.problems,
    )
}

/// Values equal as JSON, numbers compared by value (XML text cannot tell
/// 5 from 5.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn same_calls(a: &[(String, Map<String, Value>)], b: &[(String, Map<String, Value>)]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((n1, a1), (n2, a2))| {
            n1 == n2 && same(&Value::Object(a1.clone()), &Value::Object(a2.clone()))
        })
}

/// What the parser plus schema validation made of a text.
enum Outcome {
    /// Exactly the ground truth.
    Exact,
    /// A reported problem, or a call the schema rejects: the model gets an
    /// error it can act on, and nothing wrong runs.
    CleanError,
    /// A call that is not the ground truth and would run.
    Wrong(String),
    /// Not the ground truth, but the ground truth breaks its own schema.
    TruthInvalid,
}

fn outcome(text: &str, tools: &[ToolSpec], want: &Calls) -> Outcome {
    let (got, problems) = parsed_calls(text, tools);
    if problems.is_empty() && same_calls(&got, want) {
        return Outcome::Exact;
    }
    for (i, (name, args)) in got.iter().enumerate() {
        if want
            .get(i)
            .is_some_and(|w| same_calls(std::slice::from_ref(w), &[(name.clone(), args.clone())]))
        {
            continue;
        }
        let rejected = tools.iter().find(|t| &t.name == name).is_none_or(|spec| {
            tool_def(spec)
                .prepare(&Value::Object(args.clone()).to_string())
                .is_err()
        });
        // Some ground truths disagree with their own schema (a boolean for
        // a string enum): text forms read values by the schema, so such a
        // call cannot come back as the ground truth.
        let truth_invalid = want.get(i).is_some_and(|(n, a)| {
            tools.iter().find(|t| &t.name == n).is_some_and(|spec| {
                tool_def(spec)
                    .prepare(&Value::Object(a.clone()).to_string())
                    .is_err()
            })
        });
        if !rejected && truth_invalid {
            return Outcome::TruthInvalid;
        }
        if !rejected {
            return Outcome::Wrong(format!(
                "call {i} {name} {args:?} passes validation; problems {problems:?}"
            ));
        }
    }
    if problems.is_empty() && got.len() < want.len() && same_calls(&got, &want[..got.len()]) {
        return Outcome::Wrong(format!(
            "{} of {} calls, and no problem reported",
            got.len(),
            want.len()
        ));
    }
    Outcome::CleanError
}

fn render_qwen(spec: Option<&ToolSpec>, name: &str, args: &Map<String, Value>) -> String {
    let mut out = format!("<tool_call>\n<function={name}>\n");
    for (p, v) in args {
        let text = render::value_text(spec, p, v);
        let _ = write!(out, "<parameter={p}>\n{text}\n</parameter>\n");
    }
    out.push_str("</function>\n</tool_call>");
    out
}

type RenderFn = dyn Fn(Option<&ToolSpec>, &str, &Map<String, Value>) -> String;

/// The text forms of one entry's calls.
fn text_forms(calls: &Calls, tools: &[ToolSpec]) -> Vec<(&'static str, String)> {
    let join = |f: &RenderFn| {
        calls
            .iter()
            .map(|(n, a)| f(tools.iter().find(|t| &t.name == n), n, a))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let array: Vec<Value> = calls
        .iter()
        .map(|(n, a)| json!({"name": n, "arguments": a}))
        .collect();
    vec![
        (
            "hermes",
            join(&|s, n, a| render::render_call(ToolFormat::Hermes, s, n, a)),
        ),
        (
            "hermes-array",
            format!("<tool_call>\n{}\n</tool_call>", Value::Array(array)),
        ),
        ("qwen", join(&render_qwen)),
        (
            "xml",
            join(&|s, n, a| render::render_call(ToolFormat::Xml, s, n, a)),
        ),
        (
            "mcp",
            join(&|_, n, a| render::render_mcp_call("bfcl", n, a)),
        ),
    ]
}

/// Mutations that must not change the result.
fn mutations(text: &str, form: &str) -> Vec<(&'static str, String)> {
    // Whitespace between elements only: inside a value it is content.
    let spaced = if form.starts_with("hermes") {
        text.replace("<tool_call>\n", "<tool_call>  \n\n   ")
            .replace("\n</tool_call>", "\t\n  </tool_call >")
    } else {
        format!("\n  {}  \n", text.replace(">\n<", ">\n\n   <"))
    };
    let fenced = if form.starts_with("hermes") {
        text.replace("<tool_call>\n", "<tool_call>\n```json\n")
            .replace("\n</tool_call>", "\n```\n</tool_call>")
    } else {
        format!("```xml\n{text}\n```")
    };
    vec![
        ("whitespace", spaced),
        ("fences", fenced),
        (
            "prose",
            format!("Sure — I'll do that now.\n\n{text}\n\nI'll report back once it returns."),
        ),
    ]
}

fn sse_events(body: &str) -> Vec<pincer_daemon::llm::sse::SseEvent> {
    let mut d = SseDecoder::new();
    let mut events = d.push(body.as_bytes());
    events.extend(d.finish());
    events
}

fn from_deltas(deltas: Vec<Delta>) -> Calls {
    let mut b = ReplyBuilder::default();
    for d in deltas {
        b.apply(d);
    }
    b.finish()
        .tool_calls
        .into_iter()
        .map(|c| {
            let args = match serde_json::from_str::<Value>(&c.arguments) {
                Ok(Value::Object(m)) => m,
                other => panic!("arguments are not an object: {other:?}"),
            };
            (c.name, args)
        })
        .collect()
}

/// The calls as an OpenAI chat-completions stream (arguments in two deltas).
fn openai_round_trip(calls: &Calls) -> Calls {
    let mut body = String::new();
    for (i, (n, a)) in calls.iter().enumerate() {
        let args = Value::Object(a.clone()).to_string();
        let cut = args
            .char_indices()
            .nth(args.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        let first = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": n, "arguments": &args[..cut]}}]}}]});
        let second = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": &args[cut..]}}]}}]});
        let _ = write!(body, "data: {first}\n\ndata: {second}\n\n");
    }
    let _ = write!(
        body,
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    );
    let mut dec = openai::Decoder::default();
    let deltas = sse_events(&body)
        .iter()
        .flat_map(|e| dec.event(e).expect("valid openai event"))
        .collect();
    assert!(dec.finished());
    from_deltas(deltas)
}

/// The calls as an Anthropic messages stream.
fn anthropic_round_trip(calls: &Calls) -> Calls {
    let mut body = String::new();
    let mut event = |name: &str, data: Value| {
        let _ = write!(body, "event: {name}\ndata: {data}\n\n");
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
    );
    for (i, (n, a)) in calls.iter().enumerate() {
        let args = Value::Object(a.clone()).to_string();
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": n, "input": {}}}),
        );
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": args}}),
        );
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    let mut dec = anthropic::Decoder::default();
    let deltas = sse_events(&body)
        .iter()
        .flat_map(|e| dec.event(e).expect("valid anthropic event"))
        .collect();
    assert!(dec.finished());
    from_deltas(deltas)
}

/// The first parameter whose schema type is integer, number or boolean,
/// with a value of the wrong type for it.
fn wrong_type(spec: &ToolSpec, args: &Map<String, Value>) -> Option<(String, Value)> {
    args.keys().find_map(|p| {
        let ty = spec.parameters["properties"][p]["type"].as_str()?;
        matches!(ty, "integer" | "number" | "boolean").then(|| (p.clone(), json!("not-a-value")))
    })
}

fn tool_def(spec: &ToolSpec) -> ToolDef {
    ToolDef::dynamic(
        &spec.name,
        &spec.description,
        (*spec.parameters).clone(),
        Vec::new(),
        ToolFlags::default(),
        ToolSource::Core,
        std::sync::Arc::new(|_, _| Box::pin(async { ToolOutput::ok("") })),
    )
}

#[derive(Default)]
struct Counts {
    entries: usize,
    calls: usize,
    forms_ok: usize,
    forms_error: usize,
    mutations_ok: usize,
    mutations_error: usize,
    truth_invalid: usize,
    cuts: usize,
    cuts_clean_error: usize,
    wrong_types_rejected: usize,
    failures: Vec<String>,
}

#[test]
fn bfcl_round_trip() {
    let dir = data_dir();
    let mut table: BTreeMap<&str, Counts> = BTreeMap::new();
    for category in CATEGORIES {
        let questions = read_lines(dir.join(format!("BFCL_v4_{category}.json")));
        let answers = read_lines(dir.join(format!("possible_answer/BFCL_v4_{category}.json")));
        let answers: BTreeMap<&str, &Value> = answers
            .iter()
            .map(|a| (a["id"].as_str().unwrap(), a))
            .collect();
        let counts = table.entry(category).or_default();
        for (n, q) in questions.iter().enumerate() {
            let id = q["id"].as_str().unwrap();
            let Some(answer) = answers.get(id) else {
                continue;
            };
            let tools = specs(q);
            let want = expected(answer);
            counts.entries += 1;
            counts.calls += want.len();
            let mut fail = |what: String| {
                if counts.failures.len() < 20 {
                    counts.failures.push(format!("{id}: {what}"));
                } else {
                    counts.failures.push(String::new());
                }
            };

            for (form, text) in text_forms(&want, &tools) {
                match outcome(&text, &tools, &want) {
                    Outcome::Exact => counts.forms_ok += 1,
                    Outcome::CleanError => counts.forms_error += 1,
                    Outcome::TruthInvalid => counts.truth_invalid += 1,
                    Outcome::Wrong(why) => fail(format!("{form}: {why} from\n{text}")),
                }
                for (mutation, mutated) in mutations(&text, form) {
                    match outcome(&mutated, &tools, &want) {
                        Outcome::Exact => counts.mutations_ok += 1,
                        Outcome::CleanError => counts.mutations_error += 1,
                        Outcome::TruthInvalid => counts.truth_invalid += 1,
                        Outcome::Wrong(why) => {
                            fail(format!("{form}/{mutation}: {why} from\n{mutated}"))
                        }
                    }
                }
                if n % TRUNCATION_SAMPLE == 0 {
                    let (whole, _) = parsed_calls(&text, &tools);
                    for cut in (0..text.len()).filter(|i| text.is_char_boundary(*i)) {
                        let (got, problems) = parsed_calls(&text[..cut], &tools);
                        counts.cuts += 1;
                        // Never a call the whole text does not hold: what
                        // comes back is the calls completed before the cut.
                        if got.len() > whole.len() || !same_calls(&got, &whole[..got.len()]) {
                            fail(format!(
                                "{form} cut at {cut}: {got:?} is not a prefix of {whole:?}"
                            ));
                        }
                        if !problems.is_empty() {
                            counts.cuts_clean_error += 1;
                        }
                    }
                }
            }
            for (form, got) in [
                ("openai", openai_round_trip(&want)),
                ("anthropic", anthropic_round_trip(&want)),
            ] {
                if same_calls(&got, &want) {
                    counts.forms_ok += 1;
                } else {
                    fail(format!("{form}: got {got:?}"));
                }
            }
            // A wrong type is caught by schema validation, in every form.
            if let Some((name, args)) = want.first()
                && let Some(spec) = tools.iter().find(|t| &t.name == name)
                && let Some((param, bad)) = wrong_type(spec, args)
            {
                let mut args = args.clone();
                args.insert(param, bad);
                let text = render::render_call(ToolFormat::Xml, Some(spec), name, &args);
                let (got, _) = parsed_calls(&text, &tools);
                let raw = got
                    .first()
                    .map(|(_, a)| Value::Object(a.clone()).to_string())
                    .unwrap_or_default();
                match tool_def(spec).prepare(&raw) {
                    Err(e) if e.is_error && e.content.contains("invalid arguments") => {
                        counts.wrong_types_rejected += 1
                    }
                    other => fail(format!("wrong type accepted: {other:?}")),
                }
            }
        }
    }

    let mut report = String::from(
        "\nBFCL v4 tool-call round trip (7 forms: hermes, hermes-array, qwen, xml, mcp, openai, anthropic)\n",
    );
    let _ = writeln!(
        report,
        "{:<24} {:>7} {:>6} {:>9} {:>9} {:>10} {:>9} {:>8} {:>10} {:>10} {:>11} {:>7}",
        "category",
        "entries",
        "calls",
        "forms ok",
        "forms err",
        "mutated ok",
        "mut. err",
        "cuts",
        "cut->error",
        "wrong type",
        "bad truth",
        "failed"
    );
    let mut failures = Vec::new();
    for (category, c) in &table {
        let _ = writeln!(
            report,
            "{:<24} {:>7} {:>6} {:>9} {:>9} {:>10} {:>9} {:>8} {:>10} {:>10} {:>11} {:>7}",
            category,
            c.entries,
            c.calls,
            c.forms_ok,
            c.forms_error,
            c.mutations_ok,
            c.mutations_error,
            c.cuts,
            c.cuts_clean_error,
            c.wrong_types_rejected,
            c.truth_invalid,
            c.failures.len()
        );
        failures.extend(c.failures.iter().filter(|f| !f.is_empty()).cloned());
        assert!(c.entries > 0, "{category}: no entries read");
    }
    println!("{report}");
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for f in &failures {
        let kind = f
            .split(": ")
            .nth(1)
            .unwrap_or("")
            .split(' ')
            .next()
            .unwrap_or("")
            .to_string();
        *kinds.entry(kind).or_default() += 1;
    }
    assert!(
        failures.is_empty(),
        "{} failures ({kinds:?}), first ones, first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n---\n")
    );
}
