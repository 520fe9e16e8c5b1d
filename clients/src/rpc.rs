//! Connecting to pincerd's socket, and the sentences for a daemon that is
//! not there: not running (exit 3), stopping (exit 3: the socket is gone
//! but the instance lock is still held), or gone in the middle of a
//! command (exit 1, said in words, never as transport text).

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use interprocess::local_socket::tokio::Stream as LocalStream;
use interprocess::local_socket::tokio::prelude::*;
use interprocess::local_socket::{GenericFilePath, ToFsName};
use pincer_proto::v1::agent_client::AgentClient;
use pincer_proto::v1::channels_client::ChannelsClient;
use pincer_proto::v1::daemon_client::DaemonClient;
use pincer_proto::v1::memory_client::MemoryClient;
use pincer_proto::v1::schedules_client::SchedulesClient;
use pincer_proto::v1::sessions_client::SessionsClient;
use pincer_proto::v1::skills_client::SkillsClient;
use pincer_proto::v1::tools_client::ToolsClient;
use pincer_proto::v1::workflows_client::WorkflowsClient;
use tonic::transport::{Channel, Endpoint, Uri};

pub use crate::error::{CliError, NOT_RUNNING};

/// The API clients over one connection.
pub struct Clients {
    pub agent: AgentClient<Channel>,
    pub sessions: SessionsClient<Channel>,
    pub daemon: DaemonClient<Channel>,
    pub tools: ToolsClient<Channel>,
    pub memory: MemoryClient<Channel>,
    pub skills: SkillsClient<Channel>,
    pub channels: ChannelsClient<Channel>,
    pub workflows: WorkflowsClient<Channel>,
    pub schedules: SchedulesClient<Channel>,
}

pub fn socket_path(home: &Path) -> PathBuf {
    home.join("run").join("pincerd.sock")
}

pub fn lock_path(home: &Path) -> PathBuf {
    home.join("run").join("pincerd.lock")
}

/// The command that starts pincerd for this home.
pub fn start_command(home: &Path, explicit_home: bool) -> String {
    if explicit_home {
        format!("pincerd --home {} --background", home.display())
    } else {
        "pincerd --background".to_string()
    }
}

/// The sentence SPEC §4 prescribes, with the command that fits this home.
pub fn not_running(home: &Path, explicit_home: bool) -> CliError {
    CliError::new(
        NOT_RUNNING,
        format!(
            "pincerd is not running; start it with `{}`",
            start_command(home, explicit_home)
        ),
    )
}

fn stopping() -> CliError {
    CliError::new(
        NOT_RUNNING,
        "pincerd is stopping: its socket no longer answers, but it has not exited yet; wait a moment (running turns get up to [daemon] shutdown_grace_s), then start it again; `pincer logs` shows how far it got",
    )
}

/// Whether a process (pincerd) holds the instance lock. A non-blocking
/// `flock` attempt tells; a lock we get is released at once.
pub fn lock_held(home: &Path) -> bool {
    let Ok(file) = std::fs::File::open(lock_path(home)) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; closing `file` releases it.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    rc != 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

/// Whether something answers on the socket.
pub fn socket_answers(home: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket_path(home)).is_ok()
}

/// Why the socket cannot be used, as the error to report.
fn unreachable(home: &Path, explicit_home: bool, e: &io::Error) -> CliError {
    let socket = socket_path(home);
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused if lock_held(home) => stopping(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            not_running(home, explicit_home)
        }
        io::ErrorKind::PermissionDenied => CliError::failed(format!(
            "permission denied on {}: the socket belongs to another user (pincerd only serves its own user)",
            socket.display()
        )),
        _ => CliError::failed(format!("cannot connect to {}: {e}", socket.display())),
    }
}

/// What was running when the connection broke.
#[derive(Clone, Copy)]
pub enum During {
    Command,
    Turn,
}

/// The sentence for a connection that broke mid-command: what happened
/// (pincerd stopped, is stopping, or is still there) and what to do.
pub fn lost_connection(home: &Path, explicit_home: bool, during: During) -> CliError {
    let start = start_command(home, explicit_home);
    let what = match during {
        During::Command => "the command",
        During::Turn => "the turn",
    };
    let kept = match during {
        During::Command => "",
        During::Turn => "; its transcript keeps what was said",
    };
    let message = match settle(home) {
        Now::Answers => format!(
            "the connection to pincerd closed while {what} was running{kept}; pincerd still answers, so try again, and check `pincer logs` if it happens again"
        ),
        Now::Stopping => format!(
            "pincerd is stopping and closed the connection while {what} was running{kept}; once it has exited, start it again with `{start}`"
        ),
        Now::Gone => format!(
            "pincerd stopped while {what} was running (the connection closed){kept}; start it again with `{start}` and check `pincer logs`"
        ),
    };
    CliError::failed(message)
}

/// What became of pincerd after a connection broke.
enum Now {
    Answers,
    Stopping,
    Gone,
}

/// Looks for up to half a second: a dying process closes its connections
/// before its listening socket and its lock, so a first look can still see
/// a socket that answers.
fn settle(home: &Path) -> Now {
    const LOOKS: u32 = 20;
    for look in 1..=LOOKS {
        let answers = socket_answers(home);
        let held = lock_held(home);
        match (answers, held) {
            (false, false) => return Now::Gone,
            _ if look < LOOKS => std::thread::sleep(std::time::Duration::from_millis(25)),
            (true, _) => return Now::Answers,
            (false, true) => return Now::Stopping,
        }
    }
    Now::Gone
}

/// Replaces tonic's text of a broken connection with the sentence.
pub fn explain(e: CliError, home: &Path, explicit_home: bool, during: During) -> CliError {
    if e.lost_connection {
        lost_connection(home, explicit_home, during)
    } else {
        e
    }
}

pub async fn connect(home: &Path, explicit_home: bool) -> Result<Clients, CliError> {
    let socket = socket_path(home);
    // Probe first so the common failures get precise sentences.
    if let Err(e) = std::os::unix::net::UnixStream::connect(&socket) {
        return Err(unreachable(home, explicit_home, &e));
    }
    let path: PathBuf = socket.clone();
    let channel = Endpoint::from_static("http://pincerd.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let name = path.as_path().to_fs_name::<GenericFilePath>()?;
                let stream = LocalStream::connect(name).await?;
                Ok::<_, io::Error>(TokioIo::new(stream))
            }
        }))
        .await
        .map_err(|_| lost_connection(home, explicit_home, During::Command))?;
    Ok(Clients {
        agent: AgentClient::new(channel.clone()),
        sessions: SessionsClient::new(channel.clone()),
        daemon: DaemonClient::new(channel.clone()),
        tools: ToolsClient::new(channel.clone()),
        memory: MemoryClient::new(channel.clone()),
        skills: SkillsClient::new(channel.clone()),
        channels: ChannelsClient::new(channel.clone()),
        workflows: WorkflowsClient::new(channel.clone()),
        schedules: SchedulesClient::new(channel),
    })
}

/// `Ok` when pincerd answers on its socket now, else why not (not running,
/// stopping, another user's socket).
pub fn reachable(home: &Path, explicit_home: bool) -> Result<(), CliError> {
    std::os::unix::net::UnixStream::connect(socket_path(home))
        .map(|_| ())
        .map_err(|e| unreachable(home, explicit_home, &e))
}
