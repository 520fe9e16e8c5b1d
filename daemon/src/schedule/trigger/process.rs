//! The commands triggers run themselves — an `exits` command, a `lines`
//! command, a `condition` script — started as `exec` starts its own: a
//! shell in the exec sandbox, writing only in the workspace, without the
//! secrets' variables, in its own process group that dies with pincerd.

use std::process::Stdio;

use crate::agent::Runtime;
use crate::sandbox::{Jail, SandboxError};

/// Why a trigger's command did not start.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("there is no agent `{0}`")]
    NoAgent(String),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("cannot start `sh`: {0}")]
    Spawn(std::io::Error),
}

/// `sh -c command` in the agent's workspace, sandboxed; stdout piped,
/// stderr merged into it.
pub fn shell(
    rt: &Runtime,
    agent: &str,
    trigger: &str,
    command: &str,
) -> Result<tokio::process::Command, ProcessError> {
    let config = rt.config();
    let Some(agent) = config.agent(agent) else {
        return Err(ProcessError::NoAgent(agent.to_string()));
    };
    let tmp = format!("triggers/{trigger}");
    let jail = Jail::writing(vec![agent.workspace.clone()], &tmp);
    let mut cmd = rt
        .sandbox()
        .command(&config.tools.exec_sandbox, &jail, "sh")?;
    // stderr joins stdout, so a `lines` pattern sees both.
    let script = crate::children::shell_script(&mut cmd, &format!("exec 2>&1; {command}"));
    crate::children::die_with_daemon(&mut cmd);
    cmd.arg("-c")
        .arg(script)
        .current_dir(&agent.workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    for var in crate::agent::call_env::secret_env(&config) {
        cmd.env_remove(var);
    }
    Ok(cmd)
}

/// Starts `cmd` on the thread children are forked on.
pub async fn spawn(cmd: tokio::process::Command) -> Result<tokio::process::Child, ProcessError> {
    let mut cmd = cmd;
    crate::children::spawn(move || cmd.spawn())
        .await
        .map_err(ProcessError::Spawn)
}
