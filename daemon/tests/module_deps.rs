//! Keeps import cycles out of the daemon's modules, for good.
//!
//! Reads `daemon/src/**/*.rs` as text (test code left out: files named
//! `*tests.rs`, modules declared under `#[cfg(test)]`, and `#[cfg(test)]`
//! items), finds every `crate::`, `super::` and `self::` path (and
//! `pincer_daemon::` in `main.rs`), resolves it to the module it names, and
//! checks two things:
//!
//! - the top-level modules depend on each other one way only, in the order
//!   of [`LAYERS`];
//! - inside every module (the crate, a directory module such as `config/`
//!   or `llm/toolcall/`), the files that are siblings have no cycle; each
//!   cycle found is printed as `a → b → a`.
//!
//! Run it with `cargo test -p pincer-daemon --test module_deps`.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules from the top down: a module may use the modules
/// of the layers below its own, and those of its own layer as long as no
/// cycle forms. `main` (the binary) starts the `daemon` (start-up, reload,
/// shutdown), which serves `server`; `routing` (inbound message → agent,
/// session, origin) sits beside `agent`, which it does not use; `doctor` sits beside `agent` because
/// the server's `Daemon.Doctor` calls it and it reads context and memory;
/// the daemon's side of `memory` uses providers (`llm`) for embeddings and
/// is used by the agent, and `model_fetch` (`pincerd fetch-model`) beside it
/// uses the providers' TLS set-up; `lifecycle` (the `Part` trait) knows only the
/// config; `sandbox` (the exec sandbox and its launcher) reads the exec
/// settings and is used by the tools that start programs; `workspace`
/// (every write pincerd makes in a workspace, through pincer-fs) sits
/// beside `session`, whose principals name the chats' folders, and under
/// everything that writes there (daemon, channels, agent, tools); `logging`, `children` (processes that die with pincerd) and
/// `launch` (who started pincerd; the service's environment file) use nothing of ours.
/// `schedule` starts workflows and agent turns at their times, so it sits
/// above `workflow`; the chats reach it through a trait of `tools`.
/// `fuzz` (the fuzzer's entry points, used by `fuzz/` alone) sits beside
/// `main`: it drives parsers of every layer, the server's among them.
const LAYERS: &[&[&str]] = &[
    &["main", "fuzz"],
    &["daemon"],
    &["server"],
    &["channels"],
    &["schedule"],
    &["workflow"],
    &["agent", "doctor", "routing"],
    &["context", "tools", "memory", "model_fetch"],
    &["llm", "session", "lifecycle", "sandbox", "workspace"],
    &["config"],
    &["home", "util", "logging", "children", "launch", "sqlite"],
];

/// Cycles known today, each with the work that removes it. The test fails
/// on any other cycle, and on one of these once it is gone (so the list
/// shows what is left).
const KNOWN_CYCLES: &[&str] = &[];

#[test]
fn modules_depend_one_way_and_siblings_have_no_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = source_files(&src);
    let known: BTreeSet<Vec<String>> = files
        .iter()
        .flat_map(|(module, _)| (0..=module.len()).map(|n| module[..n].to_vec()))
        .collect();

    // Edges between siblings, keyed by their parent module.
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, text) in &files {
        for path in references(module, text) {
            let Some(target) = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| known.contains(p))
            else {
                continue;
            };
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common < module.len() && common < target.len() {
                graphs
                    .entry(module[..common].to_vec())
                    .or_default()
                    .entry(module[common].clone())
                    .or_default()
                    .insert(target[common].clone());
            }
        }
    }

    let mut problems = Vec::new();
    let rank = |m: &str| LAYERS.iter().position(|layer| layer.contains(&m));
    for (from, tos) in graphs.get(&Vec::new()).into_iter().flatten() {
        for to in tos {
            match (rank(from), rank(to)) {
                (Some(a), Some(b)) if a > b => problems.push(format!(
                    "`{from}` uses `{to}`, which is above it (LAYERS: {})",
                    layers_text()
                )),
                (None, _) => problems.push(format!("`{from}` is in no layer of LAYERS")),
                (_, None) => problems.push(format!("`{to}` is in no layer of LAYERS")),
                _ => {}
            }
        }
    }

    let mut cycles = BTreeSet::new();
    for (parent, graph) in &graphs {
        for cycle in cycles_of(graph) {
            let named: Vec<String> = cycle
                .iter()
                .map(|m| {
                    parent
                        .iter()
                        .chain(std::iter::once(m))
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("::")
                })
                .collect();
            cycles.insert(named.join(" → "));
        }
    }
    for cycle in &cycles {
        if !KNOWN_CYCLES.contains(&cycle.as_str()) {
            problems.push(format!("import cycle: {cycle}"));
        }
    }
    for known in KNOWN_CYCLES {
        if !cycles.contains(*known) {
            problems.push(format!(
                "the known cycle `{known}` is gone: take it out of KNOWN_CYCLES"
            ));
        }
    }
    for cycle in &cycles {
        println!("cycle: {cycle}");
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

fn layers_text() -> String {
    LAYERS
        .iter()
        .map(|l| l.join("/"))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Every non-test source file, as its module path and its code with
/// comments, literals and test items removed.
fn source_files(src: &Path) -> Vec<(Vec<String>, String)> {
    let mut paths = Vec::new();
    walk(src, &mut paths);
    paths.sort();
    let mut out = Vec::new();
    let mut test_modules = BTreeSet::new();
    for path in &paths {
        let rel = path.strip_prefix(src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with("tests.rs") || rel.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        let mut module: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let raw = std::fs::read_to_string(path).unwrap();
        let (code, tests) = without_tests(&strip(&raw));
        for t in tests {
            test_modules.insert(module.iter().cloned().chain([t]).collect::<Vec<_>>());
        }
        out.push((module, code));
    }
    out.retain(|(m, _)| !test_modules.iter().any(|t| m.starts_with(t)));
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code without comments and without the contents of string and
/// character literals (so braces and paths inside them do not count).
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (i == 0 || !ident(c[i - 1]) || c[i - 1] == 'b')
            && matches!(next, Some('"' | '#'))
        {
            let mut hashes = 0;
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            while j < c.len() {
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The code without `#[cfg(test)]` items, and the names of the modules
/// declared under `#[cfg(test)]` in another file (`mod tests;`).
fn without_tests(code: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut tests = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(ATTR) {
        out.push_str(&rest[..at]);
        let item = &rest[at + ATTR.len()..];
        let end = match (item.find('{'), item.find(';')) {
            (Some(open), semi) if semi.is_none_or(|s| open < s) => {
                let mut depth = 0;
                let mut end = item.len();
                for (i, ch) in item.char_indices().skip_while(|(i, _)| *i < open) {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semi)) => {
                let words: Vec<&str> = item[..semi].split_whitespace().collect();
                if let [.., "mod", name] = words[..] {
                    tests.push(name.to_string());
                }
                semi + 1
            }
            _ => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, tests)
}

/// The absolute paths (from the crate root) of every `crate::`, `super::`,
/// `self::` and `pincer_daemon::` path in `code`, `use` groups expanded.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let tokens = tokenize(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let starts_path = matches!(
            tokens[i].as_str(),
            "crate" | "super" | "self" | "pincer_daemon"
        ) && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts_path {
            i = path_at(module, &tokens, i, Vec::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads the path starting at `tokens[i]` (inside a `use` group, `base`
/// is the group's prefix), pushes every path it names, and returns the
/// index after it.
fn path_at(
    module: &[String],
    tokens: &[String],
    mut i: usize,
    mut base: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    // `crate`, `self` and a run of `super` can only lead a path.
    let mut leading = base.is_empty();
    while let Some(token) = tokens.get(i) {
        match token.as_str() {
            "crate" | "pincer_daemon" if leading => base.clear(),
            "self" if leading => base = module.to_vec(),
            "super" if leading => {
                if base.is_empty() {
                    base = module.to_vec();
                }
                base.pop();
            }
            "{" => {
                i += 1;
                while i < tokens.len() && tokens[i] != "}" {
                    if tokens[i] == "," {
                        i += 1;
                    } else {
                        i = path_at(module, tokens, i, base.clone(), out);
                    }
                }
                return i + 1;
            }
            // `self` inside a group names the group's prefix.
            "self" => {}
            t if t.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                leading = false;
                base.push(t.to_string());
            }
            _ => break,
        }
        i += 1;
        if tokens.get(i).is_some_and(|t| t == "::") {
            i += 1;
        } else {
            break;
        }
    }
    if tokens.get(i).is_some_and(|t| t == "as") {
        i += 2;
    }
    out.push(base);
    i
}

/// Identifiers, `::`, and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let c: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// One cycle through each strongly connected component of more than one
/// node, starting at its smallest node: `[a, b, a]`.
fn cycles_of(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for node in graph.keys() {
        if done.contains(node) || !reachable[node].contains(node) {
            continue;
        }
        let component: BTreeSet<String> = reachable[node]
            .iter()
            .filter(|m| reachable.get(m).is_some_and(|r| r.contains(node)))
            .cloned()
            .collect();
        done.extend(component.iter().cloned());
        // The shortest way back to `node` inside the component.
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([node.clone()]);
        'search: while let Some(n) = queue.pop_front() {
            for m in graph.get(&n).into_iter().flatten() {
                if !component.contains(m) {
                    continue;
                }
                if m == node {
                    let mut cycle = vec![node.clone()];
                    let mut at = n.clone();
                    while at != *node {
                        cycle.push(at.clone());
                        at = prev[&at].clone();
                    }
                    cycle.push(node.clone());
                    let last = cycle.len() - 1;
                    cycle[1..last].reverse();
                    out.push(cycle);
                    break 'search;
                }
                if !prev.contains_key(m) {
                    prev.insert(m.clone(), n.clone());
                    queue.push_back(m.clone());
                }
            }
        }
    }
    out
}

#[test]
fn the_reader_finds_paths_groups_and_leaves_tests_out() {
    let module = vec!["agent".to_string(), "turn".to_string()];
    let code = strip(
        "use super::{Event, compaction::Compactor};\nuse crate::context::{self, guard::{self, Guard}};\n// crate::server::x\nlet s = \"crate::daemon::y\";\n#[cfg(test)]\nmod tests { use crate::server::z; }\n#[cfg(test)]\nmod more_tests;\nfn f<'a>(c: char) { if c == '{' {} super::super::home::x(); }\n",
    );
    let (code, tests) = without_tests(&code);
    assert_eq!(tests, ["more_tests"]);
    let found: BTreeSet<String> = references(&module, &code)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "agent::Event",
        "agent::compaction::Compactor",
        "context",
        "context::guard",
        "context::guard::Guard",
        "home::x",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(found, want);

    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycles_of(&graph), [["a", "b", "c", "a"]]);
}
