//! Notices pincerd going away under an open chat. While the prompt waits
//! for the user, it asks `Daemon.Status` every second; when pincerd stops
//! answering it says so above the prompt, keeps trying, and says when a
//! pincerd answers again (a restart: a new pid). The line being typed is
//! the editor's and is never touched; the chat connects afresh before it
//! sends the next request.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pincer_proto::v1 as pb;
use pincer_proto::v1::daemon_client::DaemonClient;
use tonic::transport::Channel;

use super::editor::Printer;
use crate::rpc;

const EVERY: Duration = Duration::from_secs(1);
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// The running watcher; stopped when dropped.
pub struct Watch {
    idle: Arc<AtomicBool>,
    reconnected: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    pub fn spawn(
        home: PathBuf,
        explicit_home: bool,
        daemon: DaemonClient<Channel>,
        pid: u32,
        printer: Printer,
    ) -> Self {
        let idle = Arc::new(AtomicBool::new(false));
        let reconnected = Arc::new(AtomicBool::new(false));
        let watcher = Watcher {
            home,
            explicit_home,
            idle: idle.clone(),
            reconnected: reconnected.clone(),
            printer,
        };
        let task = tokio::spawn(watcher.run(daemon, pid));
        Self {
            idle,
            reconnected,
            task,
        }
    }

    /// Whether the user sits at the prompt (only then is pincerd watched:
    /// a turn notices a lost connection itself).
    pub fn set_idle(&self, idle: bool) {
        self.idle.store(idle, Ordering::SeqCst);
    }

    /// True once after pincerd answered again: the chat's own clients
    /// must connect afresh.
    pub fn take_reconnected(&self) -> bool {
        self.reconnected.swap(false, Ordering::SeqCst)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Watcher {
    home: PathBuf,
    explicit_home: bool,
    idle: Arc<AtomicBool>,
    reconnected: Arc<AtomicBool>,
    printer: Printer,
}

impl Watcher {
    async fn run(mut self, daemon: DaemonClient<Channel>, mut pid: u32) {
        // `None` while pincerd does not answer.
        let mut up = Some(daemon);
        loop {
            tokio::time::sleep(EVERY).await;
            if !self.idle.load(Ordering::SeqCst) {
                continue;
            }
            match up.as_mut() {
                Some(daemon) => match status(daemon).await {
                    Some(now) if now == pid => {}
                    Some(now) => {
                        pid = now;
                        self.say(&format!("  ✓ pincerd restarted (pid {now}); reconnected"));
                        self.reconnected.store(true, Ordering::SeqCst);
                    }
                    None => {
                        up = None;
                        self.say("  ! pincerd stopped; reconnecting… (what you type is kept)");
                    }
                },
                None => {
                    let Ok(clients) = rpc::connect(&self.home, self.explicit_home).await else {
                        continue;
                    };
                    let mut daemon = clients.daemon;
                    if let Some(now) = status(&mut daemon).await {
                        pid = now;
                        up = Some(daemon);
                        self.say(&format!("  ✓ reconnected to pincerd (pid {now})"));
                        self.reconnected.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
    }

    /// Prints above the prompt; a failed print loses the message (the
    /// chat goes on either way).
    fn say(&mut self, message: &str) {
        let _ = self.printer.print(format!("{message}\n"));
    }
}

/// pincerd's pid, or `None` when it does not answer in time.
async fn status(daemon: &mut DaemonClient<Channel>) -> Option<u32> {
    let asked = tokio::time::timeout(STATUS_TIMEOUT, daemon.status(pb::StatusRequest {})).await;
    match asked {
        Ok(Ok(r)) => Some(r.into_inner().pid),
        _ => None,
    }
}
