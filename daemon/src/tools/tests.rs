//! Unit tests of the core tools, run through `ToolDef::call` exactly as
//! the agent runs them (raw JSON arguments in, `ToolOutput` out).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{ToolContext, ToolOutput, ToolRegistry};
use crate::config::ToolSettings;

pub(super) fn ctx(dir: &std::path::Path) -> ToolContext {
    ToolContext {
        agent: "main".into(),
        session_key: "agent:main:main".into(),
        workspace: dir.to_path_buf(),
        cancel: CancellationToken::new(),
        jobs: Default::default(),
        sessions: None,
        outbox: None,
        workflows: None,
        schedules: None,
        turn_spawns: Default::default(),
        origin: Arc::new(super::policy::ChatOrigin::owner(true)),
        memory: super::memory::MemoryAccess::Unavailable(Arc::from(
            "memory is not set up in this test",
        )),
        files: super::access::FileAccess::owner(dir),
        settings: Arc::new(ToolSettings {
            exec_timeout: Duration::from_secs(10),
            exec_max_output_chars: 300,
            exec_sandbox: Default::default(),
            max_result_chars: 40_000,
            max_argument_chars: 200_000,
            fs: Default::default(),
            max_rollbacks: 5,
            refusal_keywords: Vec::new(),
            loops: crate::config::LoopSettings {
                enabled: true,
                window: 30,
                warning: 10,
                critical: 20,
                breaker: 30,
            },
            hooks: Vec::new(),
            timeouts: Default::default(),
            default_timeout: Duration::from_secs(600),
            approval_timeout: Duration::from_secs(600),
            audit_retention: None,
            web_fetch: Default::default(),
            subagents: crate::config::SubagentLimits {
                max_depth: 1,
                max_children: 5,
            },
        }),
        secret_env: Arc::new(vec!["PINCER_TEST_SECRET_VAR".into()]),
        sandbox: Arc::new(crate::sandbox::Sandbox::unavailable(
            "unit tests run commands bare",
        )),
    }
}

/// Where the sandbox cannot be had and the config requires it, `exec`
/// refuses with the reason and runs nothing.
#[tokio::test]
async fn exec_refuses_when_the_sandbox_is_required_but_missing() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ctx(dir.path());
    let mut settings = (*ctx.settings).clone();
    settings.exec_sandbox.mode = crate::config::ExecSandboxMode::Required;
    ctx.settings = Arc::new(settings);
    ctx.sandbox = Arc::new(crate::sandbox::Sandbox::unavailable(
        "this kernel has no Landlock",
    ));
    let registry = ToolRegistry::core();
    let out = registry
        .get("exec")
        .expect("tool")
        .call(
            &serde_json::json!({"command": "touch ran"}).to_string(),
            ctx,
        )
        .await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "exec is refused: tools.exec.sandbox is required but this kernel has no Landlock"
    );
    assert!(!dir.path().join("ran").exists());
}

async fn call(dir: &std::path::Path, tool: &str, args: serde_json::Value) -> ToolOutput {
    let registry = ToolRegistry::core();
    registry
        .get(tool)
        .expect("tool")
        .call(&args.to_string(), ctx(dir))
        .await
}

#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("f.txt"), text).unwrap();
    let out = call(
        dir.path(),
        "read",
        serde_json::json!({"path": "f.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert!(!out.is_error);
    assert!(
        out.content.contains("     3\tline 3\n     4\tline 4\n"),
        "{}",
        out.content
    );
    assert!(out.content.contains("use offset=5"), "{}", out.content);
    let past = call(
        dir.path(),
        "read",
        serde_json::json!({"path": "f.txt", "offset": 99}),
    )
    .await;
    assert!(past.is_error && past.content.contains("past the end"));
    std::fs::write(dir.path().join("b.bin"), [0u8, 1, 2]).unwrap();
    let bin = call(dir.path(), "read", serde_json::json!({"path": "b.bin"})).await;
    assert!(bin.is_error && bin.content.contains("binary"));
    let missing = call(dir.path(), "read", serde_json::json!({"path": "nope.txt"})).await;
    assert!(missing.is_error && missing.content.contains("cannot read `nope.txt`"));
}

#[tokio::test]
async fn write_creates_parents_and_edit_needs_a_unique_match() {
    let dir = tempfile::tempdir().unwrap();
    let w = call(
        dir.path(),
        "write",
        serde_json::json!({"path": "a/b/c.txt", "content": "one two two"}),
    )
    .await;
    assert!(!w.is_error, "{}", w.content);
    let path = dir.path().join("a/b/c.txt");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one two two");
    let twice = call(
        dir.path(),
        "edit",
        serde_json::json!({"path": "a/b/c.txt", "old_string": "two", "new_string": "2"}),
    )
    .await;
    assert!(
        twice.is_error && twice.content.contains("occurs 2 times"),
        "{}",
        twice.content
    );
    let none = call(
        dir.path(),
        "edit",
        serde_json::json!({"path": "a/b/c.txt", "old_string": "three", "new_string": "3"}),
    )
    .await;
    assert!(none.is_error && none.content.contains("not found"));
    let once = call(
        dir.path(),
        "edit",
        serde_json::json!({"path": "a/b/c.txt", "old_string": "one", "new_string": "1"}),
    )
    .await;
    assert!(!once.is_error);
    let all = call(dir.path(), "edit", serde_json::json!({"path": "a/b/c.txt", "old_string": "two", "new_string": "2", "replace_all": true})).await;
    assert!(!all.is_error);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "1 2 2");
    // No temporary files are left behind.
    assert_eq!(
        std::fs::read_dir(dir.path().join("a/b")).unwrap().count(),
        1
    );
}

#[tokio::test]
async fn ls_glob_and_grep_stay_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("notes/2026")).unwrap();
    std::fs::write(dir.path().join("notes/a.md"), "alpha\nTODO: beta\n").unwrap();
    std::fs::write(dir.path().join("notes/2026/b.md"), "todo gamma\n").unwrap();
    std::fs::write(dir.path().join("c.txt"), "TODO delta\n").unwrap();
    let ls = call(dir.path(), "ls", serde_json::json!({})).await;
    assert_eq!(ls.content, "c.txt\t11 bytes\nnotes/");
    let glob = call(
        dir.path(),
        "glob",
        serde_json::json!({"pattern": "**/*.md"}),
    )
    .await;
    assert_eq!(glob.content, "notes/2026/b.md\nnotes/a.md");
    let grep = call(
        dir.path(),
        "grep",
        serde_json::json!({"pattern": "todo", "ignore_case": true, "glob": "*.md"}),
    )
    .await;
    let mut lines: Vec<&str> = grep.content.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["notes/2026/b.md:1: todo gamma", "notes/a.md:2: TODO: beta"]
    );
    let bad = call(
        dir.path(),
        "grep",
        serde_json::json!({"pattern": "(unclosed"}),
    )
    .await;
    assert!(bad.is_error && bad.content.contains("invalid regular expression"));
    let outside = call(dir.path(), "ls", serde_json::json!({"path": ".."})).await;
    assert!(outside.is_error && outside.content.contains("outside the workspace"));
}

#[tokio::test]
async fn exec_reports_status_caps_output_and_stays_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ok = call(
        dir.path(),
        "exec",
        serde_json::json!({"command": "echo out; echo err >&2"}),
    )
    .await;
    assert!(!ok.is_error);
    assert!(ok.content.starts_with("exit code 0"), "{}", ok.content);
    assert!(
        ok.content.contains("out\nerr"),
        "stdout and stderr interleave: {}",
        ok.content
    );
    let fail = call(dir.path(), "exec", serde_json::json!({"command": "exit 3"})).await;
    assert!(fail.is_error && fail.content.starts_with("exit code 3"));
    let long = call(
        dir.path(),
        "exec",
        serde_json::json!({"command": "seq 1 2000"}),
    )
    .await;
    assert!(
        long.content.contains("characters omitted"),
        "{}",
        long.content
    );
    assert!(
        long.content.contains("\n1\n2\n") && long.content.trim_end().ends_with("2000"),
        "head and tail kept"
    );
    // Secret variables are removed from the environment: covered end to end
    // (tests/e2e/scripted.rs), where pincerd itself holds the keys.
    let cwd = call(
        dir.path(),
        "exec",
        serde_json::json!({"command": "pwd", "cwd": "/"}),
    )
    .await;
    assert!(cwd.is_error && cwd.content.contains("outside the workspace"));
}

#[tokio::test]
async fn exec_timeout_kills_the_group_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = call(
        dir.path(),
        "exec",
        serde_json::json!({"command": "echo begun; sleep 30 & sleep 30", "timeout_s": 1}),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("timed out after 1 s"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("begun"),
        "output so far is kept: {}",
        out.content
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn exec_abort_stops_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::core();
    let context = ctx(dir.path());
    let cancel = context.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let out = registry
        .get("exec")
        .unwrap()
        .call(r#"{"command": "sleep 30"}"#, context)
        .await;
    assert!(
        out.is_error && out.content.starts_with("aborted"),
        "{}",
        out.content
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_tool_errors() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::core();
    let read = registry.get("read").unwrap();
    for (raw, expect) in [
        ("[1,2]", "must be a JSON object"),
        ("{\"path\":", "not valid JSON"),
        ("{\"path\": 5}", "invalid arguments"),
        ("", "\"path\" is a required property"),
    ] {
        let out = read.call(raw, ctx(dir.path())).await;
        assert!(
            out.is_error && out.content.contains(expect),
            "{raw}: {}",
            out.content
        );
    }
}

#[tokio::test]
async fn schema_validation_names_the_problem_and_the_parameters() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let registry = ToolRegistry::core();
    let read = registry.get("read").unwrap();
    let out = read
        .call(
            "{\"path\": \"a.txt\", \"offset\": \"ten\"}",
            ctx(dir.path()),
        )
        .await;
    assert!(out.is_error);
    assert!(out.content.contains("at `/offset`"), "{}", out.content);
    assert!(
        out.content.contains("path (string, required)"),
        "{}",
        out.content
    );
    // Declared aliases are fixed before validation.
    let out = read
        .call("{\"file_path\": \"a.txt\"}", ctx(dir.path()))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("two"));
    // The right name wins when both are given.
    let edit = registry.get("edit").unwrap();
    let args = edit
        .prepare("{\"path\": \"a.txt\", \"old\": \"one\", \"new_str\": \"1\"}")
        .unwrap();
    assert_eq!(args["old_string"], "one");
    assert_eq!(args["new_string"], "1");
    // Unknown parameters are reported (the argument types deny them).
    let out = read
        .call("{\"path\": \"a.txt\", \"mode\": 1}", ctx(dir.path()))
        .await;
    assert!(
        out.is_error && out.content.contains("mode"),
        "{}",
        out.content
    );
}

/// A local web server: `/page` (HTML), `/rN` redirecting to `/r(N-1)`, with
/// `/r0` redirecting to `/page`, `/to-ip` redirecting to the same server
/// by IP address and `/to-v4-compatible` by an IPv6 form of it.
async fn web_server() -> u16 {
    use axum::extract::Path as UrlPath;
    use axum::response::{Html, IntoResponse, Redirect};
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new()
        .route(
            "/page",
            get(|| async { Html("<html><body><h1>Hello</h1><p>from <b>pincer</b> tests</p><script>x()</script></body></html>") }),
        )
        .route(
            "/to-ip",
            get(move || async move { Redirect::temporary(&format!("http://127.0.0.1:{port}/page")) }),
        )
        .route(
            "/to-v4-compatible",
            get(move || async move { Redirect::temporary(&format!("http://[::127.0.0.1]:{port}/page")) }),
        )
        .route(
            "/{hop}",
            get(|UrlPath(hop): UrlPath<String>| async move {
                let n: u32 = hop.trim_start_matches('r').parse().unwrap_or(0);
                let next = if n == 0 { "/page".to_string() } else { format!("/r{}", n - 1) };
                Redirect::temporary(&next).into_response()
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

fn web_ctx(dir: &std::path::Path, allow_private: bool, hosts: &[&str]) -> ToolContext {
    let mut c = ctx(dir);
    let mut settings = (*c.settings).clone();
    settings.web_fetch = crate::config::WebFetchSettings {
        allow_private,
        allow_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        use_env_proxy: false,
    };
    c.settings = Arc::new(settings);
    c
}

#[tokio::test]
async fn web_fetch_refuses_private_addresses_and_rechecks_redirects() {
    let dir = tempfile::tempdir().unwrap();
    let port = web_server().await;
    let registry = ToolRegistry::core();
    let fetch = registry.get("web_fetch").unwrap();
    let call = |url: String, ctx: ToolContext| {
        let args = serde_json::json!({ "url": url }).to_string();
        async move { fetch.call(&args, ctx).await }
    };

    let out = call(
        format!("http://127.0.0.1:{port}/page"),
        web_ctx(dir.path(), false, &[]),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("private or local address"),
        "{}",
        out.content
    );

    let out = call(
        format!("http://127.0.0.1:{port}/page"),
        web_ctx(dir.path(), true, &[]),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("Hello") && out.content.contains("pincer"),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("<h1>"),
        "HTML is converted: {}",
        out.content
    );

    // Three redirects are followed, a fourth is not.
    let out = call(
        format!("http://127.0.0.1:{port}/r2"),
        web_ctx(dir.path(), true, &[]),
    )
    .await;
    assert!(
        !out.is_error && out.content.contains("Hello"),
        "{}",
        out.content
    );
    let out = call(
        format!("http://127.0.0.1:{port}/r3"),
        web_ctx(dir.path(), true, &[]),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("more than 3 redirects"),
        "{}",
        out.content
    );

    // An allowed host does not open the door to where it redirects.
    let out = call(
        format!("http://localhost:{port}/page"),
        web_ctx(dir.path(), false, &["localhost"]),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let out = call(
        format!("http://localhost:{port}/to-ip"),
        web_ctx(dir.path(), false, &["localhost"]),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("127.0.0.1"),
        "{}",
        out.content
    );

    // IPv6 forms that carry 127.0.0.1 are refused as 127.0.0.1 is, before
    // any connection is tried, directly and as a redirect target.
    for url in [
        format!("http://[::127.0.0.1]:{port}/page"),
        format!("http://[64:ff9b::7f00:1]:{port}/page"),
        format!("http://[::ffff:127.0.0.1]:{port}/page"),
        format!("http://localhost:{port}/to-v4-compatible"),
    ] {
        let out = call(url.clone(), web_ctx(dir.path(), false, &["localhost"])).await;
        assert!(
            out.is_error && out.content.contains("private or local address"),
            "{url}: {}",
            out.content
        );
    }

    let out = call("file:///etc/passwd".into(), web_ctx(dir.path(), true, &[])).await;
    assert!(
        out.is_error && out.content.contains("only http and https"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn apply_patch_changes_several_files_or_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(dir.path().join("gone.txt"), "bye\n").unwrap();
    let patch = "*** Begin Patch\n*** Add File: new/b.txt\n+hello\n*** Update File: a.txt\n*** Move to: moved.txt\n@@\n one\n-two\n+2\n three\n*** Delete File: gone.txt\n*** End Patch";
    let out = call(
        dir.path(),
        "apply_patch",
        serde_json::json!({ "patch": patch }),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new/b.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("moved.txt")).unwrap(),
        "one\n2\nthree\n"
    );
    assert!(!dir.path().join("a.txt").exists() && !dir.path().join("gone.txt").exists());

    // The second change does not apply: the first is not written either.
    let patch = "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Update File: moved.txt\n-not there\n+x\n*** End Patch";
    let out = call(
        dir.path(),
        "apply_patch",
        serde_json::json!({ "patch": patch }),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("not in the file"),
        "{}",
        out.content
    );
    assert!(!dir.path().join("c.txt").exists());

    let patch = "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch";
    let out = call(
        dir.path(),
        "apply_patch",
        serde_json::json!({ "patch": patch }),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("outside the workspace"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn background_jobs_are_polled_read_killed_and_private_to_their_session() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::core();
    let c = ctx(dir.path());
    let run = |tool: &'static str, args: serde_json::Value, ctx: ToolContext| {
        let t = registry.get(tool).unwrap();
        async move { t.call(&args.to_string(), ctx).await }
    };
    let out = run(
        "exec",
        serde_json::json!({"command": "echo first; sleep 0.3; echo second", "background": true}),
        c.clone(),
    )
    .await;
    assert!(
        !out.is_error && out.content.contains("background job 1"),
        "{}",
        out.content
    );
    let slow = run(
        "exec",
        serde_json::json!({"command": "sleep 30", "background": true}),
        c.clone(),
    )
    .await;
    assert!(
        slow.content.contains("background job 2"),
        "{}",
        slow.content
    );

    let list = run("process", serde_json::json!({"action": "list"}), c.clone()).await;
    assert!(
        list.content.contains("1: echo first") && list.content.contains("2: sleep 30"),
        "{}",
        list.content
    );
    // Another session sees none of them.
    let mut other = c.clone();
    other.session_key = "agent:main:other".into();
    let none = run(
        "process",
        serde_json::json!({"action": "poll", "id": 1}),
        other,
    )
    .await;
    assert!(
        none.is_error && none.content.contains("no background job 1"),
        "{}",
        none.content
    );

    tokio::time::sleep(Duration::from_millis(100)).await;
    let poll = run(
        "process",
        serde_json::json!({"action": "poll", "id": 1}),
        c.clone(),
    )
    .await;
    assert!(
        poll.content.contains("running") && poll.content.contains("first"),
        "{}",
        poll.content
    );
    let started = Instant::now();
    loop {
        let poll = run(
            "process",
            serde_json::json!({"action": "poll", "id": 1}),
            c.clone(),
        )
        .await;
        if poll.content.contains("finished: exit code 0") {
            assert!(
                poll.content.contains("second") && !poll.content.contains("first"),
                "{}",
                poll.content
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{}",
            poll.content
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = run(
        "process",
        serde_json::json!({"action": "log", "id": 1}),
        c.clone(),
    )
    .await;
    assert!(log.content.contains("first\nsecond"), "{}", log.content);

    let kill = run(
        "process",
        serde_json::json!({"action": "kill", "id": 2}),
        c.clone(),
    )
    .await;
    assert!(kill.content.contains("killed"), "{}", kill.content);
    let started = Instant::now();
    loop {
        let poll = run(
            "process",
            serde_json::json!({"action": "poll", "id": 2}),
            c.clone(),
        )
        .await;
        if poll.content.contains("finished") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{}",
            poll.content
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
