//! An agent's workflows as a principal may run them: the workspace's
//! library checked against the tools that principal's policy offers the
//! agent, so a workflow file that names a tool the policy removes is
//! refused with the layer that removes it. The gRPC service and (later)
//! the chat command and the schedules open it the same way.

use super::check::ToolStatus;
use super::library::Library;
use crate::agent::Runtime;
use crate::config::AgentSettings;
use crate::config::locate::nearest;
use crate::tools::origin::ChatOrigin;
use crate::tools::policy::{self, PolicyInput, Resolution};

/// The library of `agent`'s workspace, checked for `origin`.
pub async fn open(rt: &Runtime, agent: &AgentSettings, origin: &ChatOrigin) -> Library {
    let registry = rt.tool_registry().await;
    let config = rt.config();
    let input = PolicyInput::for_origin(agent, origin, None);
    let resolution = policy::resolve(&registry, &config.policy, &input);
    Library::open(&agent.workspace, &|name| tool_status(&resolution, name))
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
