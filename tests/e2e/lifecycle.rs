//! The daemon's life and its errors: config errors (exit 78), the
//! not-running sentence (exit 3), single instance, stale sockets, graceful
//! shutdown, zero-config, reload, logs, doctor, bad requests.

use std::os::unix::fs::PermissionsExt;

use pincer_testkit::harness::{TestHome, bins, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};

#[tokio::test(flavor = "multi_thread")]
async fn invalid_config_names_file_line_key_and_exits_78() {
    let home = TestHome::new();
    home.write_config("[daemon]\nmax_concurrent_turns = 4\n\n[agents.main]\nmodle = \"default\"\n");
    let out = home.pincerd().output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    let file = home.path().join("config.toml");
    assert!(err.contains(&format!("{}:5:1", file.display())), "{err}");
    assert!(err.contains("agents.main.modle"), "{err}");
    assert!(err.contains("did you mean `model`?"), "{err}");

    // The CLI's check says the same, with the same exit code.
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 78);
    assert!(
        check.stderr.contains("did you mean `model`?"),
        "{}",
        check.stderr
    );

    // A semantic error points at the offending value.
    home.write_config(
        "[providers.a]\nkind = \"openai\"\n\n[models.default]\nprovider = \"b\"\nmodel = \"m\"\n",
    );
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 78);
    assert!(
        check.stderr.contains("config.toml:5:12") && check.stderr.contains("provider `b`"),
        "{}",
        check.stderr
    );

    // A bad value type.
    home.write_config("[daemon]\nmax_concurrent_turns = \"many\"\n");
    let check = home.cli(&["config", "check"]).await;
    assert_eq!(check.code, 78);
    assert!(
        check.stderr.contains(":2:") && check.stderr.contains("daemon.max_concurrent_turns"),
        "{}",
        check.stderr
    );

    // An unknown top-level table is named once, not as `channel.channel`,
    // with the nearest valid key.
    home.write_config("[channel.discord]\ntoken = \"x\"\n");
    let out = home.pincerd().output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:1:2: key `channel`: unknown key `channel`",
            file.display()
        )) && err.contains("channels"),
        "{err}"
    );
    // A key nested in a known table: its whole path and the nearest key.
    home.write_config("[channels.discord]\ntoken = \"x\"\n");
    let out = home.pincerd().output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:2:1: key `channels.discord.token`: unknown key `token` (did you mean `token_env`?)",
            file.display()
        )),
        "{err}"
    );

    home.write_config(&provider_config("openai", "http://127.0.0.1:9/v1", ""));
    assert_eq!(home.cli(&["config", "check"]).await.code, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_without_daemon_says_how_to_start_it() {
    let home = TestHome::new();
    let out = home.cli(&["status"]).await;
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("pincerd is not running; start it with"),
        "{}",
        out.stderr
    );
    let out = home.cli(&["send", "hi"]).await;
    assert_eq!(out.code, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn single_instance_stale_socket_and_graceful_stop() {
    let home = TestHome::new();
    let daemon = home.start();
    // Socket 0600 in a 0700 folder.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.path().join("run")), 0o700);
    assert_eq!(mode(&home.path().join("run/pincerd.sock")), 0o600);

    let second = home.pincerd().output().unwrap();
    // 75, not 1: the service unit does not restart on it.
    assert_eq!(second.status.code(), Some(75));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("already running")
            && err.contains("started by hand")
            && err.contains(&format!("pid {}", daemon.pid())),
        "{err}"
    );
    let bg = home.pincerd().arg("--background").output().unwrap();
    assert_eq!(bg.status.code(), Some(75));
    assert!(String::from_utf8_lossy(&bg.stderr).contains("already running"));
    home.cli(&["status"]).await.ok();

    // A crash leaves the socket behind; the next start replaces it.
    daemon.kill9();
    assert!(home.path().join("run/pincerd.sock").exists());
    let daemon = home.start();
    home.cli(&["status"]).await.ok();

    // SIGTERM stops cleanly and removes the socket.
    assert_eq!(daemon.stop(), Some(0));
    assert!(!home.path().join("run/pincerd.sock").exists());
    let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
    assert!(log.contains("pincerd stopped"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn background_start_returns_when_ready() {
    let home = TestHome::new();
    let out = home.pincerd().arg("--background").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = home.cli(&["--json", "status"]).await;
    let pid = status.json()["pid"].as_u64().unwrap() as i32;
    // Stop it through the API's owner: SIGTERM.
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    for _ in 0..200 {
        if home.cli(&["status"]).await.code == 3 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the background daemon did not stop on SIGTERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_config_explains_what_to_set_and_uses_the_environment() {
    let home = TestHome::new();
    let d = home.start();
    let out = home.cli(&["send", "hello"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("No model provider is configured: set OPENAI_API_KEY"),
        "{}",
        out.stderr
    );
    let doctor = home.cli(&["doctor"]).await;
    assert_eq!(doctor.code, 1);
    assert!(
        doctor
            .stdout
            .contains("✗ provider: No model provider is configured"),
        "{}",
        doctor.stdout
    );
    drop(d);

    let llm = ScriptedLlm::start().await.unwrap();
    llm.script("[zero]", vec![Step::text("configured by the environment")]);
    let base = format!("{}/v1", llm.base_url());
    let _d = home.start_with_env(&[
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", &base),
        ("PINCER_MODEL", "env-model"),
    ]);
    let out = home.cli(&["send", "--session", "env", "[zero] hi"]).await;
    assert_eq!(out.ok().trim(), "configured by the environment");
    assert_eq!(llm.journal()[0]["model"], "env-model");
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["agents"][0]["provider"], "openai");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_clear_errors() {
    let home = TestHome::new();
    home.write_config(&provider_config("openai", "http://127.0.0.1:9/v1", ""));
    let _d = home.start();
    let out = home.cli(&["send", "   "]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("the message is empty"),
        "{}",
        out.stderr
    );
    let big = "x".repeat(1024 * 1024 + 1);
    let out = home.cli_with_stdin(&["send", "-"], &big).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("limit is 1048576 bytes"),
        "{}",
        out.stderr
    );
    let out = home.cli(&["send", "--agent", "ghost", "hi"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no agent `ghost`"), "{}", out.stderr);
    let out = home.cli(&["send", "--session", "bad key!", "hi"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("session key"), "{}", out.stderr);
    let out = home.cli(&["sessions", "show", "nope"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no session `nope`"), "{}", out.stderr);
    // Still alive and well.
    home.cli(&["status"]).await.ok();
    // A model server that is down is a turn error with a sentence, not a crash.
    let out = home.cli(&["send", "hi"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("cannot connect"), "{}", out.stderr);
    let list = home.cli(&["--json", "sessions", "list"]).await.json();
    assert!(
        list[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot connect")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reload_applies_live_changes_and_reports_restart_ones() {
    let llm = ScriptedLlm::start().await.unwrap();
    let base = format!("{}/v1", llm.base_url());
    let home = TestHome::new();
    home.write_config(&provider_config("openai", &base, ""));
    let _d = home.start();
    home.write_config(&format!(
        "[daemon]\nmax_concurrent_turns = 3\n\n[memory]\nembedder = \"none\"\n\n{}\n[agents.helper]\nmodel = \"default\"\n",
        provider_config("openai", &base, "")
    ));
    let out = home.cli(&["config", "reload"]).await;
    assert!(
        out.ok().contains("applied: agent `helper` added"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("needs a restart of pincerd: daemon.max_concurrent_turns (8 → 3)"),
        "{}",
        out.stdout
    );
    // Each lifecycle part answers for its own settings.
    assert!(
        out.stdout
            .contains("needs a restart of pincerd: memory: [memory] settings"),
        "{}",
        out.stdout
    );
    llm.script("[helper]", vec![Step::text("helper here")]);
    assert_eq!(
        home.cli(&["send", "--agent", "helper", "[helper] hi"])
            .await
            .ok()
            .trim(),
        "helper here"
    );

    // An invalid file is refused and the running config stays.
    home.write_config("[agents.main]\nbogus = 1\n");
    let out = home.cli(&["config", "reload"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("was not applied") && out.stderr.contains("bogus"),
        "{}",
        out.stderr
    );
    let status = home.cli(&["--json", "status"]).await.json();
    assert_eq!(status["agents"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_doctor_and_session_management() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[providers.down]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[providers.nokey]\nkind = \"anthropic\"\napi_key_env = \"PINCER_TEST_UNSET_KEY\"\n",
        provider_config("openai", &format!("{}/v1", llm.base_url()), "")
    ));
    let _d = home.start();
    // `logs` reads the file: once the API answers, "ready" has been logged
    // (the socket is bound a moment before).
    home.cli(&["status"]).await.ok();
    let logs = home.cli(&["logs", "-n", "20"]).await;
    assert!(logs.ok().contains("pincerd is ready"), "{}", logs.stdout);

    let doctor = home.cli(&["doctor"]).await;
    assert_eq!(doctor.code, 1);
    assert!(doctor.stdout.contains("✓ socket"), "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("✓ provider test:"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor
            .stdout
            .contains("✗ provider down: cannot reach http://127.0.0.1:9/v1"),
        "{}",
        doctor.stdout
    );
    assert!(doctor.stdout.contains("✗ provider nokey: provider `nokey` reads its API key from $PINCER_TEST_UNSET_KEY, which is not set"), "{}", doctor.stdout);

    llm.script("[s1]", vec![Step::text("one"), Step::text("two")]);
    home.cli(&["send", "[s1] hi"]).await.ok();
    let before = home.cli(&["--json", "sessions", "list"]).await.json();
    let old_id = before[0]["id"].as_str().unwrap().to_string();
    let reset = home
        .cli(&["--json", "sessions", "reset", "main"])
        .await
        .json();
    assert_eq!(reset["old_id"], old_id.as_str());
    // The old transcript stays on disk; the next turn starts a fresh one.
    assert!(
        home.path()
            .join(format!("sessions/main/{old_id}.jsonl"))
            .exists()
    );
    llm.script("[s2]", vec![Step::text("fresh")]);
    home.cli(&["send", "[s2] again"]).await.ok();
    let show = home
        .cli(&["--json", "sessions", "show", "agent:main:main"])
        .await
        .json();
    assert_eq!(show["entries"].as_array().unwrap().len(), 2);
    let shown = home.cli(&["sessions", "show", "main"]).await;
    assert!(
        shown.ok().contains("you:       [s2] again"),
        "{}",
        shown.stdout
    );
    home.cli(&["sessions", "delete", "main"]).await.ok();
    assert!(
        home.cli(&["--json", "sessions", "list"])
            .await
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn init_writes_a_valid_starter_and_never_overwrites() {
    let home = TestHome::new();
    let out = home.cli(&["init"]).await;
    assert!(out.ok().contains("wrote"), "{}", out.stdout);
    for file in [
        "config.toml",
        "workspace/AGENTS.md",
        "workspace/SOUL.md",
        "workspace/IDENTITY.md",
        "workspace/TOOLS.md",
        "workspace/USER.md",
        "workspace/MEMORY.md",
        "workspace/skills/write-skill/SKILL.md",
    ] {
        assert!(home.path().join(file).exists(), "{file} missing");
    }
    // The starter config is valid as written, and the starter skill too.
    assert_eq!(home.cli(&["config", "check"]).await.code, 0);
    {
        let _d = home.start();
        let skills = home.cli(&["--json", "skills", "list"]).await.json();
        assert_eq!(skills["skills"][0]["name"], "write-skill", "{skills}");
        assert_eq!(skills["skills"][0]["problem"], "", "{skills}");
    }
    std::fs::write(home.workspace().join("AGENTS.md"), "mine").unwrap();
    let again = home.cli(&["init"]).await;
    assert!(again.ok().contains("kept"), "{}", again.stdout);
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("AGENTS.md")).unwrap(),
        "mine"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_reloads_the_config() {
    let home = TestHome::new();
    let base = provider_config("openai", "http://127.0.0.1:9/v1", "");
    home.write_config(&base);
    let daemon = home.start();
    home.write_config(&format!("{base}\n[agents.second]\nmodel = \"default\"\n"));
    // SAFETY: SIGHUP to the daemon this test started.
    unsafe { libc::kill(daemon.pid() as i32, libc::SIGHUP) };
    for _ in 0..250 {
        let status = home.cli(&["--json", "status"]).await.json();
        if status["agents"].as_array().is_some_and(|a| a.len() == 2) {
            let log = std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap();
            assert!(log.contains("config reloaded (SIGHUP)"), "{log}");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("SIGHUP did not reload the config");
}

/// A provider nobody can reach fails the turn at once (no retries with the
/// default 1 s → 16 s backoff, which took 31 s) with one sentence naming
/// the provider and its address.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_provider_fails_fast_and_names_itself() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("http://127.0.0.1:{closed}/v1");
    // `.invalid` never resolves (RFC 6761), with or without a network.
    let unresolved = "http://pincer-test.invalid/v1";
    let home = TestHome::new();
    // The default retry policy: what a user without a `[providers.*.retry]` gets.
    home.write_config(&format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{refused}\"\n\n\
         [providers.nowhere]\nkind = \"openai\"\nbase_url = \"{unresolved}\"\n\n\
         [models.down]\nprovider = \"local\"\nmodel = \"m\"\n\n\
         [models.unknown]\nprovider = \"nowhere\"\nmodel = \"m\"\n\n\
         [agents.main]\nmodel = \"down\"\n\n[agents.other]\nmodel = \"unknown\"\n"
    ));
    let _d = home.start();
    for (agent, provider, url, why) in [
        ("main", "local", refused.as_str(), "refused"),
        ("other", "nowhere", unresolved, "does not resolve"),
    ] {
        let started = std::time::Instant::now();
        let out = home.cli(&["send", "--agent", agent, "hi"]).await;
        let took = started.elapsed();
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("cannot connect to provider `{provider}` at {url}")),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains(why), "{}", out.stderr);
        assert!(!out.stderr.contains("retrying"), "{}", out.stderr);
        // Well under the first 1 s backoff: nothing was retried.
        assert!(took < std::time::Duration::from_millis(800), "{took:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_the_file_on_disk_not_the_running_config() {
    let home = TestHome::new();
    let _d = home.start();
    // Zero-config start, then a file appears (as `pincer init` writes one).
    home.write_config("[agents.main]\n");
    let out = home.cli(&["doctor"]).await.stdout;
    assert!(
        !out.contains("config.toml yet"),
        "doctor reads the file, not the running defaults: {out}"
    );
    assert!(out.contains("config.toml is valid"), "{out}");
    assert!(
        out.contains("pincerd runs an older config") && out.contains("pincer config reload"),
        "{out}"
    );

    // A broken edit: the reload is refused and doctor says why.
    home.write_config("[agents.main]\nmodle = \"default\"\n");
    let reload = home.cli(&["config", "reload"]).await;
    assert_ne!(reload.code, 0);
    let out = home.cli(&["doctor"]).await;
    assert_eq!(out.code, 1, "an invalid file is an error: {}", out.stdout);
    assert!(!out.stdout.contains("is valid"), "{}", out.stdout);
    assert!(
        out.stdout.contains("modle") && out.stdout.contains("config.toml:2"),
        "names the key and line: {}",
        out.stdout
    );
}

/// A daemon the systemd user service started (systemd marks its children
/// with INVOCATION_ID) owns the socket: a start by hand says so, names the
/// service verbs, and leaves the running daemon alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_by_hand_while_the_service_runs_names_the_service() {
    let home = TestHome::new();
    let daemon = home.start_with_env(&[("INVOCATION_ID", "0123456789abcdef0123456789abcdef")]);
    let second = home.pincerd().env_remove("INVOCATION_ID").output().unwrap();
    assert_eq!(second.status.code(), Some(75));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("as a systemd") || err.contains("as the systemd user service"),
        "{err}"
    );
    assert!(err.contains("pincer service restart"), "{err}");
    // The running daemon did not notice.
    let status = home.cli(&["--json", "status"]).await;
    assert_eq!(status.json()["pid"].as_u64(), Some(daemon.pid() as u64));
    assert_eq!(daemon.stop(), Some(0));
    assert!(!home.path().join("run/pincerd.started-by").exists());
}

/// `--env-file` (what the launchd agent passes) puts the keys into the
/// daemon's environment; a line that is not KEY=VALUE is a config error
/// (78) that names the file and the line.
#[tokio::test(flavor = "multi_thread")]
async fn the_env_file_feeds_provider_keys_and_a_bad_line_exits_78() {
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::new();
    let env = home.path().join("service.env");
    std::fs::write(&env, "# keys\nOPENAI_API_KEY=sk-from-the-env-file\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Zero-config reads OPENAI_API_KEY: the detection sees the file's key.
    let out = std::process::Command::new(&bins().pincerd)
        .args(["zero-config", "--env-file"])
        .arg(&env)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .output()
        .unwrap();
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["api_key_env"], "OPENAI_API_KEY", "{found}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    std::fs::write(&env, "OPENAI_API_KEY=x\nnot a pair\n").unwrap();
    let out = home.pincerd().arg("--env-file").arg(&env).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2:", env.display())), "{err}");
}

/// A part that cannot start (here memory: its index path is taken by a
/// folder) is named in `pincer status` and `pincer doctor` while the rest
/// serves; a bridge whose platform never answers holds nothing up (its
/// connecting happens after the socket answers).
#[tokio::test(flavor = "multi_thread")]
async fn a_part_that_cannot_start_is_reported_while_pincerd_serves() {
    let llm = ScriptedLlm::start().await.unwrap();
    // Accepts connections and never answers: the Discord API "hangs".
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[memory]\nembedder = \"none\"\n\n[channels.discord]\napi_url = \"http://{}\"\n",
        provider_config("openai", &format!("{}/v1", llm.base_url()), ""),
        silent.local_addr().unwrap()
    ));
    std::fs::create_dir_all(home.path().join("state/memory-main.db/taken")).unwrap();
    let started = std::time::Instant::now();
    let _d = home.start_with_env(&[("DISCORD_BOT_TOKEN", "t0k3n")]);
    // Far below the Discord client's 30 s request timeout, which a start
    // waiting on the network would sit out.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the socket answered only after {:?}",
        started.elapsed()
    );

    let status = home.cli(&["status"]).await;
    assert!(
        status.ok().contains(
            "FAILED:   memory did not start: cannot open the memory index of agent `main`"
        ),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("discord"), "{}", status.stdout);
    let json = home.cli(&["--json", "status"]).await.json();
    assert_eq!(json["failed_parts"][0]["part"], "memory");
    assert_eq!(json["failed_parts"].as_array().unwrap().len(), 1, "{json}");

    let doctor = home.cli(&["doctor"]).await;
    assert_eq!(doctor.code, 1);
    assert!(
        doctor
            .stdout
            .contains("✗ memory: did not start: cannot open the memory index of agent `main`"),
        "{}",
        doctor.stdout
    );

    // The rest serves.
    llm.script("[p1]", vec![Step::text("still here")]);
    let sent = home.cli(&["send", "[p1] hello"]).await;
    assert!(sent.ok().contains("still here"), "{}", sent.stdout);
    drop(silent);
}
