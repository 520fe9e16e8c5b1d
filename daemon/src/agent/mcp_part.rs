//! The MCP servers as a lifecycle part of the daemon ([`McpPart`]). It
//! lives beside the [`super::Runtime`] whose server set it swaps, so the
//! tools module never reaches up into the agent.

use std::time::Duration;

/// The MCP servers as a part of the daemon. They start lazily, on first
/// use; a reload with other servers stops the running ones and puts the
/// new set in place, started again on next use; stopping stops them all.
pub struct McpPart(pub super::Runtime);

impl crate::lifecycle::Part for McpPart {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn start<'a>(
        &'a self,
        _config: &'a crate::config::Config,
    ) -> crate::lifecycle::StartFuture<'a> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn reload(
        &self,
        old: &crate::config::Config,
        new: &crate::config::Config,
    ) -> crate::lifecycle::Reloaded {
        // Sandboxed servers start under the exec sandbox's settings.
        if old.mcp == new.mcp && old.tools.exec_sandbox == new.tools.exec_sandbox {
            return crate::lifecycle::Reloaded::Unchanged;
        }
        self.0
            .swap_mcp(crate::tools::mcp::McpManager::new(
                new.mcp.clone(),
                self.0.sandbox().clone(),
                new.tools.exec_sandbox.clone(),
            ))
            .stop();
        crate::lifecycle::Reloaded::Applied("servers restarted on next use".into())
    }

    fn stop(&self, _grace: Duration) -> crate::lifecycle::StopFuture<'_> {
        self.0.mcp().stop();
        Box::pin(std::future::ready(()))
    }
}
