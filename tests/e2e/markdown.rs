//! The answer as Markdown in a terminal and as the model wrote it when
//! piped; tool calls as compact one-line notes. The terminal cases give
//! `pincer` a pseudo-terminal with `script` (util-linux; Debian package bsdutils).

use std::process::Stdio;
use std::time::Duration;

use pincer_testkit::harness::{TestHome, bins, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::json;

/// Every Markdown construct the CLI renders, a fence holding Markdown
/// syntax that must stay as it is, and a table.
const ANSWER: &str = "# Plan\n\nSome **bold** and *italic* and `code`.\n\n1. first\n2. second\n- a bullet\n\n> quoted\n\n```sh\nls **/*.rs | wc -l   # not a heading\n\techo \"tab kept\"\n```\n\n| file | lines |\n|------|------:|\n| a.rs | 12 |\n| b.rs | 345 |\n\n---\nDone.";

/// Two tool calls, then the Markdown answer.
fn script() -> Vec<Step> {
    vec![
        Step::tool("ls", json!({})),
        Step::tool("ls", json!({"path": "."})),
        Step::text(ANSWER),
    ]
}

async fn setup(markers: &[&str]) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "",
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    for marker in markers {
        llm.script(marker, script());
    }
    (home, llm)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_piped_answer_is_the_models_markdown_byte_for_byte() {
    let (home, _llm) = setup(&["[md-pipe]"]).await;
    let _d = home.start();
    let out = home.cli(&["send", "[md-pipe] plan it"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("{ANSWER}\n"));
    // The tool calls: one plain line each for start and end, no blank
    // line between them, no colour on a pipe.
    assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(lines[0], "  ⚙ ls {}");
    assert_eq!(lines[2], r#"  ⚙ ls {"path":"."}"#);
    for finished in [lines[1], lines[3]] {
        let rest = finished
            .strip_prefix("  ✓ ls ")
            .unwrap_or_else(|| panic!("{finished:?}"));
        let (ms, _) = rest
            .split_once(" ms")
            .unwrap_or_else(|| panic!("{finished:?}"));
        assert!(ms.parse::<u64>().is_ok(), "{finished:?}");
    }
}

/// Runs `pincer --home H send --session S MESSAGE` in a pseudo-terminal
/// 100 columns wide; returns everything the terminal got, with `\n` line
/// ends.
async fn send_in_a_terminal(
    home: &TestHome,
    session: &str,
    message: &str,
    no_color: bool,
) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let command = format!(
        "stty cols 100 rows 40; exec {} --home {} send --session {} {}",
        quote(&bins().pincer.display().to_string()),
        quote(&home.path().display().to_string()),
        quote(session),
        quote(message)
    );
    let mut script = tokio::process::Command::new("script");
    script
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if no_color {
        script.env("NO_COLOR", "1");
    }
    let child = script.spawn().unwrap_or_else(|e| {
        panic!("cannot run `script` ({e}): it gives pincer a terminal in this test; install util-linux (Debian: apt-get install bsdutils)")
    });
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("pincer in a terminal did not finish in 60 s")
        .expect("script output");
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(
        out.status.success(),
        "pincer in a terminal failed: {shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    shown
}

/// What stays on the screen: the live preview of a line being received is
/// erased by `CR [ESC [ n A] ESC [ J` (back to the start of the line, up
/// over the rows it wrapped onto, clear below) when its rendering replaces
/// it. Lines here are logical lines, so the move up stays inside the line.
fn on_screen(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('\r') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        let after_up = match rest.strip_prefix("\x1b[") {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => {
                let digits = r.chars().take_while(char::is_ascii_digit).count();
                r[digits..].strip_prefix('A').unwrap_or(rest)
            }
            _ => rest,
        };
        if let Some(r) = after_up.strip_prefix("\x1b[J") {
            // Clear the current line back to its start.
            out.truncate(out.rfind('\n').map_or(0, |n| n + 1));
            rest = r;
        } else {
            out.push('\r');
        }
    }
    out.push_str(rest);
    out
}

/// `s` without its SGR sequences (`ESC [ … m`).
fn strip_sgr(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_gets_rendered_markdown_unless_no_color() {
    let (home, _llm) = setup(&["[md-tty]", "[md-nocolor]"]).await;
    let _d = home.start();

    let shown = on_screen(&send_in_a_terminal(&home, "tty", "[md-tty] plan it", false).await);
    // Bold and the heading are attributes now, not asterisks and hashes.
    assert!(shown.contains("\x1b[1m"), "{shown:?}");
    let text = strip_sgr(&shown);
    assert!(!text.contains("**bold**"), "{text}");
    assert!(!text.contains("# Plan"), "{text}");
    assert!(text.contains("Plan") && text.contains("bold"), "{text}");
    // The fence's lines are there exactly, Markdown syntax and tab kept.
    for line in [
        "```sh",
        "ls **/*.rs | wc -l   # not a heading",
        "\techo \"tab kept\"",
        "```",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
    }
    // The table is laid out with box-drawing borders, once.
    assert!(!text.contains("|------|"), "{text}");
    assert!(text.contains('│'), "{text}");
    assert_eq!(text.matches("345").count(), 1, "{text}");
    // Tool calls are dim lines, consecutive, no blank line between them.
    assert!(shown.contains("\x1b[2m  ⚙ ls {}"), "{shown:?}");
    let calls: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("  ⚙"))
        .take(4)
        .collect();
    assert!(
        calls[0].starts_with("  ⚙ ls")
            && calls[1].starts_with("  ✓ ls")
            && calls[2].starts_with("  ⚙ ls")
            && calls[3].starts_with("  ✓ ls"),
        "{text}"
    );

    // NO_COLOR: no escape sequence at all; the answer as the model wrote it.
    let shown = send_in_a_terminal(&home, "nocolor", "[md-nocolor] plan it", true).await;
    assert!(!shown.contains('\x1b'), "{shown:?}");
    assert!(shown.contains(ANSWER), "{shown}");
}
