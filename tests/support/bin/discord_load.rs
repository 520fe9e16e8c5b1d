//! `pincer-discord-load`: the Discord bridge under 200 concurrent guild
//! channels (SPEC §14: every message answered exactly once, added latency
//! p99 ≤ 100 ms, RSS ≤ 48 MB), with its baseline in the same run. Run
//! through `daemon/benches/discord_load.sh`, which builds it and the
//! release pincerd; it prints one table and exits 1 when a message was not
//! answered exactly once. The load, the baseline through the socket API,
//! the rounds and the checks are the load benches' own
//! ([`pincer_testkit::load`]); this file adds Discord.
//!
//! Peers, all in this process: the zero-latency scripted model
//! ([`ScriptedLlm`], every turn answers `pong`) and our Discord fake
//! ([`DiscordFake`]: REST v10 and gateway v10, the wire format the bridge
//! speaks to Discord), not a Node.js emulator sharing the two cores.
//!
//! Through Discord: a pincerd with `[channels.discord]` on the fake, the
//! guild's text channels allowlisted (one per chat of each phase, made
//! with [`DiscordFake::add_text_channel`] before it starts, plus the
//! fixture channels for the warm-up and the solo chat), each written in by
//! its own member who mentions the bot (guild channels answer mentions by
//! default). It is measured once its gateway is up and its catch-up has
//! read every channel's history. A message's time: from just before the
//! fake dispatches its MESSAGE_CREATE on the gateway to the instant the
//! fake receives the bot's `POST /channels/{id}/messages`; the bot's own
//! message comes back on the gateway as on Discord. Added latency is that
//! minus the baseline's turn at the same load: the bridge's cost (the
//! gateway, the ledger's commits, typing and the answer over REST).

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use pincer_testkit::discord_fake::{
    self, Author, BotMessage, CHANNEL_ID, DiscordFake, OTHER_CHANNEL_ID, OWNER_ID, Options, Say,
};
use pincer_testkit::load::{
    self, ANSWER_LIMIT, Args, Checks, Daemon, Expect, FLAT_OUT, Labels, PACED, Pace, Problems,
    REPLY, Run, SETTLE, Sampler, Times,
};
use pincer_testkit::scripted::ScriptedLlm;
use tokio::sync::mpsc::UnboundedReceiver;

/// Discord's heartbeat interval (HELLO's `heartbeat_interval`), as the
/// real gateway sends it.
const HEARTBEAT: Duration = Duration::from_millis(41_250);

/// A channel and the member who writes in it.
#[derive(Clone)]
struct Chat {
    channel: String,
    author: Author,
}

/// The channels of one round: the warm-up's, the solo chat's, and those
/// of each phase.
struct Channels {
    warm: Chat,
    solo: Chat,
    paced: Vec<Chat>,
    flat_out: Vec<Chat>,
    burst: Vec<Chat>,
}

impl Channels {
    /// Makes `chats` text channels per phase in the fake's guild, each with
    /// a member of its own.
    fn make(dc: &DiscordFake, chats: usize) -> Self {
        let mut people = 0u64;
        let mut chat = |channel: String| {
            people += 1;
            let id = (300_000_000_000_000_000 + people).to_string();
            let author = Author::user(&id, &format!("member{people}"));
            Chat { channel, author }
        };
        let warm = chat(CHANNEL_ID.to_string());
        let solo = chat(OTHER_CHANNEL_ID.to_string());
        let mut phase = |name: &str| -> Vec<Chat> {
            (0..chats)
                .map(|c| chat(dc.add_text_channel(&format!("{name}-{c}"))))
                .collect()
        };
        let paced = phase("paced");
        let flat_out = phase("flat");
        let burst = phase("burst");
        Self {
            warm,
            solo,
            paced,
            flat_out,
            burst,
        }
    }

    fn all(&self) -> impl Iterator<Item = &Chat> {
        [&self.warm, &self.solo]
            .into_iter()
            .chain(&self.paced)
            .chain(&self.flat_out)
            .chain(&self.burst)
    }

    /// `[channels.discord]` on `origin` with every channel allowlisted.
    fn config(&self, origin: &str) -> String {
        let mut out =
            format!("[channels.discord]\napi_url = \"{origin}\"\nowner = \"{OWNER_ID}\"\n");
        for chat in self.all() {
            out.push_str(&format!("[channels.discord.groups.\"{}\"]\n", chat.channel));
        }
        out
    }
}

/// One message, mentioning the bot, and its answer in the channel: the
/// answer's latency.
async fn exchange(
    dc: &DiscordFake,
    answers: &mut UnboundedReceiver<BotMessage>,
    chat: &Chat,
    text: &str,
    problems: &Problems,
) -> Option<Duration> {
    let asked = Instant::now();
    let message = dc.user_says(&chat.channel, &chat.author, Say::text(text).mention_bot());
    let id = message["id"].as_str().unwrap_or_default();
    let channel = &chat.channel;
    match tokio::time::timeout(ANSWER_LIMIT, answers.recv()).await {
        Ok(Some(posted)) => {
            if posted.content() != REPLY {
                problems.add(format!(
                    "channel {channel}: message {id} was answered `{}`",
                    posted.content()
                ));
            }
            Some(posted.at.saturating_duration_since(asked))
        }
        _ => {
            problems.add(format!(
                "channel {channel}: message {id} got no answer within {} s",
                ANSWER_LIMIT.as_secs()
            ));
            None
        }
    }
}

/// The channels of a phase at once, each sending `args.messages` messages
/// spaced by `pace`, each after the previous was answered; their times and
/// the phase's length.
async fn channels(
    args: &Args,
    dc: &DiscordFake,
    chats: &[Chat],
    pace: Pace,
    problems: &Problems,
) -> Result<(Times, Duration), String> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, chat) in chats.iter().enumerate() {
        let (dc, problems, chat) = (dc.clone(), problems.clone(), chat.clone());
        let mut answers = dc.watch(&chat.channel);
        let messages = args.messages;
        tasks.push(tokio::spawn(async move {
            let mut times = Times::default();
            let mut rng = load::seed(c);
            for m in 0..messages {
                tokio::time::sleep(pace.wait(&mut rng)).await;
                match exchange(&dc, &mut answers, &chat, &format!("message {m}"), &problems).await {
                    Some(took) => times.push(took),
                    None => break,
                }
            }
            times
        }));
    }
    let mut times = Times::default();
    for task in tasks {
        times.extend(task.await.map_err(|e| e.to_string())?);
    }
    Ok((times, started.elapsed()))
}

/// Waits until the bridge's gateway is up and its catch-up has read the
/// history of all `channels` (so that the load meets a settled bridge).
async fn connected(dc: &DiscordFake, daemon: &mut Daemon, channels: usize) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let identified = dc
            .connections()
            .iter()
            .any(|c| c.closed_at.is_none() && c.session_id.is_some());
        let read = dc
            .calls_to("GET", "/api/v10/channels/*/messages")
            .iter()
            .filter(|c| c.status == 200)
            .count();
        if identified && read >= channels {
            return Ok(());
        }
        daemon.alive()?;
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "the bridge did not connect and catch up within 60 s (gateway identified: {identified}, {read} of {channels} channels read): {}",
                daemon.log_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn discord(
    args: &Args,
    llm: &ScriptedLlm,
    work: &Path,
    problems: &Problems,
) -> Result<(Run, Checks), String> {
    let dc = DiscordFake::start_with(Options {
        heartbeat_interval: HEARTBEAT,
        ..Options::default()
    })
    .await;
    let chats = Channels::make(&dc, args.chats);
    let config = format!("{}{}", load::base_config(llm), chats.config(&dc.origin()));
    let home = work.join("discord");
    let mut daemon = Daemon::start(
        &args.pincerd,
        &home,
        &config,
        &[("DISCORD_BOT_TOKEN", discord_fake::TOKEN)],
    )?;
    daemon.ready().await?;
    connected(&dc, &mut daemon, chats.all().count()).await?;
    let mut run = Run::default();
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.idle_kib.push(daemon.memory().0);

    let mut warm = dc.watch(&chats.warm.channel);
    exchange(&dc, &mut warm, &chats.warm, "warm up", problems)
        .await
        .ok_or("the warm-up message got no answer")?;
    let mut solo = dc.watch(&chats.solo.channel);
    for i in 0..args.solo {
        if let Some(took) =
            exchange(&dc, &mut solo, &chats.solo, &format!("solo {i}"), problems).await
        {
            run.solo.push(took);
        }
    }

    let sampler = Sampler::start(daemon.pid());
    (run.paced, _) = channels(args, &dc, &chats.paced, PACED, problems).await?;
    (run.flat_out, run.flat_out_wall) =
        channels(args, &dc, &chats.flat_out, FLAT_OUT, problems).await?;

    // The burst: every channel's messages at once.
    let ledger = load::ledger_path(&home);
    let (before, _) = load::ledger_progress(&ledger)?;
    let burst_started = Instant::now();
    for chat in &chats.burst {
        for m in 0..args.messages {
            dc.user_says(
                &chat.channel,
                &chat.author,
                Say::text(&format!("burst {m}")).mention_bot(),
            );
        }
    }
    let expected = before + args.chats * args.messages;
    run.burst_wall = load::settle_burst(&ledger, expected, burst_started, problems).await?;
    run.peak_kib = sampler.finish().await;
    tokio::time::sleep(SETTLE).await;
    (run.after_kib, run.hwm_kib) = daemon.memory();

    // A message's key in the ledger is its id; the fake knows its channel.
    let mut channel_of: HashMap<String, String> = HashMap::new();
    for chat in chats.all() {
        for message in dc.channel_messages(&chat.channel) {
            if let Some(id) = message["id"].as_str() {
                channel_of.insert(id.to_string(), chat.channel.clone());
            }
        }
    }
    let chat_of = |key: &str| channel_of.get(key).cloned();
    let ids = |list: &[Chat]| list.iter().map(|c| c.channel.clone()).collect::<Vec<_>>();
    let expect = Expect {
        channel: "discord",
        chat_of: &chat_of,
        posted: dc
            .all_bot_messages()
            .iter()
            .map(|m| (m.channel_id().to_string(), m.id().to_string()))
            .collect(),
        closed_loop: [ids(&chats.paced), ids(&chats.flat_out)].concat(),
        burst: ids(&chats.burst),
        messages: args.messages,
    };
    let checks = load::check(&ledger, expect, problems)?;
    daemon.stop();
    Ok((run, checks))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let labels = Labels {
        bridge: "discord",
        idle: "gateway connected",
        chats: "channels",
        pickup: None,
        posts: "messages the bot posted",
    };
    load::bench(
        "pincer-discord-load",
        &labels,
        |args, llm, dir, problems| Box::pin(discord(args, llm, dir, problems)),
    )
    .await
}
