//! The workflows of one agent's workspace (`workflows/*.toml`), each
//! checked, the sub-workflow cycles between them refused and each linked
//! to the sub-workflows it starts (at most [`MAX_DEPTH`] deep): a file is
//! read and checked every time it is asked for, so an edit counts at once
//! and a run records the text of exactly what it ran, sub-workflows too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::check::{self, Context, ToolStatus};
use super::def::Workflow;
use crate::config::locate::{Problem, nearest};

/// The folder of an agent's workspace that holds its workflows.
pub const DIR: &str = "workflows";

/// How many sub-workflows may nest below a workflow: a chain
/// `a → b → c → d → e` is as deep as a run goes.
pub const MAX_DEPTH: usize = 4;

/// Why a workflow cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error("{}", not_found(.name, .nearest.as_deref(), .dir))]
    NotFound {
        name: String,
        nearest: Option<String>,
        dir: PathBuf,
    },
    #[error("{}: cannot read the workflow: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", problems_text(.0))]
    Invalid(Vec<Problem>),
}

impl LibraryError {
    /// The same error again (an I/O error keeps its kind and words).
    pub fn duplicate(&self) -> Self {
        match self {
            Self::NotFound { name, nearest, dir } => Self::NotFound {
                name: name.clone(),
                nearest: nearest.clone(),
                dir: dir.clone(),
            },
            Self::Read { path, source } => Self::Read {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Self::Invalid(p) => Self::Invalid(p.clone()),
        }
    }
}

fn not_found(name: &str, nearest: Option<&str>, dir: &Path) -> String {
    let mut s = format!("no workflow `{name}` in {}", dir.display());
    if let Some(n) = nearest {
        s.push_str(&format!(" (did you mean `{n}`?)"));
    }
    s
}

fn problems_text(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every workflow of a workspace, checked.
pub struct Library {
    dir: PathBuf,
    entries: BTreeMap<String, Result<Workflow, LibraryError>>,
}

impl Library {
    /// Reads and checks every `workflows/*.toml` of `workspace`, with the
    /// agent's policy for tool names.
    pub fn open(workspace: &Path, tools: &dyn Fn(&str) -> ToolStatus) -> Self {
        let dir = workspace.join(DIR);
        let names = names(&dir);
        let mut entries = BTreeMap::new();
        for name in &names {
            let path = dir.join(format!("{name}.toml"));
            // Read only as the regular file it is: a link could make a
            // workflow the owner never wrote out of a file a tool may.
            let linked = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            let entry = match std::fs::read_to_string(&path) {
                _ if linked => Err(LibraryError::Invalid(vec![Problem {
                    path: path.clone(),
                    line: 1,
                    column: 1,
                    key: None,
                    reason: "a workflow file is read only as a regular file, not through a symbolic link: copy the file here".into(),
                }])),
                Err(source) => Err(LibraryError::Read { path, source }),
                Ok(text) => {
                    let cx = Context {
                        name,
                        path: &path,
                        workflows: &names,
                        tools,
                    };
                    check::check(&cx, &text).map_err(LibraryError::Invalid)
                }
            };
            entries.insert(name.clone(), entry);
        }
        let mut library = Self { dir, entries };
        library.refuse_cycles();
        link(&mut library.entries);
        library
    }

    /// `top` and the sub-workflows a run recorded, as checked workflows,
    /// linked: what a resumed or replayed run runs again.
    pub fn of_sources(
        top: Workflow,
        subs: BTreeMap<String, Result<Workflow, LibraryError>>,
    ) -> Result<Workflow, LibraryError> {
        let name = top.name.clone();
        let dir = top.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut library = Self { dir, entries: subs };
        library.entries.insert(name.clone(), Ok(top));
        library.refuse_cycles();
        link(&mut library.entries);
        library.take(&name)
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Each workflow or why it cannot run, by name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Result<Workflow, LibraryError>)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The workflow `name`, checked.
    pub fn get(&self, name: &str) -> Result<&Workflow, LibraryError> {
        match self.entries.get(name) {
            Some(Ok(w)) => Ok(w),
            Some(Err(e)) => Err(e.duplicate()),
            None => Err(self.not_found(name)),
        }
    }

    /// The workflow `name`, taken out of the library.
    pub fn take(mut self, name: &str) -> Result<Workflow, LibraryError> {
        match self.entries.remove(name) {
            Some(entry) => entry,
            None => Err(self.not_found(name)),
        }
    }

    fn not_found(&self, name: &str) -> LibraryError {
        let names: Vec<String> = self.entries.keys().cloned().collect();
        LibraryError::NotFound {
            name: name.to_string(),
            nearest: nearest(name, &names),
            dir: self.dir.clone(),
        }
    }

    /// A workflow that starts itself through others is refused, at the
    /// step that closes the circle.
    fn refuse_cycles(&mut self) {
        let subs: BTreeMap<String, Vec<(String, usize)>> = self
            .entries
            .iter()
            .filter_map(|(name, e)| {
                let w = e.as_ref().ok()?;
                let starts = w.sub_workflows().into_iter();
                Some((
                    name.clone(),
                    starts.map(|(n, l)| (n.to_string(), l)).collect(),
                ))
            })
            .collect();
        let mut found: Vec<(String, Problem)> = Vec::new();
        for (start, starts) in &subs {
            let mut path = vec![start.clone()];
            if !cycle(&subs, start, &mut path) {
                continue;
            }
            let Some(Ok(w)) = self.entries.get(start) else {
                continue;
            };
            // Each workflow of the circle is refused at its own step
            // into it, the circle told from itself.
            let line = starts
                .iter()
                .find(|(name, _)| Some(name) == path.get(1))
                .map_or(1, |(_, line)| *line);
            found.push((
                start.clone(),
                Problem {
                    path: w.path.clone(),
                    line,
                    column: 1,
                    key: None,
                    reason: format!(
                        "these workflows start each other in a circle: {}",
                        path.join(" → ")
                    ),
                },
            ));
        }
        for (name, problem) in found {
            self.entries
                .insert(name, Err(LibraryError::Invalid(vec![problem])));
        }
    }
}

/// Fills each workflow's `subs`. One whose sub-workflow cannot run, or
/// that nests them deeper than [`MAX_DEPTH`], is refused at its step.
/// The circles are refused before, so the links form a tree.
fn link(entries: &mut BTreeMap<String, Result<Workflow, LibraryError>>) {
    let mut linked: BTreeMap<String, Result<Arc<Workflow>, Problem>> = BTreeMap::new();
    let names: Vec<String> = entries.keys().cloned().collect();
    for name in &names {
        resolve(name, entries, &mut linked, 0);
    }
    for (name, result) in linked {
        let entry = match result {
            Ok(w) => Ok(Arc::unwrap_or_clone(w)),
            Err(p) => Err(LibraryError::Invalid(vec![p])),
        };
        if entries.get(&name).is_some_and(Result::is_ok) {
            entries.insert(name, entry);
        }
    }
}

/// Workflow `name` linked to its sub-workflows; `Err(None)` when it was
/// refused before (its own problems say why).
fn resolve(
    name: &str,
    entries: &BTreeMap<String, Result<Workflow, LibraryError>>,
    linked: &mut BTreeMap<String, Result<Arc<Workflow>, Problem>>,
    depth: usize,
) -> Option<Arc<Workflow>> {
    if let Some(done) = linked.get(name) {
        return done.as_ref().ok().cloned();
    }
    let Some(Ok(w)) = entries.get(name) else {
        return None;
    };
    let mut w = w.clone();
    let problem = |line: usize, reason: String| Problem {
        path: w.path.clone(),
        line,
        column: 1,
        key: None,
        reason,
    };
    let starts: Vec<(String, usize)> = w
        .sub_workflows()
        .into_iter()
        .map(|(n, l)| (n.to_string(), l))
        .collect();
    let mut refused = None;
    // Circles were refused; the bound only guards against a bug there.
    if depth <= MAX_DEPTH + 1 {
        for (sub, line) in &starts {
            match resolve(sub, entries, linked, depth + 1) {
                Some(s) => {
                    w.subs.insert(sub.clone(), s);
                }
                None => {
                    refused.get_or_insert(problem(
                        *line,
                        format!(
                            "the sub-workflow `{sub}` cannot run (`pincer workflows check {sub}` says why)"
                        ),
                    ));
                }
            }
        }
    }
    let chain = deepest(&w);
    if refused.is_none() && chain.len() > MAX_DEPTH + 1 {
        let line = starts
            .iter()
            .find(|(sub, _)| Some(sub) == chain.get(1))
            .map_or(1, |(_, line)| *line);
        refused = Some(problem(
            line,
            format!(
                "sub-workflows nest {} deep here ({}); at most {MAX_DEPTH} may",
                chain.len() - 1,
                chain.join(" → ")
            ),
        ));
    }
    let result = match refused {
        Some(p) => Err(p),
        None => Ok(Arc::new(w)),
    };
    let out = result.as_ref().ok().cloned();
    linked.insert(name.to_string(), result);
    out
}

/// The longest chain of sub-workflows from `w`, its own name first.
fn deepest(w: &Workflow) -> Vec<String> {
    let below = w
        .subs
        .values()
        .map(|s| deepest(s))
        .max_by_key(Vec::len)
        .unwrap_or_default();
    let mut chain = vec![w.name.clone()];
    chain.extend(below);
    chain
}

/// Whether a path leads from `path`'s last workflow back to `start`; the
/// path is left in `path`, `start` at both ends.
fn cycle(
    subs: &BTreeMap<String, Vec<(String, usize)>>,
    start: &str,
    path: &mut Vec<String>,
) -> bool {
    let Some(here) = path.last().cloned() else {
        return false;
    };
    for (next, _) in subs.get(&here).into_iter().flatten() {
        if next == start {
            path.push(next.clone());
            return true;
        }
        if path.contains(next) {
            continue;
        }
        path.push(next.clone());
        if cycle(subs, start, path) {
            return true;
        }
        path.pop();
    }
    false
}

/// The workflow names in `dir`: each `NAME.toml` whose name is letters,
/// digits, `-` and `_`; sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .filter_map(Result::ok)
        // Links too, so the library can say why it will not read them.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_suffix(".toml")?.to_string();
            valid_name(&name).then_some(name)
        })
        .collect();
    names.sort();
    names
}

/// Whether `name` can be a workflow's name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
