//! The agent (SPEC §7): [`hub::Hub`] serialises turns per session and
//! bounds them globally; [`turn`] runs one turn (model calls and tool calls
//! until a final answer); [`compaction`] runs a compaction for a session;
//! [`last_prompt`] keeps what the model received last. The prompt itself
//! comes from the context engine ([`crate::context`]).
//!
//! [`Runtime`] is the cloneable handle to what turns need: the live config,
//! the model client, the tools and the registry.

pub mod call_env;
pub mod compaction;
mod failure;
pub mod hub;
pub mod last_prompt;
pub mod mcp_part;
pub mod rollback;
pub mod session_log;
pub mod sessions_access;
pub mod tool_step;
pub mod turn;

use std::sync::{Arc, OnceLock, RwLock};

use crate::config::Config;
use crate::home::Home;
use crate::llm::client::ModelClient;
use crate::sandbox::Sandbox;
use crate::session::registry::Registry;
use crate::tools::ToolRegistry;
use crate::tools::approvals::Approvals;
use crate::tools::jobs::Jobs;
use crate::tools::mcp::McpManager;
use crate::tools::message::Outbox;
use crate::tools::schedule_book::ScheduleBook;
use crate::tools::workflow_run::WorkflowRunner;

/// What a running turn reports, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    TurnStarted {
        session_key: String,
        session_id: String,
        turn_id: String,
        agent: String,
        model: String,
    },
    Text(String),
    ToolStarted {
        call_id: String,
        name: String,
        arguments: String,
    },
    ToolFinished {
        call_id: String,
        name: String,
        status: &'static str,
        result: String,
        duration_ms: u64,
    },
    Usage {
        model: String,
        input: u64,
        output: u64,
    },
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
        model: String,
    },
    Queued {
        position: u32,
    },
    /// Older history was summarised (or the attempt failed: `error`).
    Compaction {
        tokens_before: u64,
        tokens_after: u64,
        /// `threshold`, `overflow` or `manual`.
        reason: &'static str,
        error: String,
    },
    Finished {
        /// The final answer: the last model call's text.
        text: String,
        /// The text of each model call of the turn that wrote any, in
        /// order (a reply continued after the output limit is one); the
        /// last is `text` when that is not empty.
        segments: Vec<String>,
        stop_reason: &'static str,
        model_calls: u32,
        tool_calls: u32,
    },
    Error {
        code: &'static str,
        message: String,
    },
    /// A call waits for the owner: `pincer approvals allow|deny <id>`.
    ApprovalRequested {
        id: String,
        tool: String,
        arguments: String,
        expires_in_s: u64,
    },
}

/// Live, swappable parts of the runtime (replaced on config reload).
pub struct Live {
    pub config: Arc<Config>,
    pub models: Arc<ModelClient>,
    /// The MCP servers of this config (replaced when they change).
    pub mcp: Arc<McpManager>,
}

/// Shared state every turn uses; clone freely. Its parts are reached
/// through methods, so what may be swapped on reload (config, models, MCP)
/// is only ever read as a snapshot.
#[derive(Clone)]
pub struct Runtime {
    home: Home,
    registry: Registry,
    tools: Arc<ToolRegistry>,
    /// What waits on a person: tool calls' approvals, workflow halts.
    approvals: Approvals,
    /// Background jobs of `exec`; killed when the daemon stops.
    jobs: Jobs,
    /// Every agent's long-term memory index.
    memory: crate::memory::Memory,
    /// The last request of each session (`pincer sessions prompt`).
    prompts: last_prompt::PromptStore,
    live: Arc<RwLock<Live>>,
    /// The exec sandbox (what the kernel offers; the temp folders).
    sandbox: Arc<Sandbox>,
    /// The chat bridges as the `message` tool sees them; installed by the
    /// channels when they start (they sit above the agent).
    outbox: Arc<OnceLock<Arc<dyn Outbox>>>,
    /// The workflow engine as `workflow_run` and `/run` see it; installed
    /// by the daemon (the engine sits above the agent).
    workflows: Arc<OnceLock<Arc<dyn WorkflowRunner>>>,
    /// The scheduler as `schedule` and `/schedules` see it; installed by
    /// the daemon (the scheduler sits above the agent).
    schedules: Arc<OnceLock<Arc<dyn ScheduleBook>>>,
}

impl Runtime {
    /// The exec sandbox.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Every path inside `PINCER_HOME`.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The session registry and audit table (`state/pincer.db`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Calls waiting for the owner's approval.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// Background jobs of `exec`.
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    /// Every agent's long-term memory index.
    pub fn memory(&self) -> &crate::memory::Memory {
        &self.memory
    }

    /// The last request of each session.
    pub fn prompts(&self) -> &last_prompt::PromptStore {
        &self.prompts
    }

    /// Installs the chat bridges for the `message` tool; the first one
    /// installed stays (the daemon has one set of bridges for its life).
    pub fn set_outbox(&self, outbox: Arc<dyn Outbox>) {
        let _ = self.outbox.set(outbox);
    }

    /// Installs the workflow engine for `workflow_run` and `/run`.
    pub fn set_workflows(&self, runner: Arc<dyn WorkflowRunner>) {
        let _ = self.workflows.set(runner);
    }

    /// The workflow engine, once installed.
    pub fn workflows(&self) -> Option<Arc<dyn WorkflowRunner>> {
        self.workflows.get().cloned()
    }

    /// Installs the scheduler for `schedule` and `/schedules`.
    pub fn set_schedules(&self, book: Arc<dyn ScheduleBook>) {
        let _ = self.schedules.set(book);
    }

    /// The scheduler, once installed.
    pub fn schedules(&self) -> Option<Arc<dyn ScheduleBook>> {
        self.schedules.get().cloned()
    }

    /// The chat bridges, once installed.
    pub fn outbox(&self) -> Option<Arc<dyn Outbox>> {
        self.outbox.get().cloned()
    }

    /// A runtime serving `config`: a `Config`, or the copy the daemon
    /// shares with it rather than holding a second one.
    pub fn new(
        home: Home,
        registry: Registry,
        config: impl Into<Arc<Config>>,
        models: ModelClient,
    ) -> Self {
        let config: Arc<Config> = config.into();
        let sandbox = Arc::new(Sandbox::new(&home));
        Self {
            memory: crate::memory::Memory::new(&home, &config),
            home,
            registry,
            tools: Arc::new(ToolRegistry::core()),
            approvals: Approvals::default(),
            jobs: Jobs::default(),
            prompts: Default::default(),
            outbox: Arc::default(),
            workflows: Arc::default(),
            schedules: Arc::default(),
            live: Arc::new(RwLock::new(Live {
                mcp: Arc::new(McpManager::new(
                    config.mcp.clone(),
                    sandbox.clone(),
                    config.tools.exec_sandbox.clone(),
                )),
                config,
                models: Arc::new(models),
            })),
            sandbox,
        }
    }

    /// This runtime with `approvals` as its store (the daemon's, on disk;
    /// [`Runtime::new`] keeps them in memory).
    pub fn with_approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// The config in force now (a snapshot: a reload does not change it
    /// under a running turn).
    pub fn config(&self) -> Arc<Config> {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .config
            .clone()
    }

    pub fn models(&self) -> Arc<ModelClient> {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .models
            .clone()
    }

    /// Swaps in a new config and model client (the MCP servers are a
    /// lifecycle part of their own: [`mcp_part::McpPart`]).
    pub fn replace(&self, config: Config, models: ModelClient) {
        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
        live.config = Arc::new(config);
        live.models = Arc::new(models);
    }

    /// Puts `mcp` in place of the running MCP servers; returns those.
    pub fn swap_mcp(&self, mcp: McpManager) -> Arc<McpManager> {
        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut live.mcp, Arc::new(mcp))
    }

    pub fn mcp(&self) -> Arc<McpManager> {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .mcp
            .clone()
    }

    /// Every tool: the core tools, then those of MCP servers and plugins
    /// (started on first need).
    pub async fn tool_registry(&self) -> Arc<ToolRegistry> {
        let mcp = self.mcp();
        if mcp.is_empty() {
            return self.tools.clone();
        }
        Arc::new(self.tools.with(mcp.tools().await))
    }
}
