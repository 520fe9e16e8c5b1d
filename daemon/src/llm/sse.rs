//! A Server-Sent Events decoder that works on raw bytes.
//!
//! Lines are split on bytes before any UTF-8 decoding, so a multi-byte
//! character split across network chunks is reassembled intact; comment
//! lines (`:`) are skipped; `\n` and `\r\n` endings are both accepted; an
//! event is dispatched at a blank line (and at end of input by [`finish`]).
//!
//! [`finish`]: SseDecoder::finish

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental decoder: feed chunks with [`push`](Self::push).
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes a chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.line_done(&line, &mut out);
            } else {
                self.line.push(b);
            }
        }
        out
    }

    /// Ends the input: a last line without newline and a pending event are
    /// dispatched.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut out);
        }
        self.dispatch(&mut out);
        out
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // comment / keep-alive
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {} // id, retry and unknown fields are not used by LLM APIs
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.event = None;
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out: Vec<SseEvent> = chunks.iter().flat_map(|c| d.push(c)).collect();
        out.extend(d.finish());
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn events_comments_and_multiline_data() {
        let got = all(&[
            b": keep-alive\n\nevent: message_start\ndata: {\"a\":1}\n\ndata: x\ndata: y\n\n",
        ]);
        assert_eq!(
            got,
            vec![ev(Some("message_start"), "{\"a\":1}"), ev(None, "x\ny")]
        );
    }

    #[test]
    fn lines_split_across_chunks_and_crlf() {
        let got = all(&[
            b"da",
            b"ta: hel",
            b"lo\r",
            b"\n\r\n",
            b"data:no-space\n",
            b"\n",
        ]);
        assert_eq!(got, vec![ev(None, "hello"), ev(None, "no-space")]);
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let bytes = "data: 数据🦀\n\n".as_bytes();
        for cut in 0..bytes.len() {
            let got = all(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(got, vec![ev(None, "数据🦀")], "cut at {cut}");
        }
    }

    #[test]
    fn pending_event_is_flushed_at_end_of_input() {
        assert_eq!(all(&[b"data: [DONE]"]), vec![ev(None, "[DONE]")]);
        assert!(all(&[b": only a comment"]).is_empty());
    }

    #[test]
    fn event_name_does_not_leak_into_next_event() {
        let got = all(&[b"event: ping\n\ndata: a\n\n"]);
        assert_eq!(got, vec![ev(None, "a")]);
    }
}
