//! `pincer logs [-f] [-n N]`: the daemon's log, read from
//! `PINCER_HOME/logs/pincerd.log` directly, so it works when pincerd is down
//! or will not start (exactly when it is needed). `-f` follows the file
//! across rotation (pincerd renames it to `pincerd.log.1` and starts a new
//! one) and waits for a file that does not exist yet. Each line is shown
//! as `log_line.rs` reads it: a text line for people, its fields under
//! `--json` (an array, or one object a line with `-f`).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Ctx;
use crate::error::CliError;
use crate::log_line::LogLine;
use crate::out::{self, outln};

/// How often `-f` looks for new lines.
const POLL: Duration = Duration::from_millis(200);

pub fn log_path(home: &Path) -> PathBuf {
    home.join("logs").join("pincerd.log")
}

pub async fn run(ctx: &Ctx, follow: bool, lines: usize) -> Result<u8, CliError> {
    let path = log_path(&ctx.home);
    let print = |line: &str| {
        let line = LogLine::parse(line);
        if ctx.json {
            out::json(&line.to_json());
        } else {
            outln!("{}", line.to_text());
        }
    };
    let file = match File::open(&path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && follow => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CliError::failed(format!(
                "no log at {}: pincerd has not run with this home yet (start it with `{}`)",
                path.display(),
                crate::rpc::start_command(&ctx.home, ctx.explicit_home)
            )));
        }
        Err(e) => {
            return Err(CliError::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let mut tail = Tail { file, pos: 0 };
    let text = tail.read_new(&path);
    let all: Vec<&str> = text.lines().collect();
    let last = &all[all.len().saturating_sub(lines)..];
    if !follow {
        if ctx.json {
            let v: Vec<_> = last.iter().map(|l| LogLine::parse(l).to_json()).collect();
            out::json(&serde_json::Value::Array(v));
        } else {
            last.iter().for_each(|l| print(l));
        }
        return Ok(0);
    }
    last.iter().for_each(|l| print(l));
    let mut partial = String::new();
    loop {
        tokio::time::sleep(POLL).await;
        partial.push_str(&tail.read_new(&path));
        while let Some(i) = partial.find('\n') {
            let line: String = partial.drain(..=i).collect();
            print(line.trim_end_matches('\n'));
        }
    }
}

/// The open log file and how far it has been read.
struct Tail {
    file: Option<File>,
    pos: u64,
}

impl Tail {
    /// What was appended since the last call. A file at `path` that is not
    /// the one we hold (another inode: rotated), or that is shorter than what
    /// we read (truncated), is read from its start; what the old file got
    /// after our last read is read first.
    fn read_new(&mut self, path: &Path) -> String {
        let mut text = String::new();
        let current = std::fs::metadata(path).ok();
        let rotated = match (&self.file, &current) {
            (Some(f), Some(now)) => f
                .metadata()
                .map(|held| held.ino() != now.ino() || now.len() < self.pos)
                .unwrap_or(true),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if rotated {
            if let Some(old) = &mut self.file {
                let _ = read_from(old, self.pos, &mut text);
            }
            self.file = File::open(path).ok();
            self.pos = 0;
        }
        if let Some(f) = &mut self.file {
            self.pos += read_from(f, self.pos, &mut text);
        }
        text
    }
}

/// Appends the file's bytes from `pos` to `text`; returns how many were read.
fn read_from(file: &mut File, pos: u64, text: &mut String) -> u64 {
    if file.seek(SeekFrom::Start(pos)).is_err() {
        return 0;
    }
    let mut bytes = Vec::new();
    let n = file.read_to_end(&mut bytes).unwrap_or(0);
    text.push_str(&String::from_utf8_lossy(&bytes[..n.min(bytes.len())]));
    n as u64
}
