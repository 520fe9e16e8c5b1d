//! What a start does while a run of the same workflow is busy — the
//! workflow's `admission`: `parallel` runs beside it, `queue` (the
//! default) waits its turn (first come, first served), `coalesce` waits
//! too unless a start already waits, which it joins (it is refused,
//! naming that run), and `drop` is refused. One lane per agent and
//! workflow; a run holds its lane from its first step to its end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

use super::def::Admission;

/// The lanes of every workflow that ran here.
#[derive(Clone, Default)]
pub struct Lanes {
    lanes: Arc<Mutex<HashMap<String, Lane>>>,
}

#[derive(Default)]
struct Lane {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The run that waits for the lane, for `coalesce`.
    waiting: Option<String>,
}

/// Why a start was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// `drop`, and the lane is busy.
    Busy,
    /// `coalesce`: this run already waits for the lane.
    Joined(String),
}

/// A start admitted to a lane; `enter` waits for its turn.
pub struct Ticket {
    /// `None`: `parallel`, no lane.
    lock: Option<Arc<tokio::sync::Mutex<()>>>,
    /// Held already (`drop` took it at once).
    held: Option<OwnedMutexGuard<()>>,
    /// The lane's note that this run waits, taken back when it enters —
    /// or when the start fails and the ticket is dropped.
    mark: Option<WaitMark>,
}

struct WaitMark {
    lanes: Lanes,
    key: String,
    run: String,
}

impl Drop for WaitMark {
    fn drop(&mut self) {
        let mut lanes = self.lanes.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lane) = lanes.get_mut(&self.key)
            && lane.waiting.as_deref() == Some(self.run.as_str())
        {
            lane.waiting = None;
        }
    }
}

/// A run's hold on its lane, until it ends.
pub struct Entered {
    _guard: Option<OwnedMutexGuard<()>>,
}

impl Lanes {
    /// Admits run `run` of lane `key` under `admission`, or says why not.
    pub fn admit(&self, key: &str, run: &str, admission: Admission) -> Result<Ticket, Refused> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let lane = lanes.entry(key.to_string()).or_default();
        let mut ticket = Ticket {
            lock: Some(lane.lock.clone()),
            held: None,
            mark: None,
        };
        match admission {
            Admission::Parallel => ticket.lock = None,
            Admission::Queue => {}
            Admission::Drop => {
                ticket.held = Some(
                    lane.lock
                        .clone()
                        .try_lock_owned()
                        .map_err(|_| Refused::Busy)?,
                );
            }
            Admission::Coalesce => {
                if let Some(waiting) = &lane.waiting {
                    return Err(Refused::Joined(waiting.clone()));
                }
            }
        }
        if ticket.held.is_none() && ticket.lock.is_some() && lane.lock.try_lock().is_err() {
            lane.waiting = Some(run.to_string());
            ticket.mark = Some(WaitMark {
                lanes: self.clone(),
                key: key.to_string(),
                run: run.to_string(),
            });
        }
        Ok(ticket)
    }
}

impl Ticket {
    /// Waits for the lane (not at all for `parallel` or a held one).
    pub async fn enter(self) -> Entered {
        let guard = match (self.held, self.lock) {
            (Some(held), _) => Some(held),
            (None, Some(lock)) => Some(lock.lock_owned().await),
            (None, None) => None,
        };
        drop(self.mark);
        Entered { _guard: guard }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queue_waits_its_turn_drop_is_refused_coalesce_joins_the_waiting_run() {
        let lanes = Lanes::default();
        let first = lanes
            .admit("main/w", "r1", Admission::Queue)
            .unwrap()
            .enter()
            .await;
        assert_eq!(
            lanes.admit("main/w", "r2", Admission::Drop).err(),
            Some(Refused::Busy)
        );
        let second = lanes.admit("main/w", "r2", Admission::Coalesce).unwrap();
        assert_eq!(
            lanes.admit("main/w", "r3", Admission::Coalesce).err(),
            Some(Refused::Joined("r2".into()))
        );
        // Another workflow's lane is free; parallel never waits.
        assert!(lanes.admit("main/v", "r4", Admission::Drop).is_ok());
        let _p = lanes
            .admit("main/w", "r5", Admission::Parallel)
            .unwrap()
            .enter()
            .await;
        let entering = tokio::spawn(second.enter());
        tokio::task::yield_now().await;
        assert!(!entering.is_finished(), "r2 waits while r1 holds the lane");
        drop(first);
        let _second = entering.await.unwrap();
        // r2 no longer waits: a coalescing start waits anew.
        let r6 = lanes.admit("main/w", "r6", Admission::Coalesce).unwrap();
        // A start that fails after its admission leaves no one waiting.
        drop(r6);
        assert!(lanes.admit("main/w", "r7", Admission::Coalesce).is_ok());
    }
}
