//! A workflow as a Mermaid flowchart (`pincer workflows graph NAME`):
//! one node per step with its kind, the jumps as edges (a condition's
//! labelled with its test), a for_each's body and a parallel step's
//! branches inside their step as a subgraph.

use std::fmt::Write;

use super::def::{Action, Next, Step, Workflow};

/// The Mermaid text of `w`.
pub fn mermaid(w: &Workflow) -> String {
    let mut out = String::from("flowchart TD\n");
    out.push_str("  start((start))\n");
    for step in &w.steps {
        node(&mut out, step, "  ");
    }
    out.push_str("  finish((end))\n");
    if let Some(first) = w.steps.first() {
        let _ = writeln!(out, "  start --> {}", node_id(&first.id));
    }
    for (i, step) in w.steps.iter().enumerate() {
        let target = |n: &Next| match n {
            Next::Following => w
                .steps
                .get(i + 1)
                .map_or("finish".to_string(), |s| node_id(&s.id)),
            Next::Step(id) => node_id(id),
            Next::End => "finish".to_string(),
        };
        let from = node_id(&step.id);
        match &step.action {
            Action::Condition {
                test,
                then,
                otherwise,
            } => {
                let _ = writeln!(out, "  {from} -- \"{}\" --> {}", label(test), target(then));
                let _ = writeln!(out, "  {from} -- else --> {}", target(otherwise));
            }
            _ => {
                let _ = writeln!(out, "  {from} --> {}", target(&step.next));
            }
        }
    }
    out
}

fn node(out: &mut String, step: &Step, indent: &str) {
    let id = node_id(&step.id);
    let when = step
        .when
        .as_ref()
        .map(|w| format!("<br/>when {}", label(w)))
        .unwrap_or_default();
    match &step.action {
        Action::ForEach {
            items, var, body, ..
        } => {
            let _ = writeln!(
                out,
                "{indent}subgraph {id}[\"{} · for each {var} in {}{when}\"]",
                step.id,
                label(items)
            );
            node(out, body, &format!("{indent}  "));
            let _ = writeln!(out, "{indent}end");
        }
        Action::Parallel { branches, wait } => {
            let wait = match wait {
                super::def::Wait::All => "all",
                super::def::Wait::Any => "any",
            };
            let _ = writeln!(
                out,
                "{indent}subgraph {id}[\"{} · parallel, wait {wait}{when}\"]",
                step.id
            );
            for b in branches {
                node(out, b, &format!("{indent}  "));
            }
            let _ = writeln!(out, "{indent}end");
        }
        Action::Condition { .. } => {
            let _ = writeln!(out, "{indent}{id}{{\"{} · condition{when}\"}}", step.id);
        }
        action => {
            let what = match action {
                Action::Tool { tool, .. } => format!("tool {tool}"),
                Action::Workflow { name, .. } => format!("workflow {name}"),
                other => other.kind().to_string(),
            };
            let shape = if action.halts() {
                ("[/", "/]")
            } else {
                ("[", "]")
            };
            let _ = writeln!(
                out,
                "{indent}{id}{}\"{} · {}{when}\"{}",
                shape.0,
                step.id,
                label(&what),
                shape.1
            );
        }
    }
}

/// Step ids are identifiers; a prefix keeps them clear of Mermaid's
/// keywords (`end`, `graph`).
fn node_id(id: &str) -> String {
    format!("s_{id}")
}

/// Text inside a quoted Mermaid label.
fn label(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('\n', " ")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}
