//! What the exec sandbox costs per command: `sh -c true` started the way
//! `exec` starts it, bare (`sandbox = "off"`, the baseline) and through
//! the launcher (`pincerd sandbox-exec`: one more `exec`, Landlock rules
//! for the system folders, the seccomp filter), in the same run.
//!
//! Run with `cargo bench -p pincer-daemon --bench exec_sandbox` (as with
//! every bench, a release build of pincerd is used as the launcher).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use criterion::{Criterion, criterion_group, criterion_main};
use pincer_daemon::config::{ExecSandboxMode, ExecSandboxSettings};
use pincer_daemon::home::Home;
use pincer_daemon::sandbox::{Jail, Sandbox};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    let workspace = dir.path().join("home/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let sandbox = Sandbox::new(&home).with_launcher(env!("CARGO_BIN_EXE_pincerd"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("exec_sandbox");
    for (name, mode) in [
        ("bare", ExecSandboxMode::Off),
        ("sandboxed", ExecSandboxMode::Auto),
    ] {
        let settings = ExecSandboxSettings {
            mode,
            ..Default::default()
        };
        if mode == ExecSandboxMode::Auto {
            assert!(sandbox.active(&settings), "{}", sandbox.sentence(&settings));
        }
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let jail = Jail::writing(vec![workspace.clone()], "agents/main");
                let status = sandbox
                    .command(&settings, &jail, "sh")
                    .unwrap()
                    .arg("-c")
                    .arg("true")
                    .current_dir(&workspace)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .status()
                    .await
                    .unwrap();
                assert!(status.success());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
