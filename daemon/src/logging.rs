//! Logging to `logs/pincerd.log`, rotated by size: when the file passes
//! [`MAX_BYTES`] it becomes `pincerd.log.1` (older ones shift up to
//! `.{KEEP}`), so `pincer logs` always reads the same path.

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

/// Sends logs to the rotating file (and to stderr when `also_stderr`).
/// `PINCER_LOG` overrides the configured level with an `EnvFilter` string.
pub fn init(path: &Path, level: &str, also_stderr: bool) -> io::Result<()> {
    let file = RotatingFile::open(path, MAX_BYTES, KEEP)?;
    let filter = std::env::var("PINCER_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    use tracing_subscriber::fmt::writer::MakeWriterExt;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(true);
    let result = if also_stderr {
        builder.with_writer(file.and(io::stderr)).try_init()
    } else {
        builder.with_writer(file).try_init()
    };
    result.map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
