//! What happens to a user's message at the edges: one larger than the
//! model's window is refused with a sentence naming the limit, and one
//! whose turn was aborted is not sent again with the next message.

use std::time::Duration;

use pincer_testkit::harness::{TestHome, provider_config_window};
use pincer_testkit::scripted::{ScriptedLlm, Step};

async fn setup(window: Option<u64>) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config_window(
        "openai",
        &format!("{}/v1", llm.base_url()),
        window,
        "",
    ));
    (home, llm)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_larger_than_the_window_is_refused_with_the_limit() {
    let (home, llm) = setup(Some(32_768)).await;
    llm.script("[big]", vec![Step::text("read it all")]);
    let _d = home.start();
    // 900 KB (through stdin: too long for one argument): under the API's
    // 1 MiB, far over a 32k-token window.
    let message = format!("[big] {}", "lorem ipsum ".repeat(75_000));
    let out = home.cli_with_stdin(&["send", "-"], &message).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("16384") && out.stderr.contains("32768-token context window"),
        "the sentence names the limit: {}",
        out.stderr
    );
    assert!(llm.journal().is_empty(), "nothing reached the model");
    // A message that fits still goes through.
    assert!(
        home.cli(&["send", "[big] a short one"])
            .await
            .ok()
            .contains("read it all")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_aborted_message_is_not_sent_again_with_the_next() {
    let (home, llm) = setup(None).await;
    llm.script(
        "[first]",
        vec![Step {
            hang: true,
            ..Default::default()
        }],
    );
    llm.script("[second]", vec![Step::text("answered the second")]);
    let _d = home.start();
    let send = home.cli_spawn(&["send", "[first] never mind this"]);
    for _ in 0..500 {
        if llm.journal().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(llm.journal().len(), 1, "the first turn reached the model");
    assert_eq!(home.cli(&["--json", "abort"]).await.json()["aborted"], true);
    let _ = tokio::time::timeout(Duration::from_secs(20), send.wait_with_output()).await;

    let out = home.cli(&["send", "[second] the real question"]).await;
    assert!(out.ok().contains("answered the second"));
    let journal = llm.journal();
    let last = journal.last().unwrap().to_string();
    assert!(
        !last.contains("never mind this"),
        "the aborted message was sent again: {last}"
    );
    // It stays in the transcript, marked as aborted.
    let transcript = home.transcript("main");
    assert!(
        transcript
            .iter()
            .any(|e| e["kind"] == "user" && e["text"] == "[first] never mind this")
    );
    assert!(transcript.iter().any(|e| e["event"] == "turn_aborted"));
}
