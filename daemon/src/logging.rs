//! Logging to `logs/pincerd.log`, rotated by size: when the file passes
//! [`MAX_BYTES`] it becomes `pincerd.log.1` (older ones shift up to
//! `.{KEEP}`), so `pincer logs` always reads the same path.
//!
//! The file holds one JSON object a line, as tracing-subscriber's JSON
//! format writes it: `timestamp` (RFC 3339, UTC), `level`, `target`,
//! `fields` (the `message` and the event's fields, with their types), and
//! `spans` (each with its `name` and fields, outermost first) when the
//! event is inside any. `pincer logs` reads it (`clients/src/logs.rs`):
//! a line for people, the fields for `--json`. Logs sent to stderr
//! (`--log-stderr`, journald) are the usual text lines.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
pub const KEEP: usize = 5;

/// A log file that rotates itself when it grows past `max_bytes`.
#[derive(Clone)]
pub struct RotatingFile {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    path: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    keep: usize,
    /// The last write ended a line: rotating now cannot split one.
    at_line_start: bool,
}

impl RotatingFile {
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<Self> {
        let file = open_append(path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            inner: Arc::new(Mutex::new(Inner {
                path: path.to_path_buf(),
                file,
                written,
                max_bytes,
                keep,
                at_line_start: true,
            })),
        })
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl Inner {
    fn rotate(&mut self) -> io::Result<()> {
        let name = |n: usize| {
            let mut p = self.path.clone().into_os_string();
            p.push(format!(".{n}"));
            PathBuf::from(p)
        };
        for n in (1..self.keep).rev() {
            let from = name(n);
            if from.exists() {
                std::fs::rename(&from, name(n + 1))?;
            }
        }
        std::fs::rename(&self.path, name(1))?;
        self.file = open_append(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.at_line_start
            && inner.written + buf.len() as u64 > inner.max_bytes
            && inner.written > 0
        {
            // A failed rotation must not stop logging: keep appending.
            let _ = inner.rotate();
        }
        let n = inner.file.write(buf)?;
        inner.written += n as u64;
        inner.at_line_start = buf[..n].last().map_or(inner.at_line_start, |&b| b == b'\n');
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.file.flush()
    }
}

impl<'a> MakeWriter<'a> for RotatingFile {
    type Writer = RotatingFile;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Sends logs to the rotating file as JSON lines (and to stderr as text
/// when `also_stderr`). `PINCER_LOG` overrides the configured level with
/// an `EnvFilter` string.
pub fn init(path: &Path, level: &str, also_stderr: bool) -> io::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let file = RotatingFile::open(path, MAX_BYTES, KEEP)?;
    let filter = std::env::var("PINCER_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let stderr = also_stderr.then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_target(true)
            .with_writer(io::stderr)
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(json_layer(file))
        .with(stderr)
        .try_init()
        .map_err(|e| io::Error::other(e.to_string()))
}

/// The file's format (the module doc): JSON lines, the span list but not
/// the current span again.
fn json_layer<S, W>(writer: W) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(false)
        .with_span_list(true)
        .with_target(true)
        .with_writer(writer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `pincer logs` relies on: one JSON object a line with the time,
    /// level, target, message, the event's fields and its spans.
    #[test]
    fn the_file_gets_one_json_object_a_line() {
        use tracing_subscriber::layer::SubscriberExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.log");
        let file = RotatingFile::open(&path, MAX_BYTES, KEEP).unwrap();
        let subscriber = tracing_subscriber::registry().with(json_layer(file));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("turn", session = "agent:main:main");
            let _in = span.enter();
            tracing::warn!(code = "provider", calls = 3, "turn failed");
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["level"], "WARN", "{v}");
        assert_eq!(v["target"], "pincer_daemon::logging::tests", "{v}");
        assert_eq!(v["fields"]["message"], "turn failed", "{v}");
        assert_eq!(v["fields"]["code"], "provider", "{v}");
        assert_eq!(v["fields"]["calls"], 3, "{v}");
        assert_eq!(v["spans"][0]["name"], "turn", "{v}");
        assert_eq!(v["spans"][0]["session"], "agent:main:main", "{v}");
        assert!(
            v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{v}"
        );
        assert!(v.get("span").is_none(), "{v}");
    }

    #[test]
    fn rotates_past_the_limit_and_keeps_n_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut log = RotatingFile::open(&path, 100, 2).unwrap();
        // One write per line, as tracing's formatter does.
        for i in 0..10 {
            log.write_all(format!("{i:0>59}\n").as_bytes()).unwrap();
        }
        // Rotation waits for line ends, so no line is ever split.
        assert!(std::fs::metadata(&path).unwrap().len() <= 100);
        for n in ["x.log", "x.log.1", "x.log.2"] {
            let text = std::fs::read_to_string(dir.path().join(n)).unwrap();
            assert!(text.lines().all(|l| l.len() == 59), "{n}: {text:?}");
        }
        assert!(dir.path().join("x.log.1").exists());
        assert!(dir.path().join("x.log.2").exists());
        assert!(!dir.path().join("x.log.3").exists());
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.contains(&format!("{:0>59}", 9)));
    }
}
