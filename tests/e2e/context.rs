//! The context engine end to end (SPEC §9): a stable prompt prefix across
//! calls, keep-K on a long tool turn, compaction by threshold against
//! fakellm with an 8k window, compaction after a provider's overflow error,
//! `pincer sessions compact|prompt`, failure summaries and skills.

use pincer_testkit::harness::{TestHome, provider_config_window};
use pincer_testkit::peers::{PyServer, admin};
use pincer_testkit::requests::tool_results;
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

/// A config for `base_url` whose model has `window` tokens of context and
/// whose agent gets the full prompt whatever the window.
fn config(kind: &str, base_url: &str, window: u64, extra: &str) -> String {
    provider_config_window(
        kind,
        base_url,
        Some(window),
        &format!("prompt_mode = \"full\"\n{extra}"),
    )
}

async fn scripted(window: u64, extra: &str) -> (TestHome, ScriptedLlm) {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        window,
        extra,
    ));
    std::fs::create_dir_all(home.workspace()).unwrap();
    (home, llm)
}

fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prompt_prefix_is_byte_identical_across_the_calls_of_a_session() {
    let (home, llm) = scripted(128_000, "").await;
    std::fs::write(home.workspace().join("AGENTS.md"), "Be brief.\n").unwrap();
    std::fs::write(home.workspace().join("a.txt"), "alpha\n").unwrap();
    llm.script(
        "[prefix]",
        vec![
            Step::tool("read", json!({"path": "a.txt"})),
            Step::tool("ls", json!({})),
            Step::text("done"),
            Step::text("second turn done"),
        ],
    );
    let daemon = home.start();
    let out = home.cli(&["send", "[prefix] look around"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = home.cli(&["send", "[prefix] and again"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    let journal = llm.journal();
    assert_eq!(journal.len(), 4);
    let system = |r: &Value| messages(r)[0].clone();
    assert_eq!(system(&journal[0])["role"], "system");
    assert!(
        system(&journal[0])["content"]
            .as_str()
            .unwrap()
            .contains("Be brief.")
    );
    for r in &journal[1..] {
        assert_eq!(system(r), system(&journal[0]), "the system prompt changed");
    }
    // Within the turn each request extends the previous one.
    for pair in journal[..3].windows(2) {
        let (a, b) = (messages(&pair[0]), messages(&pair[1]));
        assert_eq!(a[..], b[..a.len()], "a later call rewrote earlier messages");
    }
    // The volatile context rides in front of the user's message, not in
    // the system prompt.
    let first_user = messages(&journal[0])[1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first_user.starts_with("<turn-context>\nCurrent time: "),
        "{first_user}"
    );
    assert!(first_user.ends_with("[prefix] look around"));
    assert!(
        !system(&journal[0])["content"]
            .as_str()
            .unwrap()
            .contains("Current time")
    );
    // The next turn keeps everything before its own message.
    let (third, fourth) = (messages(&journal[2]), messages(&journal[3]));
    assert_eq!(third[..1], fourth[..1]);
    assert_eq!(third[2..], fourth[2..third.len()]);

    // `pincer sessions prompt` shows exactly the last request.
    let p = home
        .cli(&["--json", "sessions", "prompt", "main"])
        .await
        .json();
    assert_eq!(p["system"], system(&journal[3])["content"]);
    let shown = p["messages"].as_array().unwrap();
    assert_eq!(shown.len(), fourth.len() - 1);
    let last_text = shown.last().unwrap()["parts"][0]["text"].as_str().unwrap();
    assert!(last_text.ends_with("[prefix] and again"), "{last_text}");
    let text = home.cli(&["sessions", "prompt", "main"]).await;
    assert!(text.ok().contains("=== system ==="), "{}", text.stdout);

    // It outlives a restart.
    daemon.stop();
    let _d = home.start();
    let again = home
        .cli(&["--json", "sessions", "prompt", "main"])
        .await
        .json();
    assert_eq!(again, p);
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_k_on_a_turn_with_twelve_tool_calls() {
    let (home, llm) = scripted(128_000, "").await;
    let mut steps = Vec::new();
    for i in 0..12 {
        std::fs::write(
            home.workspace().join(format!("n{i:02}.txt")),
            format!("note {i:02} {}\n", "z".repeat(300)),
        )
        .unwrap();
        steps.push(Step::tool("read", json!({"path": format!("n{i:02}.txt")})));
    }
    steps.push(Step::text("read them all"));
    llm.script("[twelve]", steps);
    let _d = home.start();
    let out = home
        .cli(&["send", "--json", "[twelve] read every note"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let journal = llm.journal();
    assert_eq!(journal.len(), 13);
    let results = tool_results(&journal[12]);
    assert_eq!(results.len(), 12);
    for (i, r) in results.iter().enumerate() {
        if i < 7 {
            assert!(
                r.starts_with("[tool result omitted: ") && r.ends_with(" chars]"),
                "result {i} should be omitted: {r}"
            );
        } else {
            assert!(
                r.contains(&format!("note {i:02} ")),
                "result {i} should be whole: {r}"
            );
        }
    }
    // The transcript still has every result in full.
    let full: Vec<Value> = home
        .transcript("main")
        .into_iter()
        .filter(|e| e["kind"] == "tool_result")
        .collect();
    assert!(
        full.iter()
            .all(|e| e["content"].as_str().unwrap().contains("zzz"))
    );
}

/// fakellm rules for a conversation of `turns` turns, newest first so that
/// a request matches its own turn: each turn reads its note, then answers.
fn fakellm_rules(turns: usize) -> String {
    let mut rules = String::from(
        "version: 1\nrules:\n  - name: summary\n    when: {messages_contain: \"<conversation>\"}\n    respond: {content: \"- The user is collecting facts about fruit; facts so far come from notes t00 onward (summary-marker-xq7).\"}\n",
    );
    for t in (0..turns).rev() {
        rules.push_str(&format!(
            "  - name: answer_{t:02}\n    when: {{tool_result_contains: \"fruit fact {t:02}\"}}\n    respond: {{content: \"Noted fruit fact {t:02}. {pad}\"}}\n  - name: read_{t:02}\n    when: {{messages_contain: \"[t{t:02}]\"}}\n    respond: {{tool_calls: [{{name: read, arguments: {{path: \"t{t:02}.txt\"}}}}]}}\n",
            pad = "More detail. ".repeat(20),
        ));
    }
    rules
}

#[tokio::test(flavor = "multi_thread")]
async fn compaction_against_fakellm_with_an_8k_window_openai() {
    compaction_against_fakellm("openai").await;
}

/// fakellm's Anthropic stream reports 1 input token for any prompt: the
/// estimate must not trust it and still compact.
#[tokio::test(flavor = "multi_thread")]
async fn compaction_against_fakellm_with_an_8k_window_anthropic() {
    compaction_against_fakellm("anthropic").await;
}

async fn compaction_against_fakellm(kind: &str) {
    const TURNS: usize = 12;
    let home = TestHome::new();
    let server = PyServer::fakellm(home.path(), &fakellm_rules(TURNS));
    let base = match kind {
        "anthropic" => server.url(),
        _ => format!("{}/v1", server.url()),
    };
    home.write_config(&config(kind, &base, 8_192, ""));
    std::fs::create_dir_all(home.workspace()).unwrap();
    for t in 0..TURNS {
        std::fs::write(
            home.workspace().join(format!("t{t:02}.txt")),
            format!(
                "fruit fact {t:02}: {}\n",
                "Apples and pears keep well in a cool cellar. ".repeat(30)
            ),
        )
        .unwrap();
    }
    let _d = home.start();
    let mut compaction_events = Vec::new();
    for t in 0..TURNS {
        let message = format!(
            "[t{t:02}] read my note number {t} and remember it. {}",
            "Please. ".repeat(40)
        );
        let out = home.cli(&["send", "--json", &message]).await;
        assert_eq!(out.code, 0, "turn {t}: {}", out.stderr);
        let events = out.json_lines();
        let done = events.last().unwrap();
        assert_eq!(done["type"], "turn_finished", "turn {t}: {events:?}");
        assert!(
            done["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!("Noted fruit fact {t:02}.")),
            "turn {t} was answered from its own note: {done}"
        );
        compaction_events.extend(events.into_iter().filter(|e| e["type"] == "compaction"));
    }
    assert!(
        !compaction_events.is_empty(),
        "an 8k window must compact twelve 1k-token turns"
    );
    for e in &compaction_events {
        assert_eq!(e["error"], "", "{e}");
        assert_eq!(e["reason"], "threshold");
        assert!(
            e["tokens_after"].as_u64() < e["tokens_before"].as_u64(),
            "{e}"
        );
    }

    // The transcript holds the compaction entries, the registry counts them.
    let transcript = home.transcript("main");
    let compactions: Vec<&Value> = transcript
        .iter()
        .filter(|e| e["kind"] == "compaction")
        .collect();
    assert_eq!(compactions.len(), compaction_events.len());
    assert!(
        compactions[0]["summary"]
            .as_str()
            .unwrap()
            .contains("summary-marker-xq7")
    );
    let list = home.cli(&["--json", "sessions", "list"]).await.json();
    assert_eq!(
        list[0]["compactions"].as_u64(),
        Some(compactions.len() as u64)
    );
    // Every entry is still on disk: the transcript keeps everything.
    assert_eq!(
        transcript.iter().filter(|e| e["kind"] == "user").count(),
        TURNS
    );

    // The last request held the summary and the recent turns, and no tool
    // call without its result or result without its call.
    let p = home
        .cli(&["--json", "sessions", "prompt", "main"])
        .await
        .json();
    let msgs = p["messages"].as_array().unwrap();
    let first = msgs[0]["parts"][0]["text"].as_str().unwrap();
    assert!(first.contains("summary-marker-xq7"), "{first}");
    let all_text = p["messages"].to_string();
    assert!(all_text.contains(&format!("[t{:02}]", TURNS - 1)));
    assert!(
        !all_text.contains("[t00]"),
        "the oldest turn was summarised away"
    );
    let mut open: Vec<String> = Vec::new();
    for m in msgs {
        for part in m["parts"].as_array().unwrap() {
            match part["type"].as_str() {
                Some("tool_call") => open.push(part["id"].as_str().unwrap().to_string()),
                Some("tool_result") => {
                    let id = part["call_id"].as_str().unwrap();
                    let pos = open.iter().position(|c| c == id);
                    assert!(pos.is_some(), "a result without its call: {id}");
                    open.retain(|c| c != id);
                }
                _ => {}
            }
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
    assert!(p["estimated_tokens"].as_u64().unwrap() < 8_192);

    // fakellm saw the summary request and answered every turn's rules.
    let stats = admin("GET", &format!("{}/_fakellm/stats", server.url()), None).await;
    assert!(
        stats["by_rule"]["summary"].as_u64().unwrap_or(0) >= 1,
        "{stats}"
    );
    assert!(stats["by_rule"].get("<fallthrough>").is_none(), "{stats}");
}

const OVERFLOW: &str = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9105 tokens. Please reduce the length of the messages.";

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_overflow_error_compacts_and_retries() {
    let (home, llm) = scripted(128_000, "").await;
    llm.script(
        "[overflow]",
        vec![
            Step::text("first answer"),
            Step::text("second answer"),
            Step::error(400, OVERFLOW),
            Step::text("- earlier: two questions answered (summary-marker-ov)"),
            Step::text("third answer, after compaction"),
        ],
    );
    let _d = home.start();
    for q in ["one", "two"] {
        let out = home
            .cli(&["send", &format!("[overflow] question {q}")])
            .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let out = home
        .cli(&["send", "--json", "[overflow] question three"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = out.json_lines();
    let compaction = events
        .iter()
        .find(|e| e["type"] == "compaction")
        .expect("a compaction event");
    assert_eq!(compaction["reason"], "overflow");
    assert_eq!(
        events.last().unwrap()["text"],
        "third answer, after compaction"
    );
    let journal = llm.journal();
    assert_eq!(journal.len(), 5);
    // The summary request went to the model without tools...
    assert!(journal[3]["tools"].as_array().is_none_or(|t| t.is_empty()));
    assert!(journal[3].to_string().contains("question one"));
    // ...and the retry carried the summary and the new question.
    let retry = journal[4].to_string();
    assert!(retry.contains("summary-marker-ov"), "{retry}");
    assert!(retry.contains("question three"));
    assert!(
        !retry.contains("first answer"),
        "the summarised turns are gone"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn forced_compaction_and_failure_summary() {
    let (home, llm) = scripted(128_000, "").await;
    llm.script(
        "[manual]",
        vec![
            Step::text("answer one"),
            Step::tool("exec", json!({"command": "false"})),
            // Every attempt of the retry policy (4) fails.
            Step::status(503),
            Step::status(503),
            Step::status(503),
            Step::status(503),
            Step::text("- the user asked twice (summary-marker-manual)"),
        ],
    );
    let _d = home.start();
    assert_eq!(home.cli(&["send", "[manual] first"]).await.code, 0);
    // The second turn fails after a failed tool call: the session keeps a
    // failure summary.
    let out = home.cli(&["send", "[manual] second, run false"]).await;
    assert_ne!(out.code, 0);
    let show = home.cli(&["sessions", "show", "main"]).await;
    let text = show.ok();
    assert!(
        text.contains("failed turn: Asked: \"[manual] second, run false\""),
        "{text}"
    );
    assert!(text.contains("tool calls (exec ×1)"), "{text}");
    assert!(text.contains("Stopped by: "), "{text}");

    let out = home.cli(&["--json", "sessions", "compact", "main"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["compacted"], true, "{r}");
    assert!(
        r["summary"]
            .as_str()
            .unwrap()
            .contains("summary-marker-manual")
    );
    let list = home.cli(&["--json", "sessions", "list"]).await.json();
    assert_eq!(list[0]["compactions"], 1);
    // Nothing is left to compact right after.
    let again = home.cli(&["sessions", "compact", "main"]).await;
    assert!(
        again.ok().contains("nothing to compact"),
        "{}",
        again.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_at_the_call_limit_ends_with_a_final_no_tools_call() {
    let (home, llm) = scripted(128_000, "max_model_calls = 3").await;
    llm.script(
        "[limit]",
        vec![
            Step::tool("ls", json!({})),
            Step::tool("ls", json!({"path": "."})),
            Step::tool("ls", json!({})),
            Step::text("Here is what I found so far."),
        ],
    );
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[limit] explore"]).await;
    let events = out.json_lines();
    let done = events.last().unwrap();
    assert_eq!(done["stop_reason"], "limit", "{events:?}");
    assert_eq!(done["text"], "Here is what I found so far.");
    let journal = llm.journal();
    let last = journal.last().unwrap();
    assert!(
        last["tools"].as_array().is_none_or(|t| t.is_empty()),
        "the last call offers no tools"
    );
    assert!(last.to_string().contains("reached its limit"));
}

#[tokio::test(flavor = "multi_thread")]
async fn skills_are_listed_by_the_cli_and_in_the_prompt() {
    let (home, llm) = scripted(128_000, "").await;
    let dir = home.workspace().join("skills/release");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: release\ndescription: Cut a release and write the changelog.\n---\n# Steps\n",
    )
    .unwrap();
    llm.script("[skills]", vec![Step::text("ok")]);
    let _d = home.start();
    let out = home.cli(&["--json", "skills", "list"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["skills"][0]["name"], "release");
    assert_eq!(r["skills"][0]["path"], "skills/release/SKILL.md");
    assert_eq!(r["listed_in_prompt"], true);
    assert_eq!(home.cli(&["send", "[skills] hi"]).await.code, 0);
    let system = messages(&llm.journal()[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains(
            "- release: Cut a release and write the changelog. (skills/release/SKILL.md)"
        ),
        "{system}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_flush_writes_todays_note_before_compacting() {
    let (home, llm) = scripted(128_000, "\n[context]\nmemory_flush = true").await;
    llm.script(
        "[flush]",
        vec![
            Step::text("noted"),
            Step::text("ok"),
            // The silent flush call, then the summary.
            Step::text("- The user's cat is called Miso (flush-marker-5k)."),
            Step::text("- Two small talk turns."),
        ],
    );
    let _d = home.start();
    assert_eq!(home.cli(&["send", "[flush] my cat is Miso"]).await.code, 0);
    assert_eq!(home.cli(&["send", "[flush] thanks"]).await.code, 0);
    let out = home.cli(&["--json", "sessions", "compact", "main"]).await;
    assert_eq!(out.json()["compacted"], true, "{}", out.stdout);

    let journal = llm.journal();
    assert_eq!(journal.len(), 4);
    assert!(journal[2].to_string().contains("worth remembering"));
    assert!(journal[2]["tools"].as_array().is_none_or(|t| t.is_empty()));
    let notes: Vec<String> = std::fs::read_dir(home.workspace().join("memory"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(notes.len(), 1, "one note file for today");
    assert!(notes[0].contains("flush-marker-5k"), "{}", notes[0]);
    assert!(notes[0].contains("Saved before compaction (agent:main:main"));
    let meta: Vec<Value> = home
        .transcript("main")
        .into_iter()
        .filter(|e| e["event"] == "memory_flush")
        .collect();
    assert_eq!(meta.len(), 1);
    assert!(meta[0]["detail"].as_str().unwrap().starts_with("memory/"));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_compaction_off_an_overflow_is_a_clear_error() {
    let (home, llm) = scripted(128_000, "\n[context]\ncompaction = false").await;
    llm.script(
        "[off]",
        vec![Step::text("fine"), Step::error(400, OVERFLOW)],
    );
    let _d = home.start();
    assert_eq!(home.cli(&["send", "[off] one"]).await.code, 0);
    let out = home.cli(&["send", "--json", "[off] two"]).await;
    assert_ne!(out.code, 0);
    let events = out.json_lines();
    let compaction = events.iter().find(|e| e["type"] == "compaction").unwrap();
    assert!(
        compaction["error"]
            .as_str()
            .unwrap()
            .contains("compaction is off")
    );
    let error = events.last().unwrap();
    assert_eq!(error["type"], "error");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("larger than the model's context window")
            && message.contains("compaction is off"),
        "{message}"
    );
    // Nothing was dropped from the transcript.
    assert_eq!(
        home.transcript("main")
            .iter()
            .filter(|e| e["kind"] == "user")
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn when_nothing_more_fits_the_model_answers_without_tools() {
    // A 4k window, compaction off: four large results fill it, and the
    // context guard ends the tool calls with one last call.
    let (home, llm) = scripted(4_096, "\n[context]\ncompaction = false").await;
    let mut steps = Vec::new();
    for i in 0..4 {
        std::fs::write(
            home.workspace().join(format!("big{i}.txt")),
            format!("{}\n", "wide data line ".repeat(400)),
        )
        .unwrap();
        // Each reply carries text too: whichever comes as the last call
        // (without tools) answers with it.
        steps.push(Step {
            text: "Answered from what fits.".into(),
            ..Step::tool("read", json!({"path": format!("big{i}.txt")}))
        });
    }
    llm.script("[full]", steps);
    let _d = home.start();
    let out = home.cli(&["send", "--json", "[full] read all four"]).await;
    let events = out.json_lines();
    let done = events.last().unwrap();
    assert_eq!(done["stop_reason"], "context", "{events:?}");
    assert_eq!(done["text"], "Answered from what fits.");
    let reads = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .count();
    assert!(
        reads < 4,
        "the guard stopped the reads before all four: {reads}"
    );
    let last = llm.journal().last().unwrap().clone();
    assert!(last["tools"].as_array().is_none_or(|t| t.is_empty()));
    assert!(
        last.to_string()
            .contains("reached the model's context limit")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_says_what_the_caps_cut_and_which_skills_are_broken() {
    let (home, _llm) = scripted(128_000, "\n[context]\nbootstrap_max_chars = 1000").await;
    std::fs::write(home.workspace().join("AGENTS.md"), "rule\n".repeat(500)).unwrap();
    std::fs::write(home.workspace().join("USER.md"), "short").unwrap();
    let dir = home.workspace().join("skills/half");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: half\n---\n").unwrap();
    let _d = home.start();
    let findings = home.cli(&["--json", "doctor"]).await.json();
    let messages: Vec<String> = findings
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["subject"] == "agent main")
        .map(|f| {
            format!(
                "{} {}",
                f["level"].as_str().unwrap(),
                f["message"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with(
            "ok prompt mode full, a 128000-token window, compaction past 108000 tokens"
        )),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("warn AGENTS.md has 2499 characters; the prompt keeps 1000")),
        "{messages:?}"
    );
    assert!(
        !messages.iter().any(|m| m.contains("USER.md")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m == "warn skill skills/half/SKILL.md: the front matter has no description"),
        "{messages:?}"
    );
}
