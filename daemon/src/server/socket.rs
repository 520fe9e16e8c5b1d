//! The daemon's Unix socket: single-instance lock, stale-socket recovery,
//! 0600 permissions, and the bridge from `interprocess` local-socket streams
//! to tonic (a newtype that carries the peer's uid as tonic `ConnectInfo`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use interprocess::local_socket::tokio::Stream as LocalStream;
use interprocess::local_socket::traits::StreamCommon;
use interprocess::local_socket::traits::tokio::Listener as _;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use crate::launch::StartedBy;

/// Why the socket could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{}", crate::launch::already_running(home, pid, owner.as_ref()))]
    AlreadyRunning {
        home: String,
        pid: String,
        /// Who started the running daemon, as it recorded.
        owner: Option<StartedBy>,
    },
    #[error("cannot create the socket {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Holds the exclusive lock on `run/pincerd.lock` for the daemon's life.
pub struct InstanceLock {
    _file: File,
    pid_file: PathBuf,
    started_by_file: PathBuf,
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pid_file);
        let _ = std::fs::remove_file(&self.started_by_file);
    }
}

/// `run/pincerd.started-by`: one line naming who started the daemon that
/// holds the lock ([`StartedBy::to_line`]).
pub fn started_by_file(run_dir: &Path) -> PathBuf {
    run_dir.join("pincerd.started-by")
}

/// Who started the daemon that holds the lock, as it recorded.
pub fn recorded_owner(run_dir: &Path) -> Option<StartedBy> {
    std::fs::read_to_string(started_by_file(run_dir))
        .ok()
        .and_then(|l| StartedBy::from_line(&l))
}

/// Takes the single-instance lock. A second daemon fails here, before it
/// touches the socket of the first, and says who started the first.
pub fn lock_instance(
    run_dir: &Path,
    home: &Path,
    started_by: &StartedBy,
) -> Result<InstanceLock, SocketError> {
    let lock_path = run_dir.join("pincerd.lock");
    let pid_file = run_dir.join("pincerd.pid");
    let started_by_file = started_by_file(run_dir);
    let io_err = |source| SocketError::Io {
        path: lock_path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err)?;
    // SAFETY: flock on a file descriptor we own; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let pid = std::fs::read_to_string(&pid_file).unwrap_or_else(|_| "unknown".into());
            return Err(SocketError::AlreadyRunning {
                home: home.display().to_string(),
                pid: pid.trim().to_string(),
                owner: recorded_owner(run_dir),
            });
        }
        return Err(io_err(err));
    }
    std::fs::write(&pid_file, std::process::id().to_string()).map_err(io_err)?;
    std::fs::write(&started_by_file, started_by.to_line()).map_err(io_err)?;
    Ok(InstanceLock {
        _file: file,
        pid_file,
        started_by_file,
    })
}

/// Binds the socket with mode 0600. Call only while holding the instance
/// lock: any socket file left there is stale (its daemon died) and is
/// replaced.
pub fn bind(path: &Path) -> Result<interprocess::local_socket::tokio::Listener, SocketError> {
    let io_err = |source| SocketError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        tracing::info!(path = %path.display(), "replacing a stale socket left by a daemon that did not stop cleanly");
        std::fs::remove_file(path).map_err(io_err)?;
    }
    let name = path.to_fs_name::<GenericFilePath>().map_err(io_err)?;
    ListenerOptions::new()
        .name(name)
        .mode(0o600)
        .reclaim_name(true)
        .create_tokio()
        .map_err(io_err)
}

/// What tonic learns about each connection.
#[derive(Debug, Clone, Copy)]
pub struct PeerInfo {
    /// The peer's effective uid, when the OS tells.
    pub uid: Option<u32>,
}

/// A local-socket connection usable by tonic.
pub struct Conn {
    inner: LocalStream,
    peer: PeerInfo,
}

impl Conn {
    fn new(inner: LocalStream) -> Self {
        let uid = inner.peer_creds().ok().and_then(|c| c.euid());
        Self {
            inner,
            peer: PeerInfo { uid },
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = PeerInfo;
    fn connect_info(&self) -> PeerInfo {
        self.peer
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The accepted connections as a stream for tonic. Accept errors are
/// logged and skipped so that one bad connection cannot stop the server.
pub fn incoming(
    listener: interprocess::local_socket::tokio::Listener,
) -> impl Stream<Item = Result<Conn, io::Error>> + Send + 'static {
    futures_util::stream::unfold(listener, |listener| async move {
        loop {
            match listener.accept().await {
                Ok(stream) => return Some((Ok(Conn::new(stream)), listener)),
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// Refuses every request from a uid other than the daemon's own.
pub fn check_peer(req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    match req.extensions().get::<PeerInfo>().and_then(|p| p.uid) {
        Some(uid) if uid == me => Ok(req),
        Some(uid) => {
            tracing::warn!(peer_uid = uid, "refused a connection from another user");
            Err(tonic::Status::permission_denied(format!(
                "this pincerd belongs to uid {me}; connections from uid {uid} are refused"
            )))
        }
        None => Err(tonic::Status::permission_denied(
            "the peer's uid could not be verified",
        )),
    }
}
