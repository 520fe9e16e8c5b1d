//! What the exec sandbox costs per command: `sh -c true` started the way
//! `exec` starts it, bare (`sandbox = "off"`, the baseline) and through
//! the launcher (`pincer-sandbox`: one more `exec`, Landlock rules for the
//! system folders, the seccomp filter), in the same run.
//!
//! Rows: `bare`; `one more exec (env)`, the floor of any launcher (one
//! more `exec`, of a small C program that confines nothing); `sandboxed`;
//! and `added (interleaved)`, the sandbox's added cost per command
//! measured as pairs of one bare and one sandboxed command, alternating,
//! so that the machine's load falls on both alike (the rows above run one
//! after the other, and their difference moves with whatever else runs).
//!
//! Run with `cargo bench -p pincer-daemon --bench exec_sandbox`. The
//! launcher is another package's binary, which cargo does not build for a
//! bench of this one, so the bench builds it first, in the bench's own
//! profile (`release`, or the `--profile` given), into the same folder;
//! `PINCER_BENCH_LAUNCHER` names another one instead (`bench/run.py`
//! passes the release build's, the launcher as shipped, when the bench
//! itself is built in `quick-release`).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use pincer_daemon::config::{ExecSandboxMode, ExecSandboxSettings};
use pincer_daemon::home::Home;
use pincer_daemon::sandbox::{Jail, Sandbox};

/// One way of starting the command.
#[derive(Clone, Copy)]
enum Way {
    Bare,
    /// Through `env`: one more `exec`, nothing confined.
    Env,
    Sandboxed,
}

struct Setup {
    sandbox: Sandbox,
    workspace: PathBuf,
}

impl Setup {
    /// Runs `sh -c true` the `way` given, to its end.
    async fn run(&self, way: Way) {
        let settings = ExecSandboxSettings {
            mode: match way {
                Way::Sandboxed => ExecSandboxMode::Auto,
                Way::Bare | Way::Env => ExecSandboxMode::Off,
            },
            ..Default::default()
        };
        let jail = Jail::writing(vec![self.workspace.clone()], "agents/main");
        let program = if matches!(way, Way::Env) { "env" } else { "sh" };
        let mut cmd = self.sandbox.command(&settings, &jail, program).unwrap();
        if matches!(way, Way::Env) {
            // The C locale: env's own locale set-up (C.UTF-8 is read from
            // files) is no part of the floor.
            cmd.arg("sh").env("LC_ALL", "C");
        }
        let status = cmd
            .arg("-c")
            .arg("true")
            .current_dir(&self.workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .await
            .unwrap();
        assert!(status.success());
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    let workspace = dir.path().join("home/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let setup = Setup {
        sandbox: Sandbox::new(&home).with_launcher(&launcher()),
        workspace,
    };
    let on = ExecSandboxSettings::default();
    assert!(setup.sandbox.active(&on), "{}", setup.sandbox.sentence(&on));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let setup = &setup;
    let mut group = c.benchmark_group("exec_sandbox");
    for (name, way) in [
        ("bare", Way::Bare),
        ("one more exec (env)", Way::Env),
        ("sandboxed", Way::Sandboxed),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| setup.run(way));
        });
    }
    group.bench_function("added (interleaved)", |b| {
        b.to_async(&rt).iter_custom(|iters| async move {
            let (mut bare, mut sandboxed) = (Duration::ZERO, Duration::ZERO);
            for i in 0..iters {
                // Each order half of the time: neither pays for going
                // first.
                let order = if i % 2 == 0 {
                    [Way::Bare, Way::Sandboxed]
                } else {
                    [Way::Sandboxed, Way::Bare]
                };
                for way in order {
                    let started = Instant::now();
                    setup.run(way).await;
                    let took = started.elapsed();
                    match way {
                        Way::Sandboxed => sandboxed += took,
                        _ => bare += took,
                    }
                }
            }
            // A sample of a pair or two can come out negative when the
            // bare one met a hiccup; criterion refuses a zero, and the
            // median it reports is the same either way.
            sandboxed.saturating_sub(bare).max(Duration::from_nanos(1))
        });
    });
    group.finish();
}

/// `pincer-sandbox`: the one `PINCER_BENCH_LAUNCHER` names, else built as
/// it ships (`packaging/launcher.sh`, statically linked) in this bench's
/// profile, in the target folder pincerd was built in.
fn launcher() -> PathBuf {
    if let Some(given) = std::env::var_os("PINCER_BENCH_LAUNCHER") {
        let given = PathBuf::from(given);
        assert!(
            given.is_file(),
            "PINCER_BENCH_LAUNCHER names {}, which is not a file",
            given.display()
        );
        return given;
    }
    let pincerd = Path::new(env!("CARGO_BIN_EXE_pincerd"));
    let dir = pincerd.parent().unwrap();
    let profile = dir.file_name().unwrap().to_str().unwrap();
    let profile = if profile == "debug" { "dev" } else { profile };
    let built = std::process::Command::new("bash")
        .args(["packaging/launcher.sh", "--profile", profile])
        .env("CARGO_TARGET_DIR", dir.parent().unwrap())
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cannot build the launcher: run `bash packaging/launcher.sh --profile {profile}` ({})",
        String::from_utf8_lossy(&built.stderr)
    );
    let path = String::from_utf8(built.stdout).unwrap();
    PathBuf::from(path.trim())
}

criterion_group!(benches, bench);
criterion_main!(benches);
