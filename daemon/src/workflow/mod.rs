//! Deterministic workflows (SPEC §13): routine work as steps a file
//! spells out — tool calls, commands, model calls with a schema,
//! conditions, loops, approvals and inputs from people — instead of a
//! model deciding every step.
//!
//! A workflow is `workflows/NAME.toml` in an agent's workspace
//! (`file.rs`, the serde shape); `check/` turns it into a typed
//! [`def::Workflow`] or a list of problems, each at its line;
//! `library.rs` reads a workspace's workflows, refuses sub-workflow
//! circles and links each to its sub-workflows; `template.rs` holds the MiniJinja environment its templates
//! and expressions use; `graph.rs` draws one as a Mermaid flowchart;
//! `replay.rs` runs a finished run again on what it recorded.

pub mod admission;
pub mod catalog;
pub mod check;
pub mod def;
pub mod engine;
pub mod file;
pub mod graph;
pub mod library;
pub mod part;
pub mod plan;
pub mod replay;
pub mod resume;
pub mod runner;
pub mod store;
pub mod template;

#[cfg(test)]
mod check_tests;
