//! `pincer-startup`: pincerd's start to ready with a 10,000-chunk memory
//! index present (SPEC §14: start → the socket answers `status`, ≤ 20 ms),
//! and what the same starts show beside it: when the socket first accepts,
//! the idle RSS, and a `pincer send` round trip (≤ 10 ms). Run by
//! `daemon/benches/startup.sh` and by `bench/run.py`.
//!
//! One home is prepared once, outside the timing: the main agent's
//! workspace holds `--chunks` chunks of notes ([`notes`]), indexed with
//! their 384-d vectors through the model-free embeddings endpoint
//! ([`Embeddings`]); the scripted model ([`ScriptedLlm`], every turn
//! answers `pong`) is its provider. Both peers live in this process.
//!
//! Each run then starts pincerd on that home and, from the instant before
//! the spawn, tries to connect to its socket every ~0.2 ms. The first
//! connection that succeeds is the **accept** time (the socket listens);
//! on that connection an in-process gRPC client (tonic over the Unix
//! socket, [`load::channel_on`]) asks `Daemon.Status`, which pincerd
//! answers once it serves: the **ready** time. No `pincer` process is
//! started to poll, so the figure is pincerd's own, not a CLI's start.
//! Then, 1.5 s after ready, VmRSS; then, with `--pincer`, a warm-up `pincer
//! send` and a timed one in a new session (the whole CLI process).
//!
//! Prints a table (median, lowest–highest), and with `--json` one JSON
//! object, `{"ready_ms": […], "accept_ms": […], "rss_mb": […],
//! "send_ms": […]}`, one value per run: on stdout (the table then goes to
//! stderr), or into the file named after `--json`.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use pincer_proto::v1::StatusRequest;
use pincer_proto::v1::daemon_client::DaemonClient;
use pincer_testkit::embeddings::Embeddings;
use pincer_testkit::load::{self, Daemon};
use pincer_testkit::notes;
use pincer_testkit::scripted::{ScriptedLlm, Step};

/// The environment variable that carries the embeddings endpoint's key.
const KEY_ENV: &str = "PINCER_BENCH_EMBEDDINGS_KEY";
/// Dimensions of the vectors (all-MiniLM-L6-v2's, the default model's).
const DIMENSIONS: usize = 384;
/// Between two connection attempts.
const POLL: Duration = Duration::from_micros(200);
/// A start slower than this is a failure, not a figure.
const START_LIMIT: Duration = Duration::from_secs(30);
/// When the idle RSS is read, after ready.
const SETTLE: Duration = Duration::from_millis(1500);

const USAGE: &str = "usage: pincer-startup --pincerd PATH [--pincer PATH] [--runs 10] [--chunks 10000] [--prepared DIR] [--json [PATH]]";

/// Where the JSON figures go.
enum JsonOut {
    Stdout,
    File(PathBuf),
}

struct Args {
    pincerd: PathBuf,
    pincer: Option<PathBuf>,
    runs: usize,
    chunks: usize,
    /// A home kept between invocations (its index is built once).
    prepared: Option<PathBuf>,
    json: Option<JsonOut>,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        pincerd: PathBuf::from("target/release/pincerd"),
        pincer: None,
        runs: 10,
        chunks: 10_000,
        prepared: None,
        json: None,
    };
    let mut it = std::env::args().skip(1).peekable();
    while let Some(flag) = it.next() {
        if flag == "--json" {
            // A path may follow; another flag or nothing means stdout.
            out.json = Some(match it.next_if(|v| !v.starts_with("--")) {
                Some(path) if path != "-" => JsonOut::File(PathBuf::from(path)),
                _ => JsonOut::Stdout,
            });
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        let number = || {
            value
                .parse::<usize>()
                .ok()
                .ok_or_else(|| format!("{flag} takes a number, not `{value}`"))
        };
        match flag.as_str() {
            "--pincerd" => out.pincerd = PathBuf::from(&value),
            "--pincer" => out.pincer = Some(PathBuf::from(&value)),
            "--runs" => out.runs = number()?.max(1),
            "--chunks" => out.chunks = number()?,
            "--prepared" => out.prepared = Some(PathBuf::from(&value)),
            _ => return Err(format!("unknown flag {flag}; {USAGE}")),
        }
    }
    Ok(out)
}

/// The peers every pincerd of the run talks to.
struct Peers {
    llm: ScriptedLlm,
    embeddings: Embeddings,
}

impl Peers {
    fn config(&self) -> String {
        let mut out = load::base_config(&self.llm);
        out.push_str(&format!(
            "[memory]\nembedder = \"openai\"\n[memory.openai]\nbase_url = \"{}\"\nmodel = \"bench-{DIMENSIONS}\"\napi_key_env = \"{KEY_ENV}\"\ndimensions = {DIMENSIONS}\n",
            self.embeddings.base_url()
        ));
        out
    }
}

const ENV: [(&str, &str); 1] = [(KEY_ENV, "bench")];

/// Builds the home whose main agent has `chunks` chunks indexed with
/// vectors, unless an earlier invocation left it ready.
async fn prepare(args: &Args, peers: &Peers, home: &Path) -> Result<(), String> {
    let done = home.join(".prepared");
    if std::fs::read_to_string(&done).ok().as_deref() == Some(&args.chunks.to_string()) {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(home);
    notes::write_notes(&home.join("workspace"), args.chunks)?;
    eprintln!(
        "indexing {} chunks through the embeddings endpoint…",
        args.chunks
    );
    let mut daemon = Daemon::start(&args.pincerd, home, &peers.config(), &ENV)?;
    daemon.ready().await?;
    let db = home.join("state").join("memory-main.db");
    let took = notes::wait_indexed(&mut daemon, &db, args.chunks, Duration::from_secs(600)).await?;
    eprintln!("indexed in {:.1} s", took.as_secs_f64());
    daemon.stop();
    std::fs::write(&done, args.chunks.to_string()).map_err(|e| e.to_string())
}

/// What one start measured.
struct Reading {
    accept: Duration,
    ready: Duration,
    rss_kib: u64,
    send: Option<Duration>,
}

/// Connects every [`POLL`] from `spawned` until a connection is taken,
/// then asks Status on it; a connection that does not get an answer (the
/// socket of a pincerd that went away) is dropped and the polling goes on.
/// Answers (accept, ready), both from `spawned`.
async fn until_ready(
    daemon: &mut Daemon,
    spawned: Instant,
) -> Result<(Duration, Duration), String> {
    let socket = daemon.socket();
    let mut accept = None;
    loop {
        if let Ok(stream) = std::os::unix::net::UnixStream::connect(&socket) {
            let at = spawned.elapsed();
            let accepted = *accept.get_or_insert(at);
            if status(stream).await.is_ok() {
                return Ok((accepted, spawned.elapsed()));
            }
        }
        daemon.alive()?;
        if spawned.elapsed() > START_LIMIT {
            return Err(format!(
                "pincerd did not answer Status within {} s: {}",
                START_LIMIT.as_secs(),
                daemon.log_tail()
            ));
        }
        // A thread sleep, not tokio's timer (whose resolution is 1 ms): it
        // holds one worker, the other serves the peers.
        std::thread::sleep(POLL);
    }
}

async fn status(stream: std::os::unix::net::UnixStream) -> Result<(), String> {
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let stream = tokio::net::UnixStream::from_std(stream).map_err(|e| e.to_string())?;
    let channel = load::channel_on(stream).await?;
    DaemonClient::new(channel)
        .status(StatusRequest {})
        .await
        .map(drop)
        .map_err(|s| format!("Status failed: {s}"))
}

/// `pincer send` (the whole process) into `session`.
async fn send(pincer: &Path, home: &Path, session: &str) -> Result<Duration, String> {
    let start = Instant::now();
    let out = tokio::process::Command::new(pincer)
        .arg("--home")
        .arg(home)
        .args(["send", "--session", session, "ping"])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", pincer.display()))?;
    let took = start.elapsed();
    if !out.status.success() {
        return Err(format!(
            "pincer send failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(took)
}

async fn measure(args: &Args, peers: &Peers, home: &Path, run: usize) -> Result<Reading, String> {
    let config = peers.config();
    let spawned = Instant::now();
    let mut daemon = Daemon::start(&args.pincerd, home, &config, &ENV)?;
    let (accept, ready) = until_ready(&mut daemon, spawned).await?;
    tokio::time::sleep(SETTLE).await;
    daemon.alive()?;
    let rss_kib = load::memory(daemon.pid()).0;
    let send = match &args.pincer {
        Some(pincer) => {
            send(pincer, home, &format!("warm-{run}")).await?;
            Some(send(pincer, home, &format!("timed-{run}")).await?)
        }
        None => None,
    };
    daemon.stop();
    Ok(Reading {
        accept,
        ready,
        rss_kib,
        send,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("pincer-startup: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pincer-startup: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let llm = ScriptedLlm::start()
        .await
        .map_err(|e| format!("cannot start the scripted model: {e}"))?;
    llm.set_journal(false);
    llm.script_cycle("", vec![Step::text(load::REPLY)]);
    let peers = Peers {
        llm,
        embeddings: Embeddings::start(DIMENSIONS)
            .await
            .map_err(|e| format!("cannot start the embeddings endpoint: {e}"))?,
    };
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let home = args
        .prepared
        .clone()
        .unwrap_or_else(|| work.path().join("home"));
    prepare(args, &peers, &home).await?;
    let mut readings = Vec::new();
    for run in 0..args.runs {
        readings.push(measure(args, &peers, &home, run).await?);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let ready: Vec<f64> = readings.iter().map(|r| ms(r.ready)).collect();
    let accept: Vec<f64> = readings.iter().map(|r| ms(r.accept)).collect();
    let rss: Vec<f64> = readings.iter().map(|r| r.rss_kib as f64 / 1024.0).collect();
    let sends: Vec<f64> = readings.iter().filter_map(|r| r.send.map(ms)).collect();
    let mut table = format!(
        "\n{} runs, {}-chunk index; median (lowest–highest)\n{:<44} {:>22} {:>10}\n",
        args.runs, args.chunks, "measure", "value", "budget"
    );
    let mut row = |what: &str, v: &[f64], unit: &str, budget: &str| {
        if let Some((mid, low, high)) = spread(v) {
            table.push_str(&format!(
                "{what:<44} {:>22} {budget:>10}\n",
                format!("{mid:.1} {unit} ({low:.1}–{high:.1})")
            ));
        }
    };
    row("pincerd start → Status answers", &ready, "ms", "≤ 20 ms");
    row("  of which: start → socket accepts", &accept, "ms", "");
    row(
        &format!("idle RSS {:.1} s after ready", SETTLE.as_secs_f64()),
        &rss,
        "MB",
        "",
    );
    row(
        "pincer send round trip (whole process)",
        &sends,
        "ms",
        "≤ 10 ms",
    );
    let json = serde_json::json!({
        "ready_ms": ready,
        "accept_ms": accept,
        "rss_mb": rss,
        "send_ms": sends,
    });
    match &args.json {
        None => print!("{table}"),
        Some(JsonOut::Stdout) => {
            eprint!("{table}");
            println!("{json}");
        }
        Some(JsonOut::File(path)) => {
            print!("{table}");
            std::fs::write(path, json.to_string())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// (median, lowest, highest); `None` for no values.
fn spread(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let (low, high) = (*v.first()?, *v.last()?);
    Some((v[(v.len() - 1) / 2], low, high))
}
