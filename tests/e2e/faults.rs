//! The fault suite (issue 29; docs/src/hardening.md): faults thrown at a
//! running pincerd that is not to blame for them. Here the disk filling
//! up: pincerd's home on a small tmpfs, filled to the last byte while it
//! works. What a person asks for meanwhile fails with a sentence that says
//! why, nothing already written is lost or corrupted, and once space
//! returns everything works again without a restart — the turn, the
//! registry, the memory index catching up with the note saved meanwhile.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::Value;

/// A tmpfs of `mb` megabytes mounted over a folder, unmounted when
/// dropped: a disk that fills up in an instant.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    fn mount(path: &Path, mb: u64) -> Self {
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mb}m,mode=0700"),
                "tmpfs",
            ])
            .arg(path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "the fault suite mounts a small tmpfs and must run as root (tests/run.sh does): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            path: path.to_path_buf(),
        }
    }

    /// Writes a file until the disk has no byte left.
    fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        let mut f = std::fs::File::create(&filler).expect("the filler");
        let block = vec![0u8; 64 * 1024];
        loop {
            if f.write_all(&block).is_err() {
                break;
            }
        }
        // The last partial block too.
        while f.write_all(&block[..512]).is_ok() {}
        while f.write_all(&block[..1]).is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

/// Every database under `state/` passes SQLite's integrity check.
fn databases_whole(home: &TestHome) {
    for entry in std::fs::read_dir(home.path().join("state"))
        .unwrap()
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "db") {
            continue;
        }
        let db = rusqlite::Connection::open(&path).unwrap();
        let check: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok", "{}: {check}", path.display());
    }
}

/// Every transcript line parses.
fn transcripts_whole(home: &TestHome) -> Vec<Value> {
    let mut entries = Vec::new();
    let dir = home.path().join("sessions/main");
    for file in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(file.path()).unwrap();
        for line in text.lines() {
            entries.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: {e}: {line:?}", file.path().display())),
            );
        }
    }
    entries
}

async fn found(home: &TestHome, needle: &str) -> bool {
    let out = home
        .cli(&["memory", "search", "--json", "--min-score", "0", needle])
        .await;
    out.json()["hits"].to_string().contains(needle)
}

async fn eventually_found(home: &TestHome, needle: &str, within: Duration) {
    let start = Instant::now();
    while !found(home, needle).await {
        let status = home.cli(&["memory", "status"]).await;
        assert!(
            start.elapsed() < within,
            "`{needle}` not searchable after {within:?}: {}{}",
            status.stdout,
            status.stderr
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_is_said_loses_nothing_and_pincer_recovers_when_space_returns() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    llm.script_cycle("[disk]", vec![Step::text("noted")]);
    let home = TestHome::new();
    let disk = SmallDisk::mount(home.path(), 16);
    // The workspace on another disk: the notes can still be saved while
    // pincerd's own disk is full.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("memory")).unwrap();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        &format!(
            "workspace = \"{}\"\n[memory]\nembedder = \"none\"\n",
            ws.path().display()
        ),
    ));
    let daemon = home.start();
    let out = home.cli(&["send", "[disk] before"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::write(ws.path().join("memory/alpha.md"), "alphanote1 before\n").unwrap();
    eventually_found(&home, "alphanote1", Duration::from_secs(10)).await;

    let filler = disk.fill();
    // A turn either fails saying why or is recorded (a transcript's last
    // page may still have room on a full disk).
    let during = home.cli(&["send", "[disk] during"]).await;
    eprintln!(
        "faults disk: a turn on the full disk {}",
        if during.code == 0 {
            "was answered and recorded (the transcript's last page had room)".to_string()
        } else {
            format!("failed: {}", during.stderr.trim())
        }
    );
    if during.code != 0 {
        assert!(
            during.stderr.contains("full") || during.stderr.contains("space"),
            "a turn on a full disk fails with a sentence that says so: {}",
            during.stderr
        );
    }
    // A new session cannot be recorded: said, not hidden.
    let other = home
        .cli(&["send", "--session", "fresh", "[disk] a new session"])
        .await;
    assert_ne!(other.code, 0, "{}", other.stdout);
    assert!(
        other.stderr.contains("disk is full"),
        "the registry's refusal says why: {}",
        other.stderr
    );
    // A note saved meanwhile cannot be indexed: `memory status` says so.
    std::fs::write(ws.path().join("memory/beta.md"), "betanote2 during\n").unwrap();
    let start = Instant::now();
    loop {
        let status = home.cli(&["memory", "status"]).await;
        if status.stdout.contains("error:") && status.stdout.contains("full") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "memory status does not say the index could not be written: {}",
            status.stdout
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    std::fs::remove_file(filler).unwrap();
    let after = home.cli(&["send", "[disk] after"]).await;
    assert_eq!(
        after.code, 0,
        "the turn once space returned: {}",
        after.stderr
    );
    let fresh = home
        .cli(&["send", "--session", "fresh", "[disk] fresh after"])
        .await;
    assert_eq!(
        fresh.code, 0,
        "a new session once space returned: {}",
        fresh.stderr
    );
    eventually_found(&home, "betanote2", Duration::from_secs(20)).await;
    assert!(found(&home, "alphanote1").await);
    let status = home.cli(&["memory", "status"]).await;
    assert!(
        !status.stdout.contains("error:"),
        "the index's error is gone once it caught up: {}",
        status.stdout
    );
    let entries = transcripts_whole(&home);
    let mut kept = vec!["[disk] before", "[disk] after", "[disk] fresh after"];
    if during.code == 0 {
        kept.push("[disk] during");
    }
    for said in kept {
        assert!(
            entries
                .iter()
                .any(|e| e["kind"] == "user" && e["text"] == said),
            "{said:?} is not in the transcripts"
        );
    }
    assert_eq!(daemon.stop(), Some(0));
    databases_whole(&home);
}
