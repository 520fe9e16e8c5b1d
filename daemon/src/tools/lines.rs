//! Reading a text file line by line in bounded memory, for `read` and
//! `grep`: at most one buffer and one capped line are held, whatever the
//! file's size (a 4 GB file, or one 1 GB line without a newline), and the
//! bytes past a line's cap are skipped, not kept. The cancellation token
//! is checked between buffers, so a tool stopped by its time limit stops
//! reading even in the middle of a long line.

use std::io::{self, BufRead, BufReader, Read};

use tokio_util::sync::CancellationToken;

/// Bytes looked at to tell a binary file (one with a NUL) from text.
pub const SNIFF_BYTES: usize = 8192;

/// A line as read: its first bytes, and whether the rest was skipped.
pub struct Line<'a> {
    pub bytes: &'a [u8],
    pub cut: bool,
}

pub struct LineReader<R> {
    inner: BufReader<R>,
    max_line_bytes: usize,
    line: Vec<u8>,
    cancel: CancellationToken,
    /// Bytes consumed so far.
    pub consumed: u64,
}

impl<R: Read> LineReader<R> {
    /// Lines of at most `max_line_bytes`; reading fails with `Interrupted`
    /// once `cancel` is cancelled.
    pub fn new(inner: R, max_line_bytes: usize, cancel: CancellationToken) -> Self {
        Self {
            inner: BufReader::with_capacity(64 * 1024, inner),
            max_line_bytes,
            line: Vec::new(),
            cancel,
            consumed: 0,
        }
    }

    /// Whether the file starts like a binary one (a NUL early on); reads
    /// nothing that a following [`LineReader::next_line`] would miss.
    pub fn looks_binary(&mut self) -> io::Result<bool> {
        let head = self.inner.fill_buf()?;
        Ok(head.iter().take(SNIFF_BYTES).any(|&b| b == 0))
    }

    /// The next line without its `\n` (and `\r`), `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.line.clear();
        let mut cut = false;
        let mut any = false;
        loop {
            if self.cancel.is_cancelled() {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    "stopped: the tool's time limit was reached or the turn was aborted",
                ));
            }
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                break;
            }
            any = true;
            let (chunk, used, ends) = match memchr::memchr(b'\n', available) {
                Some(at) => (&available[..at], at + 1, true),
                None => (available, available.len(), false),
            };
            let room = self.max_line_bytes.saturating_sub(self.line.len());
            if chunk.len() > room {
                cut = true;
            }
            self.line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.inner.consume(used);
            self.consumed += used as u64;
            if ends {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        if !cut && self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(Some(Line {
            bytes: &self.line,
            cut,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_without_being_kept() {
        let mut text = b"one\r\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 1_000_000));
        text.extend_from_slice(b"\nlast");
        let mut r = LineReader::new(&text[..], 10, CancellationToken::new());
        assert!(!r.looks_binary().unwrap());
        let l = r.next_line().unwrap().unwrap();
        assert_eq!((l.bytes, l.cut), (&b"one"[..], false));
        let l = r.next_line().unwrap().unwrap();
        assert_eq!((l.bytes, l.cut), (&b"xxxxxxxxxx"[..], true));
        let l = r.next_line().unwrap().unwrap();
        assert_eq!((l.bytes, l.cut), (&b"last"[..], false));
        assert!(r.next_line().unwrap().is_none());
        assert_eq!(r.consumed, text.len() as u64);
        assert!(r.line.capacity() < 1000, "the long line was kept");
    }

    #[test]
    fn a_nul_near_the_start_is_binary() {
        let mut r = LineReader::new(&b"ab\0cd"[..], 10, CancellationToken::new());
        assert!(r.looks_binary().unwrap());
        assert_eq!(r.next_line().unwrap().unwrap().bytes, b"ab\0cd");
    }

    #[test]
    fn a_cancelled_read_stops_inside_a_line() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let mut r = LineReader::new(&b"no newline"[..], 10, cancel);
        let e = r.next_line().err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
    }
}
