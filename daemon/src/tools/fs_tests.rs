//! The file tools in a hostile workspace: a FIFO where a file should be,
//! a hard link to a file outside, output larger than the result cap.
//! Every call runs under a time limit, so a tool that blocks fails the
//! test instead of hanging it.

use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::tests::ctx;
use super::{ToolContext, ToolOutput, ToolRegistry};
use crate::config::FsSettings;

async fn call_in(ctx: ToolContext, tool: &str, args: serde_json::Value) -> ToolOutput {
    let registry = ToolRegistry::core();
    let args = args.to_string();
    let call = registry.get(tool).unwrap().call(&args, ctx);
    tokio::time::timeout(Duration::from_secs(3), call)
        .await
        .unwrap_or_else(|_| ToolOutput::error("the call was still blocked after 3 s"))
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A writer kept open on `fifo`: a tool that opens the FIFO blocks in
/// `read` instead of `open`, and dropping the writer lets it go (EOF), even
/// once the FIFO's name is gone, so a failing test ends instead of hanging.
fn writer(fifo: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_is_refused_at_once_by_every_file_tool() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f");
    mkfifo(&fifo);
    let keeper = writer(&fifo);
    let started = Instant::now();
    let outs = [
        (
            "read",
            call_in(ctx(dir.path()), "read", json!({"path": "f"})).await,
        ),
        (
            "edit",
            call_in(
                ctx(dir.path()),
                "edit",
                json!({"path": "f", "old_string": "a", "new_string": "b"}),
            )
            .await,
        ),
        (
            "apply_patch",
            call_in(
                ctx(dir.path()),
                "apply_patch",
                json!({"patch": "*** Begin Patch\n*** Update File: f\n-a\n+b\n*** End Patch"}),
            )
            .await,
        ),
        (
            "write",
            call_in(
                ctx(dir.path()),
                "write",
                json!({"path": "f", "content": "x"}),
            )
            .await,
        ),
    ];
    let grep = call_in(ctx(dir.path()), "grep", json!({"pattern": "x"})).await;
    let elapsed = started.elapsed();
    drop(keeper);
    for (tool, out) in &outs {
        assert!(out.is_error, "{tool}: {}", out.content);
        assert!(
            out.content
                .contains("is a named pipe (FIFO), not a regular file"),
            "{tool}: {}",
            out.content
        );
    }
    assert!(
        !grep.is_error && grep.content.contains("no matches"),
        "{}",
        grep.content
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    // The FIFO is still there: write did not replace it.
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

fn allowing_hard_links(dir: &Path) -> ToolContext {
    let mut c = ctx(dir);
    let mut settings = (*c.settings).clone();
    settings.fs = FsSettings {
        allow_hard_links: true,
        ..FsSettings::default()
    };
    c.settings = Arc::new(settings);
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_link_to_an_outside_file_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "outside secret\n").unwrap();
    std::fs::hard_link(&outside, ws.join("link.txt")).unwrap();

    let read = call_in(ctx(&ws), "read", json!({"path": "link.txt"})).await;
    assert!(read.is_error, "{}", read.content);
    assert!(!read.content.contains("outside secret"), "{}", read.content);
    for why in [
        "has 2 hard links",
        "outside the workspace",
        "[tools.fs] allow_hard_links = true",
    ] {
        assert!(read.content.contains(why), "{why}: {}", read.content);
    }
    let changes = [
        call_in(ctx(&ws), "write", json!({"path": "link.txt", "content": "new"})).await,
        call_in(
            ctx(&ws),
            "edit",
            json!({"path": "link.txt", "old_string": "outside", "new_string": "inside"}),
        )
        .await,
        call_in(
            ctx(&ws),
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: link.txt\n-outside secret\n+inside\n*** End Patch"}),
        )
        .await,
    ];
    for out in &changes {
        assert!(
            out.is_error && out.content.contains("hard links"),
            "{}",
            out.content
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("link.txt")).unwrap(),
        "outside secret\n"
    );
    let grep = call_in(ctx(&ws), "grep", json!({"pattern": "secret"})).await;
    assert!(!grep.content.contains("outside secret"), "{}", grep.content);
    assert!(
        grep.content
            .contains("skipped 1 file(s) with several hard links"),
        "{}",
        grep.content
    );

    // The owner may allow them.
    let read = call_in(
        allowing_hard_links(&ws),
        "read",
        json!({"path": "link.txt"}),
    )
    .await;
    assert!(
        !read.is_error && read.content.contains("outside secret"),
        "{}",
        read.content
    );
    let grep = call_in(
        allowing_hard_links(&ws),
        "grep",
        json!({"pattern": "secret"}),
    )
    .await;
    assert!(
        grep.content.contains("link.txt:1: outside secret"),
        "{}",
        grep.content
    );
}

#[tokio::test]
async fn read_stops_at_the_result_cap_and_says_where_to_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let line = "y".repeat(99);
    let text: String = (0..2000).map(|_| format!("{line}\n")).collect();
    std::fs::write(dir.path().join("f.txt"), text).unwrap();
    // The test context caps results at 40,000 characters.
    let out = call_in(ctx(dir.path()), "read", json!({"path": "f.txt"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.len() <= 40_200, "{} bytes", out.content.len());
    let shown = out.content.lines().filter(|l| l.ends_with(&line)).count();
    assert!(shown > 300, "{shown} lines");
    assert!(
        out.content
            .contains(&format!("use offset={} to read on", shown + 1)),
        "{}",
        &out.content[out.content.len() - 200..]
    );
}
