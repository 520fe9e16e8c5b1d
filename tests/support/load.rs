//! What the chat-bridge load benches share (`pincer-telegram-load`,
//! `pincer-discord-load`): the release pincerd they start and stop
//! ([`Daemon`]), its memory read from `/proc` ([`memory`], [`Sampler`]),
//! the turns of the baseline through pincerd's socket API ([`baseline`]),
//! the load's shape (chats, messages, [`PACED`] and [`FLAT_OUT`]), the
//! exactly-once checks against the channel ledger ([`check`]) and the
//! table ([`report`]). Each bench adds only its platform: its fake, how a
//! message is sent and its answer seen, and which chat a ledger row is.
//!
//! The load, the same for the baseline and the bridge: a warm-up message;
//! `solo` messages one after another in one chat; then `chats` chats at
//! once, each sending `messages` messages one at a time (the next once the
//! previous is answered), twice:
//! - **paced**: each chat waits 0.5–1.5 s (seeded, so both runs wait
//!   alike) before each message, as people type: about `chats` messages a
//!   second offered, below what the machine can answer, so the latency is
//!   each message's own cost plus the queueing 200 chats cause. The
//!   budget's *added latency* is read here;
//! - **flat out**: no wait: the machine's throughput with `chats` messages
//!   always in flight. Latency here is mostly queueing (`chats` ÷
//!   throughput), so it compares throughputs, not bridges.
//!
//! and, through the bridge only, a **burst**: `chats` more chats each send
//! `messages` at once; messages that queue behind a running turn are
//! answered together by one turn, so exactly once is read from the ledger.
//!
//! The baseline is a pincerd without channels; each chat is a session on
//! its own connection to the socket API (the `Chat` stream `pincer send`
//! uses, without starting a process). A turn's time: from sending the
//! request to its `TurnFinished`. Both pincerds run `rounds` times,
//! alternating (fresh homes and fresh fakes each round), so both meet the
//! same noise of a shared machine; latencies are pooled over the rounds.
//! Idle RSS is read 1 s after start (the median round); peak RSS is VmRSS
//! sampled every 10 ms from the first paced message to the end of the
//! burst (the highest round).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use pincer_proto::v1::agent_client::AgentClient;
use pincer_proto::v1::chat_event::Event;
use pincer_proto::v1::{ChatEvent, ChatRequest};
use tonic::transport::{Channel, Endpoint, Uri};

use crate::scripted::{ScriptedLlm, Step};

/// What every turn answers.
pub const REPLY: &str = "pong";

/// How long one message may wait for its answer before it counts as lost.
pub const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// How long a doubled answer is waited for after the last one.
pub const SETTLE: Duration = Duration::from_secs(3);

/// The command line every load bench takes.
pub struct Args {
    pub pincerd: PathBuf,
    pub chats: usize,
    pub messages: usize,
    pub solo: usize,
    pub rounds: usize,
    /// Where to write the figures as JSON (for `bench/run.py`).
    pub json: Option<PathBuf>,
}

impl Args {
    /// Parses `--pincerd PATH --chats N --messages N --solo N --rounds N`;
    /// `bin` names the program in the usage line.
    pub fn parse(bin: &str) -> Result<Self, String> {
        let mut out = Self {
            pincerd: PathBuf::from("target/release/pincerd"),
            chats: 200,
            messages: 5,
            solo: 200,
            rounds: 3,
            json: None,
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
                "--json" => out.json = Some(PathBuf::from(&value)),
                _ => {
                    return Err(format!(
                        "unknown flag {flag}; usage: {bin} [--pincerd PATH] [--chats 200] [--messages 5] [--solo 200] [--rounds 3] [--json PATH]"
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// Everything that went wrong, the first 50 kept.
#[derive(Clone, Default)]
pub struct Problems(Arc<Mutex<Vec<String>>>);

impl Problems {
    pub fn add(&self, what: String) {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() < 50 {
            list.push(what);
        }
    }

    pub fn list(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A pincerd of this run, stopped on drop.
pub struct Daemon {
    child: Child,
    home: PathBuf,
}

impl Daemon {
    /// Starts `pincerd --home home` with `config` as its config.toml and
    /// `env` added (the provider and bot-token variables of the caller's
    /// environment removed).
    pub fn start(
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
            "DISCORD_BOT_TOKEN",
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn socket(&self) -> PathBuf {
        self.home.join("run").join("pincerd.sock")
    }

    /// Waits until the socket accepts connections.
    pub async fn ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if tokio::net::UnixStream::connect(self.socket()).await.is_ok() {
                return Ok(());
            }
            self.alive()?;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!(
            "pincerd did not answer on its socket within 30 s: {}",
            self.log_tail()
        ))
    }

    /// An error with the log's tail when pincerd has exited.
    pub fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("pincerd exited ({status}): {}", self.log_tail())),
            _ => Ok(()),
        }
    }

    /// The last 20 lines pincerd wrote to stdout and stderr, else (they
    /// are empty unless it failed early) of its own log.
    pub fn log_tail(&self) -> String {
        let read = |path: PathBuf| std::fs::read_to_string(path).unwrap_or_default();
        let mut text = read(self.home.join("pincerd.out"));
        if text.trim().is_empty() {
            text = read(self.home.join("logs").join("pincerd.log"));
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// (VmRSS, VmHWM) in KiB.
    pub fn memory(&self) -> (u64, u64) {
        memory(self.pid())
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(mut self) {
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
pub fn memory(pid: u32) -> (u64, u64) {
    let f = status_fields(pid, &["VmRSS:", "VmHWM:"]);
    (f[0], f[1])
}

/// The numbers `/proc/<pid>/status` gives for `names` (`VmRSS:`,
/// `Threads:`…), in their order; 0 for a missing one or a gone process.
pub fn status_fields(pid: u32, names: &[&str]) -> Vec<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    names
        .iter()
        .map(|name| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        })
        .collect()
}

/// Samples VmRSS every 10 ms until stopped; answers the highest seen.
pub struct Sampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(pid: u32) -> Self {
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

    pub async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

/// Latencies of one case, in microseconds.
#[derive(Default, Clone)]
pub struct Times(Vec<u64>);

impl Times {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_micros() as u64);
    }

    pub fn extend(&mut self, other: Times) {
        self.0.extend(other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The nearest-rank percentile `p` (0..=100), in ms.
    pub fn pct(&self, p: f64) -> f64 {
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
pub struct Pace {
    min: Duration,
    max: Duration,
}

/// As people write: 0.5–1.5 s between an answer and the next message.
pub const PACED: Pace = Pace {
    min: Duration::from_millis(500),
    max: Duration::from_millis(1500),
};

/// The next message as soon as the answer is there.
pub const FLAT_OUT: Pace = Pace {
    min: Duration::ZERO,
    max: Duration::ZERO,
};

impl Pace {
    /// The next wait; `seed` is the chat's own generator (xorshift), so
    /// both pincerds get the same waits.
    pub fn wait(&self, seed: &mut u64) -> Duration {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let span = (self.max - self.min).as_micros() as u64;
        self.min + Duration::from_micros(if span == 0 { 0 } else { *seed % span })
    }
}

/// The generator seed of the chat numbered `chat` in its phase.
pub fn seed(chat: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15 ^ (chat as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// What one pincerd did under the same load.
#[derive(Default)]
pub struct Run {
    /// Idle RSS of each round.
    pub idle_kib: Vec<u64>,
    pub solo: Times,
    pub paced: Times,
    /// Through a bridge: the reader's share of each paced message's time
    /// (Telegram: until `getUpdates` handed it out); empty when the
    /// platform has no such instant.
    pub paced_pickup: Times,
    pub flat_out: Times,
    pub flat_out_wall: Duration,
    pub peak_kib: u64,
    pub after_kib: u64,
    pub hwm_kib: u64,
    pub burst_wall: Option<Duration>,
}

impl Run {
    /// Adds another round: times pooled, memory at its highest.
    pub fn absorb(&mut self, other: Run) {
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
    pub fn idle(&self) -> u64 {
        let mut v = self.idle_kib.clone();
        v.sort_unstable();
        v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
    }
}

/// The config both pincerds share: the scripted model as the only one.
pub fn base_config(llm: &ScriptedLlm) -> String {
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

/// A gRPC channel on a connection already made to pincerd's socket: the
/// start-up bench connects itself, to time the socket's first accept
/// apart from the first answer. The channel does not reconnect: a second
/// connection asked of it fails.
pub async fn channel_on(stream: tokio::net::UnixStream) -> Result<Channel, String> {
    let stream = Arc::new(Mutex::new(Some(stream)));
    Endpoint::from_static("http://pincerd.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let stream = stream.lock().unwrap_or_else(|e| e.into_inner()).take();
            async move {
                stream
                    .map(TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("the connection was used already"))
            }
        }))
        .await
        .map_err(|e| format!("cannot talk gRPC to pincerd: {e}"))
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

/// One round of the baseline: a pincerd without channels in `work/baseline`.
pub async fn baseline(args: &Args, llm: &ScriptedLlm, work: &Path) -> Result<Run, String> {
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

fn open_ledger(path: &Path) -> Result<rusqlite::Connection, String> {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("cannot open the ledger {}: {e}", path.display()))
}

/// The channel ledger of a pincerd home.
pub fn ledger_path(home: &Path) -> PathBuf {
    home.join("state").join("channels.db")
}

/// (inbound rows, rows not answered yet) in the ledger.
pub fn ledger_progress(path: &Path) -> Result<(usize, usize), String> {
    let db = open_ledger(path)?;
    db.query_row(
        "SELECT count(*), count(*) - count(answered_at) FROM inbound",
        [],
        |r| Ok((r.get::<_, i64>(0)? as usize, r.get::<_, i64>(1)? as usize)),
    )
    .map_err(|e| format!("cannot read the ledger: {e}"))
}

/// Waits until the ledger holds `expected` messages, all answered;
/// answers how long that took from `started`, or `None` (and a problem)
/// after 60 s.
pub async fn settle_burst(
    ledger: &Path,
    expected: usize,
    started: Instant,
    problems: &Problems,
) -> Result<Option<Duration>, String> {
    loop {
        let (rows, open) = ledger_progress(ledger)?;
        if rows >= expected && open == 0 {
            return Ok(Some(started.elapsed()));
        }
        if started.elapsed() > Duration::from_secs(60) {
            problems.add(format!(
                "burst: after 60 s the ledger holds {rows} of {expected} messages, {open} of them unanswered"
            ));
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the exactly-once checks counted.
#[derive(Default)]
pub struct Checks {
    /// Closed loop: messages with exactly one answer, of all sent.
    pub once: usize,
    pub sent: usize,
    /// Burst: messages the ledger settled, of all sent; replies sent.
    pub burst_settled: usize,
    pub burst_sent: usize,
    pub burst_replies: usize,
    /// Chunks sent without a confirmation in the ledger, or confirmed twice.
    pub unmatched: usize,
    pub send_calls: usize,
}

impl Checks {
    pub fn absorb(&mut self, other: Checks) {
        self.once += other.once;
        self.sent += other.sent;
        self.burst_settled += other.burst_settled;
        self.burst_sent += other.burst_sent;
        self.burst_replies += other.burst_replies;
        self.unmatched += other.unmatched;
        self.send_calls += other.send_calls;
    }
}

/// What a bridge's round is checked against.
pub struct Expect<'a> {
    /// The ledger's `channel` column for this bridge.
    pub channel: &'a str,
    /// The chat a ledger `message_id` belongs to.
    pub chat_of: &'a dyn Fn(&str) -> Option<String>,
    /// Every message the platform's server received from the bot: (chat,
    /// the platform's message id).
    pub posted: Vec<(String, String)>,
    /// The chats of the paced and flat-out phases (one answer per message).
    pub closed_loop: Vec<String>,
    /// The chats of the burst.
    pub burst: Vec<String>,
    /// Messages each chat sent.
    pub messages: usize,
}

/// The exactly-once checks after a round, read from the ledger and the
/// server's record: every inbound row answered; per closed-loop chat as
/// many answers as messages, each message with exactly one confirmed
/// chunk; per burst chat every message settled, none with two answers,
/// one reply per answered message; the confirmed chunks one-to-one with
/// the messages the server received.
pub fn check(ledger: &Path, expect: Expect<'_>, problems: &Problems) -> Result<Checks, String> {
    let db = open_ledger(ledger)?;
    // message id -> (answered, confirmed chunk ids)
    let mut inbound: HashMap<String, (bool, Vec<String>)> = HashMap::new();
    let mut rows = db
        .prepare("SELECT message_id, answered_at IS NOT NULL FROM inbound WHERE channel = ?1")
        .map_err(|e| e.to_string())?;
    let list = rows
        .query_map([expect.channel], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
        })
        .map_err(|e| e.to_string())?;
    for row in list {
        let (key, answered) = row.map_err(|e| e.to_string())?;
        inbound.insert(key, (answered, Vec::new()));
    }
    let mut chunks = db
        .prepare(
            "SELECT i.message_id, c.platform_id, c.confirmed_at IS NOT NULL FROM chunks c JOIN inbound i ON c.inbound = i.seq WHERE i.channel = ?1",
        )
        .map_err(|e| e.to_string())?;
    let list = chunks
        .query_map([expect.channel], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, bool>(2)?,
            ))
        })
        .map_err(|e| e.to_string())?;
    let chat_of = |key: &str| (expect.chat_of)(key).unwrap_or_default();
    let mut confirmed: Vec<(String, String)> = Vec::new();
    for row in list {
        let (key, platform_id, done) = row.map_err(|e| e.to_string())?;
        match (done, platform_id) {
            (true, Some(id)) => {
                confirmed.push((chat_of(&key), id.clone()));
                if let Some(entry) = inbound.get_mut(&key) {
                    entry.1.push(id);
                }
            }
            _ => problems.add(format!(
                "ledger: a chunk of the answer to {key} was never confirmed"
            )),
        }
    }
    let mut out = Checks {
        send_calls: expect.posted.len(),
        ..Checks::default()
    };
    for (key, (answered, _)) in &inbound {
        if !answered {
            problems.add(format!("ledger: message {key} was never answered"));
        }
    }
    // The server's messages and the ledger's confirmed chunks, one to one.
    let mut at_server: HashSet<(String, String)> = expect.posted.iter().cloned().collect();
    for c in &confirmed {
        if !at_server.remove(c) {
            out.unmatched += 1;
            problems.add(format!(
                "ledger: chunk {} of chat {} was confirmed but never reached the server (or was confirmed twice)",
                c.1, c.0
            ));
        }
    }
    out.unmatched += at_server.len();
    for (chat, id) in at_server.iter().take(10) {
        problems.add(format!(
            "the server received message {id} in chat {chat}, which the ledger does not know"
        ));
    }
    // Per chat: the ledger's messages, each with its confirmed chunks.
    let mut chats: HashMap<String, Vec<(&String, bool, usize)>> = HashMap::new();
    for (key, (answered, ids)) in &inbound {
        chats
            .entry(chat_of(key))
            .or_default()
            .push((key, *answered, ids.len()));
    }
    let mut per_chat: HashMap<&str, usize> = HashMap::new();
    for (chat, _) in &expect.posted {
        *per_chat.entry(chat.as_str()).or_default() += 1;
    }
    let none = Vec::new();
    let messages = expect.messages;
    // Paced and flat out: as many answers in the chat as messages, and each
    // message settled by exactly one chunk of its own.
    for chat in &expect.closed_loop {
        out.sent += messages;
        let answers = per_chat.get(chat.as_str()).copied().unwrap_or(0);
        let claimed = chats.get(chat).unwrap_or(&none);
        if answers != messages || claimed.len() != messages {
            problems.add(format!(
                "chat {chat}: {messages} messages sent, {} claimed, {answers} answers",
                claimed.len()
            ));
            continue;
        }
        for (key, answered, chunks) in claimed {
            if *answered && *chunks == 1 {
                out.once += 1;
            } else {
                problems.add(format!(
                    "ledger: message {key} has {chunks} confirmed answer chunks"
                ));
            }
        }
    }
    // Burst: every message claimed once and settled, none with more than
    // one answer; at least one reply per chat, at most one per message.
    for chat in &expect.burst {
        out.burst_sent += messages;
        let replies = per_chat.get(chat.as_str()).copied().unwrap_or(0);
        out.burst_replies += replies;
        let claimed = chats.get(chat).unwrap_or(&none);
        let answered_by_chunk = claimed.iter().filter(|(_, _, n)| *n == 1).count();
        if replies == 0 || replies != answered_by_chunk || claimed.len() != messages {
            problems.add(format!(
                "burst chat {chat}: {messages} messages sent, {} claimed, {replies} replies for {answered_by_chunk} answered messages",
                claimed.len()
            ));
        }
        for (key, answered, chunks) in claimed {
            if *answered && *chunks <= 1 {
                out.burst_settled += 1;
            } else {
                problems.add(format!(
                    "ledger: burst message {key} answered: {answered}, {chunks} chunks"
                ));
            }
        }
    }
    Ok(out)
}

pub fn mb(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 / 1024.0)
}

pub fn ms(v: f64) -> String {
    format!("{v:.1} ms")
}

/// One line of the table.
pub fn row(what: &str, bridge: &str, baseline: &str, added: &str, budget: &str) {
    println!("{what:<58} {bridge:>14} {baseline:>14} {added:>10} {budget:>10}");
}

/// How a platform names its parts in the table.
pub struct Labels<'a> {
    /// The bridge's column and its phrase ("telegram", "discord").
    pub bridge: &'a str,
    /// What the bridge does at idle ("bridge polling").
    pub idle: &'a str,
    /// A chat ("chats", "channels").
    pub chats: &'a str,
    /// The reader's share of a paced message ("getUpdates handed it
    /// out"); `None` when not measured.
    pub pickup: Option<&'a str>,
    /// The call that posts an answer ("sendMessage calls").
    pub posts: &'a str,
}

/// Prints the table of a bench: the bridge against the baseline.
pub fn report(args: &Args, labels: &Labels<'_>, bridge: &Run, base: &Run, checks: &Checks) {
    let (c, m, chats) = (args.chats, args.messages, labels.chats);
    println!();
    println!(
        "{} rounds; latencies pooled over the rounds, RSS: idle the median round, peaks the highest",
        args.rounds
    );
    row("measure", labels.bridge, "baseline", "added", "budget");
    row(
        &format!("idle RSS, after start ({}: {})", labels.bridge, labels.idle),
        &mb(bridge.idle()),
        &mb(base.idle()),
        &mb(bridge.idle().saturating_sub(base.idle())),
        "",
    );
    for (label, p) in [("p50", 50.0), ("p99", 99.0)] {
        row(
            &format!("1 chat, {} messages one after another, {label}", args.solo),
            &ms(bridge.solo.pct(p)),
            &ms(base.solo.pct(p)),
            &ms(bridge.solo.pct(p) - base.solo.pct(p)),
            "",
        );
    }
    for (label, p, budget) in [
        ("p50", 50.0, ""),
        ("p99", 99.0, "≤ 100 ms"),
        ("max", 100.0, ""),
    ] {
        row(
            &format!("{c} {chats} × {m} messages, paced, {label}"),
            &ms(bridge.paced.pct(p)),
            &ms(base.paced.pct(p)),
            &ms(bridge.paced.pct(p) - base.paced.pct(p)),
            budget,
        );
    }
    if let Some(pickup) = labels.pickup {
        for (label, p) in [("p50", 50.0), ("p99", 99.0)] {
            row(
                &format!("  of which queued until {pickup}, {label}"),
                &ms(bridge.paced_pickup.pct(p)),
                "",
                "",
                "",
            );
        }
    }
    let rate = |r: &Run| {
        format!(
            "{:.0} msg/s",
            r.flat_out.len() as f64 / r.flat_out_wall.as_secs_f64()
        )
    };
    row(
        &format!("{c} {chats} × {m} messages, flat out: throughput"),
        &rate(bridge),
        &rate(base),
        "",
        "",
    );
    for (label, p) in [("p50", 50.0), ("p99", 99.0)] {
        row(
            &format!("{c} {chats} × {m} messages, flat out: {label}"),
            &ms(bridge.flat_out.pct(p)),
            &ms(base.flat_out.pct(p)),
            &ms(bridge.flat_out.pct(p) - base.flat_out.pct(p)),
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
        &format!("burst: {c} {chats} × {m} at once, settled once"),
        &format!("{}/{}", checks.burst_settled, checks.burst_sent),
        "",
        "",
        "all",
    );
    row(
        "burst: replies (queued messages share a turn), time",
        &format!("{}", checks.burst_replies),
        &bridge
            .burst_wall
            .map_or("—".into(), |d| ms(d.as_secs_f64() * 1000.0)),
        "",
        "",
    );
    row(
        &format!("{} not matched 1:1 by a ledger chunk", labels.posts),
        &format!("{}/{}", checks.unmatched, checks.send_calls),
        "",
        "",
        "0",
    );
    row(
        "peak RSS during the load (VmRSS every 10 ms)",
        &mb(bridge.peak_kib),
        &mb(base.peak_kib),
        "",
        "≤ 48 MB",
    );
    row(
        "VmHWM (whole run)",
        &mb(bridge.hwm_kib),
        &mb(base.hwm_kib),
        "",
        "",
    );
    row(
        &format!("RSS {} s after the load", SETTLE.as_secs()),
        &mb(bridge.after_kib),
        &mb(base.after_kib),
        "",
        "",
    );
}

/// One round of a bridge through its platform's fake: the load through
/// the bridge and what the ledger says of it.
pub type BridgeRound<'a> = Pin<Box<dyn Future<Output = Result<(Run, Checks), String>> + 'a>>;

/// A load bench's `main`: parses the flags (`bin` names the program), runs
/// `--rounds` rounds that alternate the socket-API baseline and `bridge`,
/// so both meet the same noise, prints the table and answers the exit
/// code (1 when a message was not answered exactly once, 2 when the bench
/// could not run).
pub async fn bench(
    bin: &str,
    labels: &Labels<'_>,
    bridge: impl for<'a> Fn(&'a Args, &'a ScriptedLlm, &'a Path, &'a Problems) -> BridgeRound<'a>,
) -> ExitCode {
    let outcome = match Args::parse(bin) {
        Ok(args) => rounds(&args, labels, bridge).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{bin}: {e}");
            ExitCode::from(2)
        }
    }
}

async fn rounds(
    args: &Args,
    labels: &Labels<'_>,
    bridge: impl for<'a> Fn(&'a Args, &'a ScriptedLlm, &'a Path, &'a Problems) -> BridgeRound<'a>,
) -> Result<bool, String> {
    let llm = ScriptedLlm::start()
        .await
        .map_err(|e| format!("cannot start the scripted model: {e}"))?;
    llm.set_journal(false);
    llm.script_cycle("", vec![Step::text(REPLY)]);
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let problems = Problems::default();
    let (mut base, mut through, mut checks) = (Run::default(), Run::default(), Checks::default());
    for round in 1..=args.rounds {
        let dir = work.path().join(format!("round-{round}"));
        eprintln!(
            "round {round}/{}: baseline, {} sessions × {} turns through the socket API…",
            args.rounds, args.chats, args.messages
        );
        base.absorb(baseline(args, &llm, &dir).await?);
        eprintln!(
            "round {round}/{}: {}, {} {} × {} messages through the bridge…",
            args.rounds, labels.bridge, args.chats, labels.chats, args.messages
        );
        let (run, counted) = bridge(args, &llm, &dir, &problems).await?;
        through.absorb(run);
        checks.absorb(counted);
    }
    report(args, labels, &through, &base, &checks);
    if let Some(path) = &args.json {
        let json = figures(&through, &base, &checks, problems.list().len());
        std::fs::write(path, json.to_string())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(verdict(&problems))
}

/// The table's figures as JSON: latencies in ms, memory in MB, the bridge
/// beside the socket-API baseline of the same run.
pub fn figures(bridge: &Run, base: &Run, checks: &Checks, problems: usize) -> serde_json::Value {
    let side = |r: &Run| {
        serde_json::json!({
            "idle_mb": r.idle() as f64 / 1024.0,
            "solo_p50_ms": r.solo.pct(50.0),
            "paced_p50_ms": r.paced.pct(50.0),
            "paced_p99_ms": r.paced.pct(99.0),
            "paced_max_ms": r.paced.pct(100.0),
            "flat_out_per_s": r.flat_out.len() as f64 / r.flat_out_wall.as_secs_f64().max(1e-9),
            "peak_mb": r.peak_kib as f64 / 1024.0,
            "hwm_mb": r.hwm_kib as f64 / 1024.0,
            "after_mb": r.after_kib as f64 / 1024.0,
        })
    };
    serde_json::json!({
        "bridge": side(bridge),
        "baseline": side(base),
        "added_paced_p50_ms": bridge.paced.pct(50.0) - base.paced.pct(50.0),
        "added_paced_p99_ms": bridge.paced.pct(99.0) - base.paced.pct(99.0),
        "once": checks.once,
        "sent": checks.sent,
        "burst_settled": checks.burst_settled,
        "burst_sent": checks.burst_sent,
        "unmatched": checks.unmatched,
        "send_calls": checks.send_calls,
        "problems": problems,
    })
}

/// Prints the problems, if any; answers whether there were none.
pub fn verdict(problems: &Problems) -> bool {
    let problems = problems.list();
    if problems.is_empty() {
        return true;
    }
    println!("\nNot every message was answered exactly once:");
    for p in &problems {
        println!("- {p}");
    }
    false
}
