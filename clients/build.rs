//! Stamps the commit `pincer` was built from into `PINCER_COMMIT` for
//! `pincer --version`: `git rev-parse --short=12 HEAD`, else `$PINCER_COMMIT` (a tarball build, where there
//! is no `.git`), else `unknown`. Only the CLI has this script: on the daemon
//! it would rebuild pincerd on every commit.

#![allow(
    clippy::disallowed_macros,
    reason = "cargo reads a build script's instructions from its stdout"
)]

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PINCER_COMMIT");
    let commit = git_commit().unwrap_or_else(|| {
        std::env::var("PINCER_COMMIT")
            .ok()
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| "unknown".to_string())
    });
    println!("cargo:rustc-env=PINCER_COMMIT={commit}");
}

/// The short commit of HEAD, or `None` outside a git checkout. Registers the
/// files that change when HEAD moves (HEAD itself, the branch's ref and the
/// packed refs), which `--git-path` finds in worktrees too. No `-dirty`
/// mark: an edit to a file does not rerun this script, so the mark would lie.
fn git_commit() -> Option<String> {
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    let paths = git(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "HEAD",
        "--git-common-dir",
    ])?;
    let mut watched: Vec<PathBuf> = paths.lines().map(PathBuf::from).collect();
    if let Some(common) = watched.pop() {
        watched.push(common.join("packed-refs"));
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            &reference,
        ])
    {
        watched.push(PathBuf::from(path));
    }
    // A missing file would make cargo rerun this script on every build.
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(head)
}

/// One git command's trimmed stdout, or `None` when git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}
