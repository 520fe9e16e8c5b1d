//! Connecting to pincerd's socket. Every failure becomes a [`CliError`]
//! with the exit code SPEC §4 assigns (3: the daemon is not running).

use std::io;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use interprocess::local_socket::tokio::Stream as LocalStream;
use interprocess::local_socket::tokio::prelude::*;
use interprocess::local_socket::{GenericFilePath, ToFsName};
use pincer_proto::v1::agent_client::AgentClient;
use pincer_proto::v1::daemon_client::DaemonClient;
use pincer_proto::v1::memory_client::MemoryClient;
use pincer_proto::v1::sessions_client::SessionsClient;
use pincer_proto::v1::skills_client::SkillsClient;
use pincer_proto::v1::tools_client::ToolsClient;
use tonic::transport::{Channel, Endpoint, Uri};

/// An error with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(1, message)
    }
}

impl From<tonic::Status> for CliError {
    fn from(s: tonic::Status) -> Self {
        let code = if s.code() == tonic::Code::Unavailable {
            3
        } else {
            1
        };
        Self::new(code, s.message().to_string())
    }
}

pub const NOT_RUNNING: u8 = 3;

/// The sentence SPEC §4 prescribes, with the command that fits this home.
pub fn not_running(home: &Path, explicit_home: bool) -> CliError {
    let start = if explicit_home {
        format!("pincerd --home {} --background", home.display())
    } else {
        "pincerd --background".to_string()
    };
    CliError::new(
        NOT_RUNNING,
        format!(
            "pincerd is not running; start it with `{start}` (or `pincer service start` once the service is installed)"
        ),
    )
}

/// The API clients over one connection.
pub struct Clients {
    pub agent: AgentClient<Channel>,
    pub sessions: SessionsClient<Channel>,
    pub daemon: DaemonClient<Channel>,
    pub tools: ToolsClient<Channel>,
    pub memory: MemoryClient<Channel>,
    pub skills: SkillsClient<Channel>,
}

pub async fn connect(home: &Path, explicit_home: bool) -> Result<Clients, CliError> {
    let socket = home.join("run").join("pincerd.sock");
    // Probe first so the common failures get precise sentences.
    if let Err(e) = std::os::unix::net::UnixStream::connect(&socket) {
        return Err(match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                not_running(home, explicit_home)
            }
            io::ErrorKind::PermissionDenied => CliError::failed(format!(
                "permission denied on {}: the socket belongs to another user (pincerd only serves its own user)",
                socket.display()
            )),
            _ => CliError::failed(format!("cannot connect to {}: {e}", socket.display())),
        });
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
        .map_err(|e| CliError::failed(format!("cannot connect to {}: {e}", socket.display())))?;
    Ok(Clients {
        agent: AgentClient::new(channel.clone()),
        sessions: SessionsClient::new(channel.clone()),
        daemon: DaemonClient::new(channel.clone()),
        tools: ToolsClient::new(channel.clone()),
        memory: MemoryClient::new(channel.clone()),
        skills: SkillsClient::new(channel),
    })
}
