//! Faults (issue 29; docs/src/hardening.md): the chat platform goes away
//! while pincerd is answering. Telegram — the real emulator stopped and
//! started again on its port — and Discord — our fake's outage: gateway
//! closed with 1001 and refused, REST answering 503 — each unreachable
//! for `PINCER_OUTAGE_SECS` seconds (10 by default, as in tests/run.sh;
//! 60 on demand, past the ~31 s an answer's tries take, so the answers go
//! out on the recovery). Answers written meanwhile reach their chats once
//! the platform is back, each exactly once, without a restart; messages
//! sent during a Discord outage are answered too; and the bridge goes on
//! answering afterwards.

use std::time::{Duration, Instant};

use pincer_testkit::discord_fake::{CHANNEL_ID, DiscordFake, OTHER_CHANNEL_ID, Say};
use pincer_testkit::scripted::Step;
use pincer_testkit::telegram::{ChatSpec, TelegramEmulator, UserSpec};

fn outage() -> Duration {
    let secs = std::env::var("PINCER_OUTAGE_SECS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(secs)
}

/// Messages in the ledger not answered yet.
fn unanswered(home: &pincer_testkit::harness::TestHome) -> i64 {
    crate::crash::ledger_count(
        home,
        "SELECT count(*) FROM inbound WHERE answered_at IS NULL",
    )
}

/// Well past the outage and an answer's tries (1 + 2 + 4 + 8 + 16 s).
fn deadline() -> Duration {
    outage() + Duration::from_secs(60)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_telegram_outage_loses_no_answer_and_sends_none_twice() {
    let down = outage();
    let mut r =
        crate::telegram::rig_with(TelegramEmulator::start(), "", "dm_policy = \"open\"").await;
    r.llm.script_cycle(
        "[outage]",
        vec![Step::text("answered across the outage").after(Duration::from_secs(2))],
    );
    let users: Vec<UserSpec> = (0..5).map(|i| UserSpec::new(800 + i, "U")).collect();
    for u in &users {
        r.tg.user_says(&ChatSpec::private(u), u, &format!("[outage] from {}", u.id))
            .await;
    }
    crate::boundary::requests_of(&r.llm, "[outage]", users.len()).await;
    // Telegram goes away while the five answers are being written.
    let went = Instant::now();
    r.tg.stop();
    tokio::time::sleep(down).await;
    // The emulator comes back empty (a fresh process): what it holds now
    // is what pincerd sent after the outage.
    r.tg.resume();
    let start = Instant::now();
    for u in &users {
        loop {
            if !r.tg.bot_messages(u.id).await.is_empty() {
                break;
            }
            assert!(
                start.elapsed() < deadline(),
                "chat {} got no answer {:?} after the outage began\n{}",
                u.id,
                went.elapsed(),
                r.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let recovered_in = went.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    for u in &users {
        let got = r.tg.bot_messages(u.id).await;
        assert_eq!(got.len(), 1, "chat {}: {got:?}", u.id);
        assert_eq!(crate::telegram::text(&got[0]), "answered across the outage");
    }
    assert_eq!(unanswered(&r.home), 0, "every message answered");
    // And it goes on: a new chat (the fresh emulator numbers messages from
    // 1 again, so an old chat's would look like one already handled).
    let late = UserSpec::new(900, "Late");
    r.llm.script("[after]", vec![Step::text("still here")]);
    r.tg.user_says(&ChatSpec::private(&late), &late, "[after] hello")
        .await;
    let got = r.wait_for(late.id, 1).await;
    assert_eq!(crate::telegram::text(&got[0]), "still here");
    let log = r.log();
    assert!(
        log.contains("telegram: reconnected after"),
        "the recovery is logged:\n{log}"
    );
    eprintln!(
        "outage telegram: {} s down, 5 answers delivered once, the last {:.1} s after it began",
        down.as_secs(),
        recovered_in.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_discord_outage_loses_no_answer_and_answers_what_came_meanwhile_once() {
    let down = outage();
    let dc = DiscordFake::start().await;
    let third = dc.add_text_channel("outage");
    let channels = [CHANNEL_ID.to_string(), OTHER_CHANNEL_ID.to_string(), third];
    let groups: String = channels[1..]
        .iter()
        .map(|c| format!("[channels.discord.groups.\"{c}\"]\n"))
        .collect();
    let r = crate::discord::rig_on(dc, "", &groups).await;
    r.llm.script_cycle(
        "",
        vec![Step::text("answered across the outage").after(Duration::from_secs(2))],
    );
    for c in &channels {
        r.dc.user_says(
            c,
            &crate::discord::ann(),
            Say::text("[before] hello").mention_bot(),
        );
    }
    crate::boundary::requests_of(&r.llm, "[before]", channels.len()).await;
    let went = Instant::now();
    r.dc.outage();
    // People go on writing; Discord keeps their messages for the session.
    tokio::time::sleep(down / 2).await;
    for c in &channels {
        r.dc.user_says(
            c,
            &crate::discord::ann(),
            Say::text("[during] still there?").mention_bot(),
        );
    }
    tokio::time::sleep(down - down / 2).await;
    r.dc.outage_over();
    let start = Instant::now();
    for c in &channels {
        loop {
            if r.dc.bot_messages(c).len() >= 2 {
                break;
            }
            assert!(
                start.elapsed() < deadline(),
                "channel {c}: {:?}\n{}",
                r.dc.bot_messages(c),
                r.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let recovered_in = went.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    for c in &channels {
        let got = r.dc.bot_messages(c);
        assert_eq!(got.len(), 2, "channel {c}: one answer per message: {got:?}");
    }
    assert_eq!(unanswered(&r.home), 0, "every message answered");
    let refused = r.dc.calls().iter().filter(|c| c.status == 503).count();
    assert!(refused > 0, "the outage refused pincerd's calls");
    eprintln!(
        "outage discord: {} s down, {refused} calls refused, 6 messages answered once, the last {:.1} s after it began",
        down.as_secs(),
        recovered_in.as_secs_f64()
    );
}
