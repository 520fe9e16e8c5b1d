//! `pincer-telegram-load`: the Telegram bridge under 200 concurrent chats
//! (SPEC §14: every message answered exactly once, RSS ≤ 48 MB, added
//! latency p99 ≤ 100 ms), with its baseline in the same run. Run through
//! `daemon/benches/telegram_load.sh`, which builds it and the release
//! pincerd; it prints one table and exits 1 when a message was not
//! answered exactly once. The load, the baseline through the socket API,
//! the rounds and the checks are the load benches' own
//! ([`pincer_testkit::load`]); this file adds Telegram.
//!
//! Peers, all in this process: the zero-latency scripted model
//! ([`ScriptedLlm`], every turn answers `pong`) and the fake Bot API
//! ([`BotApi`], long polling honoured; its header says why it stands in
//! for the emulator here).
//!
//! Through Telegram: a pincerd with `[channels.telegram]` on the fake
//! (`dm_policy = "open"`), each chat a private chat. Idle RSS once it
//! polls. A message's time: from the instant it is queued for
//! `getUpdates` to the instant the server receives the bot's
//! `sendMessage` (and, apart, until `getUpdates` first handed it out: the
//! reader's share). With one message per chat in flight every message has
//! its own turn and its own answer, and the k-th answer of a chat is the
//! k-th message's. Added latency is the Telegram percentile minus the
//! baseline's: the bridge's cost (long poll, ledger commits, HTTP to the
//! Bot API) over the turn itself, at the same load.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use pincer_testkit::bot_api::{self, BotApi};
use pincer_testkit::load::{
    self, ANSWER_LIMIT, Args, Checks, Daemon, Expect, FLAT_OUT, Labels, PACED, Pace, Problems,
    REPLY, Run, SETTLE, Sampler, Times,
};
use pincer_testkit::scripted::ScriptedLlm;

/// One message and its answer in a private chat: the answer's latency,
/// and how much of it the message waited to be handed out.
async fn exchange(
    api: &BotApi,
    answers: &mut tokio::sync::mpsc::UnboundedReceiver<bot_api::Sent>,
    user: i64,
    text: &str,
    problems: &Problems,
) -> Option<(Duration, Duration)> {
    let (message_id, asked) = api.user_says(user, text);
    match tokio::time::timeout(ANSWER_LIMIT, answers.recv()).await {
        Ok(Some(sent)) => {
            if sent.text != REPLY {
                problems.add(format!(
                    "chat {user}: message {message_id} was answered `{}`",
                    sent.text
                ));
            }
            let handed = api.handed_out(user, message_id).unwrap_or(sent.at);
            Some((
                sent.at.saturating_duration_since(asked),
                handed.saturating_duration_since(asked),
            ))
        }
        _ => {
            problems.add(format!(
                "chat {user}: message {message_id} got no answer within {} s",
                ANSWER_LIMIT.as_secs()
            ));
            None
        }
    }
}

/// The users of each phase (a private chat's id is its user's id).
const WARM_USER: i64 = 100;
const SOLO_USER: i64 = 101;
const PACED_USERS: i64 = 10_000;
const FLAT_OUT_USERS: i64 = 20_000;
const BURST_USERS: i64 = 30_000;

/// `args.chats` private chats at once (users `first..`), each sending
/// `args.messages` messages spaced by `pace`, each after the previous was
/// answered; their times and the phase's length.
async fn chats(
    args: &Args,
    api: &BotApi,
    first: i64,
    pace: Pace,
    problems: &Problems,
) -> Result<(Times, Times, Duration), String> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..args.chats {
        let (api, problems) = (api.clone(), problems.clone());
        let user = first + c as i64;
        let mut answers = api.watch(user);
        let messages = args.messages;
        tasks.push(tokio::spawn(async move {
            let (mut times, mut pickups) = (Times::default(), Times::default());
            let mut rng = load::seed(c);
            for m in 0..messages {
                tokio::time::sleep(pace.wait(&mut rng)).await;
                match exchange(&api, &mut answers, user, &format!("message {m}"), &problems).await {
                    Some((took, pickup)) => {
                        times.push(took);
                        pickups.push(pickup);
                    }
                    None => break,
                }
            }
            (times, pickups)
        }));
    }
    let (mut times, mut pickups) = (Times::default(), Times::default());
    for task in tasks {
        let (t, p) = task.await.map_err(|e| e.to_string())?;
        times.extend(t);
        pickups.extend(p);
    }
    Ok((times, pickups, started.elapsed()))
}

async fn telegram(
    args: &Args,
    llm: &ScriptedLlm,
    work: &Path,
    problems: &Problems,
) -> Result<(Run, Checks), String> {
    let api = BotApi::start()
        .await
        .map_err(|e| format!("cannot start the fake Bot API: {e}"))?;
    let config = format!(
        "{}[channels.telegram]\napi_url = \"{}\"\ndm_policy = \"open\"\n",
        load::base_config(llm),
        api.api_url()
    );
    let home = work.join("telegram");
    let mut daemon = Daemon::start(
        &args.pincerd,
        &home,
        &config,
        &[("TELEGRAM_BOT_TOKEN", bot_api::TOKEN)],
    )?;
    daemon.ready().await?;
    let start = Instant::now();
    while api.calls("getUpdates") == 0 {
        if start.elapsed() > Duration::from_secs(30) {
            return Err(format!(
                "the bridge did not poll within 30 s: {}",
                daemon.log_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut run = Run::default();
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.idle_kib.push(daemon.memory().0);

    let mut warm = api.watch(WARM_USER);
    exchange(&api, &mut warm, WARM_USER, "warm up", problems)
        .await
        .ok_or("the warm-up message got no answer")?;
    let mut solo = api.watch(SOLO_USER);
    for i in 0..args.solo {
        if let Some((took, _)) =
            exchange(&api, &mut solo, SOLO_USER, &format!("solo {i}"), problems).await
        {
            run.solo.push(took);
        }
    }

    let sampler = Sampler::start(daemon.pid());
    (run.paced, run.paced_pickup, _) = chats(args, &api, PACED_USERS, PACED, problems).await?;
    (run.flat_out, _, run.flat_out_wall) =
        chats(args, &api, FLAT_OUT_USERS, FLAT_OUT, problems).await?;

    // The burst: every chat's messages at once.
    let ledger = load::ledger_path(&home);
    let (before, _) = load::ledger_progress(&ledger)?;
    let burst_started = Instant::now();
    for c in 0..args.chats as i64 {
        for m in 0..args.messages {
            api.user_says(BURST_USERS + c, &format!("burst {m}"));
        }
    }
    let expected = before + args.chats * args.messages;
    run.burst_wall = load::settle_burst(&ledger, expected, burst_started, problems).await?;
    run.peak_kib = sampler.finish().await;
    tokio::time::sleep(SETTLE).await;
    (run.after_kib, run.hwm_kib) = daemon.memory();
    // A message's key in the ledger is "chat:message".
    let chat_of = |key: &str| key.split(':').next().map(str::to_string);
    let users = |first: i64| (0..args.chats as i64).map(move |c| (first + c).to_string());
    let expect = Expect {
        channel: "telegram",
        chat_of: &chat_of,
        posted: api
            .sent()
            .iter()
            .map(|s| (s.chat_id.to_string(), s.message_id.to_string()))
            .collect(),
        closed_loop: users(PACED_USERS).chain(users(FLAT_OUT_USERS)).collect(),
        burst: users(BURST_USERS).collect(),
        messages: args.messages,
    };
    let checks = load::check(&ledger, expect, problems)?;
    daemon.stop();
    Ok((run, checks))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let labels = Labels {
        bridge: "telegram",
        idle: "bridge polling",
        chats: "chats",
        pickup: Some("getUpdates handed it out"),
        posts: "sendMessage calls",
    };
    load::bench(
        "pincer-telegram-load",
        &labels,
        |args, llm, dir, problems| Box::pin(telegram(args, llm, dir, problems)),
    )
    .await
}
