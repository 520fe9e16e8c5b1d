//! Rules of the code that review found worth keeping for good, checked on
//! the sources as text (test code left out: `tests/`, `benches/`, files
//! named `*tests.rs`, and everything after a file's first `#[cfg(test)]`):
//!
//! - **No `Result<_, String>` at a seam.** A function, method, type alias
//!   or field that other modules see (`pub` in any form, or a trait's
//!   method) returns a typed error that says what happened; a private
//!   helper may still carry a sentence inside its module.
//! - **Files by noun, small.** A file of more than [`MAX_LINES`] lines of
//!   code (blank and comment lines not counted) says at its top why it is
//!   long, in a `//!` line starting `Long because`.
//! - **Crates depend one way.** Each crate of the workspace uses only the
//!   workspace crates [`CRATE_DEPS`] allows: the bridges and the libraries
//!   below the daemon never depend on it.
//!
//! The daemon's modules have their own guard, `daemon/tests/module_deps.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Lines of code above which a file says why it is long.
const MAX_LINES: usize = 600;

/// The workspace crates each crate's `[dependencies]` may name.
const CRATE_DEPS: &[(&str, &[&str])] = &[
    ("proto", &[]),
    ("daemon/fs", &[]),
    ("daemon/memory", &["pincer-pages"]),
    ("daemon/pages", &[]),
    ("daemon/worker", &[]),
    ("daemon/migrate", &[]),
    ("daemon/sandbox", &[]),
    (
        "bridges/channel",
        &["pincer-fs", "pincer-migrate", "pincer-worker"],
    ),
    ("bridges/telegram", &["pincer-channel", "pincer-fs"]),
    ("bridges/discord", &["pincer-channel"]),
    ("packaging", &[]),
    (
        "daemon",
        &[
            "pincer-proto",
            "pincer-channel",
            "pincer-telegram",
            "pincer-discord",
            "pincer-memory",
            "pincer-fs",
            "pincer-migrate",
            "pincer-pages",
            "pincer-sandbox",
            "pincer-worker",
        ],
    ),
    ("clients", &["pincer-proto", "pincer-service"]),
    ("tests", &["pincer-proto"]),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// Every non-test Rust source of the workspace, relative to the root.
fn sources() -> Vec<PathBuf> {
    let root = repo();
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !["target", ".git", "tests", "benches", "node_modules", "book"].contains(&name) {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && !name.ends_with("tests.rs") {
                found.push(path.strip_prefix(&root).expect("inside").to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// The file's text before its first `#[cfg(test)]`.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(repo().join(path)).expect("a source file");
    let end = text
        .lines()
        .scan(0, |at, line| {
            let start = *at;
            *at += line.len() + 1;
            Some((start, line))
        })
        .find(|(_, line)| line.trim_start().starts_with("#[cfg(test)]"))
        .map_or(text.len(), |(start, _)| start);
    text[..end].to_owned()
}

/// Whether a line holds a `Result` whose error type is `String`.
fn result_of_string(line: &str) -> bool {
    let mut rest = line;
    while let Some(at) = rest.find("Result<") {
        let after = &rest[at + "Result<".len()..];
        // The matching `>` of this `Result<`.
        let mut depth = 1;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { return false };
        let args = &after[..end];
        // The last top-level argument is the error type.
        let mut depth = 0;
        let mut last = 0;
        for (i, c) in args.char_indices() {
            match c {
                '<' | '(' => depth += 1,
                '>' | ')' => depth -= 1,
                ',' if depth == 0 => last = i + 1,
                _ => {}
            }
        }
        if last > 0 && args[last..].trim() == "String" {
            return true;
        }
        rest = after;
    }
    false
}

/// The seams in a file that carry a `Result<_, String>`, as
/// `path:line: text`.
fn string_seams(path: &Path) -> Vec<String> {
    let code = code_of(path);
    let lines: Vec<&str> = code.lines().collect();
    let mut seams = Vec::new();
    // The indentation of the trait being read, if any.
    let mut in_trait: Option<usize> = None;
    for (number, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        if let Some(at) = in_trait
            && indent == at
            && text.starts_with('}')
        {
            in_trait = None;
        }
        if (text.starts_with("trait ") || text.starts_with("pub") && text.contains(" trait "))
            && text.ends_with('{')
        {
            in_trait = Some(indent);
        }
        if !result_of_string(text) {
            continue;
        }
        let public = text.starts_with("pub ") || text.starts_with("pub(");
        // A continuation line (a signature's return type on its own line)
        // belongs to the item above it: find that item's first line.
        let item = if text.starts_with(')') || text.starts_with("->") {
            lines[..number]
                .iter()
                .rev()
                .map(|l| l.trim())
                .find(|l| l.contains("fn "))
                .unwrap_or("")
        } else {
            text
        };
        let item_public = item.starts_with("pub ") || item.starts_with("pub(");
        if public || item_public || in_trait.is_some() {
            seams.push(format!("{}:{}: {}", path.display(), number + 1, text));
        }
    }
    seams
}

#[test]
fn no_result_of_string_at_a_seam() {
    let seams: Vec<String> = sources().iter().flat_map(|p| string_seams(p)).collect();
    assert!(
        seams.is_empty(),
        "a seam returns `Result<_, String>`: give it an error type that says what happened (thiserror), \
         mapped once where it meets gRPC or a chat:\n{}",
        seams.join("\n")
    );
}

/// Lines of code: not blank, not only a comment.
fn lines_of_code(code: &str) -> usize {
    code.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

#[test]
fn a_long_file_says_why() {
    let mut unexplained = Vec::new();
    for path in sources() {
        let code = code_of(&path);
        let lines = lines_of_code(&code);
        let explained = code
            .lines()
            .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
            .any(|l| {
                l.trim_start_matches("//!")
                    .trim_start()
                    .starts_with("Long because")
            });
        if lines > MAX_LINES && !explained {
            unexplained.push(format!("{}: {lines} lines of code", path.display()));
        }
    }
    assert!(
        unexplained.is_empty(),
        "files over {MAX_LINES} lines of code: split them by noun, or say at the top why not (a `//! Long because …` line):\n{}",
        unexplained.join("\n")
    );
}

/// The workspace crates named in a manifest's `[dependencies]` (build and
/// dev dependencies apart).
fn workspace_deps(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && line.starts_with("pincer-") {
            let name = line
                .split(|c: char| c == '=' || c == '.' || c.is_whitespace())
                .next()
                .unwrap_or("");
            deps.insert(name.to_owned());
        }
    }
    deps
}

#[test]
fn crates_depend_one_way() {
    let mut wrong = Vec::new();
    for (dir, allowed) in CRATE_DEPS {
        let manifest = std::fs::read_to_string(repo().join(dir).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{dir}/Cargo.toml: {e}"));
        for dep in workspace_deps(&manifest) {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("{dir} depends on {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a crate depends on one it may not (CRATE_DEPS in tests/rules.rs lists what each may use; ARCHITECTURE.md names the order):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_workspace_crate_has_its_rule() {
    let root = std::fs::read_to_string(repo().join("Cargo.toml")).expect("Cargo.toml");
    let members = root
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("the workspace members");
    for member in members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
    {
        assert!(
            CRATE_DEPS.iter().any(|(dir, _)| *dir == member),
            "{member} has no entry in CRATE_DEPS"
        );
    }
}

/// Each `[[package]]` of a Cargo.lock as (name, version).
fn locked(path: &Path) -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(path).expect("a lockfile");
    text.split("[[package]]")
        .filter_map(|block| {
            let field = |key: &str| {
                block.lines().find_map(|l| {
                    l.strip_prefix(key)
                        .map(|v| v.trim().trim_matches('"').to_string())
                })
            };
            Some((field("name = ")?, field("version = ")?))
        })
        .collect()
}

/// The fuzzer (outside the workspace, built `--locked`) uses the versions
/// the workspace uses: a dependency change that forgot fuzz/Cargo.lock
/// fails here, in seconds, rather than in the fuzzing at the end of the
/// suite.
#[test]
fn the_fuzzers_lockfile_follows_the_workspaces() {
    let workspace = locked(&repo().join("Cargo.lock"));
    let names: BTreeSet<&String> = workspace.iter().map(|(n, _)| n).collect();
    let stale: Vec<_> = locked(&repo().join("fuzz/Cargo.lock"))
        .into_iter()
        .filter(|(name, _)| names.contains(name))
        .filter(|p| !workspace.contains(p))
        .collect();
    assert!(
        stale.is_empty(),
        "fuzz/Cargo.lock has versions the workspace does not: {stale:?}; copy Cargo.lock to fuzz/Cargo.lock and run `cargo metadata` in fuzz/ (CONTRIBUTING.md)"
    );
}

#[test]
fn the_seam_finder_sees_what_it_should() {
    assert!(result_of_string("pub fn a() -> Result<(), String> {"));
    assert!(result_of_string(
        "fn b() -> BoxFuture<'a, Result<Vec<String>, String>>;"
    ));
    assert!(!result_of_string("pub fn c() -> Result<String, Error> {"));
    assert!(!result_of_string(
        "pub fn d() -> Result<Map<String, Value>, E> {"
    ));
    assert!(result_of_string(
        "pub fn e() -> Result<Map<String, Value>, String> {"
    ));
}
