//! `pincer chat` in a real pseudo-terminal (issue 16): each test runs the
//! chat in a detached tmux session on a private socket, types with
//! `send-keys`, pastes with `paste-buffer -p` (bracketed paste), and reads
//! the screen with `capture-pane`; the scripted model's journal says what
//! the model received. Needs tmux (tests/setup.sh installs it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, bins, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

/// A home whose config points at a fresh scripted model; `extra` goes
/// into the agent's table.
async fn scripted_home(extra: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        Some(128_000),
        extra,
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    (home, llm)
}

/// The user messages the model received, one per request (the last user
/// message of each request body, without the `<turn-context>` block
/// pincerd puts before it).
fn received(llm: &ScriptedLlm) -> Vec<String> {
    llm.journal()
        .iter()
        .filter_map(|body| {
            body["messages"]
                .as_array()?
                .iter()
                .rev()
                .find(|m| m["role"] == "user")
                .and_then(|m| m["content"].as_str())
                .map(|text| match text.split_once("</turn-context>\n\n") {
                    Some((_, message)) => message.to_string(),
                    None => text.to_string(),
                })
        })
        .collect()
}

/// A `pincer chat` running in a tmux session of its own; the tmux server
/// is killed when dropped.
struct Tty {
    socket: PathBuf,
}

impl Tty {
    /// Starts `pincer --home H chat` in a 120×40 terminal; the shell
    /// around it prints `[exited N]` when it ends.
    fn start(home: &TestHome, name: &str) -> Self {
        assert!(
            Command::new("tmux")
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success()),
            "these tests drive the chat in tmux: install tmux (apt-get install tmux), or run tests/setup.sh"
        );
        let socket = home.path().join(format!("tmux-{name}.sock"));
        let chat = format!(
            "'{}' --home '{}' chat; echo \"[exited $?]\"; sleep 600",
            bins().pincer.display(),
            home.path().display()
        );
        let tty = Self { socket };
        tty.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            "120",
            "-y",
            "40",
            "sh",
            "-c",
            &chat,
        ]);
        tty
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` as it is.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "chat", "-l", text]);
    }

    /// Presses keys by tmux name (Enter, Up, C-c, M-Enter …).
    fn press(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "chat"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Pastes `text` as a terminal does with bracketed paste on.
    fn paste(&self, text: &str) {
        self.tmux(&["set-buffer", "-b", "p", text]);
        self.tmux(&["paste-buffer", "-p", "-b", "p", "-t", "chat"]);
    }

    /// Everything on the screen and in its scrollback, wrapped lines joined.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "chat"])
    }

    /// The last line with text on it (where the prompt is).
    fn last_line(&self) -> String {
        self.screen()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_string()
    }

    /// Waits up to 20 s until `check` holds for the screen.
    async fn until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn shows(&self, text: &str) -> String {
        self.until(&format!("`{text}` on the screen"), |s| s.contains(text))
            .await
    }

    /// Waits for an empty prompt on the last line.
    async fn prompt(&self) {
        let started = Instant::now();
        while self.last_line().trim_end() != "›" {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no empty prompt; the screen:\n{}",
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// No escape sequence or `^C` reached the screen as text.
fn assert_clean(screen: &str) {
    for junk in ["^[", "\u{1b}", "^C", "[A", "[B", "[C", "[D"] {
        assert!(!screen.contains(junk), "`{junk}` on the screen:\n{screen}");
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread")]
async fn history_is_recalled_with_up_after_the_chat_restarts_and_arrows_print_no_escapes() {
    let (home, llm) = scripted_home("").await;
    llm.script("[hist]", vec![Step::text("first answer")]);
    let _d = home.start();
    {
        let tty = Tty::start(&home, "one");
        tty.prompt().await;
        tty.type_text("[hist] remember me");
        tty.press(&["Enter"]);
        tty.shows("first answer").await;
        tty.prompt().await;
        tty.press(&["C-d"]);
        tty.shows("[exited 0]").await;
    }
    let history = home.path().join("chat_history");
    assert_eq!(mode(&history), 0o600, "the history file is private");
    assert!(
        std::fs::read_to_string(&history)
            .unwrap()
            .contains("[hist] remember me")
    );

    let tty = Tty::start(&home, "two");
    tty.prompt().await;
    tty.press(&["Up"]);
    tty.until("the recalled message", |_| {
        tty.last_line().trim_end() == "› [hist] remember me"
    })
    .await;
    // Editing keys move in the line; none of them prints its sequence.
    tty.press(&["Left", "Left", "Right", "Home", "End", "Down", "Up"]);
    tty.until("the line after the arrows", |_| {
        tty.last_line().trim_end() == "› [hist] remember me"
    })
    .await;
    assert_clean(&tty.screen());
    assert_eq!(received(&llm).len(), 1, "nothing more was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multi_line_message_reaches_the_model_whole_typed_or_pasted() {
    let (home, llm) = scripted_home("").await;
    llm.script(
        "[multi]",
        vec![
            Step::text("got the typed one"),
            Step::text("got the alt one"),
            Step::text("got the pasted one"),
        ],
    );
    let _d = home.start();
    let tty = Tty::start(&home, "multi");
    tty.prompt().await;
    // `\` then Enter goes on on a new line.
    tty.type_text("[multi] line one\\");
    tty.press(&["Enter"]);
    tty.type_text("line two");
    tty.press(&["Enter"]);
    tty.shows("got the typed one").await;
    tty.prompt().await;
    // Alt-Enter too.
    tty.type_text("alt one");
    tty.press(&["M-Enter"]);
    tty.type_text("alt two");
    tty.press(&["Enter"]);
    tty.shows("got the alt one").await;
    tty.prompt().await;
    // A paste with new lines (and a `\` at a line's end, kept as it is)
    // arrives whole and waits for Enter.
    tty.paste("pasted one\\\npasted two\npasted three");
    tty.until("the paste in the prompt", |s| s.contains("pasted three"))
        .await;
    assert_eq!(received(&llm).len(), 2, "the paste alone sends nothing");
    tty.press(&["Enter"]);
    tty.shows("got the pasted one").await;
    assert_eq!(
        received(&llm),
        [
            "[multi] line one\nline two",
            "alt one\nalt two",
            "pasted one\\\npasted two\npasted three"
        ]
    );
    assert_clean(&tty.screen());
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_aborts_a_running_turn_and_help_stays_local() {
    let (home, llm) = scripted_home("").await;
    llm.script(
        "[slow]",
        vec![Step {
            text: "thinking hard".into(),
            hang: true,
            ..Default::default()
        }],
    );
    let _d = home.start();
    let tty = Tty::start(&home, "abort");
    tty.prompt().await;
    tty.type_text("[slow] take your time");
    tty.press(&["Enter"]);
    tty.shows("thinking hard").await;
    tty.press(&["C-c"]);
    let screen = tty.shows("turn aborted").await;
    // The terminal does not echo control keys during a turn: no `^C` in
    // the answer, and the abort note starts its own line.
    assert!(!screen.contains("^C"), "{screen}");
    assert!(
        screen.lines().any(|l| l.trim() == "■ aborting…"),
        "{screen}"
    );
    tty.prompt().await;
    // The prompt works again: /help is answered here, not by the model.
    tty.type_text("/help");
    tty.press(&["Enter"]);
    let screen = tty.shows("never sent to the model").await;
    for name in ["/help", "/exit", "/quit", "/new", "/reset", "Ctrl-R"] {
        assert!(screen.contains(name), "{name} not listed:\n{screen}");
    }
    tty.prompt().await;
    tty.type_text("/frobnicate");
    tty.press(&["Enter"]);
    tty.shows("unknown command /frobnicate").await;
    tty.prompt().await;
    assert_eq!(received(&llm), ["[slow] take your time"]);
    let transcript = std::fs::read_to_string(home.transcript_path("main")).unwrap();
    assert!(transcript.contains("aborted"), "{transcript}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_at_the_prompt_clears_the_line_then_leaves_on_a_second() {
    let (home, llm) = scripted_home("").await;
    llm.script("[idle]", vec![Step::text("answered")]);
    let _d = home.start();
    let tty = Tty::start(&home, "idle");
    tty.prompt().await;
    tty.type_text("[idle] never mind this");
    tty.until("the typed text", |_| {
        tty.last_line().contains("never mind this")
    })
    .await;
    tty.press(&["C-c"]);
    tty.prompt().await;
    // The next line typed is sent intact.
    tty.type_text("[idle] the real question");
    tty.press(&["Enter"]);
    tty.shows("answered").await;
    tty.prompt().await;
    assert_eq!(received(&llm), ["[idle] the real question"]);
    // On an empty prompt: a hint, then a second Ctrl-C leaves (130).
    tty.press(&["C-c"]);
    tty.shows("Ctrl-C again").await;
    tty.prompt().await;
    tty.press(&["C-c"]);
    let screen = tty.shows("[exited 130]").await;
    assert_clean(&screen);
    assert!(!screen.contains("never mind this\n›"), "{screen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_are_answered_inline_and_always_stops_asking_in_that_session() {
    let (home, llm) = scripted_home("tools.ask = [\"exec\"]").await;
    llm.script(
        "[ask]",
        vec![
            Step::tool("exec", json!({"command": "touch one"})),
            Step::text("made one"),
            Step::tool("exec", json!({"command": "touch two"})),
            Step::tool("exec", json!({"command": "touch three"})),
            Step::text("made all"),
        ],
    );
    let _d = home.start();
    let tty = Tty::start(&home, "ask");
    tty.prompt().await;
    tty.type_text("[ask] make files");
    tty.press(&["Enter"]);
    tty.shows("approve? [y]es / [n]o / [a]lways").await;
    tty.press(&["y"]);
    tty.shows("made one").await;
    assert!(home.workspace().join("one").exists());
    tty.prompt().await;
    tty.type_text("more");
    tty.press(&["Enter"]);
    tty.until("the second question", |s| {
        s.matches("approve?").count() == 2
    })
    .await;
    tty.press(&["a"]);
    let screen = tty.shows("made all").await;
    assert_eq!(screen.matches("approve?").count(), 2, "{screen}");
    assert!(home.workspace().join("two").exists());
    assert!(home.workspace().join("three").exists());
    assert!(!screen.contains("pincer approvals allow"), "{screen}");
    let audit = home.cli(&["--json", "tools", "audit"]).await.json();
    let outcomes: Vec<&Value> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["outcome"])
        .collect();
    assert_eq!(outcomes, [&json!("ok"), &json!("ok"), &json!("ok")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_restart_under_an_open_chat_keeps_the_line_being_typed() {
    let (home, llm) = scripted_home("").await;
    llm.script(
        "[restart]",
        vec![
            Step::text("before the restart"),
            Step::text("after the restart"),
        ],
    );
    let d = home.start();
    let tty = Tty::start(&home, "restart");
    tty.prompt().await;
    tty.type_text("[restart] hello");
    tty.press(&["Enter"]);
    tty.shows("before the restart").await;
    tty.prompt().await;
    tty.type_text("half typed");
    d.stop();
    tty.shows("pincerd stopped; reconnecting").await;
    let _d = home.start();
    tty.shows("reconnected to pincerd").await;
    tty.until("the half-typed line, still there", |_| {
        tty.last_line().trim_end() == "› half typed"
    })
    .await;
    tty.type_text(" line");
    tty.press(&["Enter"]);
    tty.shows("after the restart").await;
    assert_eq!(received(&llm), ["[restart] hello", "half typed line"]);
}

/// A turn's answer from two model calls in a terminal: the first call's
/// text, its tool call's two notes, a blank line, then the second call's
/// text (issue 23: piped, they ran together).
#[tokio::test(flavor = "multi_thread")]
async fn the_text_of_two_model_calls_is_kept_apart_on_a_terminal() {
    let (home, llm) = scripted_home("").await;
    llm.script(
        "[two]",
        vec![
            Step {
                text: "Running it.".into(),
                ..Step::tool("exec", json!({"command": "echo hi"}))
            },
            Step::text("Hello from exec."),
        ],
    );
    let _d = home.start();
    let tty = Tty::start(&home, "two-calls");
    tty.prompt().await;
    tty.type_text("[two] run it");
    tty.press(&["Enter"]);
    let screen = tty.shows("Hello from exec.").await;
    tty.prompt().await;
    assert_clean(&screen);
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let first = lines
        .iter()
        .position(|l| *l == "Running it.")
        .unwrap_or_else(|| panic!("`Running it.` not on a line of its own:\n{screen}"));
    let second = lines
        .iter()
        .position(|l| *l == "Hello from exec.")
        .unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(second, first + 4, "{screen}");
    assert!(lines[first + 1].contains("⚙ exec"), "{screen}");
    assert!(lines[first + 2].contains("✓ exec"), "{screen}");
    assert_eq!(lines[first + 3], "", "{screen}");
}
