//! The data boundary inside the tools, for a turn that is not the
//! owner's: the walks (`ls`, `glob`, `grep`) never show the owner's memory
//! or another chat's folder, `exec` refuses to run unsandboxed, and a
//! shared memory never hands out the indexed session transcripts.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::access::FileAccess;
use super::memory::MemoryAccess;
use super::tests::ctx;
use super::{ToolContext, ToolOutput, ToolRegistry};
use crate::config::MemoryScope;
use crate::session::Principal;

fn group() -> Principal {
    Principal::Group {
        channel: "telegram".into(),
        chat: "-100".into(),
    }
}

/// A turn of the group `-100` in `ws`, offered `read`.
fn strangers(ws: &Path) -> ToolContext {
    let mut c = ctx(ws);
    c.files = FileAccess::new(ws, &group(), MemoryScope::Owner, &[], true);
    c
}

async fn call(c: ToolContext, tool: &str, args: serde_json::Value) -> ToolOutput {
    ToolRegistry::core()
        .get(tool)
        .unwrap()
        .call(&args.to_string(), c)
        .await
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    for d in [
        "memory",
        "inbox/telegram-group--100",
        "inbox/telegram-group--200",
    ] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    for (f, text) in [
        ("MEMORY.md", "secret plans"),
        ("memory/2026-11-26.md", "secret diary"),
        (
            "inbox/telegram-group--200/theirs.md",
            "secret of another chat",
        ),
        ("inbox/telegram-group--100/ours.md", "our secret list"),
        ("readme.md", "public secret-free text"),
    ] {
        std::fs::write(ws.join(f), text).unwrap();
    }
    dir
}

#[tokio::test]
async fn walks_never_show_what_the_boundary_hides() {
    let dir = workspace();
    let c = strangers(dir.path());
    let ls = call(c.clone(), "ls", json!({})).await;
    assert!(!ls.content.contains("MEMORY.md"), "{}", ls.content);
    assert!(!ls.content.contains("memory/"), "{}", ls.content);
    assert!(ls.content.contains("readme.md"), "{}", ls.content);
    let inbox = call(c.clone(), "ls", json!({"path": "inbox"})).await;
    assert_eq!(inbox.content, "telegram-group--100/", "{}", inbox.content);
    let glob = call(c.clone(), "glob", json!({"pattern": "**/*.md"})).await;
    assert_eq!(
        glob.content, "inbox/telegram-group--100/ours.md\nreadme.md",
        "{}",
        glob.content
    );
    let grep = call(c.clone(), "grep", json!({"pattern": "secret"})).await;
    assert!(grep.content.contains("ours.md"), "{}", grep.content);
    assert!(grep.content.contains("readme.md"), "{}", grep.content);
    for hidden in ["plans", "diary", "another chat"] {
        assert!(!grep.content.contains(hidden), "{}", grep.content);
    }
    let refused = call(c.clone(), "grep", json!({"pattern": "x", "path": "memory"})).await;
    assert!(refused.refused, "{}", refused.content);
    // The owner's turn sees everything.
    let owner = call(ctx(dir.path()), "grep", json!({"pattern": "secret"})).await;
    for shown in ["plans", "diary", "another chat"] {
        assert!(owner.content.contains(shown), "{}", owner.content);
    }
}

#[tokio::test]
async fn a_strangers_exec_refuses_to_run_without_the_sandbox() {
    let dir = workspace();
    let mut c = strangers(dir.path());
    c.sandbox = Arc::new(crate::sandbox::Sandbox::unavailable(
        "this kernel has no Landlock",
    ));
    let out = call(c, "exec", json!({"command": "cat MEMORY.md"})).await;
    assert!(out.refused, "{}", out.content);
    assert!(
        out.content.contains("only in the sandbox") && out.content.contains("no Landlock"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("secret"), "{}", out.content);
}

#[tokio::test]
async fn a_shared_memory_never_hands_a_stranger_the_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(ws.join("MEMORY.md"), "The picnic is by the lake.\n").unwrap();
    std::fs::write(
        sessions.join("abc.jsonl"),
        "{\"kind\":\"user\",\"text\":\"the picnic password is hunter2\"}\n",
    )
    .unwrap();
    let index = pincer_memory::MemoryIndex::open(
        "friends",
        dir.path().join("memory.db"),
        pincer_memory::Sources::new(ws.clone(), Vec::new(), Some(sessions)).unwrap(),
        Default::default(),
        None,
        "no embedder in this test",
    )
    .unwrap();
    index.sync(pincer_memory::Scope::All, None).await.unwrap();
    let search = |access: MemoryAccess| {
        let mut c = ctx(&ws);
        c.memory = access;
        call(c, "memory_search", json!({"query": "picnic"}))
    };
    let owner = search(MemoryAccess::Index(index.clone())).await;
    assert!(owner.content.contains("hunter2"), "{}", owner.content);
    let shared = search(MemoryAccess::Shared(index.clone())).await;
    assert!(shared.content.contains("by the lake"), "{}", shared.content);
    assert!(!shared.content.contains("hunter2"), "{}", shared.content);
    let mut c = ctx(&ws);
    c.memory = MemoryAccess::Shared(index);
    let get = call(c, "memory_get", json!({"path": "sessions/abc.jsonl"})).await;
    assert!(get.refused, "{}", get.content);
    let mut c = ctx(&ws);
    c.memory = MemoryAccess::OwnersOnly;
    let out = call(c, "memory_search", json!({"query": "picnic"})).await;
    assert!(
        out.refused && out.content.contains("the owner's"),
        "{}",
        out.content
    );
}
