//! Terminal escape injection (issue 14): what a model, a tool or a log line
//! says reaches the terminal with its control characters shown as
//! `\u{1b}`-style text, never acted on; `--json` keeps the real data.

use pincer_testkit::harness::{Output, TestHome, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::json;

/// Sets the window title, clears the screen, moves up a line and erases it
/// (which would hide the tool-call line printed just before).
const ATTACK: &str = "\x1b]0;PWNED\x07\x1b[2J\x1b[1A\x1b[2K";
/// How the CLI shows [`ATTACK`].
const SHOWN: &str = "\\u{1b}]0;PWNED\\u{7}\\u{1b}[2J\\u{1b}[1A\\u{1b}[2K";

/// Neither stream of `out` holds a byte a terminal would act on.
fn assert_inert(what: &str, out: &Output) {
    for (name, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !text.contains(['\x1b', '\x07', '\r', '\u{9b}', '\u{202e}']),
            "{what}: {name} holds a control character: {text:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn model_and_tool_text_is_shown_not_obeyed() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        Some(128_000),
        "",
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(
        home.workspace().join("evil.txt"),
        format!("file says {ATTACK} end\n"),
    )
    .unwrap();
    // A C1 CSI, a right-to-left override and a lone carriage return ride
    // along with the ESC sequences.
    let reply = format!("model says {ATTACK} and \u{9b}2J \u{202e}txt.exe\rFAKE done");
    let script = || {
        vec![
            Step {
                text: format!("before {ATTACK}"),
                ..Step::tool("read", json!({"path": "evil.txt"}))
            },
            Step::text(&reply),
        ]
    };
    llm.script("[esc]", script());
    llm.script("[esc-json]", script());
    let _d = home.start();

    let out = home.cli(&["send", "--session", "esc", "[esc] go"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_inert("send", &out);
    assert!(
        out.stdout.contains(&format!("model says {SHOWN} and")),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("\\u{9b}2J \\u{202e}txt.exe\\u{d}FAKE done"),
        "{out:?}"
    );
    // The tool's output is on stderr with the tool-call lines.
    assert!(
        out.stderr.contains(&format!("file says {SHOWN} end")),
        "{out:?}"
    );

    let out = home.cli(&["sessions", "show", "esc"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_inert("sessions show", &out);
    assert!(
        out.stdout.contains(&format!("model says {SHOWN}")),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!("file says {SHOWN}")),
        "{out:?}"
    );

    // `--json` is the data as it is: JSON escaping already keeps it inert.
    let out = home
        .cli(&["send", "--json", "--session", "esc2", "[esc-json] go"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains('\x1b'), "{out:?}");
    let text: String = out
        .json_lines()
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect();
    assert!(text.contains(&reply), "{text:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn log_lines_are_shown_not_obeyed() {
    let home = TestHome::new();
    let logs = home.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(
        logs.join("pincerd.log"),
        format!("INFO tool said {ATTACK}\n"),
    )
    .unwrap();
    let out = home.cli(&["logs"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_inert("logs", &out);
    assert!(
        out.stdout.contains(&format!("tool said {SHOWN}")),
        "{out:?}"
    );
}
