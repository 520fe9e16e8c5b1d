//! `exec`: runs a shell command in the workspace, in its own process group,
//! with a timeout, confined by the exec sandbox ([`crate::sandbox`]).
//! Output (stdout and stderr interleaved) is capped by keeping its head and
//! tail. An abort or timeout kills the whole process
//! group, so background children die with it; so does pincerd's death,
//! even by `kill -9` ([`crate::children`]).

use std::process::Stdio;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::sandbox::Jail;
use crate::util::cap_head_tail;

/// Bytes of output kept in memory at most (head and tail halves).
const MAX_CAPTURE: usize = 4 * 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// Shell command line, run with `sh -c`.
    pub command: String,
    /// Working folder, relative to the workspace (default: the workspace).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Timeout in seconds (default from config, 120; none for background jobs).
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// Start it as a background job and return its id at once (see `process`).
    #[serde(default)]
    pub background: bool,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "exec",
        "Run a shell command in the workspace and return its exit status and output (stdout and stderr together, long output shortened in the middle).",
        &["runtime"],
        ToolFlags::default(),
        exec,
    )
    .with_aliases(&[("cmd", "command"), ("workdir", "cwd")])
}

async fn exec(args: ExecArgs, ctx: ToolContext) -> ToolOutput {
    if args.command.trim().is_empty() {
        return ToolOutput::error("command is empty");
    }
    // A chat that is not the owner's (offered exec only where its own
    // layers name it) runs in the sandbox or not at all, starts in its own
    // folder, writes only there and sees neither the owner's memory nor
    // other chats' folders.
    let stranger = ctx.files.jail();
    if stranger.is_some() && !ctx.sandbox.active(&ctx.settings.exec_sandbox) {
        return ToolOutput::refused(format!(
            "exec runs for a chat that is not the owner's only in the sandbox, and {}",
            ctx.sandbox.sentence(&ctx.settings.exec_sandbox)
        ));
    }
    // Made beneath the workspace root without following a link: a chat's
    // folder (or the inbox) turned into a link must not become the
    // command's folder, nor its sandbox's writable one.
    if let Err(e) = super::write::make_own_folder(&ctx.files) {
        return ToolOutput::error(format!("cannot make this chat's folder: {e}"));
    }
    let own = ctx.files.own_folder();
    let cwd = match (&args.cwd, own) {
        (None, Some(own)) => own,
        (cwd, _) => match ctx.files.read(cwd.as_deref().unwrap_or(".")) {
            Ok(p) => p,
            Err(e) => return e.output(),
        },
    };
    let timeout = args
        .timeout_s
        .map(Duration::from_secs)
        .unwrap_or(ctx.settings.exec_timeout)
        .min(Duration::from_secs(24 * 3600));
    // A temp folder per chat: another chat's commands never see its files.
    let tmp_name = match &stranger {
        None => format!("agents/{}", ctx.agent),
        Some(_) => format!("chats/{}/{}", ctx.agent, ctx.origin.principal),
    };
    let jail = match stranger {
        None => Jail::writing(vec![ctx.workspace.clone()], &tmp_name),
        Some(paths) => Jail {
            write: paths.write,
            read: paths.read,
            hidden: paths.hidden,
            tmp_name: &tmp_name,
        },
    };
    let mut cmd = match ctx.sandbox.command(&ctx.settings.exec_sandbox, &jail, "sh") {
        Ok(cmd) => cmd,
        Err(refused) => return ToolOutput::error(refused.to_string()),
    };
    let script = crate::children::shell_script(&mut cmd, &args.command);
    crate::children::die_with_daemon(&mut cmd);
    cmd.arg("-c")
        .arg(script)
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    for var in ctx.secret_env.iter() {
        cmd.env_remove(var);
    }
    if args.background {
        cmd.kill_on_drop(false);
    }
    let started = Instant::now();
    let mut child = match crate::children::spawn(move || cmd.spawn()).await {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("cannot start `sh`: {e}")),
    };
    let pgid = child.id();
    let mut stdout = match child.stdout.take() {
        Some(s) => s,
        None => return ToolOutput::error("cannot capture the command's output"),
    };
    if args.background {
        return background(child, stdout, pgid, &args, &ctx);
    }
    let reader = tokio::spawn(async move {
        let mut capture = Capture::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => capture.push(&buf[..n]),
            }
        }
        capture
    });

    enum End {
        Exited(std::process::ExitStatus),
        TimedOut,
        Aborted,
        WaitFailed(std::io::Error),
    }
    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => End::Exited(s),
            Err(e) => End::WaitFailed(e),
        },
        _ = tokio::time::sleep(timeout) => End::TimedOut,
        _ = ctx.cancel.cancelled() => End::Aborted,
    };
    if !matches!(end, End::Exited(_)) {
        kill_group(pgid);
        let _ = child.wait().await;
    } else {
        // The shell exited; stop any background children it left behind.
        kill_group(pgid);
    }
    // Children that escaped the group could keep the pipe open: bound the wait.
    let capture = tokio::time::timeout(Duration::from_secs(2), reader)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let output = cap_head_tail(&capture.text(), ctx.settings.exec_max_output_chars);
    let elapsed = started.elapsed().as_millis();
    match end {
        End::Exited(status) => {
            use std::os::unix::process::ExitStatusExt;
            let head = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => "exited".to_string(),
            };
            let text = format!("{head} ({elapsed} ms)\n{output}");
            if status.success() {
                ToolOutput::ok(text)
            } else {
                ToolOutput::error(text)
            }
        }
        End::TimedOut => ToolOutput::error(format!(
            "timed out after {} s; the process group was killed. Output so far:\n{output}",
            timeout.as_secs()
        )),
        End::Aborted => ToolOutput::error(format!(
            "aborted; the process group was killed. Output so far:\n{output}"
        )),
        End::WaitFailed(e) => ToolOutput::error(format!("waiting for the command failed: {e}")),
    }
}

/// Registers a started command as a background job; tasks collect its
/// output and exit status.
fn background(
    mut child: tokio::process::Child,
    mut stdout: tokio::process::ChildStdout,
    pgid: Option<u32>,
    args: &ExecArgs,
    ctx: &ToolContext,
) -> ToolOutput {
    let job = ctx.jobs.add(&ctx.session_key, &args.command, pgid);
    let id = job.id;
    let reader_job = job.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => reader_job.push(&buf[..n]),
            }
        }
    });
    let limit = args.timeout_s.map(Duration::from_secs);
    tokio::spawn(async move {
        let waited = match limit {
            Some(limit) => tokio::time::timeout(limit, child.wait()).await.ok(),
            None => Some(child.wait().await),
        };
        let how = match waited {
            Some(Ok(status)) => match status.code() {
                Some(code) => format!("exit code {code}"),
                None => "killed by a signal".to_string(),
            },
            Some(Err(e)) => format!("waiting failed: {e}"),
            None => "timed out; the process group was killed".to_string(),
        };
        // Children left behind die with the job.
        job.kill();
        let _ = child.wait().await;
        job.finish(how);
    });
    ToolOutput::ok(format!(
        "started background job {id}; use `process` with action poll, log or kill and id {id}"
    ))
}

pub(crate) fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
        // SAFETY: killpg only sends a signal; the group was created by our
        // own spawn (process_group(0)), so it cannot name another group.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// Keeps the first and the last `MAX_CAPTURE / 2` bytes of a stream.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: usize,
}

impl Capture {
    fn push(&mut self, bytes: &[u8]) {
        let half = MAX_CAPTURE / 2;
        let room = half.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        self.tail.extend(rest);
        while self.tail.len() > half {
            self.tail.pop_front();
            self.dropped += 1;
        }
    }

    fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            s.push_str(&format!("\n[… {} bytes omitted …]\n", self.dropped));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        s.push_str(&String::from_utf8_lossy(&tail));
        s
    }
}
