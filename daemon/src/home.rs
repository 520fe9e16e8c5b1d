//! The layout of `PINCER_HOME` (SPEC §2): every path the daemon reads or
//! writes is derived here, so no other module joins path strings itself.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The resolved `PINCER_HOME` and the paths inside it.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// Resolves the home from an explicit path (`--home`), then
    /// `PINCER_HOME`, then `~/.pincer`.
    pub fn resolve(explicit: Option<&Path>) -> io::Result<Self> {
        let root = match explicit {
            Some(path) => path.to_path_buf(),
            None => match std::env::var_os("PINCER_HOME") {
                Some(value) if !value.is_empty() => PathBuf::from(value),
                _ => home_dir()
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::NotFound,
                            "cannot find the home directory: set HOME or PINCER_HOME",
                        )
                    })?
                    .join(".pincer"),
            },
        };
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir()?.join(root)
        };
        Ok(Self { root })
    }

    /// A home at exactly this path (tests, tools).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    pub fn default_workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }
    /// Workspace of a non-default agent unless its config names one.
    pub fn agent_workspace(&self, agent: &str) -> PathBuf {
        self.root.join("workspaces").join(agent)
    }
    pub fn sessions_dir(&self, agent: &str) -> PathBuf {
        self.root.join("sessions").join(agent)
    }
    /// A session's transcript, `sessions/<agent>/<session id>.jsonl`.
    pub fn transcript(&self, agent: &str, session_id: &str) -> PathBuf {
        self.sessions_dir(agent).join(format!("{session_id}.jsonl"))
    }
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }
    pub fn registry_db(&self) -> PathBuf {
        self.state_dir().join("pincer.db")
    }
    /// Workflow runs and their step ledger (SPEC §13).
    pub fn workflows_db(&self) -> PathBuf {
        self.state_dir().join("workflows.db")
    }
    /// Schedules, the ledger of their fires and their deliveries (SPEC
    /// §13a).
    pub fn schedules_db(&self) -> PathBuf {
        self.state_dir().join("schedules.db")
    }
    /// Everything that waits on a person: tool calls' approvals and
    /// workflow halts (SPEC §8.4, §13).
    pub fn approvals_db(&self) -> PathBuf {
        self.state_dir().join("approvals.db")
    }
    /// One agent's memory index (SPEC §2).
    pub fn memory_db(&self, agent: &str) -> PathBuf {
        self.state_dir().join(format!("memory-{agent}.db"))
    }
    /// Local model files (the embedding model).
    pub fn models_dir(&self) -> PathBuf {
        self.root.join("models")
    }
    pub fn secrets_dir(&self) -> PathBuf {
        self.root.join("secrets")
    }
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    pub fn socket_path(&self) -> PathBuf {
        self.run_dir().join("pincerd.sock")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.run_dir().join("pincerd.pid")
    }
    /// Plugin folders, each with a `pincer-plugin.toml`.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn log_file(&self) -> PathBuf {
        self.logs_dir().join("pincerd.log")
    }

    /// Creates the directories the daemon writes to. `run/` and `secrets/`
    /// are made 0700 even when they already exist with looser modes.
    pub fn create_dirs(&self) -> io::Result<()> {
        for dir in [self.root.clone(), self.state_dir(), self.logs_dir()] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
        }
        for private in [self.run_dir(), self.secrets_dir()] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&private)?;
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
}

/// Expands a leading `~/` against `$HOME`.
pub fn expand_tilde(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), home_dir()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if path == "~" => home_dir().unwrap_or_else(|| PathBuf::from(path)),
        _ => PathBuf::from(path),
    }
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}
