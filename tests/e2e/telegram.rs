//! The Telegram bridge end to end: pincerd with `[channels.telegram]`
//! pointed at the real Bot API emulator (`telegram-test-api`, with the
//! routes our launcher adds) and the scripted model. Every test talks to
//! the bot the way a person does: messages injected as a user, answers
//! read from what the bot sent.

use std::time::{Duration, Instant};

use pincer_testkit::harness::{Daemon, TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use pincer_testkit::telegram::{BotMessage, ChatSpec, TelegramEmulator, UserSpec};
use serde_json::json;

const OWNER: i64 = 1001;

struct Rig {
    tg: TelegramEmulator,
    llm: ScriptedLlm,
    home: TestHome,
    daemon: Option<Daemon>,
}

/// pincerd with the Telegram channel at the emulator; `agent` is added to
/// `[agents.main]`, `channel` to `[channels.telegram]` (after `owner`).
async fn rig(agent: &str, channel: &str) -> Rig {
    rig_with(TelegramEmulator::start(), agent, channel).await
}

async fn rig_with(tg: TelegramEmulator, agent: &str, channel: &str) -> Rig {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let config = provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &format!(
            "{agent}\n[channels.telegram]\napi_url = \"{}\"\nowner = \"{OWNER}\"\n{channel}\n",
            tg.api_url()
        ),
    );
    home.write_config(&config);
    let daemon = home.start_with_env(&[("TELEGRAM_BOT_TOKEN", tg.token())]);
    let rig = Rig {
        tg,
        llm,
        home,
        daemon: Some(daemon),
    };
    rig.connected().await;
    rig
}

impl Rig {
    /// Waits until `pincer channels status` says the bridge is connected.
    async fn connected(&self) {
        let start = Instant::now();
        loop {
            let status = self.home.cli(&["--json", "channels", "status"]).await;
            if status.json()[0]["connected"] == true {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the bridge did not connect: {}\npincerd log: {}",
                status.ok(),
                std::fs::read_to_string(self.home.path().join("logs/pincerd.log"))
                    .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_for(&self, chat: i64, n: usize) -> Vec<BotMessage> {
        let start = Instant::now();
        loop {
            let got = self.tg.bot_messages(chat).await;
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the bot sent {} of {n} messages to chat {chat} in 20 s: {got:?}\npincerd log:\n{}",
                got.len(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("logs/pincerd.log")).unwrap_or_default()
    }

    /// What the bot sent in `chat` after a quiet second (to see that
    /// nothing more arrives).
    async fn settled(&self, chat: i64) -> Vec<BotMessage> {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        self.tg.bot_messages(chat).await
    }
}

fn text(m: &BotMessage) -> String {
    m.text.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_gets_one_code_and_is_answered_once_approved() {
    let r = rig("", "").await;
    let eve = UserSpec::new(4242, "Eve");
    let dm = ChatSpec::private(&eve);
    for i in 0..4 {
        r.tg.user_says(&dm, &eve, &format!("hello {i} [tg-stranger]"))
            .await;
    }
    let sent = r.settled(4242).await;
    assert_eq!(
        sent.len(),
        1,
        "exactly one reply while the code is pending: {sent:?}"
    );
    assert!(text(&sent[0]).contains("pincer pairing approve telegram"));
    assert!(
        r.llm.journal().is_empty(),
        "a stranger never reaches the model"
    );

    let list = r.home.cli(&["--json", "pairing", "list"]).await.json();
    let code = list[0]["code"]
        .as_str()
        .expect("a pending code")
        .to_string();
    assert_eq!(list[0]["sender_id"], "4242");
    assert!(text(&sent[0]).contains(&code));

    let out = r.home.cli(&["pairing", "approve", "telegram", &code]).await;
    assert!(out.ok().contains("approved"), "{}", out.ok());
    let told = r.wait_for(4242, 2).await;
    assert!(text(&told[1]).contains("approved"), "{told:?}");

    r.llm.script(
        "[tg-approved]",
        vec![Step::text("Hi Eve, nice to meet you.")],
    );
    r.tg.user_says(&dm, &eve, "hello again [tg-approved]").await;
    let sent = r.wait_for(4242, 3).await;
    assert_eq!(text(&sent[2]), "Hi Eve, nice to meet you.");
    let status = r.home.cli(&["--json", "channels", "status"]).await.json();
    assert_eq!(status[0]["pending_pairings"], 0);
    assert!(status[0]["messages_in"].as_u64().unwrap() >= 5, "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_answers_mentions_only_with_context_and_never_runs_exec() {
    let r = rig(
        "tools = { profile = \"coding\" }",
        "[channels.telegram.groups.\"-100200\"]\ntools = { deny = [\"exec\"] }\n",
    );
    let r = r.await;
    let group = ChatSpec::supergroup(-100200, "Friends");
    let (ann, bob) = (UserSpec::new(11, "Ann"), UserSpec::new(12, "Bob"));
    r.tg.user_says(&group, &ann, "the meeting moved to 5pm")
        .await;
    r.tg.user_says(&group, &bob, "I will bring cake").await;
    assert!(
        r.settled(-100200).await.is_empty(),
        "no reply without a mention"
    );

    let marker = r.home.path().join("pwned");
    r.llm.script(
        "[tg-group]",
        vec![
            Step::tool(
                "exec",
                json!({"command": format!("touch {}", marker.display())}),
            ),
            Step::text("The meeting is at 5pm."),
        ],
    );
    r.tg.user_says(
        &group,
        &ann,
        "@pincer_test_bot when is the meeting? [tg-group]",
    )
    .await;
    let sent = r.wait_for(-100200, 1).await;
    assert_eq!(text(&sent[0]), "The meeting is at 5pm.");
    assert!(
        !marker.exists(),
        "exec ran in a group whose policy denies it"
    );

    let requests = r.llm.journal();
    let first = serde_json::to_string(&requests[0]).unwrap();
    assert!(
        first.contains("the meeting moved to 5pm"),
        "context reached the model"
    );
    assert!(first.contains("I will bring cake"));
    let offered = pincer_testkit::requests::offered_tools(&requests[0]);
    assert!(!offered.iter().any(|t| t == "exec"), "{offered:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_answer_arrives_in_order_as_three_messages() {
    let r = rig("", &format!("allow_from = [\"{}\"]", 77)).await;
    let ann = UserSpec::new(77, "Ann");
    let paragraphs: Vec<String> = (0..9)
        .map(|i| {
            let words: Vec<String> = (0..170).map(|j| format!("w{i}x{j}")).collect();
            format!("Paragraph {i}: {}", words.join(" "))
        })
        .collect();
    let answer = paragraphs.join("\n\n");
    assert!(answer.chars().count() >= 9000);
    r.llm.script("[tg-long]", vec![Step::text(&answer)]);
    r.tg.user_says(&ChatSpec::private(&ann), &ann, "tell me a lot [tg-long]")
        .await;
    r.wait_for(77, 3).await;
    let sent = r.settled(77).await;
    assert_eq!(
        sent.len(),
        3,
        "{:?}",
        sent.iter().map(text).collect::<Vec<_>>()
    );
    let joined: Vec<String> = sent
        .iter()
        .flat_map(|m| {
            text(m)
                .split("\n\n")
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(joined, paragraphs, "every paragraph once, in order");
    assert!(sent.iter().all(|m| text(m).chars().count() <= 4000));
    let actions = r.tg.chat_actions().await;
    assert!(
        actions
            .iter()
            .any(|a| a.chat_id == 77 && a.action == "typing"),
        "{actions:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reset_starts_a_new_session_and_commands_are_registered() {
    let r = rig("", "").await;
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    r.llm.script("[tg-one]", vec![Step::text("first answer")]);
    r.tg.user_says(&dm, &owner, "hi [tg-one]").await;
    r.wait_for(OWNER, 1).await;
    let key = format!("agent:main:telegram:dm:{OWNER}");
    let before = r.home.cli(&["--json", "sessions", "list"]).await.json();
    let id_before = before
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key.as_str())
        .unwrap_or_else(|| panic!("no session {key} in {before}"))["id"]
        .clone();

    r.tg.user_says(&dm, &owner, "/reset").await;
    let sent = r.wait_for(OWNER, 2).await;
    assert!(text(&sent[1]).contains("new conversation"), "{sent:?}");
    let after = r.home.cli(&["--json", "sessions", "list"]).await.json();
    let id_after = after
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key.as_str())
        .unwrap()["id"]
        .clone();
    assert_ne!(id_before, id_after, "/reset gave the chat a new session");

    let commands: Vec<String> = r.tg.commands().await.into_iter().map(|c| c.0).collect();
    for c in ["new", "reset", "stop", "status", "help"] {
        assert!(
            commands.iter().any(|x| x == c),
            "{c} not registered: {commands:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_reaches_the_owner_as_buttons_and_the_button_approves() {
    let r = rig("tools = { profile = \"coding\", ask = [\"exec\"] }", "").await;
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    let marker = r.home.workspace().join("approved.txt");
    r.llm.script(
        "[tg-ask]",
        vec![
            Step::tool("exec", json!({"command": "echo yes > approved.txt"})),
            Step::text("Done."),
        ],
    );
    r.tg.user_says(&dm, &owner, "make the file [tg-ask]").await;
    let sent = r.wait_for(OWNER, 1).await;
    let ask = &sent[0];
    assert!(text(ask).contains("exec"), "{ask:?}");
    let keyboard = ask.reply_markup.clone().expect("buttons");
    let approve = keyboard["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .expect("an approve button")
        .to_string();
    assert!(approve.starts_with("approve:"));
    assert!(!marker.exists());

    // A stranger's press changes nothing.
    let eve = UserSpec::new(4242, "Eve");
    r.tg.press_button(&dm, &eve, ask.message_id, &approve).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!marker.exists(), "only the owner can approve");

    r.tg.press_button(&dm, &owner, ask.message_id, &approve)
        .await;
    let sent = r.wait_for(OWNER, 2).await;
    assert_eq!(text(&sent[1]), "Done.");
    assert!(marker.exists(), "the approved command ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_sigkill_mid_burst_answers_every_message_exactly_once() {
    // The real API's offset semantics: what the killed daemon read but did
    // not record is handed over again after the restart.
    let mut r = rig_with(
        TelegramEmulator::start_honoring_offset(),
        "",
        "dm_policy = \"open\"",
    )
    .await;
    // Two chunks per answer, so a kill can fall between the chunks of one.
    let long: String = (0..2)
        .map(|p| {
            let words: Vec<String> = (0..500).map(|j| format!("p{p}w{j}")).collect();
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    r.llm.script_cycle("[burst]", vec![Step::text(&long)]);
    let users: Vec<UserSpec> = (0..10).map(|i| UserSpec::new(500 + i, "U")).collect();
    for round in 0..5 {
        for u in &users {
            r.tg.user_says(&ChatSpec::private(u), u, &format!("m{round} [burst]"))
                .await;
        }
        if round == 2 {
            r.daemon.take().expect("running").kill9();
            r.daemon = Some(
                r.home
                    .start_with_env(&[("TELEGRAM_BOT_TOKEN", r.tg.token())]),
            );
        }
    }
    let ledger = r.home.path().join("state/channels.db");
    let count = |sql: &str| -> i64 {
        let db = rusqlite::Connection::open(&ledger).expect("the ledger");
        db.query_row(sql, [], |row| row.get(0)).expect(sql)
    };
    let start = Instant::now();
    while count("SELECT COUNT(*) FROM inbound WHERE answered_at IS NOT NULL") < 50 {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "not every message was answered: {} of 50 ({} claimed; unanswered: {:?})\n{}",
            count("SELECT COUNT(*) FROM inbound WHERE answered_at IS NOT NULL"),
            count("SELECT COUNT(*) FROM inbound"),
            {
                let db = rusqlite::Connection::open(&ledger).expect("the ledger");
                let mut q = db
                    .prepare("SELECT message_id, attempts, (SELECT COUNT(*) FROM chunks WHERE inbound = seq), (SELECT COUNT(*) FROM chunks WHERE inbound = seq AND platform_id IS NOT NULL) FROM inbound WHERE answered_at IS NULL")
                    .expect("query");
                q.query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                })
                .expect("rows")
                .collect::<Vec<_>>()
            },
            r.log()
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        count("SELECT COUNT(*) FROM inbound"),
        50,
        "each message claimed once"
    );
    let confirmed = count("SELECT COUNT(*) FROM chunks WHERE platform_id IS NOT NULL");
    let planned = count("SELECT COUNT(*) FROM chunks");
    assert_eq!(confirmed, planned, "every planned chunk went out");
    let mut sent = 0;
    for u in &users {
        let got = r.tg.bot_messages(u.id).await;
        assert!(!got.is_empty(), "chat {} got no answer", u.id);
        sent += got.len() as i64;
    }
    // Telegram's sendMessage has no idempotency key: a kill between its
    // answer and the ledger's commit of the confirmation resends that
    // chunk, at most one per chat (each chat sends one chunk at a time).
    // Every chunk confirmed before the kill is never sent again.
    assert!(
        sent >= confirmed && sent - confirmed <= users.len() as i64,
        "{sent} messages sent for {confirmed} confirmed chunks"
    );
}
