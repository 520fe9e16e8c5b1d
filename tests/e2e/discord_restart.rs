//! The Discord bridge across crashes, against our fake: a SIGKILL in the
//! middle of a burst answers every message exactly once (the ledger, the
//! answers owed taken up at start, catch-up from each channel's history,
//! each part's nonce), a part whose answer was lost is not posted twice,
//! and a message whose turn fails is reported once and never dispatched
//! in a loop, also when the daemon dies in its turn every time.

use std::time::{Duration, Instant};

use pincer_testkit::discord_fake::{CHANNEL_ID, DiscordFake, Fault, OTHER_CHANNEL_ID, Say, TOKEN};
use pincer_testkit::scripted::Step;

use crate::discord::{Rig, ann, rig, rig_on};

/// A count from the ledger (`state/channels.db`).
fn count(r: &Rig, sql: &str) -> i64 {
    let db =
        rusqlite::Connection::open(r.home.path().join("state/channels.db")).expect("the ledger");
    db.query_row(sql, [], |row| row.get(0)).expect(sql)
}

/// How many model requests a conversation whose first message holds
/// `marker` made.
fn requests(r: &Rig, marker: &str) -> usize {
    r.llm
        .journal()
        .iter()
        .filter(|body| body.to_string().contains(marker))
        .count()
}

/// SIGKILLs pincerd and starts it again on the same home.
async fn kill_and_start(r: &mut Rig) {
    r.daemon.take().expect("running").kill9();
    r.daemon = Some(r.home.start_with_env(&[("DISCORD_BOT_TOKEN", TOKEN)]));
}

/// No residual window on Discord, unlike Telegram: each part of an answer
/// is posted with a `nonce` (the message it answers and the part's index)
/// and `enforce_nonce`, so a part Discord accepted in the instant before
/// the kill, before the ledger recorded its confirmation, is answered
/// with the message already posted when it is sent again after the
/// restart. Every message is claimed once (the ledger's unique key), the
/// answers owed are finished from the ledger, and what was posted while
/// pincerd was down is read back from each channel's history.
#[tokio::test(flavor = "multi_thread")]
async fn a_sigkill_mid_burst_in_ten_channels_answers_every_message_exactly_once() {
    let dc = DiscordFake::start().await;
    let mut channels = vec![CHANNEL_ID.to_string(), OTHER_CHANNEL_ID.to_string()];
    for i in 0..8 {
        channels.push(dc.add_text_channel(&format!("burst-{i}")));
    }
    let groups: String = channels[1..]
        .iter()
        .map(|c| format!("[channels.discord.groups.\"{c}\"]\n"))
        .collect();
    let mut r = rig_on(dc, "", &groups).await;
    // Two chunks per answer (two paragraphs of about 1,600 characters),
    // so a kill can fall between the chunks of one.
    let long: String = (0..2)
        .map(|p| {
            let words: Vec<String> = (0..250).map(|j| format!("p{p}w{j}")).collect();
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    r.llm.script_cycle("", vec![Step::text(&long)]);
    for round in 0..5 {
        for channel in &channels {
            r.dc.user_says(
                channel,
                &ann(),
                Say::text(&format!("m{round} [burst]")).mention_bot(),
            );
            // Paced, so that the kill falls while answers are being sent.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if round == 2 {
            kill_and_start(&mut r).await;
        }
    }
    let answered = "SELECT COUNT(*) FROM inbound WHERE answered_at IS NOT NULL";
    let start = Instant::now();
    while count(&r, answered) < 50 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not every message was answered: {} of 50 ({} claimed)\n{}",
            count(&r, answered),
            count(&r, "SELECT COUNT(*) FROM inbound"),
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
        count(&r, "SELECT COUNT(*) FROM inbound"),
        50,
        "each message claimed once"
    );
    let confirmed = count(
        &r,
        "SELECT COUNT(*) FROM chunks WHERE platform_id IS NOT NULL",
    );
    let planned = count(&r, "SELECT COUNT(*) FROM chunks");
    assert_eq!(confirmed, planned, "every planned chunk went out");
    let mut sent = 0;
    for channel in &channels {
        let got = r.dc.bot_messages(channel);
        assert!(!got.is_empty(), "channel {channel} got no answer");
        assert!(
            got.iter().all(|m| m.content().chars().count() <= 2000),
            "within Discord's limit"
        );
        sent += got.len() as i64;
    }
    // Not one part doubled (see the doc above).
    assert_eq!(
        sent, confirmed,
        "{sent} messages posted for {confirmed} confirmed chunks"
    );
}

/// Discord carried out the post but its answer was lost (a 502 after the
/// message was made): the bridge tries again with the same nonce and
/// Discord hands back the message already posted, so the channel shows
/// the answer once.
#[tokio::test(flavor = "multi_thread")]
async fn a_part_whose_answer_was_lost_is_sent_again_without_a_second_message() {
    let r = rig("", "").await;
    r.llm.script_cycle("", vec![Step::text("only once")]);
    r.dc.fail_next(
        "POST",
        "/api/v10/channels/*/messages",
        1,
        Fault::AnswerLost(502),
    );
    let asked =
        r.dc.user_says(CHANNEL_ID, &ann(), Say::text("hello").mention_bot());
    r.wait_for(CHANNEL_ID, 1).await;
    let posts =
        r.dc.wait_for("the post tried again", Duration::from_secs(20), |dc| {
            let posts = dc.calls_to("POST", "/api/v10/channels/*/messages");
            (posts.len() >= 2).then_some(posts)
        })
        .await;
    let nonce = format!("{}.0", asked["id"].as_str().unwrap());
    assert_eq!(posts[0].status, 502);
    for post in &posts {
        assert_eq!(post.body["nonce"], nonce.as_str(), "{:?}", post.body);
        assert_eq!(post.body["enforce_nonce"], true);
    }
    assert_eq!(r.settled(CHANNEL_ID).await, ["only once"]);
    let confirmed = count(
        &r,
        "SELECT COUNT(*) FROM chunks WHERE platform_id IS NOT NULL",
    );
    assert_eq!(confirmed, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_turn_is_reported_once_and_never_dispatched_again() {
    let mut r = rig(
        "",
        &format!("[channels.discord.groups.\"{OTHER_CHANNEL_ID}\"]\n"),
    )
    .await;
    // Every turn of the conversation that starts with [doomed] fails (a
    // 400 is not retried by the model client); others are answered.
    r.llm.script_cycle(
        "[doomed]",
        vec![Step::error(400, "scripted: this message cannot be handled")],
    );
    r.llm.script_cycle("", vec![Step::text("fine")]);
    r.dc.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("[doomed] please").mention_bot(),
    );
    let got = r.wait_for(CHANNEL_ID, 1).await;
    assert!(got[0].starts_with("Sorry, something went wrong"), "{got:?}");
    assert!(got[0].contains("cannot be handled"), "the reason: {got:?}");
    let tried = requests(&r, "[doomed]");
    assert_eq!(tried, 1, "one model request, no retry of a 400");
    assert_eq!(r.settled(CHANNEL_ID).await.len(), 1, "reported once");
    // Neither the answers owed at start nor catch-up take it up again,
    // after a crash nor after a clean restart.
    kill_and_start(&mut r).await;
    r.connected().await;
    r.restart();
    r.connected().await;
    r.dc.user_says(
        OTHER_CHANNEL_ID,
        &ann(),
        Say::text("[other] hi").mention_bot(),
    );
    r.wait_for(OTHER_CHANNEL_ID, 1).await;
    assert_eq!(r.settled(CHANNEL_ID).await.len(), 1, "not reported again");
    assert_eq!(requests(&r, "[doomed]"), tried, "never dispatched again");
    assert_eq!(
        count(
            &r,
            "SELECT COUNT(*) FROM inbound WHERE answered_at IS NOT NULL AND attempts = 1"
        ),
        2,
        "both messages settled at their first attempt"
    );
}

/// A message whose turn never ends because the daemon dies in it every
/// time (here: SIGKILL while the model's stream hangs): the ledger counts
/// each dispatch, the answers owed at start run it again while the count
/// is within `MAX_ATTEMPTS` (3), then it gets one failure reply and is
/// never dispatched again.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_whose_turn_dies_every_time_is_given_up_after_three_tries() {
    let mut r = rig("", "").await;
    r.llm.script_cycle(
        "[hangs]",
        vec![Step {
            hang: true,
            ..Step::text("thinking")
        }],
    );
    r.dc.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("[hangs] a hard one").mention_bot(),
    );
    for attempt in 1..=3 {
        let start = Instant::now();
        while requests(&r, "[hangs]") < attempt {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "attempt {attempt} never reached the model\n{}",
                r.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(requests(&r, "[hangs]"), attempt);
        assert!(
            r.dc.bot_messages(CHANNEL_ID).is_empty(),
            "nothing sent while the turn runs"
        );
        kill_and_start(&mut r).await;
        r.connected().await;
    }
    let got = r.wait_for(CHANNEL_ID, 1).await;
    assert!(got[0].contains("failed several times"), "{got:?}");
    r.restart();
    r.connected().await;
    assert_eq!(r.settled(CHANNEL_ID).await.len(), 1, "reported once");
    assert_eq!(requests(&r, "[hangs]"), 3, "never a fourth dispatch");
    assert_eq!(
        count(&r, "SELECT MAX(attempts) FROM inbound"),
        4,
        "three turns and the give-up, counted in the ledger"
    );
}
