//! Background jobs: `exec` with `background = true` starts a command that
//! outlives the call, and `process` lists, polls, reads and kills them
//! (SPEC §8.2). A job belongs to the session that started it; other
//! sessions do not see it. Output is kept in memory (the newest
//! `MAX_OUTPUT` bytes); the newest `FINISHED_KEPT` finished jobs stay
//! readable, older ones are forgotten; the daemon kills every job's process
//! group when it stops.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::util::cap_head_tail;

/// Output bytes kept per job (the oldest are dropped first).
const MAX_OUTPUT: usize = 1024 * 1024;
/// Finished jobs kept for `poll` and `log`; when a job starts, older
/// finished ones are forgotten, so a daemon running for weeks does not
/// keep every job's output.
const FINISHED_KEPT: usize = 16;

struct Output {
    text: String,
    /// Bytes dropped from the front so far.
    dropped: usize,
    /// Absolute offset up to which `poll` has returned output.
    polled: usize,
    exit: Option<String>,
}

pub struct Job {
    pub id: u32,
    pub session_key: String,
    pub command: String,
    started: Instant,
    pgid: Option<u32>,
    out: Mutex<Output>,
}

impl Job {
    fn lock(&self) -> std::sync::MutexGuard<'_, Output> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends output, dropping the oldest beyond the limit.
    pub fn push(&self, bytes: &[u8]) {
        let mut o = self.lock();
        o.text.push_str(&String::from_utf8_lossy(bytes));
        if o.text.len() > MAX_OUTPUT {
            let mut cut = o.text.len() - MAX_OUTPUT;
            while !o.text.is_char_boundary(cut) {
                cut += 1;
            }
            o.text.drain(..cut);
            o.dropped += cut;
        }
    }

    pub fn finish(&self, how: String) {
        self.lock().exit = Some(how);
    }

    fn state(&self) -> String {
        match &self.lock().exit {
            Some(how) => format!("finished: {how}"),
            None => format!("running for {} s", self.started.elapsed().as_secs()),
        }
    }

    pub fn kill(&self) {
        super::exec::kill_group(self.pgid);
    }
}

/// Every background job of the daemon; cheap to clone.
#[derive(Clone, Default)]
pub struct Jobs {
    inner: Arc<Mutex<BTreeMap<u32, Arc<Job>>>>,
    next: Arc<AtomicU32>,
}

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Arc<Job>>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn add(&self, session_key: &str, command: &str, pgid: Option<u32>) -> Arc<Job> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Arc::new(Job {
            id,
            session_key: session_key.to_string(),
            command: command.to_string(),
            started: Instant::now(),
            pgid,
            out: Mutex::new(Output {
                text: String::new(),
                dropped: 0,
                polled: 0,
                exit: None,
            }),
        });
        let mut jobs = self.lock();
        forget_old_finished(&mut jobs);
        jobs.insert(id, job.clone());
        job
    }

    fn of_session(&self, session_key: &str) -> Vec<Arc<Job>> {
        self.lock()
            .values()
            .filter(|j| j.session_key == session_key)
            .cloned()
            .collect()
    }

    fn get(&self, session_key: &str, id: u32) -> Option<Arc<Job>> {
        self.lock()
            .get(&id)
            .filter(|j| j.session_key == session_key)
            .cloned()
    }

    /// Kills every job (daemon shutdown).
    pub fn kill_all(&self) {
        for job in self.lock().values() {
            if job.lock().exit.is_none() {
                job.kill();
            }
        }
    }
}

/// Drops finished jobs beyond the newest [`FINISHED_KEPT`] (ids grow, so
/// the map's order is the age); running jobs are never dropped.
fn forget_old_finished(jobs: &mut BTreeMap<u32, Arc<Job>>) {
    let finished: Vec<u32> = jobs
        .iter()
        .filter(|(_, job)| job.lock().exit.is_some())
        .map(|(id, _)| *id)
        .collect();
    let excess = finished.len().saturating_sub(FINISHED_KEPT);
    for id in &finished[..excess] {
        jobs.remove(id);
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The session's jobs and their state.
    List,
    /// A job's state and the output it produced since the last poll.
    Poll,
    /// A job's output, by lines (`offset`, `limit`).
    Log,
    /// Kill the job's process group.
    Kill,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessArgs {
    pub action: Action,
    /// The job id (`exec` with `background = true` returns it); not for `list`.
    #[serde(default)]
    pub id: Option<u32>,
    /// For `log`: the first line (0-based) and how many lines.
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "process",
        "Manage background jobs started by exec with background=true: list them, poll one for its state and new output, read its log, or kill it.",
        &["runtime"],
        ToolFlags::default(),
        process,
    )
    .with_aliases(&[("job", "id"), ("job_id", "id")])
}

async fn process(args: ProcessArgs, ctx: ToolContext) -> ToolOutput {
    let jobs = &ctx.jobs;
    let job = match (args.action, args.id) {
        (Action::List, _) => return list(jobs, &ctx.session_key),
        (_, None) => {
            return ToolOutput::error(
                "this action needs the job's `id` (`process` with action list shows them)",
            );
        }
        (_, Some(id)) => match jobs.get(&ctx.session_key, id) {
            Some(job) => job,
            None => {
                return ToolOutput::error(format!(
                    "no background job {id} in this session (finished jobs are forgotten once {FINISHED_KEPT} newer ones have finished)"
                ));
            }
        },
    };
    let cap = ctx.settings.exec_max_output_chars;
    let id = job.id;
    match args.action {
        Action::List | Action::Poll => {
            let state = job.state();
            let mut o = job.lock();
            let end = o.dropped + o.text.len();
            let from = o.polled.max(o.dropped) - o.dropped;
            let new = o.text.get(from..).unwrap_or_default().to_string();
            o.polled = end;
            let new = if new.is_empty() {
                "(no new output)".to_string()
            } else {
                cap_head_tail(&new, cap)
            };
            ToolOutput::ok(format!("job {id}: {state}\n{new}"))
        }
        Action::Log => {
            let o = job.lock();
            let offset = args.offset.unwrap_or(0);
            let limit = args.limit.unwrap_or(200);
            let lines: Vec<&str> = o.text.lines().skip(offset).take(limit).collect();
            let total = o.text.lines().count();
            let head = if o.dropped > 0 {
                format!("[the first {} bytes were dropped]\n", o.dropped)
            } else {
                String::new()
            };
            ToolOutput::ok(format!(
                "{head}lines {}–{} of {total}:\n{}",
                offset,
                offset + lines.len(),
                cap_head_tail(&lines.join("\n"), cap)
            ))
        }
        Action::Kill => {
            if job.lock().exit.is_some() {
                return ToolOutput::ok(format!("job {id} had already {}", job.state()));
            }
            job.kill();
            ToolOutput::ok(format!("job {id} killed"))
        }
    }
}

fn list(jobs: &Jobs, session_key: &str) -> ToolOutput {
    let list = jobs.of_session(session_key);
    if list.is_empty() {
        return ToolOutput::ok("no background jobs in this session");
    }
    ToolOutput::ok(
        list.iter()
            .map(|j| format!("{}: {} — {}", j.id, j.command, j.state()))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_finished_jobs_are_kept() {
        let jobs = Jobs::default();
        let running = jobs.add("s", "sleep 1000", None);
        let finished: Vec<Arc<Job>> = (0..FINISHED_KEPT + 4)
            .map(|i| {
                let job = jobs.add("s", &format!("echo {i}"), None);
                job.finish("exit 0".into());
                job
            })
            .collect();
        let next = jobs.add("s", "echo next", None);
        let ids: Vec<u32> = jobs.of_session("s").iter().map(|j| j.id).collect();
        assert_eq!(ids.len(), 1 + FINISHED_KEPT + 1, "{ids:?}");
        assert!(ids.contains(&running.id), "a running job is never dropped");
        assert!(ids.contains(&next.id));
        for old in &finished[..4] {
            assert!(!ids.contains(&old.id), "{} kept: {ids:?}", old.id);
        }
        for kept in &finished[4..] {
            assert!(ids.contains(&kept.id), "{} dropped: {ids:?}", kept.id);
        }
    }
}
