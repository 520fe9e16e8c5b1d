//! The daemon's side of long-term memory (SPEC §10): picks the embedder
//! `[memory]` asks for, opens one index per agent (at start-up, or on first
//! use for an agent a reload added), runs each index's watcher, and stops
//! the watchers on shutdown. Tools, auto-recall and the `Memory` gRPC
//! service reach an agent's index through [`Memory::index`].
//!
//! At start-up the indexes open before the socket answers (one that cannot
//! is reported as the part's failure), but their watchers — and with them
//! the first reconcile scan, which reads every memory file's metadata and
//! its row — start only once the server takes connections
//! ([`Memory::watch_opened`]), so the first answer does not wait for them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pincer_memory::embed::openai::OpenAiEmbedder;
use pincer_memory::{Embedder, IndexSettings, MemoryIndex, Sources};
use tokio_util::sync::CancellationToken;

use crate::config::{AgentSettings, ApiKey, Config, EmbedderChoice, MemorySettings};
use crate::home::Home;

/// Every agent's index; clone freely.
#[derive(Clone)]
pub struct Memory {
    inner: Arc<Inner>,
}

struct Inner {
    home: Home,
    settings: MemorySettings,
    embedder: Option<Arc<dyn Embedder>>,
    /// Why there is no embedder (shown with every result and by doctor).
    no_embedder: String,
    indexes: Mutex<Indexes>,
    stop: CancellationToken,
}

struct Indexes {
    by_agent: HashMap<String, Opened>,
    /// An index opened now is watched at once: false from the daemon's
    /// [`Memory::start`] until the server takes connections
    /// ([`Memory::watch_opened`]); true for every other user.
    watching: bool,
}

#[derive(Clone)]
struct Opened {
    index: MemoryIndex,
    /// The workspace the index was opened for.
    workspace: PathBuf,
    /// Its watcher runs.
    watched: bool,
}

/// Why an agent has no index.
#[derive(Debug, thiserror::Error)]
pub enum MemoryUnavailable {
    #[error("memory is turned off in the config ([memory] enabled = false)")]
    Disabled,
    #[error("cannot open the memory index of agent `{agent}`: {reason}")]
    Open { agent: String, reason: String },
}

/// The agents whose index could not be opened at start-up, each with why
/// (the others work, and a failed one is tried again on its next use).
#[derive(Debug, thiserror::Error)]
#[error("{}", joined(.0))]
pub struct IndexesUnopened(pub Vec<MemoryUnavailable>);

fn joined(failed: &[MemoryUnavailable]) -> String {
    let failed: Vec<String> = failed.iter().map(ToString::to_string).collect();
    failed.join("; ")
}

/// Why there is no embedder: the sentence users see after "the vector leg
/// is off".
#[derive(Debug, thiserror::Error)]
pub enum NoEmbedder {
    #[error("[memory] embedder = \"none\"")]
    TurnedOff,
    #[error(
        "no embedding model in {}: run `pincer models fetch`, or set [memory] embedder = \"openai\"",
        .0.display()
    )]
    NoModel(PathBuf),
    #[error(transparent)]
    Local(#[from] pincer_memory::EmbedError),
    #[error("this pincerd was built without the local embedder (cargo feature `local-embedder`)")]
    NotBuiltIn,
    /// The API key's problem, as the config put it.
    #[error("{0}")]
    ApiKey(String),
    #[error("cannot build the HTTP client for the embedder: {0}")]
    Http(reqwest::Error),
    #[error("cannot set up TLS for the embedder: {0}")]
    Tls(rustls::Error),
}

impl Memory {
    /// Chooses the embedder; opens nothing yet (see [`Memory::start`]).
    pub fn new(home: &Home, config: &Config) -> Self {
        let settings = config.memory.clone();
        let (embedder, no_embedder) = match choose_embedder(&settings) {
            Ok(e) => (Some(e), String::new()),
            Err(reason) => (None, reason.to_string()),
        };
        Self {
            inner: Arc::new(Inner {
                home: home.clone(),
                settings,
                embedder,
                no_embedder,
                indexes: Mutex::new(Indexes {
                    by_agent: HashMap::new(),
                    watching: true,
                }),
                stop: CancellationToken::new(),
            }),
        }
    }

    pub fn settings(&self) -> &MemorySettings {
        &self.inner.settings
    }

    /// Opens every agent's index; their watchers start with
    /// [`Memory::watch_opened`]. Agents whose index cannot open are logged
    /// and retried on first use; `Err` names them.
    pub fn start(&self, config: &Config) -> Result<(), IndexesUnopened> {
        if !self.inner.settings.enabled {
            tracing::info!("memory is turned off ([memory] enabled = false)");
            return Ok(());
        }
        match &self.inner.embedder {
            Some(e) => tracing::info!(embedder = %e.id(), "memory: hybrid search"),
            None => tracing::warn!(
                "memory: the vector leg is off ({}); search is full-text only",
                self.inner.no_embedder
            ),
        }
        self.inner
            .indexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .watching = false;
        let failed: Vec<MemoryUnavailable> = config
            .agents
            .values()
            .filter_map(|agent| self.index(agent).err())
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(IndexesUnopened(failed))
        }
    }

    /// The agent's index, opened (and watched) on first use.
    pub fn index(&self, agent: &AgentSettings) -> Result<MemoryIndex, MemoryUnavailable> {
        if !self.inner.settings.enabled {
            return Err(MemoryUnavailable::Disabled);
        }
        let mut indexes = self.inner.indexes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = indexes.by_agent.get(&agent.id)
            && open.workspace == agent.workspace
        {
            return Ok(open.index.clone());
        }
        let s = &self.inner.settings;
        let sources = Sources::new(
            agent.workspace.clone(),
            s.paths.clone(),
            s.sessions.then(|| self.inner.home.sessions_dir(&agent.id)),
        )
        .map_err(|e| MemoryUnavailable::Open {
            agent: agent.id.clone(),
            reason: format!("bad [memory] paths glob: {e}"),
        })?;
        let index = MemoryIndex::open(
            &agent.id,
            self.inner.home.memory_db(&agent.id),
            sources,
            IndexSettings {
                chunk: s.chunk,
                search: s.search.clone(),
            },
            self.inner.embedder.clone(),
            &self.inner.no_embedder,
        )
        .map_err(|e| MemoryUnavailable::Open {
            agent: agent.id.clone(),
            reason: e.to_string(),
        })?;
        // A workspace moved by a reload: the old watcher stops with its
        // token, the new index starts its own.
        let watched = indexes.watching;
        if watched {
            self.watch(&index);
        }
        indexes.by_agent.insert(
            agent.id.clone(),
            Opened {
                index: index.clone(),
                workspace: agent.workspace.clone(),
                watched,
            },
        );
        Ok(index)
    }

    /// Starts the watchers of the indexes opened so far (their first act is
    /// the reconcile scan), and of every index opened from now on.
    pub fn watch_opened(&self) {
        let mut indexes = self.inner.indexes.lock().unwrap_or_else(|e| e.into_inner());
        indexes.watching = true;
        for open in indexes.by_agent.values_mut().filter(|o| !o.watched) {
            self.watch(&open.index);
            open.watched = true;
        }
    }

    fn watch(&self, index: &MemoryIndex) {
        let stop = self.inner.stop.child_token();
        pincer_memory::watch::spawn(index.clone(), self.inner.settings.watch, stop);
    }

    /// The indexes opened so far, by agent.
    pub fn opened(&self) -> Vec<MemoryIndex> {
        let indexes = self.inner.indexes.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<MemoryIndex> =
            indexes.by_agent.values().map(|o| o.index.clone()).collect();
        all.sort_by(|a, b| a.agent().cmp(b.agent()));
        all
    }

    /// Why the vector leg is off, or `None` when an embedder is set up.
    pub fn no_embedder(&self) -> Option<&str> {
        self.inner
            .embedder
            .is_none()
            .then_some(self.inner.no_embedder.as_str())
    }

    /// The embedder in use, if any.
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.inner.embedder.clone()
    }

    /// Stops every watcher.
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// Copies each open index's write-ahead log into its database and
    /// empties it (a `TRUNCATE` checkpoint), for the daemon's stop. SQLite
    /// rebuilds its view of a log it finds at the next open by reading all
    /// of it, and pincerd exits without closing its connections, which
    /// would otherwise leave the log for the next start: after indexing
    /// 10,000 chunks it held 6 MB, read back on every start (issue 28).
    pub async fn checkpoint(&self) {
        let paths: Vec<PathBuf> = {
            let indexes = self.inner.indexes.lock().unwrap_or_else(|e| e.into_inner());
            indexes
                .by_agent
                .keys()
                .map(|agent| self.inner.home.memory_db(agent))
                .collect()
        };
        let _ = tokio::task::spawn_blocking(move || {
            for path in paths {
                if let Err(e) = checkpoint(&path) {
                    tracing::debug!(index = %path.display(), "memory index log not emptied: {e}");
                }
            }
        })
        .await;
    }
}

/// A `TRUNCATE` checkpoint of the index at `path`, from a connection of its
/// own (the index's are idle once the watchers stopped).
fn checkpoint(path: &std::path::Path) -> rusqlite::Result<()> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // A sync the stopped watcher had begun may still be writing.
    conn.busy_timeout(std::time::Duration::from_secs(2))?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
}

/// The embedder `[memory] embedder` names, or why there is none, as the
/// sentence users see.
pub fn choose_embedder(s: &MemorySettings) -> Result<Arc<dyn Embedder>, NoEmbedder> {
    match s.embedder {
        EmbedderChoice::None => Err(NoEmbedder::TurnedOff),
        EmbedderChoice::Local => local(s),
        EmbedderChoice::Openai => openai(s),
        EmbedderChoice::Auto => {
            if s.model_dir.join("config.json").is_file() {
                local(s)
            } else {
                Err(NoEmbedder::NoModel(s.model_dir.clone()))
            }
        }
    }
}

#[cfg(feature = "local-embedder")]
fn local(s: &MemorySettings) -> Result<Arc<dyn Embedder>, NoEmbedder> {
    pincer_memory::embed::local::LocalEmbedder::open(&s.model_dir)
        .map(|e| Arc::new(e) as Arc<dyn Embedder>)
        .map_err(NoEmbedder::Local)
}

#[cfg(not(feature = "local-embedder"))]
fn local(_: &MemorySettings) -> Result<Arc<dyn Embedder>, NoEmbedder> {
    Err(NoEmbedder::NotBuiltIn)
}

fn openai(s: &MemorySettings) -> Result<Arc<dyn Embedder>, NoEmbedder> {
    let o = &s.openai;
    let key = match &o.api_key {
        ApiKey::None => None,
        ApiKey::Found { value, .. } => Some(value.0.clone()),
        ApiKey::Missing { problem } => return Err(NoEmbedder::ApiKey(problem.clone())),
    };
    let http = reqwest::Client::builder()
        // The providers' TLS setup: no root certificates loaded at start.
        .use_preconfigured_tls(crate::llm::tls::client_config().map_err(NoEmbedder::Tls)?)
        .timeout(o.timeout)
        .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(NoEmbedder::Http)?;
    Ok(Arc::new(OpenAiEmbedder::new(
        http,
        &o.base_url,
        &o.model,
        key,
        o.dimensions,
    )))
}

/// The indexes and their watchers as a part of the daemon: the indexes
/// open before the socket answers, the watchers once it does; stopped
/// last; `[memory]` changes need a restart (the embedder and every open
/// index were made from them).
impl crate::lifecycle::Part for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn start<'a>(&'a self, config: &'a Config) -> crate::lifecycle::StartFuture<'a> {
        Box::pin(std::future::ready(
            Memory::start(self, config).map_err(crate::lifecycle::StartError::from),
        ))
    }

    fn started(&self) {
        self.watch_opened();
    }

    fn reload(&self, _old: &Config, new: &Config) -> crate::lifecycle::Reloaded {
        // Against the settings the indexes were opened with, not the file
        // loaded last: a value set back needs no restart.
        if self.settings() == &new.memory {
            crate::lifecycle::Reloaded::Unchanged
        } else {
            crate::lifecycle::Reloaded::NeedsRestart("[memory] settings".into())
        }
    }

    fn stop(&self, _grace: std::time::Duration) -> crate::lifecycle::StopFuture<'_> {
        Memory::stop(self);
        Box::pin(self.checkpoint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::{Part, Reloaded};
    use std::time::Duration;

    fn config(home: &Home, text: &str) -> Config {
        crate::config::load::parse(home, std::path::Path::new("/h/config.toml"), text, &|| None)
            .unwrap()
    }

    /// The part judges a `[memory]` change against the settings its
    /// indexes were opened with, so a value set back needs no restart.
    #[test]
    fn a_memory_change_is_judged_against_what_runs() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let started = config(&home, "[memory]\nembedder = \"none\"\nmax_results = 6\n");
        let memory = Memory::new(&home, &started);
        let changed = config(&home, "[memory]\nembedder = \"none\"\nmax_results = 3\n");
        assert_eq!(
            memory.reload(&started, &changed),
            Reloaded::NeedsRestart("[memory] settings".into())
        );
        assert_eq!(memory.reload(&changed, &started), Reloaded::Unchanged);
    }

    /// The daemon's start opens the indexes but holds their watchers (and
    /// the first scan) until the server takes connections; an index opened
    /// after that is watched at once.
    #[tokio::test(flavor = "multi_thread")]
    async fn watchers_start_once_the_server_takes_connections() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let config = config(
            &home,
            &format!(
                "[memory]\nembedder = \"none\"\n[agents.main]\nworkspace = \"{}\"\n[agents.other]\nworkspace = \"{}\"\n",
                dir.path().join("ws").display(),
                dir.path().join("ws2").display()
            ),
        );
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let memory = Memory::new(&home, &config);
        Memory::start(&memory, &config).unwrap();
        let main = memory.index(&config.agents["main"]).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let status = main.status().await.unwrap();
        assert!(
            !status.watching && status.last_sync.is_none(),
            "watched before the server took connections"
        );
        memory.started();
        let watched = |index: pincer_memory::MemoryIndex| async move {
            let begun = std::time::Instant::now();
            loop {
                let status = index.status().await.unwrap();
                if status.watching && status.last_sync.is_some() {
                    return;
                }
                assert!(begun.elapsed() < std::time::Duration::from_secs(10));
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        };
        watched(main).await;
        watched(memory.index(&config.agents["other"]).unwrap()).await;
        memory.stop();
    }

    /// Stopping empties each index's write-ahead log, so the next start
    /// does not read it back.
    #[tokio::test(flavor = "multi_thread")]
    async fn stopping_empties_the_index_logs() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(workspace.join("memory")).unwrap();
        for n in 0..20 {
            std::fs::write(
                workspace.join(format!("memory/note-{n}.md")),
                format!("# Note {n}\n\nThe boat number {n} is named Aurora {n}.\n"),
            )
            .unwrap();
        }
        let config = config(
            &home,
            &format!(
                "[memory]\nembedder = \"none\"\n[agents.main]\nworkspace = \"{}\"\n",
                workspace.display()
            ),
        );
        let memory = Memory::new(&home, &config);
        let index = memory.index(&config.agents["main"]).unwrap();
        index.sync(pincer_memory::Scope::All, None).await.unwrap();
        let wal = || {
            let mut path = home.memory_db("main").into_os_string();
            path.push("-wal");
            std::fs::metadata(path).map_or(0, |m| m.len())
        };
        assert!(wal() > 0, "the sync wrote no log to empty");
        Part::stop(&memory, Duration::from_secs(5)).await;
        assert_eq!(wal(), 0, "the log was left for the next start");
        assert!(
            !index
                .search(pincer_memory::Query {
                    text: "Aurora".into(),
                    min_score: Some(0.0),
                    ..pincer_memory::Query::default()
                })
                .await
                .unwrap()
                .hits
                .is_empty()
        );
    }

    #[test]
    fn without_a_model_the_sentence_names_the_command_that_fetches_it() {
        let home = tempfile::tempdir().unwrap();
        let config = crate::config::load(&Home::at(home.path())).unwrap();
        let Err(why) = choose_embedder(&config.memory) else {
            panic!("an empty home has no model");
        };
        let why = why.to_string();
        assert!(
            why.starts_with("no embedding model in ")
                && why.contains(": run `pincer models fetch`, or set"),
            "{why}"
        );
    }
}
