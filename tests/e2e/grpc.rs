//! The API from clients we did not write (grpcurl, via reflection), and the
//! socket's refusal of other users.
//!
//! grpcurl 1.8.6 (the build on PyPI) sends the socket path as HTTP/2
//! `:authority`, which the h2 server rejects (hyperium/h2#487); grpcurl
//! 1.8.10 and later send `localhost`. Hence `-authority localhost` here.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use pincer_testkit::harness::{TestHome, bins};
use pincer_testkit::peers::peer;

/// `grpcurl -plaintext -unix -authority localhost [-d DATA] SOCKET ARGS…`
fn grpcurl(sock: &Path, data: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(peer("grpcurl"));
    cmd.args(["-plaintext", "-unix", "-authority", "localhost"]);
    if let Some(d) = data {
        cmd.args(["-d", d]);
    }
    cmd.arg(sock).args(args).output().expect("run grpcurl")
}

#[tokio::test(flavor = "multi_thread")]
async fn grpcurl_lists_services_by_reflection_and_calls_status() {
    let home = TestHome::new();
    let daemon = home.start();
    let sock = home.path().join("run/pincerd.sock");
    let list = grpcurl(&sock, None, &["list"]);
    let services = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    for s in [
        "pincer.v1.Agent",
        "pincer.v1.Sessions",
        "pincer.v1.Daemon",
        "pincer.v1.Skills",
        "pincer.v1.Channels",
        "pincer.v1.Workflows",
        "grpc.health.v1.Health",
    ] {
        assert!(
            services.lines().any(|l| l.trim() == s),
            "{s} missing from: {services}"
        );
    }
    // A workflow problem comes back over the wire with its line.
    std::fs::create_dir_all(home.workspace().join("workflows")).unwrap();
    std::fs::write(
        home.workspace().join("workflows/w.toml"),
        "[[steps]]\nid = \"a\"\nkind = \"tol\"\n",
    )
    .unwrap();
    let listed = grpcurl(&sock, Some("{}"), &["pincer.v1.Workflows/List"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(body["workflows"][0]["name"], "w");
    assert_eq!(body["workflows"][0]["problems"][0]["line"], 3);
    assert!(
        body["workflows"][0]["problems"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("unknown step kind `tol` (did you mean `tool`?)")
    );
    let status = grpcurl(&sock, Some("{}"), &["pincer.v1.Daemon/Status"]);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["home"], home.path().to_str().unwrap());
    let health = grpcurl(
        &sock,
        Some(r#"{"service":"pincer.v1.Agent"}"#),
        &["grpc.health.v1.Health/Check"],
    );
    assert!(String::from_utf8_lossy(&health.stdout).contains("SERVING"));
    // A bad request from outside gets a status, not a crash.
    let bad = grpcurl(&sock, Some(r#"{"message":""}"#), &["pincer.v1.Agent/Chat"]);
    assert_eq!(
        bad.status.code(),
        Some(64 + 3),
        "INVALID_ARGUMENT expected: {}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // The Channels service from outside: no channel configured, and a
    // pairing verb on an unknown channel is NOT_FOUND with its sentence.
    let channels = grpcurl(&sock, Some("{}"), &["pincer.v1.Channels/Status"]);
    assert!(
        channels.status.success(),
        "{}",
        String::from_utf8_lossy(&channels.stderr)
    );
    let pairing = grpcurl(
        &sock,
        Some(r#"{"channel":"irc","code":"ABCDEFGH","approve":true}"#),
        &["pincer.v1.Channels/DecidePairing"],
    );
    assert_eq!(pairing.status.code(), Some(64 + 5), "NOT_FOUND expected");
    assert!(
        String::from_utf8_lossy(&pairing.stderr).contains("no channel `irc` is configured"),
        "{}",
        String::from_utf8_lossy(&pairing.stderr)
    );
    home.cli(&["status"]).await.ok();

    // Daemon.Shutdown stops the daemon cleanly.
    let stop = grpcurl(&sock, Some("{}"), &["pincer.v1.Daemon/Shutdown"]);
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert_eq!(daemon.wait_exit(), Some(0));
    assert!(!sock.exists(), "the socket is still there after Shutdown");
    assert_eq!(home.cli(&["status"]).await.code, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_socket_refuses_other_users() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test switches to the user `nobody` and must run as root (CI does); run the suite as root or in a container"
    );
    let home = TestHome::new();
    let _d = home.start();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&bins().pincer)
            .arg("--home")
            .arg(home.path())
            .args(args)
            .output()
            .expect("setpriv (util-linux) is needed to run a client as nobody")
    };
    // The binary must be reachable by nobody for the test to mean anything.
    let probe = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bins().pincer)
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "user nobody cannot run {}: {}",
        bins().pincer.display(),
        String::from_utf8_lossy(&probe.stderr)
    );

    // 1. File permissions: another user cannot even reach the socket.
    let out = as_nobody(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // 2. Even with the permissions opened up, the peer-uid check refuses.
    for (path, mode) in [
        (home.path().to_path_buf(), 0o711),
        (home.path().join("run"), 0o711),
        (home.path().join("run/pincerd.sock"), 0o666),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out = as_nobody(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("connections from uid 65534 are refused"),
        "{err}"
    );
    // The owner is still served.
    home.cli(&["status"]).await.ok();
}
