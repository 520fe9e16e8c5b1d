//! An agent's workflows as a principal may run them: the workspace's
//! library checked against the tools that principal's policy offers the
//! agent, so a workflow file that names a tool the policy removes is
//! refused with the layer that removes it. The gRPC service and (later)
//! the chat command and the schedules open it the same way.

use super::check::{Context, ToolStatus, check};
use super::def::Workflow;
use super::library::{self, Library, LibraryError};
use super::store::RunRow;
use crate::agent::Runtime;
use crate::config::AgentSettings;
use crate::config::locate::nearest;
use crate::tools::origin::ChatOrigin;
use crate::tools::policy::{self, PolicyInput, Resolution};

/// Runs `f` with the agent's tool policy for `origin`: the one place the
/// workflow module resolves it.
pub async fn with_policy<R>(
    rt: &Runtime,
    agent: &AgentSettings,
    origin: &ChatOrigin,
    f: impl FnOnce(&Resolution<'_>) -> R,
) -> R {
    let registry = rt.tool_registry().await;
    let config = rt.config();
    let input = PolicyInput::for_origin(agent, origin, None);
    f(&policy::resolve(&registry, &config.policy, &input))
}

/// The library of `agent`'s workspace, checked under `policy`.
pub fn library(agent: &AgentSettings, policy: &Resolution<'_>) -> Library {
    Library::open(&agent.workspace, &|name| tool_status(policy, name))
}

/// The library of `agent`'s workspace, checked for `origin`.
pub async fn open(rt: &Runtime, agent: &AgentSettings, origin: &ChatOrigin) -> Library {
    with_policy(rt, agent, origin, |policy| library(agent, policy)).await
}

/// The workflow `run` ran — the text of its file and of its
/// sub-workflows' as the run recorded them — checked again for `origin`
/// and linked (a resumed run runs what it started with, under today's
/// policy).
pub async fn recorded(
    rt: &Runtime,
    agent: &AgentSettings,
    origin: &ChatOrigin,
    run: &RunRow,
) -> Result<Workflow, LibraryError> {
    let dir = agent.workspace.join(library::DIR);
    let mut workflows = library::names(&dir);
    workflows.extend(run.subs.keys().cloned());
    workflows.sort();
    workflows.dedup();
    with_policy(rt, agent, origin, |policy| {
        let status = |tool: &str| tool_status(policy, tool);
        let checked = |name: &str, source: &str| {
            let path = dir.join(format!("{name}.toml"));
            let cx = Context {
                name,
                path: &path,
                workflows: &workflows,
                tools: &status,
            };
            check(&cx, source).map_err(LibraryError::Invalid)
        };
        let top = checked(&run.workflow, &run.source)?;
        let subs = run
            .subs
            .iter()
            .map(|(name, source)| (name.clone(), checked(name, source)))
            .collect();
        Library::of_sources(top, subs)
    })
    .await
}

/// What the policy says of one tool name.
pub fn tool_status(resolution: &Resolution<'_>, name: &str) -> ToolStatus {
    match resolution.verdicts.iter().find(|v| v.tool.name == name) {
        Some(v) => match &v.removed {
            None => ToolStatus::Offered,
            Some(r) => ToolStatus::Removed {
                layer: r.layer.clone(),
                reason: r.reason.clone(),
            },
        },
        None => {
            let names: Vec<String> = resolution
                .verdicts
                .iter()
                .map(|v| v.tool.name.clone())
                .collect();
            ToolStatus::Unknown {
                nearest: nearest(name, &names),
            }
        }
    }
}
