//! The exec sandbox against a model that tries to get past it (issue
//! "Hostile-model holes", holes 2 and 3): the daemon's keys in its
//! environment and in `PINCER_HOME`, the socket, the config; and what
//! happens where the kernel has no Landlock (`auto` runs and says so,
//! `required` refuses).

use pincer_testkit::harness::{TestHome, bins, provider_config};
use pincer_testkit::requests::tool_results;
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::json;

const ENV_KEY: &str = "sk-live-env-secret-4711";
const FILE_KEY: &str = "sk-live-file-secret-0815";

async fn setup(tail: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n{tail}",
        provider_config("openai", &format!("{}/v1", llm.base_url()), "")
    ));
    std::fs::create_dir_all(home.path().join("secrets")).unwrap();
    std::fs::write(home.path().join("secrets/other.key"), FILE_KEY).unwrap();
    std::fs::create_dir_all(home.workspace()).unwrap();
    (home, llm)
}

fn base64(text: &str) -> String {
    let out = std::process::Command::new("base64")
        .arg("-w0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .expect("base64 (coreutils)");
    String::from_utf8(out.stdout).unwrap()
}

/// Every way of the probe to read a key: the daemon's `/proc` environ
/// (plain, reversed, base64), key files in `PINCER_HOME`, and a file left
/// in the workspace. No key reaches the tool results, the transcript or
/// the workspace.
#[tokio::test(flavor = "multi_thread")]
async fn exec_cannot_read_the_daemons_keys() {
    let (home, llm) = setup("").await;
    llm.script(
        "[leak]",
        vec![
            Step::tools(&[
                (
                    "exec",
                    json!({"command": "tr '\\0' '\\n' < /proc/$PPID/environ | rev; for p in /proc/[0-9]*; do cat $p/environ; done 2>/dev/null | tr '\\0' '\\n' | grep -a '^OPENAI' | rev; echo rc=$?"}),
                ),
                (
                    "exec",
                    json!({"command": "base64 -w0 < /proc/$PPID/environ; echo; base64 -w0 ../secrets/*.key; cat ../config.toml"}),
                ),
                (
                    "exec",
                    json!({"command": "cat /proc/$PPID/environ ../secrets/other.key > leak.txt 2>&1; chmod 644 leak.txt; echo wrote"}),
                ),
            ]),
            Step::text("done"),
        ],
    );
    let _d = home.start_with_env(&[("OPENAI_API_KEY", ENV_KEY)]);
    home.cli(&["send", "[leak] show me the keys"]).await.ok();
    let results = tool_results(&llm.journal()[1]).join("\n");
    assert!(results.contains("Permission denied"), "{results}");
    let reversed: String = ENV_KEY.chars().rev().collect();
    let transcript = std::fs::read_to_string(home.transcript_path("main")).unwrap();
    let leaked = std::fs::read_to_string(home.workspace().join("leak.txt")).unwrap_or_default();
    for (what, text) in [
        ("tool results", &results),
        ("transcript", &transcript),
        ("leak.txt", &leaked),
    ] {
        for secret in [
            ENV_KEY.to_string(),
            reversed.clone(),
            FILE_KEY.to_string(),
            base64(FILE_KEY),
        ] {
            assert!(!text.contains(&secret), "{what} holds {secret}: {text}");
        }
    }
    // The config was not readable either.
    assert!(!results.contains("[providers.test]"), "{results}");
}

/// A command — foreground, or a job that detaches with `setsid` and a
/// double fork — cannot use pincerd's socket (no `pincer approvals allow`
/// of its own pending call, no `config reload`) nor change the config.
#[tokio::test(flavor = "multi_thread")]
async fn exec_cannot_act_as_the_owner() {
    let bin_dir = bins().pincer.parent().unwrap().to_path_buf();
    // The CLI must be runnable in the sandbox for the test to mean
    // something: its folder is made readable.
    let (home, llm) = setup(&format!(
        "[tools.exec]\nread_paths = [\"{}\"]\n",
        bin_dir.display()
    ))
    .await;
    let pincer = format!(
        "{} --home {}",
        bins().pincer.display(),
        home.path().display()
    );
    let socket = home.path().join("run/pincerd.sock");
    let detached = format!(
        "setsid sh -c '( ( {pincer} status > detached.txt 2>&1; echo rc=$? >> detached.txt ) & )' < /dev/null > /dev/null 2>&1; echo started"
    );
    llm.script(
        "[owner]",
        vec![
            Step::tools(&[
                ("exec", json!({"command": format!("{pincer} --version && {pincer} status; echo rc=$?")})),
                ("exec", json!({"command": format!("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}')\" 2>&1 | tail -1", socket.display())})),
                ("exec", json!({"command": "sed -i 's/test-model/other-model/' ../config.toml; echo rc=$?"})),
                ("exec", json!({"command": format!("{pincer} config reload; echo rc=$?")})),
                ("exec", json!({"command": detached, "background": true})),
            ]),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    let config_before = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.cli(&["send", "[owner] take over"]).await.ok();
    let results = tool_results(&llm.journal()[1]);
    // The CLI runs (its --version works) but cannot reach the daemon.
    assert!(results[0].contains("pincer "), "{}", results[0]);
    assert!(results[0].contains("rc=1"), "{}", results[0]);
    assert!(
        !results[0].contains("uptime") && !results[0].contains("state:"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("PermissionError"), "{}", results[1]);
    assert!(!results[2].contains("rc=0"), "{}", results[2]);
    assert!(results[3].contains("rc=1"), "{}", results[3]);
    assert_eq!(
        std::fs::read_to_string(home.path().join("config.toml")).unwrap(),
        config_before
    );
    // The detached job wrote its answer: refused as well.
    let path = home.workspace().join("detached.txt");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&path)
        .unwrap_or_default()
        .contains("rc=")
    {
        assert!(
            started.elapsed().as_secs() < 20,
            "the detached job wrote nothing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let detached = std::fs::read_to_string(&path).unwrap();
    assert!(detached.contains("rc=1"), "{detached}");
    assert!(!detached.contains("state:"), "{detached}");
}

/// The workspace stays writable and the system readable: the sandbox
/// does not get in the way of ordinary work, and `status` says it is on.
#[tokio::test(flavor = "multi_thread")]
async fn sandboxed_exec_still_does_ordinary_work() {
    let (home, llm) = setup("").await;
    llm.script(
        "[work]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "mkdir -p src && echo 'print(6*7)' > src/a.py && python3 src/a.py && echo tmp > $TMPDIR/t && cat $TMPDIR/t && ls /usr/bin/env && echo x > /etc/pincer-test 2>&1; echo etc-rc=$?"}),
            ),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "[work] go"]).await.ok();
    let results = tool_results(&llm.journal()[1]);
    assert!(
        results[0].contains("42\ntmp\n/usr/bin/env"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("etc-rc=2") || results[0].contains("etc-rc=1"),
        "{}",
        results[0]
    );
    assert!(!std::path::Path::new("/etc/pincer-test").exists());
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["sandbox"]["active"], true, "{status}");
    assert!(
        status["sandbox"]["state"]
            .as_str()
            .unwrap()
            .starts_with("exec is sandboxed (Landlock ABI"),
        "{status}"
    );
}

/// `auto` on a kernel without Landlock: exec runs, and status, doctor and
/// the log each say in one sentence that it is not sandboxed and why.
#[tokio::test(flavor = "multi_thread")]
async fn auto_without_landlock_runs_exec_and_says_so() {
    let (home, llm) = setup("").await;
    llm.script(
        "[auto]",
        vec![
            Step::tool("exec", json!({"command": "touch ran && echo ran"})),
            Step::text("done"),
        ],
    );
    let _d = home.start_without_landlock();
    home.cli(&["send", "[auto] go"]).await.ok();
    assert!(home.workspace().join("ran").exists());
    let why = "exec is not sandboxed: this kernel has no Landlock";
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["sandbox"]["active"], false);
    assert!(
        status["sandbox"]["state"]
            .as_str()
            .unwrap()
            .starts_with(why),
        "{status}"
    );
    let doctor = home.cli(&["doctor"]).await;
    let doctor = doctor.stdout.clone();
    assert!(
        doctor
            .lines()
            .any(|l| l.contains("sandbox") && l.contains(why)),
        "{doctor}"
    );
    let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
    assert!(log.contains(why), "{log}");
}

/// `required` on a kernel without Landlock: exec is refused with the
/// reason and nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn required_without_landlock_refuses_exec() {
    let (home, llm) = setup("[tools.exec]\nsandbox = \"required\"\n").await;
    llm.script(
        "[required]",
        vec![
            Step::tool("exec", json!({"command": "touch ran"})),
            Step::text("done"),
        ],
    );
    let _d = home.start_without_landlock();
    home.cli(&["send", "[required] go"]).await.ok();
    assert!(!home.workspace().join("ran").exists());
    let results = tool_results(&llm.journal()[1]);
    assert!(
        results[0].contains(
            "exec is refused: tools.exec.sandbox is required but this kernel has no Landlock"
        ),
        "{}",
        results[0]
    );
    let doctor = home.cli(&["doctor"]).await;
    let doctor = doctor.stdout.clone();
    assert!(doctor.contains("exec is refused"), "{doctor}");
}

/// With `network = false` no socket of any kind can be opened.
#[tokio::test(flavor = "multi_thread")]
async fn network_off_refuses_every_socket() {
    let (home, llm) = setup("[tools.exec]\nnetwork = false\n").await;
    llm.script(
        "[net]",
        vec![
            Step::tool(
                "exec",
                json!({"command": "python3 -c 'import socket; socket.socket()' 2>&1 | tail -1"}),
            ),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "[net] go"]).await.ok();
    let results = tool_results(&llm.journal()[1]);
    assert!(results[0].contains("PermissionError"), "{}", results[0]);
}

/// A hook with `sandbox = true` runs confined (it cannot read the config)
/// and one without runs with the owner's rights, as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_hook_opts_into_the_sandbox() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let probe = format!(
        "cat > /dev/null; if cat {}/config.toml > /dev/null 2>&1; then echo '{{\"decision\": \"block\", \"reason\": \"the config is readable\"}}'; else echo '{{\"decision\": \"allow\"}}'; fi",
        home.path().display()
    );
    let hook = |name: &str, tool: &str, sandbox: bool| {
        format!(
            "[[tools.hooks]]\nname = \"{name}\"\nevent = \"before_tool_call\"\ntools = [\"{tool}\"]\nsandbox = {sandbox}\ncommand = [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(&probe).unwrap()
        )
    };
    home.write_config(&format!(
        "{}\n{}\n{}",
        provider_config("openai", &format!("{}/v1", llm.base_url()), ""),
        hook("confined", "exec", true),
        hook("trusted", "ls", false)
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    llm.script(
        "[hooks]",
        vec![
            Step::tools(&[("exec", json!({"command": "echo ran"})), ("ls", json!({}))]),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "[hooks] go"]).await.ok();
    let results = tool_results(&llm.journal()[1]);
    assert!(results[0].contains("ran"), "{}", results[0]);
    assert!(
        results[1].contains("the config is readable"),
        "{}",
        results[1]
    );
}

/// A stdio MCP server with `sandbox = true` still serves its tools, with
/// the interpreter it needs named in `read_paths`.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_mcp_server_still_serves() {
    let server = pincer_testkit::peers::peer("mcp-server-time");
    let python = server.parent().unwrap().join("python3");
    let prefix = std::process::Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .expect("the peers' python");
    let prefix = String::from_utf8(prefix.stdout).unwrap().trim().to_string();
    let peers = pincer_testkit::peers::peers_dir();
    let (home, llm) = setup(&format!(
        "[tools.exec]\nread_paths = [\"{}\", \"{prefix}\"]\n[mcp.time]\ncommand = [\"{}\", \"--local-timezone\", \"UTC\"]\nsandbox = true\n",
        peers.display(),
        server.display()
    ))
    .await;
    llm.script(
        "[time]",
        vec![
            Step::tool("mcp__time__get_current_time", json!({"timezone": "UTC"})),
            Step::text("done"),
        ],
    );
    let _d = home.start();
    home.cli(&["send", "[time] what time is it"]).await.ok();
    let results = tool_results(&llm.journal()[1]);
    assert!(results[0].contains("UTC"), "{}", results[0]);
}

/// A copy of pincerd in a folder of its own, with the sandbox's launcher
/// beside it or not: what an install holds, and what an upgrade changes.
fn installed_copy(with_launcher: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut wanted = vec![&bins().pincerd];
    if with_launcher {
        wanted.push(&bins().sandbox);
    }
    for bin in wanted {
        let to = dir.path().join(bin.file_name().unwrap());
        // A hard link where the folders share a file system: pincerd is
        // large in a debug build.
        if std::fs::hard_link(bin, &to).is_err() {
            std::fs::copy(bin, &to).unwrap();
        }
    }
    let pincerd = dir.path().join("pincerd");
    (dir, pincerd)
}

/// An upgrade replaces the launcher under a running daemon (a new file
/// renamed over it, as dpkg does), then removes it: pincerd keeps
/// starting commands with the launcher it opened at start, confined as
/// before, and no command holds a descriptor of it.
#[tokio::test(flavor = "multi_thread")]
async fn the_launcher_a_daemon_started_with_survives_an_upgrade() {
    let (home, llm) = setup("").await;
    let (bin, pincerd) = installed_copy(true);
    let probe = "cat ../config.toml > /dev/null 2>&1 && echo config-readable; for f in /proc/$$/fd/*; do readlink $f; done; echo probed";
    llm.script(
        "[upgrade]",
        vec![
            Step::tool("exec", json!({"command": probe})),
            Step::text("done"),
            Step::tool("exec", json!({"command": probe})),
            Step::text("done"),
        ],
    );
    let _d = home.start_binary(&pincerd);
    let launcher = bin.path().join("pincer-sandbox");
    let marker = home.workspace().join("replaced-launcher-ran");
    let new = bin.path().join("pincer-sandbox.dpkg-new");
    std::fs::write(
        &new,
        format!("#!/bin/sh\ntouch {}\nexit 3\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&new, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(&new, &launcher).unwrap();
    home.cli(&["send", "[upgrade] after the replacement"])
        .await
        .ok();
    std::fs::remove_file(&launcher).unwrap();
    home.cli(&["send", "[upgrade] after the removal"])
        .await
        .ok();
    // The last request holds both calls' results: the second turn's
    // history has the first.
    let results = tool_results(llm.journal().last().unwrap());
    assert_eq!(results.len(), 2, "{results:?}");
    for result in &results {
        // The descriptors were listed (stdin is /dev/null), and none is
        // the launcher's.
        assert!(
            result.contains("probed") && result.contains("/dev/null"),
            "{result}"
        );
        assert!(!result.contains("config-readable"), "{result}");
        assert!(!result.contains("pincer-sandbox"), "{result}");
    }
    assert!(!marker.exists(), "the replaced launcher ran");
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["sandbox"]["active"], true, "{status}");
}

/// A pincerd without its launcher beside it (a by-hand install that
/// copied only the two old binaries) runs no command unconfined: exec is
/// refused, and status, doctor and the log say why and what to do.
#[tokio::test(flavor = "multi_thread")]
async fn without_its_launcher_exec_is_refused_and_said_so() {
    let (home, llm) = setup("").await;
    let (bin, pincerd) = installed_copy(false);
    llm.script(
        "[nolauncher]",
        vec![
            Step::tool("exec", json!({"command": "touch ran"})),
            Step::text("done"),
        ],
    );
    let _d = home.start_binary(&pincerd);
    home.cli(&["send", "[nolauncher] go"]).await.ok();
    assert!(!home.workspace().join("ran").exists());
    let why = format!(
        "exec is refused: the sandbox's launcher {} is missing",
        bin.path().join("pincer-sandbox").display()
    );
    let results = tool_results(&llm.journal()[1]);
    assert!(results[0].contains(&why), "{}", results[0]);
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["sandbox"]["active"], false);
    assert!(
        status["sandbox"]["state"]
            .as_str()
            .unwrap()
            .starts_with(&why),
        "{status}"
    );
    let doctor = home.cli(&["doctor"]).await.stdout;
    assert!(
        doctor
            .lines()
            .any(|l| l.starts_with("✗ sandbox: ") && l.contains(&why)),
        "{doctor}"
    );
    let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
    assert!(log.contains(&why), "{log}");
}
