//! `pincer-idle-rss`: pincerd's idle RSS with both chat bridges connected
//! to their fakes and a 10,000-chunk memory index (SPEC §14: ≤ 20 MB),
//! and what each part adds, measured in the same run. Run through
//! `daemon/benches/idle_rss.sh`, which builds it and the release pincerd;
//! it prints one table.
//!
//! Peers, all in this process: the zero-latency scripted model (only
//! configured: nothing is asked at idle), the fake Bot API of the Telegram
//! load bench ([`BotApi`]: long polling, as the bridge polls Telegram), our
//! Discord fake ([`DiscordFake`]: the gateway with Discord's 41.25 s
//! heartbeat) and an OpenAI-compatible embeddings endpoint
//! ([`Embeddings`]: 384-d vectors without a model).
//!
//! First one pincerd indexes the notes of the main agent's workspace:
//! `memory/topic-NNN.md` files whose every section (a heading and about
//! 700 characters of generated prose) is one chunk, `--chunks` in all, each
//! with its vector (`state/memory-main.db`: FTS5 and sqlite-vec). Then each
//! configuration starts on a copy of that home, all with the same
//! `[memory]` settings:
//! - **no bridges**: the index alone;
//! - **telegram**: `[channels.telegram]` polling the fake Bot API;
//! - **both bridges**: and `[channels.discord]` with its gateway up and
//!   one guild channel allowlisted — the SPEC's row;
//! - **both bridges, empty index** and **no bridges, empty index**: the
//!   same without the notes, to show what the index costs.
//!
//! Each start: the socket answers, the bridges connect (Telegram: its
//! first `getUpdates`; Discord: an identified gateway session and its
//! catch-up read), then `--idle` seconds pass (the start-up reconcile of
//! the index is done by then) and VmRSS is read, with VmHWM (the peak of
//! the start). The configurations run `--rounds` times in alternating
//! order, so they meet the same noise; the table shows the median round
//! (and the spread).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use pincer_testkit::bot_api::{self, BotApi};
use pincer_testkit::discord_fake::{self, CHANNEL_ID, DiscordFake, OWNER_ID, Options};
use pincer_testkit::embeddings::Embeddings;
use pincer_testkit::load::{self, Daemon, mb};
use pincer_testkit::scripted::ScriptedLlm;

/// The environment variable that carries the embeddings endpoint's key.
const KEY_ENV: &str = "PINCER_BENCH_EMBEDDINGS_KEY";
/// Dimensions of the vectors (all-MiniLM-L6-v2's, the default model's).
const DIMENSIONS: usize = 384;
/// Sections (chunks) per notes file.
const SECTIONS_PER_FILE: usize = 100;

struct Args {
    pincerd: PathBuf,
    chunks: usize,
    rounds: usize,
    idle: Duration,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        pincerd: PathBuf::from("target/release/pincerd"),
        chunks: 10_000,
        rounds: 3,
        idle: Duration::from_secs(5),
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
            "--chunks" => out.chunks = number()?,
            "--rounds" => out.rounds = number()?,
            "--idle" => out.idle = Duration::from_secs(number()? as u64),
            _ => {
                return Err(format!(
                    "unknown flag {flag}; usage: pincer-idle-rss [--pincerd PATH] [--chunks 10000] [--rounds 3] [--idle 5]"
                ));
            }
        }
    }
    Ok(out)
}

/// The peers every pincerd of the run talks to.
struct Peers {
    llm: ScriptedLlm,
    telegram: BotApi,
    discord: DiscordFake,
    embeddings: Embeddings,
}

/// What a configuration turns on.
#[derive(Clone, Copy, PartialEq)]
enum Setup {
    NoBridges,
    Telegram,
    Both,
    BothEmptyIndex,
    NoBridgesEmptyIndex,
}

impl Setup {
    const ALL: [Setup; 5] = [
        Setup::NoBridges,
        Setup::Telegram,
        Setup::Both,
        Setup::BothEmptyIndex,
        Setup::NoBridgesEmptyIndex,
    ];

    fn label(self, chunks: usize) -> String {
        match self {
            Setup::NoBridges => format!("no bridges, {chunks}-chunk index"),
            Setup::Telegram => format!("telegram connected, {chunks}-chunk index"),
            Setup::Both => format!("telegram + discord connected, {chunks}-chunk index"),
            Setup::BothEmptyIndex => "telegram + discord connected, empty index".to_string(),
            Setup::NoBridgesEmptyIndex => "no bridges, empty index".to_string(),
        }
    }

    fn indexed(self) -> bool {
        !matches!(self, Setup::BothEmptyIndex | Setup::NoBridgesEmptyIndex)
    }

    fn telegram(self) -> bool {
        !matches!(self, Setup::NoBridges | Setup::NoBridgesEmptyIndex)
    }

    fn discord(self) -> bool {
        matches!(self, Setup::Both | Setup::BothEmptyIndex)
    }

    fn config(self, peers: &Peers) -> String {
        let mut out = load::base_config(&peers.llm);
        out.push_str(&format!(
            "[memory]\nembedder = \"openai\"\n[memory.openai]\nbase_url = \"{}\"\nmodel = \"bench-{DIMENSIONS}\"\napi_key_env = \"{KEY_ENV}\"\ndimensions = {DIMENSIONS}\n",
            peers.embeddings.base_url()
        ));
        if self.telegram() {
            out.push_str(&format!(
                "[channels.telegram]\napi_url = \"{}\"\ndm_policy = \"open\"\n",
                peers.telegram.api_url()
            ));
        }
        if self.discord() {
            out.push_str(&format!(
                "[channels.discord]\napi_url = \"{}\"\nowner = \"{OWNER_ID}\"\n[channels.discord.groups.\"{CHANNEL_ID}\"]\n",
                peers.discord.origin()
            ));
        }
        out
    }
}

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        (KEY_ENV, "bench"),
        ("TELEGRAM_BOT_TOKEN", bot_api::TOKEN),
        ("DISCORD_BOT_TOKEN", discord_fake::TOKEN),
    ]
}

/// Prose for the notes: words from a fixed syllable set, seeded.
struct Prose(u64);

impl Prose {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn word(&mut self) -> String {
        const SYLLABLES: [&str; 24] = [
            "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "ba", "di", "fo", "gu", "ha",
            "je", "pa", "qui", "ro", "su", "te", "ul", "ver", "wo", "yan",
        ];
        let n = 1 + self.next() % 3;
        (0..n)
            .map(|_| SYLLABLES[(self.next() % SYLLABLES.len() as u64) as usize])
            .collect()
    }

    /// About `chars` characters of sentences.
    fn paragraph(&mut self, chars: usize) -> String {
        let mut out = String::new();
        while out.len() < chars {
            let words = 6 + self.next() % 10;
            let sentence: Vec<String> = (0..words).map(|_| self.word()).collect();
            let mut sentence = sentence.join(" ");
            if let Some(first) = sentence.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            out.push_str(&sentence);
            out.push_str(". ");
        }
        out.trim_end().to_string()
    }
}

/// Writes `chunks` sections into `workspace/memory/topic-NNN.md`.
fn write_notes(workspace: &Path, chunks: usize) -> Result<(), String> {
    let dir = workspace.join("memory");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut prose = Prose(0x2545_F491_4F6C_DD1D);
    let files = chunks.div_ceil(SECTIONS_PER_FILE);
    for f in 0..files {
        let mut text = format!("# Topic {f}\n\n");
        let sections = SECTIONS_PER_FILE.min(chunks - f * SECTIONS_PER_FILE);
        for s in 0..sections {
            // The file's first section is its title's: one chunk.
            if s > 0 {
                text.push_str(&format!("## Note {f}.{s}\n\n"));
            }
            text.push_str(&prose.paragraph(700));
            text.push_str("\n\n");
        }
        let path = dir.join(format!("topic-{f:03}.md"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// (chunks, chunks with a vector) in an agent's memory index.
fn index_size(db: &Path) -> Option<(u64, u64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT count(*), coalesce(sum(embedded != 0), 0) FROM chunks",
        [],
        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
    )
    .ok()
}

/// Builds a home whose main agent has `chunks` chunks indexed with
/// vectors (none when `chunks` is 0), then stops its pincerd.
async fn prepare(args: &Args, peers: &Peers, home: &Path, chunks: usize) -> Result<(), String> {
    if chunks > 0 {
        write_notes(&home.join("workspace"), chunks)?;
    }
    let config = Setup::NoBridges.config(peers);
    let mut daemon = Daemon::start(&args.pincerd, home, &config, &env())?;
    daemon.ready().await?;
    if chunks == 0 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        daemon.stop();
        return Ok(());
    }
    let db = home.join("state").join("memory-main.db");
    let start = Instant::now();
    let mut last = (0, 0);
    loop {
        if let Some(size) = index_size(&db) {
            last = size;
            if size.0 >= chunks as u64 && size.1 == size.0 {
                break;
            }
        }
        daemon.alive()?;
        if start.elapsed() > Duration::from_secs(600) {
            return Err(format!(
                "the index holds {} chunks ({} with vectors) of {chunks} after 10 minutes: {}",
                last.0,
                last.1,
                daemon.log_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "indexed {} chunks with vectors in {:.1} s",
        last.0,
        start.elapsed().as_secs_f64()
    );
    daemon.stop();
    Ok(())
}

/// Copies a prepared home (its config, workspace and state) to `to`.
fn copy_home(from: &Path, to: &Path) -> Result<(), String> {
    fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                copy(&entry.path(), &target)?;
            } else if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), target)?;
            }
        }
        Ok(())
    }
    for part in ["workspace", "state"] {
        let source = from.join(part);
        if source.exists() {
            copy(&source, &to.join(part)).map_err(|e| format!("copying {part}: {e}"))?;
        }
    }
    Ok(())
}

/// Waits until the configured bridges are connected: Telegram has polled
/// since `polls`, Discord has a gateway session opened after `sockets`
/// connections and its catch-up has read the allowlisted channel.
async fn bridges_up(
    setup: Setup,
    peers: &Peers,
    daemon: &mut Daemon,
    polls: u64,
    sockets: usize,
    reads: usize,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let telegram = !setup.telegram() || peers.telegram.calls("getUpdates") > polls;
        let discord =
            !setup.discord()
                || (peers.discord.connections().iter().any(|c| {
                    c.number > sockets && c.closed_at.is_none() && c.session_id.is_some()
                }) && history_reads(&peers.discord) > reads);
        if telegram && discord {
            return Ok(());
        }
        daemon.alive()?;
        if start.elapsed() > Duration::from_secs(30) {
            return Err(format!(
                "the bridges did not connect within 30 s (telegram: {telegram}, discord: {discord}): {}",
                daemon.log_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn history_reads(dc: &DiscordFake) -> usize {
    dc.calls_to("GET", "/api/v10/channels/*/messages").len()
}

/// What one start measured, in KiB.
#[derive(Clone, Copy, Default)]
struct Reading {
    rss: u64,
    /// Of `rss`: anonymous memory (heap, stacks) and mapped files (the
    /// binary's pages that were touched, shared libraries).
    anon: u64,
    file: u64,
    /// VmHWM: the peak of the start.
    hwm: u64,
}

fn reading(pid: u32) -> Reading {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Reading {
        rss: field("VmRSS:"),
        anon: field("RssAnon:"),
        file: field("RssFile:"),
        hwm: field("VmHWM:"),
    }
}

/// One start of `setup` on `home`: its memory `idle` after the bridges
/// connected.
async fn measure(args: &Args, peers: &Peers, setup: Setup, home: &Path) -> Result<Reading, String> {
    let polls = peers.telegram.calls("getUpdates");
    let sockets = peers.discord.connections().len();
    let reads = history_reads(&peers.discord);
    let mut daemon = Daemon::start(&args.pincerd, home, &setup.config(peers), &env())?;
    daemon.ready().await?;
    bridges_up(setup, peers, &mut daemon, polls, sockets, reads).await?;
    tokio::time::sleep(args.idle).await;
    daemon.alive()?;
    let memory = reading(daemon.pid());
    daemon.stop();
    Ok(memory)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("pincer-idle-rss: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pincer-idle-rss: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let peers = Peers {
        llm: ScriptedLlm::start()
            .await
            .map_err(|e| format!("cannot start the scripted model: {e}"))?,
        telegram: BotApi::start()
            .await
            .map_err(|e| format!("cannot start the fake Bot API: {e}"))?,
        discord: DiscordFake::start_with(Options {
            heartbeat_interval: Duration::from_millis(41_250),
            ..Options::default()
        })
        .await,
        embeddings: Embeddings::start(DIMENSIONS)
            .await
            .map_err(|e| format!("cannot start the embeddings endpoint: {e}"))?,
    };
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (indexed, empty) = (work.path().join("indexed"), work.path().join("empty"));
    eprintln!(
        "indexing {} chunks through the embeddings endpoint…",
        args.chunks
    );
    prepare(args, &peers, &indexed, args.chunks).await?;
    prepare(args, &peers, &empty, 0).await?;
    let mut homes = Vec::new();
    for setup in Setup::ALL {
        let home = work.path().join(format!("setup-{}", homes.len()));
        let from = if setup.indexed() { &indexed } else { &empty };
        copy_home(from, &home)?;
        homes.push((setup, home));
    }
    let mut readings: Vec<Vec<Reading>> = vec![Vec::new(); homes.len()];
    for round in 0..args.rounds {
        eprintln!("round {}/{}…", round + 1, args.rounds);
        // Each round starts with the next configuration.
        for k in 0..homes.len() {
            let i = (round + k) % homes.len();
            let (setup, home) = &homes[i];
            readings[i].push(measure(args, &peers, *setup, home).await?);
        }
    }
    // The median round of a configuration by RSS (its parts from the same
    // round), and the lowest and highest RSS.
    let middle = |i: usize| {
        let mut v = readings[i].clone();
        v.sort_unstable_by_key(|r| r.rss);
        let low = v.first().map_or(0, |r| r.rss);
        let high = v.last().map_or(0, |r| r.rss);
        (
            v.get(v.len().saturating_sub(1) / 2)
                .copied()
                .unwrap_or_default(),
            low,
            high,
        )
    };
    let at = |s: Setup| Setup::ALL.iter().position(|x| *x == s).unwrap_or(0);
    println!();
    println!(
        "{} rounds, configurations in alternating order; VmRSS {} s after the bridges connected, the median round (of it: anonymous, mapped files) and the lowest–highest",
        args.rounds,
        args.idle.as_secs()
    );
    println!(
        "{:<48} {:>9} {:>9} {:>9} {:>17} {:>9} {:>8}",
        "configuration", "idle RSS", "anon", "files", "spread", "VmHWM", "budget"
    );
    for (i, (setup, _)) in homes.iter().enumerate() {
        let (r, low, high) = middle(i);
        println!(
            "{:<48} {:>9} {:>9} {:>9} {:>17} {:>9} {:>8}",
            setup.label(args.chunks),
            mb(r.rss),
            mb(r.anon),
            mb(r.file),
            format!("{}–{}", mb(low), mb(high)),
            mb(r.hwm),
            if *setup == Setup::Both {
                "≤ 20 MB"
            } else {
                ""
            }
        );
    }
    let delta = |a: Setup, b: Setup, what: &str| {
        let (a, b) = (middle(at(a)).0, middle(at(b)).0);
        let d = |x: u64, y: u64| format!("{:+.1} MB", (x as f64 - y as f64) / 1024.0);
        println!(
            "{:<48} {:>9} {:>9} {:>9}",
            what,
            d(a.rss, b.rss),
            d(a.anon, b.anon),
            d(a.file, b.file)
        );
    };
    delta(
        Setup::Telegram,
        Setup::NoBridges,
        "what the Telegram bridge adds",
    );
    delta(
        Setup::Both,
        Setup::Telegram,
        "what the Discord bridge adds (same binary)",
    );
    delta(
        Setup::Both,
        Setup::BothEmptyIndex,
        &format!("what the {}-chunk index adds", args.chunks),
    );
    Ok(())
}
