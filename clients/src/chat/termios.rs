//! The terminal's modes while the chat is not in the line editor: changed
//! for as long as a guard lives, then put back as they were. During a
//! turn the terminal stays line-buffered (Ctrl-C must still raise SIGINT,
//! which aborts the turn) but does not echo control keys, so Ctrl-C does
//! not print `^C` into the answer; the approval question reads one key
//! without echo.

/// stdin's terminal modes as they were; restored when dropped.
pub struct Saved {
    saved: libc::termios,
}

impl Saved {
    /// Applies `change` to stdin's modes; `None` when stdin is not a
    /// terminal (nothing was changed).
    pub fn change(change: impl FnOnce(&mut libc::termios)) -> Option<Self> {
        // SAFETY: tcgetattr/tcsetattr on stdin with termios values we own.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let mut changed = saved;
            change(&mut changed);
            if libc::tcsetattr(0, libc::TCSANOW, &changed) != 0 {
                return None;
            }
            Some(Self { saved })
        }
    }

    /// While a turn runs: no echo of control keys (`^C`), signals on.
    pub fn quiet_controls() -> Option<Self> {
        Self::change(|t| t.c_lflag &= !libc::ECHOCTL)
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        // SAFETY: restores the modes read in `change`.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
    }
}
