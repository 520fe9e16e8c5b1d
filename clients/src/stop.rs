//! `pincer stop`: asks pincerd to shut down (`Daemon.Shutdown`), says how
//! many turns are still running and how long they get, and returns once
//! the daemon has exited: its socket no longer answers and its instance
//! lock (`run/pincerd.lock`) is free. With no pincerd it says so and exits
//! 3 (SPEC §4).

use std::path::Path;
use std::time::{Duration, Instant};

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::error::{CliError, NOT_RUNNING};
use crate::out::{self, outln};
use crate::rpc;

/// How often the daemon's exit is checked.
const POLL: Duration = Duration::from_millis(50);
/// Time allowed beyond the grace for flushing transcripts and closing.
const SLACK: Duration = Duration::from_secs(30);

pub async fn run(ctx: &Ctx) -> Result<u8, CliError> {
    let mut c = match rpc::connect(&ctx.home, ctx.explicit_home).await {
        Ok(c) => c,
        // Nothing to stop: exit 3 as SPEC §4 says, without the advice to
        // start it that other commands give. One still stopping says so.
        Err(e) if e.code == NOT_RUNNING && !rpc::lock_held(&ctx.home) => {
            return Err(CliError::new(NOT_RUNNING, nothing_to_stop(&ctx.home)));
        }
        Err(e) => return Err(e),
    };
    let pid = c
        .daemon
        .status(pb::StatusRequest {})
        .await?
        .into_inner()
        .pid;
    let r = c
        .daemon
        .shutdown(pb::ShutdownRequest {})
        .await?
        .into_inner();
    drop(c);
    if !ctx.json {
        outln!("{}", stopping_line(r.running_turns, r.grace_s));
    }
    let started = Instant::now();
    let limit = Duration::from_secs(u64::from(r.grace_s)) + SLACK;
    while rpc::socket_answers(&ctx.home) || rpc::lock_held(&ctx.home) {
        if started.elapsed() > limit {
            return Err(CliError::failed(format!(
                "pincerd (pid {pid}) has not exited {} s after it was asked to stop; `pincer logs` shows what it is doing, and `kill {pid}` stops it harder",
                limit.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
    if ctx.json {
        out::json(
            &json!({"stopped": true, "pid": pid, "running_turns": r.running_turns,
                          "grace_s": r.grace_s, "elapsed_ms": started.elapsed().as_millis() as u64}),
        );
    } else {
        outln!("pincerd stopped");
    }
    Ok(0)
}

/// The sentence for `pincer stop` with no pincerd for this home.
fn nothing_to_stop(home: &Path) -> String {
    let socket = rpc::socket_path(home);
    let why = if socket.exists() {
        "nothing answers on"
    } else {
        "no socket at"
    };
    format!(
        "pincerd is not running ({why} {}); there is nothing to stop",
        socket.display()
    )
}

fn stopping_line(running: u32, grace_s: u32) -> String {
    match running {
        0 => "stopping pincerd (no turns running)".to_string(),
        1 => format!("stopping pincerd (1 turn running; it gets up to {grace_s} s)"),
        n => format!("stopping pincerd ({n} turns running; they get up to {grace_s} s)"),
    }
}

#[cfg(test)]
mod tests {
    use super::{nothing_to_stop, stopping_line};

    #[test]
    fn nothing_to_stop_names_the_socket() {
        let home = tempfile::tempdir().unwrap();
        let socket = home.path().join("run/pincerd.sock");
        assert_eq!(
            nothing_to_stop(home.path()),
            format!(
                "pincerd is not running (no socket at {}); there is nothing to stop",
                socket.display()
            )
        );
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        std::fs::write(&socket, "").unwrap();
        assert!(
            nothing_to_stop(home.path()).contains("(nothing answers on "),
            "{}",
            nothing_to_stop(home.path())
        );
    }

    #[test]
    fn the_stopping_line_counts_turns() {
        assert_eq!(stopping_line(0, 10), "stopping pincerd (no turns running)");
        assert_eq!(
            stopping_line(1, 10),
            "stopping pincerd (1 turn running; it gets up to 10 s)"
        );
        assert_eq!(
            stopping_line(2, 5),
            "stopping pincerd (2 turns running; they get up to 5 s)"
        );
    }
}
