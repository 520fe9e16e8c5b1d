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
//!   same without the notes, to show what the index costs;
//! - with `--model`, **both bridges, local model installed**: the index's
//!   vectors labelled as the model's, then read after start, while a
//!   search has the model loaded, and a minute after its idle unload.
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
use pincer_testkit::notes::{self, write_notes};
use pincer_testkit::scripted::ScriptedLlm;

/// The environment variable that carries the embeddings endpoint's key.
const KEY_ENV: &str = "PINCER_BENCH_EMBEDDINGS_KEY";
/// Dimensions of the vectors (all-MiniLM-L6-v2's, the default model's).
const DIMENSIONS: usize = 384;

struct Args {
    pincerd: PathBuf,
    chunks: usize,
    rounds: usize,
    idle: Duration,
    /// The local embedding model's folder: adds the `both bridges, local
    /// model` configuration (its index embedded by that model).
    model: Option<PathBuf>,
    /// Where prepared homes are kept between runs (indexing 10k chunks
    /// with the local model takes minutes).
    prepared: Option<PathBuf>,
    /// Where to write the figures as JSON (for `bench/run.py`).
    json: Option<PathBuf>,
    /// Only these configurations (their JSON keys); all when empty.
    setups: Vec<String>,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        pincerd: PathBuf::from("target/release/pincerd"),
        chunks: 10_000,
        rounds: 3,
        idle: Duration::from_secs(5),
        model: None,
        prepared: None,
        json: None,
        setups: Vec::new(),
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
            "--model" => out.model = Some(PathBuf::from(&value)),
            "--prepared" => out.prepared = Some(PathBuf::from(&value)),
            "--json" => out.json = Some(PathBuf::from(&value)),
            "--setups" => out.setups = value.split(',').map(str::to_string).collect(),
            _ => {
                return Err(format!(
                    "unknown flag {flag}; usage: pincer-idle-rss [--pincerd PATH] [--chunks 10000] [--rounds 3] [--idle 5] [--model DIR] [--prepared DIR] [--json PATH] [--setups both,…]"
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
    /// Both bridges and the local model installed in the home as README's
    /// first command installs it, the index's vectors labelled as the
    /// model's (see [`label_as_model`]).
    BothModel,
}

/// How long the local model stays loaded without use in `BothModel`
/// (the watcher checks every 30 s).
const RELEASE_AFTER_S: u64 = 10;

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
            Setup::BothModel => {
                format!("telegram + discord, {chunks}-chunk index, local model installed")
            }
        }
    }

    /// The configuration's name in the JSON figures.
    fn key(self) -> &'static str {
        match self {
            Setup::NoBridges => "no_bridges",
            Setup::Telegram => "telegram",
            Setup::Both => "both",
            Setup::BothEmptyIndex => "both_empty_index",
            Setup::NoBridgesEmptyIndex => "no_bridges_empty_index",
            Setup::BothModel => "both_model",
        }
    }

    fn indexed(self) -> bool {
        !matches!(self, Setup::BothEmptyIndex | Setup::NoBridgesEmptyIndex)
    }

    fn telegram(self) -> bool {
        !matches!(self, Setup::NoBridges | Setup::NoBridgesEmptyIndex)
    }

    fn discord(self) -> bool {
        matches!(self, Setup::Both | Setup::BothEmptyIndex | Setup::BothModel)
    }

    fn config(self, peers: &Peers) -> String {
        let mut out = load::base_config(&peers.llm);
        if self == Setup::BothModel {
            out.push_str(&format!(
                "[memory]\nrelease_model_after_s = {RELEASE_AFTER_S}\n"
            ));
        } else {
            out.push_str(&format!(
            "[memory]\nembedder = \"openai\"\n[memory.openai]\nbase_url = \"{}\"\nmodel = \"bench-{DIMENSIONS}\"\napi_key_env = \"{KEY_ENV}\"\ndimensions = {DIMENSIONS}\n",
                peers.embeddings.base_url()
            ));
        }
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

/// The folder the local model is installed in, under the home's
/// `models/`; the local embedder names itself after it.
const MODEL_FOLDER: &str = "all-MiniLM-L6-v2";

/// Builds a home whose main agent has `chunks` chunks indexed with
/// vectors (none when `chunks` is 0), then stops its pincerd. With
/// `model`, the model is installed in it and the index labelled as its
/// (see [`label_as_model`]).
async fn prepare(
    args: &Args,
    peers: &Peers,
    home: &Path,
    chunks: usize,
    model: Option<&Path>,
) -> Result<(), String> {
    let done = home.join(".prepared");
    if done.exists() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(home);
    if chunks > 0 {
        write_notes(&home.join("workspace"), chunks)?;
    }
    let config = Setup::NoBridges.config(peers);
    let mut daemon = Daemon::start(&args.pincerd, home, &config, &env())?;
    daemon.ready().await?;
    if chunks == 0 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        daemon.stop();
        return std::fs::write(&done, "").map_err(|e| e.to_string());
    }
    let db = home.join("state").join("memory-main.db");
    let took = notes::wait_indexed(&mut daemon, &db, chunks, Duration::from_secs(1200)).await?;
    eprintln!(
        "indexed {chunks} chunks with vectors in {:.1} s",
        took.as_secs_f64()
    );
    daemon.stop();
    if let Some(folder) = model {
        let to = home.join("models").join(MODEL_FOLDER);
        copy_dir(folder, &to).map_err(|e| format!("copying the model: {e}"))?;
        label_as_model(&db)?;
    }
    std::fs::write(&done, "").map_err(|e| e.to_string())
}

/// Labels the index at `db`, embedded through the 384-d endpoint, as the
/// local model's (`meta.embedder` and the embedding cache's rows), so that
/// a pincerd with the model installed keeps its vectors as a user's would
/// after indexing. Embedding 10,000 chunks with the model itself takes
/// over 20 minutes per build on 2 cores; the vectors' values are not what
/// idle memory depends on, their number, size and layout are, and those
/// are the same (the model's 384 dimensions). The model is still loaded
/// and run for real by the search that [`model_phases`] makes.
fn label_as_model(db: &Path) -> Result<(), String> {
    let conn = rusqlite::Connection::open(db).map_err(|e| format!("{}: {e}", db.display()))?;
    let identity = format!("local/{MODEL_FOLDER}");
    let labelled = conn
        .execute(
            "UPDATE meta SET value = ?1 WHERE key = 'embedder'",
            [&identity],
        )
        .map_err(|e| format!("labelling {}: {e}", db.display()))?;
    if labelled != 1 {
        return Err(format!("{} names no embedder to relabel", db.display()));
    }
    conn.execute(
        "UPDATE embedding_cache SET provider = 'local', model = ?1",
        [MODEL_FOLDER],
    )
    .map_err(|e| format!("relabelling the embedding cache of {}: {e}", db.display()))?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Copies a prepared home (its config, workspace, state and model) to `to`.
fn copy_home(from: &Path, to: &Path) -> Result<(), String> {
    for part in ["workspace", "state", "models"] {
        let source = from.join(part);
        if source.exists() {
            copy_dir(&source, &to.join(part)).map_err(|e| format!("copying {part}: {e}"))?;
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
    let f = load::status_fields(pid, &["VmRSS:", "RssAnon:", "RssFile:", "VmHWM:"]);
    Reading {
        rss: f[0],
        anon: f[1],
        file: f[2],
        hwm: f[3],
    }
}

/// The files mapped into `pid`, by file and permissions, with their
/// resident KiB, most first (the executable's code `r-xp`, the memory
/// index read through mmap, libraries).
fn mapped_files(pid: u32) -> Vec<(String, u64)> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut by_file = std::collections::BTreeMap::<String, u64>::new();
    let mut file = None;
    for line in smaps.lines() {
        if let Some(kib) = line.strip_prefix("Rss:") {
            if let (Some(f), Some(kib)) = (&file, kib.split_whitespace().next()) {
                *by_file.entry(String::clone(f)).or_default() += kib.parse::<u64>().unwrap_or(0);
            }
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|a| a.contains('-') && !a.ends_with(':'))
        {
            // A mapping's header: address perms offset dev inode [path].
            let fields: Vec<_> = line.split_whitespace().collect();
            file = fields
                .get(5)
                .filter(|p| p.starts_with('/'))
                .map(|p| format!("{} ({})", p.rsplit('/').next().unwrap_or(p), fields[1]));
        }
    }
    let mut files: Vec<_> = by_file.into_iter().filter(|(_, kib)| *kib > 0).collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    files.truncate(5);
    files
}

/// One start of `setup` on `home`: its memory `idle` after the bridges
/// connected.
async fn measure(
    args: &Args,
    peers: &Peers,
    setup: Setup,
    home: &Path,
) -> Result<(Reading, Option<ModelReading>), String> {
    let polls = peers.telegram.calls("getUpdates");
    let sockets = peers.discord.connections().len();
    let reads = history_reads(&peers.discord);
    let mut daemon = Daemon::start(&args.pincerd, home, &setup.config(peers), &env())?;
    daemon.ready().await?;
    bridges_up(setup, peers, &mut daemon, polls, sockets, reads).await?;
    tokio::time::sleep(args.idle).await;
    daemon.alive()?;
    let memory = reading(daemon.pid());
    let model = match setup {
        Setup::BothModel => Some(model_phases(args, &mut daemon).await?),
        _ => None,
    };
    daemon.stop();
    Ok((memory, model))
}

/// What the `BothModel` start measured beyond its idle reading.
#[derive(Clone, Default)]
struct ModelReading {
    /// Right after a search loaded the model.
    loaded: Reading,
    /// A minute after the model's idle unload.
    after_unload: Reading,
    /// Then, the mapped files that hold most of its resident pages.
    files_after_unload: Vec<(String, u64)>,
    /// The model's load time, from pincerd's log.
    load_ms: f64,
}

/// How many lines of pincerd's log hold `needle`, and the `"ms"` field of the last.
fn log_count(home: &Path, needle: &str) -> (usize, f64) {
    // pincerd's own log (JSON lines; its stdout and stderr stay empty).
    let text = std::fs::read_to_string(home.join("logs").join("pincerd.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
    let ms = lines
        .last()
        .and_then(|l| l.split("\"ms\":").nth(1))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(f64::NAN);
    (lines.len(), ms)
}

/// `BothModel` after its idle reading: a search through `pincer` loads the
/// model; then the watcher unloads it after `RELEASE_AFTER_S` idle and
/// the memory is read a minute later.
async fn model_phases(args: &Args, daemon: &mut Daemon) -> Result<ModelReading, String> {
    let pincer = args.pincerd.with_file_name("pincer");
    let unloads = log_count(daemon.home(), "embedding model unloaded").0;
    let out = std::process::Command::new(&pincer)
        .arg("--home")
        .arg(daemon.home())
        .args(["memory", "search", "kalo mine"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", pincer.display()))?;
    if !out.status.success() {
        return Err(format!(
            "pincer memory search failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let loaded = reading(daemon.pid());
    let (_, load_ms) = log_count(daemon.home(), "embedding model loaded");
    let start = Instant::now();
    while log_count(daemon.home(), "embedding model unloaded").0 == unloads {
        daemon.alive()?;
        if start.elapsed() > Duration::from_secs(RELEASE_AFTER_S + 90) {
            return Err(format!("the model was not unloaded: {}", daemon.log_tail()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    daemon.alive()?;
    Ok(ModelReading {
        loaded,
        after_unload: reading(daemon.pid()),
        files_after_unload: mapped_files(daemon.pid()),
        load_ms,
    })
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
    let kept = args
        .prepared
        .clone()
        .unwrap_or_else(|| work.path().to_path_buf());
    let c = args.chunks;
    let (indexed, empty) = (kept.join(format!("indexed-{c}")), kept.join("empty"));
    eprintln!("indexing {c} chunks through the embeddings endpoint…");
    prepare(args, &peers, &indexed, c, None).await?;
    prepare(args, &peers, &empty, 0, None).await?;
    let mut setups: Vec<Setup> = Setup::ALL
        .into_iter()
        .filter(|s| args.setups.is_empty() || args.setups.iter().any(|k| k == s.key()))
        .collect();
    let with_model = kept.join(format!("model-labelled-{c}"));
    if let Some(model) = &args.model {
        eprintln!("indexing {c} chunks for the local model (its vectors labelled as the model's)…");
        prepare(args, &peers, &with_model, c, Some(model)).await?;
        setups.push(Setup::BothModel);
    }
    let mut homes = Vec::new();
    for setup in setups {
        let home = work.path().join(format!("setup-{}", homes.len()));
        let from = match setup {
            Setup::BothModel => &with_model,
            s if s.indexed() => &indexed,
            _ => &empty,
        };
        copy_home(from, &home)?;
        homes.push((setup, home));
    }
    let mut readings: Vec<Vec<Reading>> = vec![Vec::new(); homes.len()];
    let mut models = Vec::new();
    for round in 0..args.rounds {
        eprintln!("round {}/{}…", round + 1, args.rounds);
        // Each round starts with the next configuration.
        for k in 0..homes.len() {
            let i = (round + k) % homes.len();
            let (setup, home) = &homes[i];
            let (idle, model) = measure(args, &peers, *setup, home).await?;
            readings[i].push(idle);
            models.extend(model);
        }
    }
    if let Some(path) = &args.json {
        write_json(path, &homes, &readings, &models)?;
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
    let at = |s: Setup| homes.iter().position(|(x, _)| *x == s);
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
            if matches!(setup, Setup::Both | Setup::BothModel) {
                "≤ 20 MB"
            } else {
                ""
            }
        );
    }
    let delta = |a: Setup, b: Setup, what: &str| {
        let (Some(a), Some(b)) = (at(a), at(b)) else {
            return;
        };
        let (a, b) = (middle(a).0, middle(b).0);
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
    if !models.is_empty() {
        let median = |f: &dyn Fn(&ModelReading) -> f64| {
            let mut v: Vec<f64> = models.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[(v.len() - 1) / 2]
        };
        let kib = |f: fn(&ModelReading) -> Reading| median(&|m| f(m).rss as f64) as u64;
        println!(
            "{:<48} {:>9}   (loading it took {:.0} ms)",
            "local model: while a search has it loaded",
            mb(kib(|m| m.loaded)),
            median(&|m| m.load_ms)
        );
        println!(
            "{:<48} {:>9} {:>9} {:>9} {:>17} {:>9} {:>8}",
            "local model: a minute after its idle unload",
            mb(kib(|m| m.after_unload)),
            mb(median(&|m| m.after_unload.anon as f64) as u64),
            mb(median(&|m| m.after_unload.file as f64) as u64),
            "",
            "",
            "≤ 20 MB"
        );
        // The round whose RSS after the unload is the median shown above.
        let mut by_rss: Vec<&ModelReading> = models.iter().collect();
        by_rss.sort_by_key(|m| m.after_unload.rss);
        let files = by_rss[(by_rss.len() - 1) / 2]
            .files_after_unload
            .iter()
            .map(|(f, kib)| format!("{f} {}", mb(*kib)))
            .collect::<Vec<_>>()
            .join(", ");
        println!("  of its mapped files (the median round's): {files}");
    }
    Ok(())
}

/// The readings as JSON, MB: per configuration a list per field, one
/// value per round; the model's phases apart.
fn write_json(
    path: &Path,
    homes: &[(Setup, PathBuf)],
    readings: &[Vec<Reading>],
    models: &[ModelReading],
) -> Result<(), String> {
    let mb = |k: u64| k as f64 / 1024.0;
    let fields = |rs: &mut dyn Iterator<Item = Reading>| {
        let rs: Vec<Reading> = rs.collect();
        serde_json::json!({
            "rss_mb": rs.iter().map(|r| mb(r.rss)).collect::<Vec<_>>(),
            "anon_mb": rs.iter().map(|r| mb(r.anon)).collect::<Vec<_>>(),
            "file_mb": rs.iter().map(|r| mb(r.file)).collect::<Vec<_>>(),
        })
    };
    let mut out = serde_json::Map::new();
    for ((setup, _), rs) in homes.iter().zip(readings) {
        out.insert(setup.key().into(), fields(&mut rs.iter().copied()));
    }
    if !models.is_empty() {
        out.insert(
            "model_loaded".into(),
            fields(&mut models.iter().map(|m| m.loaded)),
        );
        out.insert(
            "model_after_unload".into(),
            fields(&mut models.iter().map(|m| m.after_unload)),
        );
        out.insert(
            "model_load_ms".into(),
            models.iter().map(|m| m.load_ms).collect::<Vec<_>>().into(),
        );
    }
    std::fs::write(path, serde_json::Value::Object(out).to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
