//! Where the chat's lines come from. On a terminal: rustyline on a thread
//! of its own (it blocks; the gRPC side keeps running), with history in
//! `PINCER_HOME/chat_history`, `\`+Enter and Alt-Enter for a new line,
//! bracketed paste, and Ctrl-C that clears a typed line. The same thread
//! reads the single keys of inline approvals, so only one reader ever
//! holds the terminal. Piped: plain lines, as a script sends them.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{
    Cmd, ConditionalEventHandler, Config, Editor, Event, EventContext, EventHandler, KeyCode,
    KeyEvent, Modifiers, Movement, RepeatCount,
};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use tokio::sync::oneshot;

use crate::error::CliError;
use crate::out::errln;

/// History keeps this many entries.
const HISTORY_ENTRIES: usize = 1000;
/// Longer messages (a pasted file) are sent but not kept in the history.
const HISTORY_MAX_BYTES: usize = 16 * 1024;

/// One read of the prompt.
pub enum Read {
    Line(String),
    /// Ctrl-C on an empty line.
    Interrupted,
    /// Ctrl-D on an empty line, or the end of piped input.
    Eof,
}

/// A printer that writes above the prompt while it is being edited.
pub type Printer = Box<dyn rustyline::ExternalPrinter + Send>;

enum Request {
    Line {
        prompt: String,
        initial: String,
        reply: oneshot::Sender<Result<Read, String>>,
    },
    Key {
        prompt: String,
        cancel: Arc<AtomicBool>,
        reply: oneshot::Sender<Option<char>>,
    },
}

/// The line editor's thread, spoken to over a channel.
pub struct Terminal {
    requests: mpsc::Sender<Request>,
}

pub enum Input {
    Terminal(Terminal),
    Piped(Lines<BufReader<Stdin>>),
}

impl Input {
    /// The editor when stdin and stdout are a terminal, else plain lines.
    /// Also returns a printer for messages above the prompt (terminal only).
    pub fn open(history: PathBuf) -> (Self, Option<Printer>) {
        let piped = || Self::Piped(BufReader::new(tokio::io::stdin()).lines());
        if !interactive() {
            return (piped(), None);
        }
        match Terminal::start(history) {
            Ok((t, printer)) => (Self::Terminal(t), printer),
            Err(e) => {
                errln!("note: no line editing ({e}); reading plain lines");
                (piped(), None)
            }
        }
    }

    pub fn terminal(&self) -> Option<&Terminal> {
        match self {
            Self::Terminal(t) => Some(t),
            Self::Piped(_) => None,
        }
    }

    /// The next line; `initial` is put back into the editor (a message
    /// that could not be sent).
    pub async fn read(&mut self, prompt: &str, initial: &str) -> Result<Read, CliError> {
        match self {
            Self::Terminal(t) => t.line(prompt, initial).await,
            Self::Piped(lines) => {
                crate::out::err!("{prompt}");
                let line = tokio::select! {
                    line = lines.next_line() => line.map_err(|e| CliError::failed(format!("cannot read stdin: {e}")))?,
                    _ = tokio::signal::ctrl_c() => return Ok(Read::Interrupted),
                };
                Ok(line.map_or(Read::Eof, Read::Line))
            }
        }
    }
}

/// Whether both ends of the chat are a terminal.
#[allow(
    clippy::disallowed_methods,
    reason = "only asks whether stdout is a terminal; prints nothing"
)]
fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

impl Terminal {
    fn start(history: PathBuf) -> Result<(Self, Option<Printer>), String> {
        let config = Config::builder()
            .max_history_size(HISTORY_ENTRIES)
            .and_then(|b| b.history_ignore_dups(true))
            .map_err(|e| e.to_string())?
            .history_ignore_space(true)
            .auto_add_history(false)
            .bracketed_paste(true)
            .build();
        let mut editor: Editor<(), FileHistory> =
            Editor::with_config(config).map_err(|e| e.to_string())?;
        editor.bind_sequence(
            KeyEvent(KeyCode::Char('C'), Modifiers::CTRL),
            EventHandler::Conditional(Box::new(ClearOrInterrupt)),
        );
        let continued = Continued::default();
        editor.bind_sequence(
            KeyEvent(KeyCode::Enter, Modifiers::NONE),
            EventHandler::Conditional(Box::new(continued.clone())),
        );
        editor.bind_sequence(
            KeyEvent(KeyCode::Enter, Modifiers::ALT),
            EventHandler::Simple(Cmd::Newline),
        );
        let history = open_history(&mut editor, history);
        let printer = editor
            .create_external_printer()
            .ok()
            .map(|p| Box::new(p) as Printer);
        let (requests, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("line-editor".into())
            .spawn(move || serve(editor, history, continued, receiver))
            .map_err(|e| e.to_string())?;
        Ok((Self { requests }, printer))
    }

    async fn line(&self, prompt: &str, initial: &str) -> Result<Read, CliError> {
        let (reply, answer) = oneshot::channel();
        let request = Request::Line {
            prompt: prompt.to_string(),
            initial: initial.to_string(),
            reply,
        };
        let gone = || CliError::failed("the line editor stopped");
        self.requests.send(request).map_err(|_| gone())?;
        answer
            .await
            .map_err(|_| gone())?
            .map_err(|e| CliError::failed(format!("cannot read the terminal: {e}")))
    }

    /// Asks for one key (see `approval::read_key`); the answer is `None`
    /// when `cancel` was set first or the terminal could not be read.
    pub fn key(&self, prompt: &str, cancel: Arc<AtomicBool>) -> oneshot::Receiver<Option<char>> {
        let (reply, answer) = oneshot::channel();
        let request = Request::Key {
            prompt: prompt.to_string(),
            cancel,
            reply,
        };
        // A stopped editor drops `reply`: the answer reads as none.
        let _ = self.requests.send(request);
        answer
    }
}

/// Creates the history file 0600 when missing and loads it; `None` (and a
/// note) when it cannot be used: the chat works without history.
fn open_history(editor: &mut Editor<(), FileHistory>, path: PathBuf) -> Option<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let created = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path);
    let loaded = created
        .map_err(|e| e.to_string())
        .and_then(|_| editor.load_history(&path).map_err(|e| e.to_string()));
    match loaded {
        Ok(()) => Some(path),
        Err(e) => {
            errln!(
                "note: the chat history {} cannot be used ({e}); this chat is not remembered",
                path.display()
            );
            None
        }
    }
}

/// The editor thread: one request at a time, until the chat ends.
fn serve(
    mut editor: Editor<(), FileHistory>,
    history: Option<PathBuf>,
    continued: Continued,
    requests: mpsc::Receiver<Request>,
) {
    while let Ok(request) = requests.recv() {
        match request {
            Request::Line {
                prompt,
                initial,
                reply,
            } => {
                continued.clear();
                let read = match editor.readline_with_initial(&prompt, (&initial, "")) {
                    Ok(line) => {
                        let line = continued.join(line);
                        remember(&mut editor, history.as_ref(), &line);
                        Ok(Read::Line(line))
                    }
                    Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
                    Err(ReadlineError::Eof) => Ok(Read::Eof),
                    Err(e) => Err(e.to_string()),
                };
                let _ = reply.send(read);
            }
            Request::Key {
                prompt,
                cancel,
                reply,
            } => {
                let _ = reply.send(super::approval::read_key(&prompt, &cancel));
            }
        }
    }
}

/// Adds a line to the history and appends it to the file at once, so a
/// chat that is killed keeps what was typed.
fn remember(editor: &mut Editor<(), FileHistory>, history: Option<&PathBuf>, line: &str) {
    if line.trim().is_empty() || line.len() > HISTORY_MAX_BYTES {
        return;
    }
    if !matches!(editor.add_history_entry(line), Ok(true)) {
        return;
    }
    if let Some(path) = history
        && let Err(e) = editor.append_history(path)
    {
        errln!(
            "note: cannot write the chat history {}: {e}",
            path.display()
        );
    }
}

/// Ctrl-C clears a typed line in place; on an empty line it interrupts
/// (the chat then offers to leave).
struct ClearOrInterrupt;

impl ConditionalEventHandler for ClearOrInterrupt {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        if ctx.line().is_empty() {
            Some(Cmd::Interrupt)
        } else {
            Some(Cmd::Kill(Movement::WholeBuffer))
        }
    }
}

/// Enter right after a `\\` typed at the end goes on on a new line
/// (rustyline inserts it after the `\\`); the `\\` is dropped when the
/// message is sent. Where each such `\\` sits is noted, so a `\\` at a
/// line's end in pasted text is never touched.
#[derive(Clone, Default)]
struct Continued(Arc<Mutex<Vec<usize>>>);

impl Continued {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn clear(&self) {
        self.lock().clear();
    }

    /// The message without the continuation backslashes (those still
    /// where they were typed).
    fn join(&self, mut line: String) -> String {
        let mut at = std::mem::take(&mut *self.lock());
        at.sort_unstable();
        for &i in at.iter().rev() {
            if line.get(i..).is_some_and(|rest| rest.starts_with("\\\n")) {
                line.remove(i);
            }
        }
        line
    }
}

impl ConditionalEventHandler for Continued {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        let line = ctx.line();
        if ctx.pos() != line.len() || !line.ends_with('\\') {
            return None;
        }
        self.lock().push(line.len() - 1);
        Some(Cmd::Newline)
    }
}

#[cfg(test)]
mod tests {
    use super::Continued;

    #[test]
    fn only_the_noted_backslashes_are_dropped() {
        let c = Continued::default();
        c.lock().push(3);
        assert_eq!(c.join("one\\\ntwo\\\nthree".into()), "one\ntwo\\\nthree");
        // Edited since (the noted place moved): left as it is.
        c.lock().push(0);
        assert_eq!(c.join("x\\\ny".into()), "x\\\ny");
    }
}
