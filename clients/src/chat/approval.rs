//! Approvals answered inline (a tool set to `ask`): the call is shown in
//! one line and one key answers it — y allows, n denies, a allows this
//! call and the tool's later calls in this session — then `Tools.Decide`
//! tells pincerd. The key is read on the line editor's thread with the
//! terminal in non-canonical mode; Ctrl-C still raises SIGINT there, so it
//! aborts the turn as it does anywhere else in a turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pincer_proto::v1 as pb;

use crate::out::{err, errln};
use crate::render::one_line;
use crate::rpc::Clients;

use super::termios::Saved;

/// The owner's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    Allow,
    Deny,
    Always,
}

impl Answer {
    pub fn from_key(key: char) -> Option<Self> {
        match key {
            'y' | 'Y' => Some(Self::Allow),
            'n' | 'N' => Some(Self::Deny),
            'a' => Some(Self::Always),
            _ => None,
        }
    }
}

/// The question for one request, as printed before the key is read.
pub fn show(a: &pb::ApprovalRequested) {
    errln!(
        "\n  ? {} {} needs your approval (denied in {} s)",
        a.tool,
        one_line(&a.arguments_json, 120),
        a.expires_in_s
    );
}

pub const PROMPT: &str = "    approve? [y]es / [n]o / [a]lways › ";

/// Tells pincerd the answer and says what happened.
pub async fn decide(clients: &mut Clients, id: &str, answer: Answer) {
    let request = pb::DecideRequest {
        id: id.to_string(),
        allow: answer != Answer::Deny,
        always: answer == Answer::Always,
        ..Default::default()
    };
    match clients.tools.decide(request).await {
        Ok(_) => {}
        Err(s) if s.code() == tonic::Code::NotFound => {
            errln!("  (that call was already answered or its time ran out)");
        }
        Err(s) => errln!("  ! the answer did not reach pincerd: {}", s.message()),
    }
}

/// Reads one of y, n, a from the terminal without waiting for Enter;
/// other keys (arrows, letters) are ignored. `None` when `cancel` is set
/// first (the turn moved on) or the terminal cannot be read. Runs on the
/// line editor's thread.
pub fn read_key(prompt: &str, cancel: &AtomicBool) -> Option<char> {
    err!("{prompt}");
    let raw = KeyMode::enter()?;
    let key = loop {
        if cancel.load(Ordering::SeqCst) {
            break None;
        }
        match raw.next_byte(100) {
            Ok(Some(b)) if Answer::from_key(char::from(b)).is_some() => break Some(char::from(b)),
            // An escape sequence (an arrow key): drop the rest of it.
            Ok(Some(0x1b)) => while let Ok(Some(_)) = raw.next_byte(20) {},
            Ok(_) => {}
            Err(()) => break None,
        }
    };
    drop(raw);
    match key.and_then(Answer::from_key) {
        Some(Answer::Allow) => errln!("yes"),
        Some(Answer::Deny) => errln!("no"),
        Some(Answer::Always) => errln!("always"),
        None => errln!(),
    }
    key
}

/// The terminal without line buffering and echo (signals stay on), put
/// back as it was when dropped.
struct KeyMode {
    _saved: Saved,
}

impl KeyMode {
    fn enter() -> Option<Self> {
        let saved = Saved::change(|t| {
            t.c_lflag &= !(libc::ICANON | libc::ECHO);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
        })?;
        Some(Self { _saved: saved })
    }

    /// A byte within `timeout_ms`, `None` when none came.
    fn next_byte(&self, timeout_ms: i32) -> Result<Option<u8>, ()> {
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd we own.
        let ready = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
        if ready < 0 {
            // A signal (Ctrl-C) interrupts the wait: look at `cancel` again.
            return if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(())
            };
        }
        if ready == 0 {
            return Ok(None);
        }
        let mut byte = 0u8;
        // SAFETY: reads one byte into a local buffer.
        let n = unsafe { libc::read(0, (&mut byte as *mut u8).cast(), 1) };
        match n {
            1 => Ok(Some(byte)),
            _ => Err(()),
        }
    }
}

/// A pending question: its id and how to stop asking.
pub struct Asking {
    pub id: String,
    pub cancel: Arc<AtomicBool>,
}

#[cfg(test)]
mod tests {
    use super::Answer;

    #[test]
    fn only_y_n_a_answer_and_an_arrow_key_is_no_always() {
        assert_eq!(Answer::from_key('y'), Some(Answer::Allow));
        assert_eq!(Answer::from_key('n'), Some(Answer::Deny));
        assert_eq!(Answer::from_key('a'), Some(Answer::Always));
        // ESC [ A is the Up arrow: its `A` must not mean "always".
        assert_eq!(Answer::from_key('A'), None);
        assert_eq!(Answer::from_key('\r'), None);
    }
}
