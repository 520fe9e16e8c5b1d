//! The Discord bridge's basics against crabline (`pincer_testkit::discord`,
//! the npm Discord server others wrote, REST v10 and gateway v10): a DM
//! stranger's one pairing code and their answers once approved, a guild
//! channel's mention answered and the rest not, `@everyone` in model
//! output sent with no mention parsed, a long answer within Discord's
//! limits. Everything crabline lacks (interactions, history placed while
//! the bot is away, gateway faults, 429s) is tested against our own fake
//! in `discord.rs`.
//!
//! crabline's ids are its own (the bot's user id whatever the token, the
//! fixture guild and channel), its heartbeat is 45 s (no test here waits
//! for one), and its GUILD_CREATE lacks fields Discord sends (the bridge
//! reads GUILD_CREATE as raw JSON, so it copes).

use std::time::{Duration, Instant};

use pincer_testkit::discord::{self, Crabline};
use pincer_testkit::harness::{Daemon, TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

/// A person on crabline (ids must be 17–20 digit snowflakes there).
const ANN: &str = "200000000000000001";
/// The owner of the bridge (approvals, pairing notes), never writing here.
const OWNER: &str = "200000000000000009";

struct CrabRig {
    crab: Crabline,
    llm: ScriptedLlm,
    home: TestHome,
    _daemon: Daemon,
}

/// pincerd with the Discord bridge on a fresh crabline, its fixture channel
/// allowlisted; `channel` is added under `[channels.discord]`.
async fn crab_rig(channel: &str) -> CrabRig {
    let crab = Crabline::start(discord::TOKEN);
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &format!(
            "[channels.discord]\napi_url = \"{}\"\nowner = \"{OWNER}\"\n{channel}\n[channels.discord.groups.\"{}\"]\n",
            crab.origin(),
            crab.channel_id()
        ),
    ));
    let daemon = home.start_with_env(&[("DISCORD_BOT_TOKEN", &crab.token())]);
    let rig = CrabRig {
        crab,
        llm,
        home,
        _daemon: daemon,
    };
    rig.connected().await;
    rig
}

impl CrabRig {
    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("logs/pincerd.log")).unwrap_or_default()
    }

    /// Waits until `pincer channels status` says the bridge is connected
    /// (READY on crabline's gateway).
    async fn connected(&self) {
        let start = Instant::now();
        loop {
            let all = self
                .home
                .cli(&["--json", "channels", "status"])
                .await
                .json();
            let status = all
                .as_array()
                .and_then(|a| a.iter().find(|c| c["channel"] == "discord").cloned())
                .unwrap_or_default();
            if status["connected"] == true {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the Discord bridge did not connect to crabline: {status}\npincerd log:\n{}\ncrabline:\n{}",
                self.log(),
                self.crab.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A user's message in the fixture channel.
    async fn in_channel(&self, content: &str) -> Value {
        self.crab
            .user_says(self.crab.guild_message(ANN, "ann", content))
            .await
    }

    /// `content` mentioning the bot, as Discord's client writes it.
    fn mention(&self, content: &str) -> String {
        format!("<@{}> {content}", self.crab.bot_user_id())
    }

    async fn wait_for(&self, channel: &str, n: usize) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let got = self.crab.bot_messages(channel).await;
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the bot sent {} of {n} messages to {channel} on crabline in 20 s: {got:#?}\npincerd log:\n{}",
                got.len(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the bot posted in `channel` after a quiet moment.
    async fn settled(&self, channel: &str) -> Vec<Value> {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        self.crab.bot_messages(channel).await
    }
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn crabline_a_dm_stranger_gets_one_code_and_is_answered_once_approved() {
    let r = crab_rig("").await;
    r.llm
        .script_cycle("", vec![Step::text("hello from pincer")]);
    let dm = r.crab.dm_channel_id(ANN);
    for i in 0..3 {
        r.crab
            .user_says(json!({
                "channelId": dm, "senderId": ANN, "senderName": "ann",
                "content": format!("hi {i}"),
            }))
            .await;
    }
    let sent = r.settled(&dm).await;
    assert_eq!(sent.len(), 1, "one code while it is pending: {sent:#?}");
    assert!(
        content(&sent[0]).contains("pincer pairing approve discord"),
        "{sent:#?}"
    );
    assert!(
        r.llm.journal().is_empty(),
        "a stranger never reaches the model"
    );
    let list = r.home.cli(&["--json", "pairing", "list"]).await.json();
    let code = list[0]["code"].as_str().expect("a code").to_string();
    assert!(content(&sent[0]).contains(&code), "{sent:#?}");
    r.home
        .cli(&["pairing", "approve", "discord", &code])
        .await
        .ok();
    // The note to the person just paired, through the DM channel the API
    // opens (crabline answers the same id).
    r.wait_for(&dm, 2).await;
    r.crab
        .user_says(json!({
            "channelId": dm, "senderId": ANN, "senderName": "ann", "content": "now?",
        }))
        .await;
    let got = r.wait_for(&dm, 3).await;
    assert_eq!(content(&got[2]), "hello from pincer", "{got:#?}");
    assert_eq!(r.settled(&dm).await.len(), 3, "answered once");
}

#[tokio::test(flavor = "multi_thread")]
async fn crabline_a_guild_mention_is_answered_and_a_message_without_one_is_not() {
    let r = crab_rig("").await;
    r.llm.script_cycle("", vec![Step::text("answered")]);
    let channel = r.crab.channel_id();
    r.in_channel("just chatting, the code word is plum").await;
    assert!(
        r.settled(&channel).await.is_empty(),
        "no mention, no answer"
    );
    let asked = r.in_channel(&r.mention("what is the word?")).await;
    let got = r.wait_for(&channel, 1).await;
    assert_eq!(content(&got[0]), "answered");
    // The answer replies to the message it answers.
    assert_eq!(
        got[0]["message_reference"]["message_id"], asked["id"],
        "{:#}",
        got[0]
    );
    // The un-mentioned message reached the model as context, and the
    // bot's own mention was taken off the question.
    let journal = serde_json::to_string(&r.llm.journal()).unwrap_or_default();
    assert!(journal.contains("plum"), "{journal}");
    assert!(
        !journal.contains(&format!("<@{}>", r.crab.bot_user_id())),
        "{journal}"
    );
    assert_eq!(r.settled(&channel).await.len(), 1, "answered once");
}

#[tokio::test(flavor = "multi_thread")]
async fn crabline_everyone_in_model_output_is_sent_with_no_mention_parsed() {
    let r = crab_rig("").await;
    r.llm.script_cycle(
        "",
        vec![Step::text(
            "Hi @everyone and @here, see <@&300000000000000001>",
        )],
    );
    let channel = r.crab.channel_id();
    r.in_channel(&r.mention("ping them all")).await;
    let got = r.wait_for(&channel, 1).await;
    assert_eq!(
        content(&got[0]),
        "Hi @everyone and @here, see <@&300000000000000001>",
        "the text is sent as written"
    );
    // crabline stores the request's allowed_mentions with the message (it
    // sets mention_everyone from the content alone, whatever
    // allowed_mentions says; Discord pings no one with `parse: []`).
    assert_eq!(
        got[0]["allowed_mentions"]["parse"],
        json!([]),
        "{:#}",
        got[0]
    );
    assert!(
        got[0]["allowed_mentions"].get("roles").is_none()
            && got[0]["allowed_mentions"].get("users").is_none(),
        "no role or user listed to ping: {:#}",
        got[0]
    );
    let posts = r
        .crab
        .calls_to("POST", &format!("/api/v10/channels/{channel}/messages"));
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0]["body"]["allowed_mentions"]["parse"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn crabline_a_long_answer_comes_as_three_messages_within_discords_limits() {
    let r = crab_rig("").await;
    // 50 lines of 99 characters: Discord's 17-line fold, not its 2,000
    // characters, decides the cuts.
    let answer = (0..50)
        .map(|i| format!("{i:02} {}", "y".repeat(96)))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(answer.chars().count() >= 4990);
    r.llm.script_cycle("", vec![Step::text(&answer)]);
    let channel = r.crab.channel_id();
    r.in_channel(&r.mention("a long one please")).await;
    r.wait_for(&channel, 3).await;
    let got: Vec<String> = r
        .settled(&channel)
        .await
        .iter()
        .map(|m| content(m).to_string())
        .collect();
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
