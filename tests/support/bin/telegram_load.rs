//! `pincer-telegram-load`: the Telegram bridge under 200 concurrent chats
//! (SPEC §14: every message answered exactly once, RSS ≤ 48 MB, added
//! latency p99 ≤ 100 ms), with its baseline in the same run. Run through
//! `daemon/benches/telegram_load.sh`, which builds it and the release
//! pincerd; it prints one table and exits 1 when a message was not
//! answered exactly once.
//!
//! Peers, all in this process: the zero-latency scripted model
//! ([`ScriptedLlm`], every turn answers `pong`) and the fake Bot API
//! ([`BotApi`], long polling honoured; its header says why it stands in
//! for the emulator here).
//!
//! The load, the same for both pincerds: a warm-up message; `solo`
//! messages one after another in one chat; then `chats` chats at once,
//! each sending `messages` messages one at a time (the next once the
//! previous is answered), twice:
//! - **paced**: each chat waits 0.5–1.5 s (seeded, so both runs wait
//!   alike) before each message, as people type: about `chats` messages a
//!   second offered, below what the machine can answer, so the latency is
//!   each message's own cost plus the queueing 200 chats cause. The
//!   budget's *added latency* is read here;
//! - **flat out**: no wait: the machine's throughput with `chats`
//!   messages always in flight. Latency here is mostly queueing
//!   (`chats` ÷ throughput), so it compares throughputs, not bridges.
//!
//! 1. **Baseline**: a pincerd without channels; each chat is a session
//!    on its own connection to the socket API (the `Chat` stream `pincer
//!    send` uses, without starting a process). A turn's time: from sending
//!    the request to its `TurnFinished`.
//! 2. **Telegram**: a pincerd with `[channels.telegram]` on the fake
//!    (`dm_policy = "open"`), each chat a private chat. Idle RSS once it
//!    polls. A message's time: from the instant it is queued for
//!    `getUpdates` to the instant the server receives the bot's
//!    `sendMessage` (and, apart, until `getUpdates` first handed it out:
//!    the reader's share). With one message per chat in flight every message has
//!    its own turn and its own answer, and the k-th answer of a chat is
//!    the k-th message's.
//! 3. **Burst** (Telegram only): `chats` new chats each send `messages`
//!    at once. Messages that queue behind a running turn are answered
//!    together by one turn (one reply for several messages), so exactly
//!    once is read from the ledger here: every message settled, none with
//!    two answers.
//! 4. **Checks**, after a pause in which a doubled answer would arrive:
//!    per chat, answers sent = messages (paced and flat out); in the
//!    ledger (`state/channels.db`) every inbound row answered, each of
//!    those messages with exactly one confirmed chunk, and the confirmed
//!    chunks one-to-one with the `sendMessage` calls the server received.
//!
//! Both pincerds run `rounds` times, alternating (fresh homes and a fresh
//! fake each round), so both meet the same noise of a shared machine;
//! latencies are pooled over the rounds. Added latency is the Telegram
//! percentile minus the baseline's: the bridge's cost (long poll, ledger
//! commits, HTTP to the Bot API) over the turn itself, at the same load.
//! Idle RSS is read 1 s after start (the median round); peak RSS is VmRSS
//! sampled every 10 ms from the first paced message to the end of the
//! burst (the highest round).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use pincer_proto::v1::agent_client::AgentClient;
use pincer_proto::v1::chat_event::Event;
use pincer_proto::v1::{ChatEvent, ChatRequest};
use pincer_testkit::bot_api::{self, BotApi};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use tonic::transport::{Channel, Endpoint, Uri};

/// What every turn answers.
const REPLY: &str = "pong";

/// How long one message may wait for its answer before it counts as lost.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// How long a doubled answer is waited for after the last one.
const SETTLE: Duration = Duration::from_secs(3);

struct Args {
    pincerd: PathBuf,
    chats: usize,
    messages: usize,
    solo: usize,
    rounds: usize,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        pincerd: PathBuf::from("target/release/pincerd"),
        chats: 200,
        messages: 5,
        solo: 200,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{flag} takes a positive number, not `{value}`"))
        };
        match flag.as_str() {
            "--pincerd" => out.pincerd = PathBuf::from(&value),
            "--chats" => out.chats = number()?,
            "--messages" => out.messages = number()?,
            "--solo" => out.solo = number()?,
            "--rounds" => out.rounds = number()?,
            _ => {
                return Err(format!(
                    "unknown flag {flag}; usage: pincer-telegram-load [--pincerd PATH] [--chats 200] [--messages 5] [--solo 200] [--rounds 3]"
                ));
            }
        }
    }
    Ok(out)
}

/// A pincerd of this run, stopped on drop.
struct Daemon {
    child: Child,
    home: PathBuf,
}

impl Daemon {
    fn start(
        pincerd: &Path,
        home: &Path,
        config: &str,
        env: &[(&str, &str)],
    ) -> Result<Self, String> {
        std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
        std::fs::write(home.join("config.toml"), config).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(home.join("pincerd.out")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(pincerd);
        cmd.arg("--home")
            .arg(home)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        for var in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "PINCER_MODEL",
            "PINCER_HOME",
            "TELEGRAM_BOT_TOKEN",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(env.iter().copied());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", pincerd.display()))?;
        Ok(Self {
            child,
            home: home.to_path_buf(),
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn socket(&self) -> PathBuf {
        self.home.join("run").join("pincerd.sock")
    }

    /// Waits until the socket accepts connections.
    async fn ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if tokio::net::UnixStream::connect(self.socket()).await.is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "pincerd exited ({status}) before it answered: {}",
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!(
            "pincerd did not answer on its socket within 30 s: {}",
            self.log_tail()
        ))
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.home.join("pincerd.out")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// (VmRSS, VmHWM) in KiB.
    fn memory(&self) -> (u64, u64) {
        memory(self.pid())
    }

    fn stop(mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (VmRSS, VmHWM) of `pid` in KiB; zeros when it is gone.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Samples VmRSS every 10 ms until stopped; answers the highest seen.
struct Sampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(memory(pid).0, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Self { peak, stop, task }
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

/// Latencies of one case, in microseconds.
#[derive(Default, Clone)]
struct Times(Vec<u64>);

impl Times {
    fn push(&mut self, d: Duration) {
        self.0.push(d.as_micros() as u64);
    }

    fn extend(&mut self, other: Times) {
        self.0.extend(other.0);
    }

    /// The nearest-rank percentile `p` (0..=100), in ms.
    fn pct(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        v[rank.min(v.len()) - 1] as f64 / 1000.0
    }
}

/// How a chat spaces its messages: the wait before each one (after the
/// previous answer), uniform in `min..max`.
#[derive(Clone, Copy)]
struct Pace {
    min: Duration,
    max: Duration,
}

/// As people write: 0.5–1.5 s between an answer and the next message.
const PACED: Pace = Pace {
    min: Duration::from_millis(500),
    max: Duration::from_millis(1500),
};

/// The next message as soon as the answer is there.
const FLAT_OUT: Pace = Pace {
    min: Duration::ZERO,
    max: Duration::ZERO,
};

impl Pace {
    /// The next wait; `seed` is the chat's own generator (xorshift), so
    /// both pincerds get the same waits.
    fn wait(&self, seed: &mut u64) -> Duration {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let span = (self.max - self.min).as_micros() as u64;
        self.min + Duration::from_micros(if span == 0 { 0 } else { *seed % span })
    }
}

/// A chat's generator seed.
fn seed(chat: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15 ^ (chat as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// What one pincerd did under the same load.
#[derive(Default)]
struct Run {
    /// Idle RSS of each round.
    idle_kib: Vec<u64>,
    solo: Times,
    paced: Times,
    /// Telegram: from the message queued to `getUpdates` handing it out.
    paced_pickup: Times,
    flat_out: Times,
    flat_out_wall: Duration,
    peak_kib: u64,
    after_kib: u64,
    hwm_kib: u64,
    burst_wall: Option<Duration>,
}

impl Run {
    /// Adds another round: times pooled, memory at its highest.
    fn absorb(&mut self, other: Run) {
        self.idle_kib.extend(other.idle_kib);
        self.solo.extend(other.solo);
        self.paced.extend(other.paced);
        self.paced_pickup.extend(other.paced_pickup);
        self.flat_out.extend(other.flat_out);
        self.flat_out_wall += other.flat_out_wall;
        self.peak_kib = self.peak_kib.max(other.peak_kib);
        self.after_kib = self.after_kib.max(other.after_kib);
        self.hwm_kib = self.hwm_kib.max(other.hwm_kib);
        self.burst_wall = self.burst_wall.max(other.burst_wall);
    }

    /// The median idle RSS of the rounds.
    fn idle(&self) -> u64 {
        let mut v = self.idle_kib.clone();
        v.sort_unstable();
        v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
    }
}

fn base_config(llm: &ScriptedLlm) -> String {
    format!(
        "[providers.s]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n[models.default]\nprovider = \"s\"\nmodel = \"m\"\n[agents.main]\nmodel = \"default\"\n",
        llm.base_url()
    )
}

async fn grpc(socket: PathBuf) -> Result<AgentClient<Channel>, String> {
    let channel = Endpoint::from_static("http://pincerd.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await
        .map_err(|e| format!("cannot connect to pincerd: {e}"))?;
    Ok(AgentClient::new(channel))
}

/// One turn through the socket API; answers its time and final text.
async fn turn(
    client: &mut AgentClient<Channel>,
    session: &str,
    text: &str,
) -> Result<(Duration, String), String> {
    let start = Instant::now();
    let request = ChatRequest {
        agent: String::new(),
        session: session.to_string(),
        message: text.to_string(),
    };
    let mut stream = client
        .chat(request)
        .await
        .map_err(|s| format!("Chat refused: {s}"))?
        .into_inner();
    loop {
        match stream
            .message()
            .await
            .map_err(|s| format!("Chat failed: {s}"))?
        {
            Some(ChatEvent {
                event: Some(Event::TurnFinished(f)),
            }) => return Ok((start.elapsed(), f.text)),
            Some(ChatEvent {
                event: Some(Event::Error(e)),
            }) => return Err(format!("the turn failed: {} ({})", e.message, e.code)),
            Some(_) => {}
            None => return Err("the stream ended before the turn did".into()),
        }
    }
}

/// `args.chats` sessions at once, each `args.messages` turns spaced by
/// `pace`, each on its own connection; their times and the phase's length.
async fn sessions(
    args: &Args,
    daemon: &Daemon,
    name: &str,
    pace: Pace,
) -> Result<(Times, Duration), String> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..args.chats {
        let socket = daemon.socket();
        let messages = args.messages;
        let session = format!("{name}-{c}");
        tasks.push(tokio::spawn(async move {
            let mut client = grpc(socket).await?;
            let mut times = Times::default();
            let mut rng = seed(c);
            for m in 0..messages {
                tokio::time::sleep(pace.wait(&mut rng)).await;
                let (took, text) = turn(&mut client, &session, &format!("message {m}")).await?;
                if text != REPLY {
                    return Err(format!("session {session} got `{text}`"));
                }
                times.push(took);
            }
            Ok::<_, String>(times)
        }));
    }
    let mut times = Times::default();
    for task in tasks {
        times.extend(task.await.map_err(|e| e.to_string())??);
    }
    Ok((times, started.elapsed()))
}

async fn baseline(args: &Args, llm: &ScriptedLlm, work: &Path) -> Result<Run, String> {
    let mut daemon = Daemon::start(
        &args.pincerd,
        &work.join("baseline"),
        &base_config(llm),
        &[],
    )?;
    daemon.ready().await?;
    let mut run = Run::default();
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.idle_kib.push(daemon.memory().0);
    let mut client = grpc(daemon.socket()).await?;
    turn(&mut client, "warm", "warm up").await?;
    for i in 0..args.solo {
        let (took, _) = turn(&mut client, "solo", &format!("solo {i}")).await?;
        run.solo.push(took);
    }
    let sampler = Sampler::start(daemon.pid());
    (run.paced, _) = sessions(args, &daemon, "paced", PACED).await?;
    (run.flat_out, run.flat_out_wall) = sessions(args, &daemon, "flat", FLAT_OUT).await?;
    run.peak_kib = sampler.finish().await;
    tokio::time::sleep(SETTLE).await;
    (run.after_kib, run.hwm_kib) = daemon.memory();
    daemon.stop();
    Ok(run)
}

/// One message and its answer in a private chat: the answer's latency,
/// and how much of it the message waited to be handed out.
async fn exchange(
    api: &BotApi,
    answers: &mut tokio::sync::mpsc::UnboundedReceiver<bot_api::Sent>,
    user: i64,
    text: &str,
    problems: &Arc<std::sync::Mutex<Vec<String>>>,
) -> Option<(Duration, Duration)> {
    let (message_id, asked) = api.user_says(user, text);
    match tokio::time::timeout(ANSWER_LIMIT, answers.recv()).await {
        Ok(Some(sent)) => {
            if sent.text != REPLY {
                problem(
                    problems,
                    format!(
                        "chat {user}: message {message_id} was answered `{}`",
                        sent.text
                    ),
                );
            }
            let handed = api.handed_out(user, message_id).unwrap_or(sent.at);
            Some((
                sent.at.saturating_duration_since(asked),
                handed.saturating_duration_since(asked),
            ))
        }
        _ => {
            problem(
                problems,
                format!(
                    "chat {user}: message {message_id} got no answer within {} s",
                    ANSWER_LIMIT.as_secs()
                ),
            );
            None
        }
    }
}

fn problem(problems: &Arc<std::sync::Mutex<Vec<String>>>, what: String) {
    let mut list = problems.lock().unwrap_or_else(|e| e.into_inner());
    if list.len() < 50 {
        list.push(what);
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
    problems: &Arc<std::sync::Mutex<Vec<String>>>,
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
            let mut rng = seed(c);
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
    problems: &Arc<std::sync::Mutex<Vec<String>>>,
) -> Result<(Run, Checks), String> {
    let api = BotApi::start()
        .await
        .map_err(|e| format!("cannot start the fake Bot API: {e}"))?;
    let config = format!(
        "{}[channels.telegram]\napi_url = \"{}\"\ndm_policy = \"open\"\n",
        base_config(llm),
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
    let ledger = home.join("state").join("channels.db");
    let before = inbound_rows(&ledger)?;
    let burst_started = Instant::now();
    for c in 0..args.chats as i64 {
        for m in 0..args.messages {
            api.user_says(BURST_USERS + c, &format!("burst {m}"));
        }
    }
    let expected = before + args.chats * args.messages;
    loop {
        let (rows, open) = ledger_progress(&ledger)?;
        if rows >= expected && open == 0 {
            run.burst_wall = Some(burst_started.elapsed());
            break;
        }
        if burst_started.elapsed() > Duration::from_secs(60) {
            problem(
                problems,
                format!(
                    "burst: after 60 s the ledger holds {rows} of {expected} messages, {open} of them unanswered"
                ),
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.peak_kib = sampler.finish().await;
    tokio::time::sleep(SETTLE).await;
    (run.after_kib, run.hwm_kib) = daemon.memory();
    let checks = check(args, &api, &ledger, problems)?;
    daemon.stop();
    Ok((run, checks))
}

/// What the exactly-once checks counted.
#[derive(Default)]
struct Checks {
    /// Closed loop: messages with exactly one answer, of all sent.
    once: usize,
    sent: usize,
    /// Burst: messages the ledger settled, of all sent; replies sent.
    burst_settled: usize,
    burst_sent: usize,
    burst_replies: usize,
    /// Chunks sent without a confirmation in the ledger, or confirmed twice.
    unmatched: usize,
    send_calls: usize,
}

impl Checks {
    fn absorb(&mut self, other: Checks) {
        self.once += other.once;
        self.sent += other.sent;
        self.burst_settled += other.burst_settled;
        self.burst_sent += other.burst_sent;
        self.burst_replies += other.burst_replies;
        self.unmatched += other.unmatched;
        self.send_calls += other.send_calls;
    }
}

fn open_ledger(path: &Path) -> Result<rusqlite::Connection, String> {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("cannot open the ledger {}: {e}", path.display()))
}

fn inbound_rows(path: &Path) -> Result<usize, String> {
    Ok(ledger_progress(path)?.0)
}

/// (inbound rows, rows not answered yet).
fn ledger_progress(path: &Path) -> Result<(usize, usize), String> {
    let db = open_ledger(path)?;
    db.query_row(
        "SELECT count(*), count(*) - count(answered_at) FROM inbound",
        [],
        |r| Ok((r.get::<_, i64>(0)? as usize, r.get::<_, i64>(1)? as usize)),
    )
    .map_err(|e| format!("cannot read the ledger: {e}"))
}

fn check(
    args: &Args,
    api: &BotApi,
    ledger: &Path,
    problems: &Arc<std::sync::Mutex<Vec<String>>>,
) -> Result<Checks, String> {
    let sent = api.sent();
    let db = open_ledger(ledger)?;
    // message key ("chat:id") -> (answered, confirmed chunk ids)
    let mut inbound: HashMap<String, (bool, Vec<String>)> = HashMap::new();
    let mut rows = db
        .prepare(
            "SELECT message_id, answered_at IS NOT NULL FROM inbound WHERE channel = 'telegram'",
        )
        .map_err(|e| e.to_string())?;
    let list = rows
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)))
        .map_err(|e| e.to_string())?;
    for row in list {
        let (key, answered) = row.map_err(|e| e.to_string())?;
        inbound.insert(key, (answered, Vec::new()));
    }
    let mut chunks = db
        .prepare(
            "SELECT i.message_id, c.platform_id, c.confirmed_at IS NOT NULL FROM chunks c JOIN inbound i ON c.inbound = i.seq",
        )
        .map_err(|e| e.to_string())?;
    let list = chunks
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, bool>(2)?,
            ))
        })
        .map_err(|e| e.to_string())?;
    let mut confirmed: Vec<(i64, String)> = Vec::new();
    for row in list {
        let (key, platform_id, done) = row.map_err(|e| e.to_string())?;
        let chat: i64 = key
            .split(':')
            .next()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        match (done, platform_id) {
            (true, Some(id)) => {
                confirmed.push((chat, id.clone()));
                if let Some(entry) = inbound.get_mut(&key) {
                    entry.1.push(id);
                }
            }
            _ => problem(
                problems,
                format!("ledger: a chunk of the answer to {key} was never confirmed"),
            ),
        }
    }
    let mut out = Checks {
        send_calls: sent.len(),
        ..Checks::default()
    };
    for (key, (answered, _)) in &inbound {
        if !answered {
            problem(
                problems,
                format!("ledger: message {key} was never answered"),
            );
        }
    }
    // The server's messages and the ledger's confirmed chunks, one to one.
    let mut at_server: HashSet<(i64, String)> = sent
        .iter()
        .map(|s| (s.chat_id, s.message_id.to_string()))
        .collect();
    for c in &confirmed {
        if !at_server.remove(c) {
            out.unmatched += 1;
            problem(
                problems,
                format!(
                    "ledger: chunk {} of chat {} was confirmed but never reached the server (or was confirmed twice)",
                    c.1, c.0
                ),
            );
        }
    }
    out.unmatched += at_server.len();
    for (chat, id) in at_server.iter().take(10) {
        problem(
            problems,
            format!(
                "the server received message {id} in chat {chat}, which the ledger does not know"
            ),
        );
    }
    // Per chat: the ledger's messages, each with its confirmed chunks.
    let mut chats: HashMap<i64, Vec<(&String, bool, usize)>> = HashMap::new();
    for (key, (answered, ids)) in &inbound {
        let chat: i64 = key
            .split(':')
            .next()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        chats
            .entry(chat)
            .or_default()
            .push((key, *answered, ids.len()));
    }
    let mut per_chat: HashMap<i64, usize> = HashMap::new();
    for s in &sent {
        *per_chat.entry(s.chat_id).or_default() += 1;
    }
    let none = Vec::new();
    // Paced and flat out: as many answers in the chat as messages, and each
    // message settled by exactly one chunk of its own.
    let closed_loop = (0..args.chats as i64).flat_map(|c| [PACED_USERS + c, FLAT_OUT_USERS + c]);
    for user in closed_loop {
        out.sent += args.messages;
        let answers = per_chat.get(&user).copied().unwrap_or(0);
        let claimed = chats.get(&user).unwrap_or(&none);
        if answers != args.messages || claimed.len() != args.messages {
            problem(
                problems,
                format!(
                    "chat {user}: {} messages sent, {} claimed, {answers} answers",
                    args.messages,
                    claimed.len()
                ),
            );
            continue;
        }
        for (key, answered, chunks) in claimed {
            if *answered && *chunks == 1 {
                out.once += 1;
            } else {
                problem(
                    problems,
                    format!("ledger: message {key} has {chunks} confirmed answer chunks"),
                );
            }
        }
    }
    // Burst: every message claimed once and settled, none with more than
    // one answer; at least one reply per chat, at most one per message.
    for c in 0..args.chats as i64 {
        let user = BURST_USERS + c;
        out.burst_sent += args.messages;
        let replies = per_chat.get(&user).copied().unwrap_or(0);
        out.burst_replies += replies;
        let claimed = chats.get(&user).unwrap_or(&none);
        let answered_by_chunk = claimed.iter().filter(|(_, _, n)| *n == 1).count();
        if replies == 0 || replies != answered_by_chunk || claimed.len() != args.messages {
            problem(
                problems,
                format!(
                    "burst chat {user}: {} messages sent, {} claimed, {replies} replies for {answered_by_chunk} answered messages",
                    args.messages,
                    claimed.len()
                ),
            );
        }
        for (key, answered, chunks) in claimed {
            if *answered && *chunks <= 1 {
                out.burst_settled += 1;
            } else {
                problem(
                    problems,
                    format!("ledger: burst message {key} answered: {answered}, {chunks} chunks"),
                );
            }
        }
    }
    Ok(out)
}

fn mb(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 / 1024.0)
}

fn ms(v: f64) -> String {
    format!("{v:.1} ms")
}

fn row(what: &str, telegram: &str, baseline: &str, added: &str, budget: &str) {
    println!("{what:<58} {telegram:>14} {baseline:>14} {added:>10} {budget:>10}");
}

fn report(args: &Args, tg: &Run, base: &Run, checks: &Checks) {
    let (c, m) = (args.chats, args.messages);
    println!();
    println!(
        "{} rounds; latencies pooled over the rounds, RSS: idle the median round, peaks the highest",
        args.rounds
    );
    row("measure", "telegram", "baseline", "added", "budget");
    row(
        "idle RSS, after start (telegram: bridge polling)",
        &mb(tg.idle()),
        &mb(base.idle()),
        &mb(tg.idle().saturating_sub(base.idle())),
        "",
    );
    for (label, p) in [("p50", 50.0), ("p99", 99.0)] {
        row(
            &format!("1 chat, {} messages one after another, {label}", args.solo),
            &ms(tg.solo.pct(p)),
            &ms(base.solo.pct(p)),
            &ms(tg.solo.pct(p) - base.solo.pct(p)),
            "",
        );
    }
    for (label, p, budget) in [
        ("p50", 50.0, ""),
        ("p99", 99.0, "≤ 100 ms"),
        ("max", 100.0, ""),
    ] {
        row(
            &format!("{c} chats × {m} messages, paced, {label}"),
            &ms(tg.paced.pct(p)),
            &ms(base.paced.pct(p)),
            &ms(tg.paced.pct(p) - base.paced.pct(p)),
            budget,
        );
    }
    for (label, p) in [("p50", 50.0), ("p99", 99.0)] {
        row(
            &format!("  of which queued until getUpdates handed it out, {label}"),
            &ms(tg.paced_pickup.pct(p)),
            "",
            "",
            "",
        );
    }
    let rate = |r: &Run| {
        format!(
            "{:.0} msg/s",
            r.flat_out.0.len() as f64 / r.flat_out_wall.as_secs_f64()
        )
    };
    row(
        &format!("{c} chats × {m} messages, flat out: throughput"),
        &rate(tg),
        &rate(base),
        "",
        "",
    );
    for (label, p) in [("p50", 50.0), ("p99", 99.0)] {
        row(
            &format!("{c} chats × {m} messages, flat out: {label}"),
            &ms(tg.flat_out.pct(p)),
            &ms(base.flat_out.pct(p)),
            &ms(tg.flat_out.pct(p) - base.flat_out.pct(p)),
            "",
        );
    }
    row(
        "paced + flat out: answered once (1 answer, 1 chunk)",
        &format!("{}/{}", checks.once, checks.sent),
        "",
        "",
        "all",
    );
    row(
        &format!("burst: {c} chats × {m} at once, settled once"),
        &format!("{}/{}", checks.burst_settled, checks.burst_sent),
        "",
        "",
        "all",
    );
    row(
        "burst: replies (queued messages share a turn), time",
        &format!("{}", checks.burst_replies),
        &tg.burst_wall
            .map_or("—".into(), |d| ms(d.as_secs_f64() * 1000.0)),
        "",
        "",
    );
    row(
        "sendMessage calls not matched 1:1 by a ledger chunk",
        &format!("{}/{}", checks.unmatched, checks.send_calls),
        "",
        "",
        "0",
    );
    row(
        "peak RSS during the load (VmRSS every 10 ms)",
        &mb(tg.peak_kib),
        &mb(base.peak_kib),
        "",
        "≤ 48 MB",
    );
    row(
        "VmHWM (whole run)",
        &mb(tg.hwm_kib),
        &mb(base.hwm_kib),
        "",
        "",
    );
    row(
        &format!("RSS {} s after the load", SETTLE.as_secs()),
        &mb(tg.after_kib),
        &mb(base.after_kib),
        "",
        "",
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("pincer-telegram-load: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("pincer-telegram-load: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args) -> Result<bool, String> {
    let llm = ScriptedLlm::start()
        .await
        .map_err(|e| format!("cannot start the scripted model: {e}"))?;
    llm.set_journal(false);
    llm.script_cycle("", vec![Step::text(REPLY)]);
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let problems = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (mut base, mut tg, mut checks) = (Run::default(), Run::default(), Checks::default());
    // Rounds alternate the two pincerds, so both meet the same noise.
    for round in 1..=args.rounds {
        let dir = work.path().join(format!("round-{round}"));
        eprintln!(
            "round {round}/{}: baseline, {} sessions × {} turns through the socket API…",
            args.rounds, args.chats, args.messages
        );
        base.absorb(baseline(args, &llm, &dir).await?);
        eprintln!(
            "round {round}/{}: telegram, {} chats × {} messages through the bridge…",
            args.rounds, args.chats, args.messages
        );
        let (run, counted) = telegram(args, &llm, &dir, &problems).await?;
        tg.absorb(run);
        checks.absorb(counted);
    }
    report(args, &tg, &base, &checks);
    let problems = problems.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if problems.is_empty() {
        return Ok(true);
    }
    println!("\nNot every message was answered exactly once:");
    for p in &problems {
        println!("- {p}");
    }
    Ok(false)
}
