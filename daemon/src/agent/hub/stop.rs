//! `/stop` from someone other than the owner, and what of a session is
//! theirs (`/status`): a session's running turn remembers whose messages
//! it answers (one sender, or several when queued messages were merged:
//! `ChatOrigin::sender` is then `a,b`), and each queued message keeps its
//! own origin.
//!
//! A member may stop an answer only when every message it answers is
//! theirs; in a group, an answer to several people is not one person's
//! to stop. Otherwise their own queued messages are dropped, each ended
//! for its subscriber as an aborted turn with no text (a bridge settles
//! such a message without a reply), and the others' stay queued. The
//! owner's `/stop` is [`Hub::abort`]: who asks is decided by the caller
//! (`channels::commands`), not here.

use super::{Event, Hub};
use crate::tools::policy::ChatOrigin;

/// What a sender's `/stop` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopOutcome {
    /// The running turn answered only them: it is aborted.
    Stopped,
    /// The running turn answers others too (or nobody's message, as a
    /// compaction): it goes on; this many of their queued messages were
    /// dropped.
    Dropped(usize),
    /// Nothing runs in the session.
    Idle,
}

/// The senders a turn of `origin` answers, one each.
pub(super) fn senders(origin: &ChatOrigin) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for sender in origin.sender.split(',') {
        if !sender.is_empty() && !out.iter().any(|s| s == sender) {
            out.push(sender.to_string());
        }
    }
    out
}

impl Hub {
    /// `/stop` in session `key` from `sender` (`telegram:42`), who is not
    /// the owner: the module doc's rule.
    pub fn stop_for(&self, key: &str, sender: &str) -> StopOutcome {
        let mut slots = self.lock();
        let Some(slot) = slots.get_mut(key) else {
            return StopOutcome::Idle;
        };
        let Some(running) = &slot.running else {
            return StopOutcome::Idle;
        };
        if !sender.is_empty()
            && !slot.answering.is_empty()
            && slot.answering.iter().all(|s| s == sender)
        {
            running.cancel();
            return StopOutcome::Stopped;
        }
        let (theirs, others): (Vec<_>, Vec<_>) = slot
            .pending
            .drain(..)
            .partition(|p| !sender.is_empty() && p.origin.sender == sender);
        slot.pending = others;
        for p in &theirs {
            let _ = p.subscriber.send(Event::Finished {
                text: String::new(),
                segments: Vec::new(),
                stop_reason: "aborted",
                model_calls: 0,
                tool_calls: 0,
            });
        }
        StopOutcome::Dropped(theirs.len())
    }

    /// How many of `sender`'s messages wait in session `key`'s queue.
    pub fn queued_from(&self, key: &str, sender: &str) -> usize {
        self.lock().get(key).map_or(0, |slot| {
            slot.pending
                .iter()
                .filter(|p| !sender.is_empty() && p.origin.sender == sender)
                .count()
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::super::{Pending, Slot};
    use super::*;

    fn origin(sender: &str) -> ChatOrigin {
        ChatOrigin {
            sender: sender.into(),
            ..ChatOrigin::owner(false)
        }
    }

    fn queued(sender: &str) -> (Pending, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Pending {
                text: "hi".into(),
                images: Vec::new(),
                origin: origin(sender),
                subscriber: tx,
            },
            rx,
        )
    }

    /// A hub over an empty home (no turn is ever run: only slots).
    fn test_hub() -> Hub {
        Hub::for_tests("[agents.main]\n")
    }

    /// A hub whose session `k` runs a turn answering `answering`, with
    /// messages queued from `queue`.
    fn hub_with(
        answering: &str,
        queue: &[&str],
    ) -> (Hub, CancellationToken, Vec<mpsc::UnboundedReceiver<Event>>) {
        let hub = test_hub();
        let cancel = CancellationToken::new();
        let mut slot = Slot {
            running: Some(cancel.clone()),
            answering: senders(&origin(answering)),
            ..Slot::default()
        };
        let mut receivers = Vec::new();
        for sender in queue {
            let (p, rx) = queued(sender);
            slot.pending.push(p);
            receivers.push(rx);
        }
        hub.lock().insert("k".into(), slot);
        (hub, cancel, receivers)
    }

    #[tokio::test]
    async fn a_sender_stops_an_answer_that_is_theirs_alone() {
        let (hub, cancel, _) = hub_with("telegram:1", &["telegram:2"]);
        assert_eq!(hub.stop_for("k", "telegram:1"), StopOutcome::Stopped);
        assert!(cancel.is_cancelled());
        assert_eq!(hub.queued_from("k", "telegram:2"), 1, "others' stay");
    }

    #[tokio::test]
    async fn a_member_cannot_stop_anothers_answer_and_drops_only_their_own_queue() {
        let (hub, cancel, mut rx) =
            hub_with("telegram:2", &["telegram:1", "telegram:2", "telegram:1"]);
        assert_eq!(hub.queued_from("k", "telegram:1"), 2);
        assert_eq!(hub.stop_for("k", "telegram:1"), StopOutcome::Dropped(2));
        assert!(!cancel.is_cancelled(), "B's answer goes on");
        assert_eq!(hub.queued_from("k", "telegram:1"), 0);
        assert_eq!(hub.queued_from("k", "telegram:2"), 1);
        // The dropped ones end cleanly: an aborted turn with no text.
        for i in [0, 2] {
            assert!(matches!(
                rx[i].try_recv(),
                Ok(Event::Finished { ref text, stop_reason: "aborted", .. }) if text.is_empty()
            ));
        }
        assert!(rx[1].try_recv().is_err(), "B's queued message is kept");
    }

    #[tokio::test]
    async fn a_merged_turn_is_nobodys_alone_and_an_empty_sender_is_nobody() {
        let (hub, cancel, _) = hub_with("telegram:1,telegram:2", &[]);
        assert_eq!(hub.stop_for("k", "telegram:1"), StopOutcome::Dropped(0));
        assert!(!cancel.is_cancelled());
        let (hub, cancel, _) = hub_with("", &[""]);
        assert_eq!(hub.stop_for("k", ""), StopOutcome::Dropped(0));
        assert!(!cancel.is_cancelled(), "a turn of nobody's messages");
        assert_eq!(hub.stop_for("other", "telegram:1"), StopOutcome::Idle);
    }

    #[test]
    fn senders_are_read_from_a_merged_origin_once_each() {
        assert_eq!(
            senders(&origin("telegram:1,telegram:2,telegram:1")),
            ["telegram:1", "telegram:2"]
        );
        assert!(senders(&origin("")).is_empty());
    }
}
