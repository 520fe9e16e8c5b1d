//! The Discord bridge end to end: pincerd with `[channels.discord]`
//! against our Discord fake (`pincer_testkit::discord_fake`: REST v10 and
//! gateway v10 with the controls crabline lacks — interactions, roles,
//! threads and forum posts, history, the gateway's lifecycle) and the
//! zero-latency scripted model. `discord_crabline.rs` runs the basics
//! against crabline, the Discord server others wrote.

use std::time::{Duration, Instant};

use pincer_testkit::discord_fake::{
    Author, BOT_ID, CHANNEL_ID, DiscordFake, FORUM_ID, GUILD_ID, OTHER_CHANNEL_ID, OWNER_ID,
    Options, ROLE_ID, Say, TOKEN,
};
use pincer_testkit::harness::{Daemon, TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::Value;

pub(crate) struct Rig {
    pub(crate) dc: DiscordFake,
    pub(crate) llm: ScriptedLlm,
    pub(crate) home: TestHome,
    pub(crate) daemon: Option<Daemon>,
}

/// pincerd with the Discord bridge on `dc`, the guild channel
/// [`CHANNEL_ID`] allowlisted; `agents` and `channel` are added to the
/// config (agents before, channel keys after `[channels.discord]`).
pub(crate) async fn rig_on(dc: DiscordFake, agents: &str, channel: &str) -> Rig {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let config = provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &format!(
            "{agents}\n[channels.discord]\napi_url = \"{}\"\nowner = \"{OWNER_ID}\"\n{channel}\n[channels.discord.groups.\"{CHANNEL_ID}\"]\n",
            dc.origin()
        ),
    );
    home.write_config(&config);
    let daemon = home.start_with_env(&[("DISCORD_BOT_TOKEN", TOKEN)]);
    let rig = Rig {
        dc,
        llm,
        home,
        daemon: Some(daemon),
    };
    rig.connected().await;
    rig
}

pub(crate) async fn rig(agents: &str, channel: &str) -> Rig {
    rig_on(DiscordFake::start().await, agents, channel).await
}

pub(crate) fn ann() -> Author {
    Author::user("200000000000000001", "ann")
}

pub(crate) fn owner() -> Author {
    Author::user(OWNER_ID, "owner")
}

impl Rig {
    pub(crate) async fn status(&self) -> Value {
        let all = self
            .home
            .cli(&["--json", "channels", "status"])
            .await
            .json();
        all.as_array()
            .and_then(|a| a.iter().find(|c| c["channel"] == "discord").cloned())
            .unwrap_or_default()
    }

    /// Waits until `pincer channels status` says the bridge is connected.
    pub(crate) async fn connected(&self) {
        let start = Instant::now();
        loop {
            if self.status().await["connected"] == true {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the Discord bridge did not connect: {}\npincerd log: {}",
                self.status().await,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("logs/pincerd.log")).unwrap_or_default()
    }

    pub(crate) async fn wait_for(&self, channel: &str, n: usize) -> Vec<String> {
        let start = Instant::now();
        loop {
            let got: Vec<String> = self
                .dc
                .bot_messages(channel)
                .iter()
                .map(|m| m.content().to_string())
                .collect();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the bot sent {} of {n} messages to {channel} in 20 s: {got:?}\npincerd log:\n{}",
                got.len(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the bot sent in `channel` after a quiet moment.
    pub(crate) async fn settled(&self, channel: &str) -> Vec<String> {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        self.dc
            .bot_messages(channel)
            .iter()
            .map(|m| m.content().to_string())
            .collect()
    }

    pub(crate) fn restart(&mut self) {
        if let Some(d) = self.daemon.take() {
            d.stop();
        }
        self.daemon = Some(self.home.start_with_env(&[("DISCORD_BOT_TOKEN", TOKEN)]));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guild_channel_answers_mentions_and_replies_and_keeps_the_rest_as_context() {
    let r = rig("", "").await;
    r.llm
        .script_cycle("", vec![Step::text("Hi @everyone and <@&123> — answered")]);
    r.dc.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("just chatting, the code word is plum"),
    );
    let first = r.dc.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("what is the word?").mention_bot(),
    );
    let got = r.wait_for(CHANNEL_ID, 1).await;
    assert!(got[0].contains("answered"), "{got:?}");
    // The un-mentioned message reached the model as context.
    let journal = serde_json::to_string(&r.llm.journal()).unwrap_or_default();
    assert!(journal.contains("plum"), "{journal}");
    // Model output never pings: no mention is parsed.
    let sent = &r.dc.bot_messages(CHANNEL_ID)[0];
    assert_eq!(
        sent.request["allowed_mentions"]["parse"],
        serde_json::json!([])
    );
    assert_eq!(sent.message["mention_everyone"], false, "{}", sent.message);
    // The answer replies to the message it answers.
    assert_eq!(
        sent.request["message_reference"]["message_id"], first["id"],
        "{}",
        sent.request
    );
    // A reply to the bot counts as a mention.
    r.dc.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("and again").reply_to(sent.id()),
    );
    r.wait_for(CHANNEL_ID, 2).await;
    // A channel not allowlisted is never answered.
    r.dc.user_says(OTHER_CHANNEL_ID, &ann(), Say::text("hello?").mention_bot());
    assert!(r.settled(OTHER_CHANNEL_ID).await.is_empty());
    assert_eq!(r.settled(CHANNEL_ID).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dm_stranger_gets_one_code_and_is_answered_once_approved() {
    let r = rig("", "").await;
    r.llm.script_cycle("", vec![Step::text("hello friend")]);
    let dm = r.dc.dm_channel(&ann());
    for i in 0..3 {
        r.dc.user_says(&dm, &ann(), Say::text(&format!("hi {i}")));
    }
    let sent = r.settled(&dm).await;
    assert_eq!(sent.len(), 1, "one code while it is pending: {sent:?}");
    assert!(
        sent[0].contains("pincer pairing approve discord"),
        "{sent:?}"
    );
    assert!(
        r.llm.journal().is_empty(),
        "a stranger never reaches the model"
    );
    let list = r.home.cli(&["--json", "pairing", "list"]).await.json();
    let code = list[0]["code"].as_str().expect("a code").to_string();
    r.home
        .cli(&["pairing", "approve", "discord", &code])
        .await
        .ok();
    // The note to the person just paired, then their answers.
    r.wait_for(&dm, 2).await;
    r.dc.user_says(&dm, &ann(), Say::text("now?"));
    let got = r.wait_for(&dm, 3).await;
    assert!(got.iter().any(|m| m.contains("hello friend")), "{got:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_answer_comes_as_three_messages_within_discords_limits() {
    let r = rig("", "").await;
    // 50 lines of 99 characters: Discord's 17-line fold, not its 2,000
    // characters, decides the cuts.
    let answer = (0..50)
        .map(|i| format!("{i:02} {}", "x".repeat(96)))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(answer.chars().count() >= 4990);
    r.llm.script_cycle("", vec![Step::text(&answer)]);
    r.dc.user_says(CHANNEL_ID, &ann(), Say::text("long please").mention_bot());
    r.wait_for(CHANNEL_ID, 3).await;
    let got = r.settled(CHANNEL_ID).await;
    assert_eq!(
        got.len(),
        3,
        "{:?}",
        got.iter().map(|m| m.len()).collect::<Vec<_>>()
    );
    for m in &got {
        assert!(m.chars().count() <= 2000, "{}", m.chars().count());
        assert!(m.lines().count() <= 17, "{}", m.lines().count());
    }
    assert_eq!(got.join("\n"), answer, "nothing lost, nothing added");
}

#[tokio::test(flavor = "multi_thread")]
async fn threads_and_forum_posts_are_sessions_of_their_own_under_the_parents_rules() {
    let r = rig(
        "",
        &format!("[channels.discord.groups.\"{FORUM_ID}\"]\nrequire_mention = false\n"),
    )
    .await;
    r.llm.script_cycle("", vec![Step::text("thread answer")]);
    let thread = r.dc.create_thread(CHANNEL_ID, "topic", &ann());
    r.dc.user_says(&thread, &ann(), Say::text("in the thread").mention_bot());
    let got = r.wait_for(&thread, 1).await;
    assert!(got[0].contains("thread answer"));
    let (post, _) = r.dc.forum_post(
        FORUM_ID,
        &ann(),
        "A question",
        Say::text("no mention needed here"),
    );
    r.wait_for(&post, 1).await;
    let sessions = r.home.cli(&["--json", "sessions", "list"]).await.json();
    let keys: Vec<String> = sessions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["key"].as_str().map(str::to_string))
        .collect();
    assert!(
        keys.contains(&format!(
            "agent:main:discord:group:{CHANNEL_ID}:thread:{thread}"
        )),
        "{keys:?}"
    );
    assert!(
        keys.contains(&format!(
            "agent:main:discord:group:{FORUM_ID}:thread:{post}"
        )),
        "{keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_role_entry_picks_the_agent_and_bots_are_ignored() {
    let r = rig(
        "[agents.helper]\nmodel = \"default\"\n",
        &format!(
            "[channels.discord.guilds.\"{GUILD_ID}\".roles.\"{ROLE_ID}\"]\nagent = \"helper\"\n"
        ),
    )
    .await;
    r.llm.script_cycle("", vec![Step::text("ok")]);
    let bob = Author::user("200000000000000002", "bob");
    r.dc.set_roles(&bob, &[ROLE_ID]);
    r.dc.user_says(
        CHANNEL_ID,
        &bob,
        Say::text("hi").mention_bot().roles(&[ROLE_ID]),
    );
    r.wait_for(CHANNEL_ID, 1).await;
    let sessions = r.home.cli(&["--json", "sessions", "list"]).await.json();
    assert_eq!(
        sessions[0]["key"],
        format!("agent:helper:discord:group:{CHANNEL_ID}"),
        "{sessions}"
    );
    let other = Author::user("300000000000000003", "otherbot").bot();
    r.dc.user_says(CHANNEL_ID, &other, Say::text("hi").mention_bot());
    assert_eq!(
        r.settled(CHANNEL_ID).await.len(),
        1,
        "bots are not answered"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reconnects_and_resumes_never_answer_twice() {
    let r = rig("", "").await;
    r.llm.script_cycle("", vec![Step::text("once")]);
    let mut expected = 0;
    for (i, fault) in [
        "reconnect",
        "invalid-resumable",
        "replay",
        "zombie",
        "invalid",
    ]
    .iter()
    .enumerate()
    {
        r.dc.user_says(
            CHANNEL_ID,
            &ann(),
            Say::text(&format!("before {fault} {i}")).mention_bot(),
        );
        expected += 1;
        r.wait_for(CHANNEL_ID, expected).await;
        match *fault {
            "reconnect" => r.dc.send_reconnect(),
            "invalid-resumable" => r.dc.invalidate_session(true),
            "replay" => {
                r.dc.replay_on_resume(10);
                r.dc.close(4000);
            }
            "zombie" => r.dc.stop_acking(),
            _ => r.dc.invalidate_session(false),
        }
        let before = r.dc.connections().len();
        r.dc.wait_for(
            &format!("a new connection after {fault}"),
            Duration::from_secs(20),
            |dc| (dc.connections().len() > before && dc.live_sockets() == 1).then_some(()),
        )
        .await;
        r.dc.resume_acking();
        r.connected().await;
        r.dc.user_says(
            CHANNEL_ID,
            &ann(),
            Say::text(&format!("after {fault} {i}")).mention_bot(),
        );
        expected += 1;
        r.wait_for(CHANNEL_ID, expected).await;
    }
    assert_eq!(
        r.settled(CHANNEL_ID).await.len(),
        expected,
        "no message answered twice"
    );
    // The old socket was closed before the new one delivered anything.
    let conns = r.dc.connections();
    for pair in conns.windows(2) {
        let closed = pair[0].closed_at.expect("the old socket was closed");
        let first_delivery =
            r.dc.deliveries()
                .iter()
                .filter(|d| d.connection == pair[1].number)
                .map(|d| d.at)
                .min();
        if let Some(at) = first_delivery {
            assert!(
                closed <= at,
                "connection {} still open when {} delivered",
                pair[0].number,
                pair[1].number
            );
        }
    }
    assert!(conns.iter().any(|c| c.resumed), "some reconnect resumed");
    assert!(
        r.dc.identifies().len() >= 2,
        "a non-resumable session identified again"
    );
}

/// A session whose resume address stops answering is given up after a
/// few tries: the bot identifies anew at `/gateway/bot`'s address, and a
/// message posted meanwhile is answered (catch-up), once.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_resume_address_is_given_up_for_a_new_session() {
    let dc = DiscordFake::start().await;
    // Nothing listens there once the listener is dropped.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    dc.set_resume_url(&format!("ws://{}", dead.local_addr().unwrap()));
    drop(dead);
    let r = rig_on(dc, "", "").await;
    r.connected().await;
    r.llm.script_cycle("", vec![Step::text("answered")]);
    let identified = r.dc.identifies().len();
    r.dc.close(4000);
    r.dc.put_history(CHANNEL_ID, &ann(), Say::text("while away").mention_bot());
    r.dc.wait_for(
        "a new session at the gateway's own address",
        Duration::from_secs(30),
        |dc| (dc.identifies().len() > identified).then_some(()),
    )
    .await;
    assert!(
        r.dc.resumes().is_empty(),
        "nothing reached the dead address"
    );
    r.wait_for(CHANNEL_ID, 1).await;
    assert_eq!(r.settled(CHANNEL_ID).await, ["answered"]);
    assert!(
        r.log()
            .contains("the resume address failed 3 times; identifying anew"),
        "{}",
        r.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn disallowed_intents_stop_the_bridge_with_the_fix_and_no_loop() {
    let dc = DiscordFake::start_with(Options {
        message_content_enabled: false,
        ..Options::default()
    })
    .await;
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &format!("[channels.discord]\napi_url = \"{}\"\n", dc.origin()),
    ));
    let _d = home.start_with_env(&[("DISCORD_BOT_TOKEN", TOKEN)]);
    let start = Instant::now();
    let status = loop {
        let all = home.cli(&["--json", "channels", "status"]).await.json();
        let why = all[0]["last_error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if why.contains("4014") {
            break why;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{all}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.contains("Message Content Intent"), "{status}");
    assert!(status.contains("message_content = false"), "{status}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(dc.identifies().len(), 1, "no reconnect loop");
    // doctor says it too, from the bridge's health.
    let findings = doctor(&home).await;
    assert!(
        findings
            .iter()
            .any(|f| f.starts_with("error bridge discord: not connected")
                && f.contains("4014")
                && f.contains("Message Content Intent")),
        "{findings:#?}"
    );
    // The daemon keeps serving.
    llm.script_cycle("", vec![Step::text("cli works")]);
    let out = home.cli(&["send", "hi"]).await;
    assert!(out.ok().contains("cli works"), "{}", out.ok());
    let _ = BOT_ID;
}

/// `pincer --json doctor`'s findings as `level subject: message` lines.
async fn doctor(home: &TestHome) -> Vec<String> {
    let findings = home.cli(&["--json", "doctor"]).await.json();
    findings
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{} {}: {}",
                f["level"].as_str().unwrap_or_default(),
                f["subject"].as_str().unwrap_or_default(),
                f["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_each_channel_the_bot_must_answer_in_and_mention_only_mode() {
    let dc = DiscordFake::start().await;
    // #random: @everyone may not send there (the bot has no role that may).
    dc.set_overwrites(
        OTHER_CHANNEL_ID,
        serde_json::json!([{"id": GUILD_ID, "type": 0, "allow": "0", "deny": "2048"}]),
    );
    let unknown = "100000000000000099";
    let r = rig_on(
        dc,
        "",
        &format!(
            "message_content = false\n[channels.discord.groups.\"{OTHER_CHANNEL_ID}\"]\n[channels.discord.groups.\"{unknown}\"]\nrequire_mention = false\n"
        ),
    )
    .await;
    let findings = doctor(&r.home).await;
    let has = |start: &str, parts: &[&str]| {
        findings
            .iter()
            .any(|f| f.starts_with(start) && parts.iter().all(|p| f.contains(p)))
    };
    assert!(
        has("ok channel discord: the bot @pincer_fake answers", &[]),
        "{findings:#?}"
    );
    assert!(
        has(
            "ok channel discord:",
            &[CHANNEL_ID, "#general", "can read and answer"]
        ),
        "{findings:#?}"
    );
    assert!(
        has(
            "error channel discord: the bot cannot answer in channel",
            &[OTHER_CHANNEL_ID, "#random", "Send Messages"]
        ),
        "{findings:#?}"
    );
    assert!(
        has(
            &format!("error channel discord: the bot cannot see channel {unknown}"),
            &["View Channel and Send Messages"]
        ),
        "{findings:#?}"
    );
    assert!(
        has(
            "warn channel discord: message_content = false: the bot runs mention-only",
            &["require_mention = false has no effect"]
        ),
        "{findings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_says_when_discord_refuses_the_token() {
    let dc = DiscordFake::start().await;
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &format!(
            "[channels.discord]\napi_url = \"{}\"\n[channels.discord.groups.\"{CHANNEL_ID}\"]\n",
            dc.origin()
        ),
    ));
    let _d = home.start_with_env(&[("DISCORD_BOT_TOKEN", "MTAw.not.the-token")]);
    let findings = doctor(&home).await;
    assert!(
        findings.iter().any(|f| f
            .starts_with("error channel discord: Discord refused the bot token (401)")
            && f.contains("Reset Token")),
        "{findings:#?}"
    );
    // Nothing is said about the channels of a bot Discord does not know.
    assert!(
        !findings.iter().any(|f| f.contains(CHANNEL_ID)),
        "{findings:#?}"
    );
    // The token never shows.
    assert!(
        !findings.iter().any(|f| f.contains("not.the-token")),
        "{findings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slash_command_is_acknowledged_and_answered_in_place() {
    let r = rig("", "").await;
    r.dc.wait_for("the commands registered", Duration::from_secs(10), |dc| {
        (!dc.commands(None).is_empty()).then_some(())
    })
    .await;
    let names: Vec<String> =
        r.dc.commands(None)
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect();
    assert!(names.contains(&"status".to_string()), "{names:?}");
    let i =
        r.dc.slash_command(CHANNEL_ID, &ann(), "help", serde_json::json!([]));
    let callback =
        r.dc.wait_for("the callback", Duration::from_secs(5), |dc| {
            dc.callbacks()
                .into_iter()
                .find(|c| c.interaction_id == i.id)
        })
        .await;
    assert!(
        callback.in_time,
        "acknowledged within 3 s: {:?}",
        callback.after
    );
    assert_eq!(callback.kind, 5);
    let original =
        r.dc.wait_for("the answer in place", Duration::from_secs(10), |dc| {
            dc.calls()
                .into_iter()
                .find(|c| c.method == "PATCH" && c.path.contains("/messages/@original"))
        })
        .await;
    assert!(
        original.body.to_string().contains("/new"),
        "the help text: {}",
        original.body
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_reaches_the_owner_and_only_the_owners_click_counts() {
    let r = rig(
        "tools = { profile = \"coding\", ask = [\"exec\"] }\n",
        "dm_policy = \"open\"\n",
    )
    .await;
    r.llm.script(
        "[approve-me]",
        vec![
            Step::tool("exec", serde_json::json!({"command": "echo approved-run"})),
            Step::text("done"),
        ],
    );
    let owner_dm = r.dc.dm_channel(&owner());
    r.dc.user_says(&owner_dm, &owner(), Say::text("[approve-me] run it"));
    let request =
        r.dc.wait_for("the approval request", Duration::from_secs(20), |dc| {
            dc.bot_messages(&owner_dm)
                .into_iter()
                .find(|m| !m.request["components"].as_array().is_none_or(Vec::is_empty))
        })
        .await;
    let buttons = request.request["components"][0]["components"].clone();
    let labels: Vec<&str> = buttons
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["label"].as_str())
        .collect();
    assert_eq!(labels.len(), 3, "{labels:?}");
    let approve = buttons[0]["custom_id"].as_str().expect("id").to_string();
    // A stranger's click is refused.
    r.dc.press_button(&owner_dm, request.id(), &ann(), &approve);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pending = r.home.cli(&["--json", "approvals", "list"]).await.json();
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    // The owner's decides.
    r.dc.press_button(&owner_dm, request.id(), &owner(), &approve);
    r.dc.wait_for(
        "the answer after the approval",
        Duration::from_secs(20),
        |dc| {
            dc.bot_messages(&owner_dm)
                .iter()
                .any(|m| m.content() == "done")
                .then_some(())
        },
    )
    .await;
    // The stranger was told, in a note only they see.
    let refused =
        r.dc.bot_messages(&owner_dm)
            .into_iter()
            .find(|m| m.content().contains("Only the owner"))
            .expect("the stranger's note");
    assert_eq!(
        refused.request["flags"], 64,
        "ephemeral: {}",
        refused.request
    );
    // The request lost its buttons once decided.
    let edited =
        r.dc.bot_messages(&owner_dm)
            .into_iter()
            .find(|m| m.id() == request.id())
            .expect("the request");
    assert!(
        edited
            .edits
            .iter()
            .any(|e| e["components"] == serde_json::json!([])),
        "{:?}",
        edited.edits
    );
    assert!(r.dc.callbacks().iter().all(|c| c.in_time));
}

#[tokio::test(flavor = "multi_thread")]
async fn catch_up_answers_what_was_posted_while_down_exactly_once() {
    let mut r = rig("", "").await;
    r.llm.script_cycle("", vec![Step::text("caught")]);
    r.dc.user_says(CHANNEL_ID, &ann(), Say::text("first").mention_bot());
    r.wait_for(CHANNEL_ID, 1).await;
    if let Some(d) = r.daemon.take() {
        d.stop();
    }
    r.dc.put_history(
        CHANNEL_ID,
        &ann(),
        Say::text("while you were away").mention_bot(),
    );
    r.dc.put_history(CHANNEL_ID, &ann(), Say::text("un-mentioned chatter"));
    r.restart();
    r.connected().await;
    let got = r.wait_for(CHANNEL_ID, 2).await;
    assert_eq!(r.settled(CHANNEL_ID).await.len(), 2, "{got:?}");
    r.restart();
    r.connected().await;
    assert_eq!(
        r.settled(CHANNEL_ID).await.len(),
        2,
        "a second restart answers nothing again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_message_tool_reaches_the_owners_dm_and_attachments_go_both_ways() {
    let r = rig("", "dm_policy = \"open\"\n").await;
    let workspace = r.home.workspace();
    std::fs::create_dir_all(workspace.join("out")).unwrap();
    std::fs::write(workspace.join("out/report.csv"), "day,steps\nmon,9000\n").unwrap();
    r.llm.script(
        "[dc-file]",
        vec![
            Step::tool(
                "message",
                serde_json::json!({"file": "out/report.csv", "text": "This week's report"}),
            ),
            Step::text("Sent."),
        ],
    );
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        r.home.cli(&["send", "send me the report [dc-file]"]),
    )
    .await
    .unwrap_or_else(|_| panic!("the turn did not end: {}", r.log()));
    assert!(out.ok().contains("Sent."), "{}", out.ok());
    // The owner's DM is the channel Discord opened for them, not their id.
    let dm = r.dc.dm_channel(&owner());
    assert_ne!(dm, OWNER_ID);
    let sent = &r.dc.bot_messages(&dm)[0];
    assert_eq!(sent.content(), "This week's report");
    assert_eq!(sent.files.len(), 1, "{:?}", sent.files.len());
    assert_eq!(sent.files[0].bytes, b"day,steps\nmon,9000\n");

    // In: an attachment is saved into the sender's inbox and named.
    r.llm
        .script_cycle("[dc-attach]", vec![Step::text("got it")]);
    r.dc.user_says(
        &r.dc.dm_channel(&ann()),
        &ann(),
        Say::text("here [dc-attach]").attach("notes.txt", "text/plain", b"remember the milk"),
    );
    r.wait_for(&r.dc.dm_channel(&ann()), 1).await;
    let journal = serde_json::to_string(&r.llm.journal()).unwrap_or_default();
    assert!(journal.contains("notes.txt"), "{journal}");
    let saved = walk(&workspace)
        .into_iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("notes.txt"))
        })
        .unwrap_or_else(|| panic!("the attachment saved in the workspace: {journal}"));
    assert_eq!(std::fs::read(&saved).unwrap(), b"remember the milk");
    assert!(
        saved.to_string_lossy().contains("discord-dm-"),
        "in the sender's own folder: {}",
        saved.display()
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A workflow's approval on Discord: `/run` from the owner's DM halts at
/// an approval with a quorum of two, the owner and a named approver each
/// get it with buttons in their DMs, and both presses are needed.
#[tokio::test(flavor = "multi_thread")]
async fn a_workflows_approval_is_pressed_by_the_owner_and_a_named_approver_on_discord() {
    let r = rig("tools = { profile = \"full\" }\n", "dm_policy = \"open\"\n").await;
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/post.toml"),
        format!(
            r#"
[inputs.text]
type = "string"

[[steps]]
id = "ok"
kind = "approval"
prompt = "Post {{{{ inputs.text }}}}?"
approvers = ["owner", "discord:{}"]
quorum = 2

[[steps]]
id = "post"
kind = "tool"
tool = "write"
arguments = {{ path = "posted.txt", content = "{{{{ inputs.text }}}}" }}
"#,
            ann().id
        ),
    )
    .unwrap();
    let owner_dm = r.dc.dm_channel(&owner());
    r.dc.user_says(&owner_dm, &owner(), Say::text("/run post text=hi"));
    let ann_dm = r.dc.dm_channel(&ann());
    let with_buttons = |dm: String| {
        move |dc: &DiscordFake| {
            dc.bot_messages(&dm)
                .into_iter()
                .find(|m| !m.request["components"].as_array().is_none_or(Vec::is_empty))
        }
    };
    let mine =
        r.dc.wait_for(
            "the owner's request",
            Duration::from_secs(20),
            with_buttons(owner_dm.clone()),
        )
        .await;
    let hers =
        r.dc.wait_for(
            "the approver's request",
            Duration::from_secs(20),
            with_buttons(ann_dm.clone()),
        )
        .await;
    assert!(mine.content().contains("Post hi"), "{}", mine.content());
    let approve = mine.request["components"][0]["components"][0]["custom_id"]
        .as_str()
        .expect("an Approve button")
        .to_string();
    assert!(approve.starts_with("approve:"), "{approve}");
    let id = approve.trim_start_matches("approve:").to_string();

    // The owner alone is one of two.
    r.dc.press_button(&owner_dm, mine.id(), &owner(), &approve);
    let start = Instant::now();
    loop {
        let pending = r.home.cli(&["--json", "approvals", "list"]).await.json();
        if pending[0]["votes"].as_array().map(Vec::len) == Some(1) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{pending}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!ws.join("posted.txt").exists());
    r.dc.press_button(&ann_dm, hers.id(), &ann(), &approve);
    let start = Instant::now();
    while !ws.join("posted.txt").exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "{}", r.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("posted.txt")).unwrap(),
        "hi"
    );
    let out = r.home.cli(&["--json", "workflows", "runs"]).await;
    let run = out.json()["runs"][0]["id"].as_str().unwrap().to_string();
    let status = crate::workflows::status_until(&r.home, &run, "the run to succeed", |s| {
        s["run"]["status"] == "succeeded"
    })
    .await;
    let ok = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == "ok")
        .unwrap()
        .clone();
    assert_eq!(
        ok["output"]["approvers"].as_array().unwrap().len(),
        2,
        "{ok} ({id})"
    );
}
