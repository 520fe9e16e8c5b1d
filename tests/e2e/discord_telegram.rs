//! Both bridges in one pincerd: a Telegram chat (the Bot API emulator) and
//! a Discord channel (our fake) bound to different agents with different
//! tool policies, each policy holding in its own chat, as the tools offered
//! to the model in each turn show.

use std::time::{Duration, Instant};

use pincer_testkit::discord_fake::{self, CHANNEL_ID, DiscordFake, Say};
use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use pincer_testkit::telegram::{ChatSpec, TelegramEmulator, UserSpec};

use crate::discord::ann;

const TG_OWNER: i64 = 1001;

/// The tool names offered in the first model request whose body holds
/// `marker`.
fn offered(llm: &ScriptedLlm, marker: &str) -> Vec<String> {
    let journal = llm.journal();
    let body = journal
        .iter()
        .find(|b| b.to_string().contains(marker))
        .unwrap_or_else(|| panic!("no model request for {marker}"));
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_and_discord_at_once_each_keep_their_agents_tool_policy() {
    let tg = TelegramEmulator::start();
    let dc = DiscordFake::start().await;
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    // Telegram's agent may run commands but not fetch pages; Discord's
    // may fetch pages but never run commands, even though the channel's
    // own layer names `exec` (a layer only narrows: the agent's deny
    // holds).
    let extra = format!(
        r#"
[agents.tg]
model = "default"
tools = {{ profile = "coding", deny = ["web_fetch"] }}

[agents.dc]
model = "default"
tools = {{ profile = "coding", deny = ["exec"] }}

[[bindings]]
channel = "telegram"
agent = "tg"

[[bindings]]
channel = "discord"
agent = "dc"

[channels.telegram]
api_url = "{}"
owner = "{TG_OWNER}"

[channels.discord]
api_url = "{}"
owner = "{}"

[channels.discord.groups."{CHANNEL_ID}"]
tools = {{ allow = ["exec", "web_fetch", "read"] }}
"#,
        tg.api_url(),
        dc.origin(),
        discord_fake::OWNER_ID,
    );
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &extra,
    ));
    let _daemon = home.start_with_env(&[
        ("TELEGRAM_BOT_TOKEN", tg.token()),
        ("DISCORD_BOT_TOKEN", discord_fake::TOKEN),
    ]);
    let log = || std::fs::read_to_string(home.path().join("logs/pincerd.log")).unwrap_or_default();
    let start = Instant::now();
    loop {
        let all = home.cli(&["--json", "channels", "status"]).await.json();
        let up = |name: &str| {
            all.as_array()
                .into_iter()
                .flatten()
                .any(|c| c["channel"] == name && c["connected"] == true)
        };
        if up("telegram") && up("discord") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "both bridges should connect: {all}\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    llm.script_cycle("[from-tg]", vec![Step::text("telegram answer")]);
    llm.script_cycle("[from-dc]", vec![Step::text("discord answer")]);

    let owner = UserSpec::new(TG_OWNER, "Owner");
    tg.user_says(&ChatSpec::private(&owner), &owner, "hi [from-tg]")
        .await;
    dc.user_says(CHANNEL_ID, &ann(), Say::text("hi [from-dc]").mention_bot());

    let start = Instant::now();
    loop {
        let tg_sent = tg.bot_messages(TG_OWNER).await;
        let dc_sent = dc.bot_messages(CHANNEL_ID);
        if !tg_sent.is_empty() && !dc_sent.is_empty() {
            assert_eq!(tg_sent[0].text.as_deref(), Some("telegram answer"));
            assert_eq!(dc_sent[0].content(), "discord answer");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "both chats should be answered: telegram {tg_sent:?}, discord {:?}\n{}",
            dc_sent
                .iter()
                .map(|m| m.content().to_string())
                .collect::<Vec<_>>(),
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let tg_tools = offered(&llm, "[from-tg]");
    assert!(tg_tools.iter().any(|t| t == "exec"), "{tg_tools:?}");
    assert!(!tg_tools.iter().any(|t| t == "web_fetch"), "{tg_tools:?}");
    let dc_tools = offered(&llm, "[from-dc]");
    assert!(dc_tools.iter().any(|t| t == "web_fetch"), "{dc_tools:?}");
    assert!(dc_tools.iter().any(|t| t == "read"), "{dc_tools:?}");
    assert!(!dc_tools.iter().any(|t| t == "exec"), "{dc_tools:?}");
    // Only what the channel's layer lets through.
    assert!(!dc_tools.iter().any(|t| t == "write"), "{dc_tools:?}");

    let sessions = home.cli(&["--json", "sessions", "list"]).await.json();
    let keys: Vec<&str> = sessions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["key"].as_str())
        .collect();
    assert!(
        keys.iter().any(|k| k.starts_with("agent:tg:telegram:")),
        "{keys:?}"
    );
    assert!(
        keys.contains(&format!("agent:dc:discord:group:{CHANNEL_ID}").as_str()),
        "{keys:?}"
    );
}
