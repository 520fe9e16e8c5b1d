//! Diagnosis for `pincer doctor`: every finding is one sentence that says
//! what is wrong and what to do. Used offline (`pincerd doctor`) and by the
//! running daemon (`Daemon.Doctor`), which checks with its live config.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::config::{ApiKey, Config, ProviderKind, ProviderSettings};
use crate::home::Home;
use crate::llm::windows::ContextWindow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub level: Level,
    pub subject: String,
    pub message: String,
}

fn finding(level: Level, subject: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding {
        level,
        subject: subject.into(),
        message: message.into(),
    }
}

/// Checks of the config file on disk and of every provider and agent it
/// names. `running` is the config the daemon runs (the daemon's
/// `Daemon.Doctor`), `None` offline; with `memory`, the running daemon's
/// indexes are checked too, and with `mcp` its MCP servers are asked
/// for their tools.
pub async fn check_running(
    home: &Home,
    running: Option<&Config>,
    memory: Option<&crate::memory::Memory>,
    mcp: Option<&crate::tools::mcp::McpManager>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // The file decides, not what the daemon loaded: right after `pincer
    // init`, or with a broken edit the daemon refused, the two differ.
    let disk = crate::config::load(home);
    out.extend(check_config_file(home, &disk, running));
    let Some(config) = disk.as_ref().ok().or(running) else {
        return out;
    };
    if let Some(problem) = &config.provider_problem {
        out.push(finding(Level::Error, "provider", problem.clone()));
    }
    for problem in &config.plugin_problems {
        out.push(finding(Level::Warn, "plugin", problem.clone()));
    }
    for plugin in &config.plugins {
        out.push(finding(
            Level::Ok,
            "plugin",
            format!("`{}` loaded from {}", plugin.id, plugin.dir.display()),
        ));
    }
    out.extend(check_dirs(home));
    out.extend(check_tool_names(home, config, running.zip(mcp)).await);
    out.push(check_sandbox(config));
    out.extend(check_context(config));
    out.extend(check_memory(config, memory).await);
    for provider in config.providers.values() {
        out.push(check_provider(provider).await);
    }
    for channel in config.channels.values().filter(|c| c.enabled) {
        out.extend(check_channel(channel).await);
    }
    for agent in config.agents.values() {
        if agent.models.is_empty() && config.provider_problem.is_none() {
            out.push(finding(
                Level::Error,
                format!("agent {}", agent.id),
                "has no model; set `model` under its [agents] table",
            ));
        }
    }
    out
}

/// The tool names the config's policy lists use that only a server can
/// confirm (`Config::tool_names_to_check`: `mcp__<server>__<tool>`, and a
/// plugin's tool), each compared with what the servers list: a warning for
/// a name none lists, since its entry then matches nothing. `running` is
/// the daemon's own servers, asked when they run the same config;
/// otherwise (offline, or a changed `[mcp]`) the servers are started for
/// the check and stopped after. Nothing starts when there is nothing to
/// check.
pub async fn check_tool_names(
    home: &Home,
    config: &Config,
    running: Option<(&Config, &crate::tools::mcp::McpManager)>,
) -> Vec<Finding> {
    if config.tool_names_to_check.is_empty() {
        return Vec::new();
    }
    let listings = match running {
        Some((rc, mcp))
            if rc.mcp == config.mcp && rc.tools.exec_sandbox == config.tools.exec_sandbox =>
        {
            mcp.listings().await
        }
        _ => {
            let mcp = crate::tools::mcp::McpManager::new(
                config.mcp.clone(),
                std::sync::Arc::new(crate::sandbox::Sandbox::new(home)),
                config.tools.exec_sandbox.clone(),
            );
            let listings = mcp.listings().await;
            mcp.stop();
            listings
        }
    };
    tool_name_findings(&config.tool_names_to_check, &listings)
}

/// The warnings for names no listing has (see [`check_tool_names`]).
fn tool_name_findings(
    names: &[crate::config::tool_names::NameToCheck],
    listings: &[crate::tools::mcp::Listing],
) -> Vec<Finding> {
    let has = |tools: &[String], name: &str| tools.iter().any(|t| t.eq_ignore_ascii_case(name));
    let mut out = Vec::new();
    for n in names {
        let (name, place) = (&n.name, &n.place);
        // The listings that could hold the name: its server's, or every
        // plugin's for a plugin's tool.
        let from: Vec<&crate::tools::mcp::Listing> = listings
            .iter()
            .filter(|l| match &n.server {
                Some(server) => l.plugin.is_none() && l.server.eq_ignore_ascii_case(server),
                None => l.plugin.is_some(),
            })
            .collect();
        // A server with no listing is a disabled one (`enabled = false`):
        // its tools are off on purpose, nothing to warn about.
        if from.is_empty()
            || from
                .iter()
                .any(|l| l.tools.as_ref().is_ok_and(|tools| has(tools, name)))
        {
            continue;
        }
        let failed: Vec<String> = from
            .iter()
            .filter_map(|l| l.tools.as_ref().err())
            .cloned()
            .collect();
        let mut listed: Vec<String> = from
            .iter()
            .filter_map(|l| l.tools.as_ref().ok())
            .flatten()
            .cloned()
            .collect();
        if n.server.is_none() {
            // A plugin's tool may as well be a misspelled core tool.
            listed.extend(
                crate::config::tool_names::CORE_TOOL_NAMES
                    .iter()
                    .map(|t| t.to_string()),
            );
        }
        let message = if !failed.is_empty() {
            format!(
                "{place}: `{name}` could not be checked ({}); until it is, the entry may match nothing",
                failed.join("; ")
            )
        } else {
            let lower: Vec<String> = listed.iter().map(|t| t.to_lowercase()).collect();
            let near = crate::config::locate::nearest(&name.to_lowercase(), &lower)
                .and_then(|best| listed.iter().find(|t| t.to_lowercase() == best))
                .map(|best| format!(" (did you mean `{best}`?)"))
                .unwrap_or_default();
            match &n.server {
                Some(server) => format!(
                    "{place}: the MCP server `{server}` lists no tool `{name}`{near}, so the entry matches nothing"
                ),
                None => format!(
                    "{place}: `{name}` is no core tool and no plugin lists it{near}, so the entry matches nothing"
                ),
            }
        };
        out.push(finding(Level::Warn, "tools", message));
    }
    out
}

/// Whether `exec` runs sandboxed under the config, and if not, why.
fn check_sandbox(config: &Config) -> Finding {
    let settings = &config.tools.exec_sandbox;
    let support = crate::sandbox::probe();
    let level = if support.active(settings) {
        Level::Ok
    } else if settings.mode == crate::config::ExecSandboxMode::Required {
        Level::Error
    } else {
        Level::Warn
    };
    finding(level, "sandbox", support.sentence(settings))
}

/// Whether the file on disk is valid, and whether the daemon runs it.
fn check_config_file(
    home: &Home,
    disk: &Result<Config, crate::config::ConfigError>,
    running: Option<&Config>,
) -> Vec<Finding> {
    let path = home.config_file();
    let mut out = vec![match disk {
        Err(e) => finding(
            Level::Error,
            "config",
            format!(
                "{e}; fix it and run `pincer config check`{}",
                if running.is_some() {
                    " (pincerd keeps running the config it loaded last until a reload succeeds)"
                } else {
                    ""
                }
            ),
        ),
        Ok(c) if c.source.is_none() => finding(
            Level::Ok,
            "config",
            format!(
                "no {} yet: running on zero-config defaults (`pincer init` writes a starter file)",
                path.display()
            ),
        ),
        Ok(_) => finding(Level::Ok, "config", format!("{} is valid", path.display())),
    }];
    if let (Ok(disk), Some(running)) = (disk, running)
        && disk.text_hash != running.text_hash
    {
        out.push(finding(
            Level::Warn,
            "config",
            format!(
                "pincerd runs an older config than {} ({}); `pincer config reload` applies the file",
                path.display(),
                match &running.source {
                    Some(_) => "the file changed since it was loaded",
                    None => "it started before the file existed",
                }
            ),
        ));
    }
    out
}

/// What each agent's prompt will be: its mode and compaction point, and
/// whatever the caps cut or a skill gets wrong, so nothing is lost from
/// the prompt without the owner knowing.
pub fn check_context(config: &Config) -> Vec<Finding> {
    let c = &config.context;
    let mut out = Vec::new();
    if !c.compaction {
        out.push(finding(
            Level::Warn,
            "context",
            "compaction is off ([context] compaction = false): a session that outgrows the model's window fails until it is reset",
        ));
    }
    for agent in config.agents.values() {
        let subject = format!("agent {}", agent.id);
        let window = agent.context_window();
        let mode = agent.prompt_mode.resolve(window, false);
        out.push(finding(
            Level::Ok,
            subject.clone(),
            format!(
                "prompt mode {}, a {window}-token window, compaction past {} tokens",
                mode.as_str(),
                window.saturating_sub(c.reserve_for(window))
            ),
        ));
        let total = c.bootstrap_total_for(window);
        let caps = crate::context::bootstrap::Caps {
            file_chars: c.bootstrap_file_chars,
            total_chars: total,
        };
        let files = crate::context::bootstrap::load(
            &agent.workspace,
            &crate::context::bootstrap::FILES,
            caps,
        );
        for (name, t) in files.iter().filter_map(|f| Some((f.name, f.trimmed?))) {
            out.push(finding(
                Level::Warn,
                subject.clone(),
                format!(
                    "{name} has {} characters; the prompt keeps {} of them (the first 70 % and the last 20 %): shorten it, or raise [context] bootstrap_max_chars / bootstrap_total_max_chars (all files together get {total})",
                    t.from, t.cap
                ),
            ));
        }
        for skill in crate::context::skills::discover(&agent.workspace) {
            if let Some(problem) = skill.problem {
                out.push(finding(
                    Level::Warn,
                    subject.clone(),
                    format!("skill {}: {problem}", skill.path),
                ));
            }
        }
    }
    out
}

/// The embedder (one real embedding) and, in the daemon, every index:
/// size, last sync, errors, and a plain warning when the vector leg is off.
pub async fn check_memory(config: &Config, memory: Option<&crate::memory::Memory>) -> Vec<Finding> {
    let settings = &config.memory;
    if !settings.enabled {
        return vec![finding(
            Level::Ok,
            "memory",
            "turned off ([memory] enabled = false)",
        )];
    }
    let mut out = Vec::new();
    let embedder = match memory {
        Some(m) => m
            .embedder()
            .ok_or_else(|| m.no_embedder().unwrap_or_default().to_string()),
        None => crate::memory::choose_embedder(settings),
    };
    match embedder {
        Err(reason) => out.push(finding(
            Level::Warn,
            "embedder",
            format!("the vector leg is off ({reason}): memory search is full-text only"),
        )),
        Ok(e) => {
            let started = std::time::Instant::now();
            let probe = vec!["pincer doctor checks the embedder".to_string()];
            let result = tokio::time::timeout(Duration::from_secs(60), e.embed(&probe)).await;
            out.push(match result {
                Ok(Ok(v)) if v.len() == 1 && !v[0].is_empty() => finding(
                    Level::Ok,
                    "embedder",
                    format!(
                        "{} works ({}-d, {} ms): hybrid search",
                        e.id(),
                        v[0].len(),
                        started.elapsed().as_millis()
                    ),
                ),
                Ok(Ok(_)) => finding(
                    Level::Error,
                    "embedder",
                    format!("{} returned no vector", e.id()),
                ),
                Ok(Err(err)) => finding(
                    Level::Error,
                    "embedder",
                    format!("{err}: until it works, memory search is full-text only"),
                ),
                Err(_) => finding(
                    Level::Error,
                    "embedder",
                    format!("{} did not answer within 60 s", e.id()),
                ),
            });
        }
    }
    let Some(memory) = memory else {
        return out;
    };
    for index in memory.opened() {
        let subject = format!("memory {}", index.agent());
        let status = match index.status().await {
            Ok(s) => s,
            Err(e) => {
                out.push(finding(Level::Error, subject, e.to_string()));
                continue;
            }
        };
        if let Some(error) = &status.last_error {
            out.push(finding(
                Level::Error,
                subject.clone(),
                format!("the last index update failed: {error}"),
            ));
        }
        // What `pincer memory status` lists as skipped, from the same
        // index status: a file the search never sees.
        for skipped in &status.skipped {
            out.push(finding(
                Level::Warn,
                subject.clone(),
                format!("skipped {skipped}; the search does not see it"),
            ));
        }
        if let Some(error) = &status.watcher_error {
            out.push(finding(
                Level::Warn,
                subject.clone(),
                format!("{error}; changes are picked up by the reconcile scan only"),
            ));
        }
        let last = status.last_sync.map_or_else(
            || "not indexed yet".to_string(),
            |t| {
                let ago = time::OffsetDateTime::now_utc().unix_timestamp() - t;
                format!("indexed {ago} s ago")
            },
        );
        out.push(finding(
            if status.vector_leg.is_on() {
                Level::Ok
            } else {
                Level::Warn
            },
            subject,
            format!(
                "{} files, {} chunks ({} with vectors), {last}; {}",
                status.files,
                status.chunks,
                status.embedded_chunks,
                status.vector_leg.describe()
            ),
        ));
    }
    out
}

fn check_dirs(home: &Home) -> Vec<Finding> {
    let mut out = Vec::new();
    let run = home.run_dir();
    match std::fs::metadata(&run) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => out.push(finding(
            Level::Error,
            "socket",
            format!(
                "{} is readable by other users (mode {:o}); run `chmod 700 {}`",
                run.display(),
                m.permissions().mode() & 0o777,
                run.display()
            ),
        )),
        _ => {}
    }
    let sock = home.socket_path();
    if let Ok(m) = std::fs::metadata(&sock)
        && m.permissions().mode() & 0o077 != 0
    {
        out.push(finding(
            Level::Error,
            "socket",
            format!(
                "{} allows other users (mode {:o}); restart pincerd to recreate it as 0600",
                sock.display(),
                m.permissions().mode() & 0o777
            ),
        ));
    }
    out
}

/// One chat channel, asked directly: on Telegram (`getMe`,
/// `getWebhookInfo`) the token, the API, a webhook that swallows the
/// updates a poll waits for, and the group privacy mode that hides
/// un-mentioned group messages; on Discord the token, each allowlisted
/// channel the bot must see and answer in, and mention-only mode.
pub async fn check_channel(channel: &crate::config::ChannelSettings) -> Vec<Finding> {
    let subject = format!("channel {}", channel.name);
    match channel.name.as_str() {
        #[cfg(feature = "telegram")]
        "telegram" => check_telegram(channel, subject).await,
        #[cfg(feature = "discord")]
        "discord" => check_discord(channel, subject).await,
        other => {
            if let Err(why) = channel.token() {
                return vec![finding(Level::Error, subject, why)];
            }
            vec![finding(
                Level::Warn,
                subject,
                format!(
                    "this pincerd was built without the {other} bridge; the channel does not run"
                ),
            )]
        }
    }
}

/// The channel's bot, asked with `getMe`; the error is the sentence (a
/// token not found, refused, an API not reached).
#[cfg(feature = "telegram")]
async fn connect_telegram(
    channel: &crate::config::ChannelSettings,
) -> Result<std::sync::Arc<pincer_telegram::Telegram>, String> {
    let mut settings = pincer_telegram::TelegramSettings::new(channel.token()?);
    settings.api_url = channel.api_url.clone();
    pincer_telegram::connect(settings)
        .await
        .map_err(|e| e.to_string())
}

/// Whether the channel reads its updates by polling (a webhook left on
/// the bot then keeps the poll empty).
#[cfg(feature = "telegram")]
fn polls(channel: &crate::config::ChannelSettings) -> bool {
    !matches!(
        channel.telegram.as_ref().map(|t| &t.mode),
        Some(crate::config::TelegramMode::Webhook(_))
    )
}

#[cfg(feature = "telegram")]
async fn check_telegram(channel: &crate::config::ChannelSettings, subject: String) -> Vec<Finding> {
    let telegram = match connect_telegram(channel).await {
        Ok(t) => t,
        Err(why) => return vec![finding(Level::Error, subject, why)],
    };
    let mut out = vec![finding(
        Level::Ok,
        subject.clone(),
        format!(
            "the bot @{} answers at {}",
            telegram.username(),
            channel.api_url
        ),
    )];
    match telegram.webhook_info().await {
        Ok(Some(url)) if polls(channel) => out.push(finding(
            Level::Error,
            subject.clone(),
            format!(
                "a webhook is set on the bot ({url}) while pincerd polls, so Telegram hands no messages to the poll; delete it with `pincer doctor --fix`, or set mode = \"webhook\""
            ),
        )),
        Ok(_) => {}
        Err(e) => out.push(finding(Level::Warn, subject.clone(), e.to_string())),
    }
    let wants_context = !channel.groups.is_empty()
        && (channel.context_messages > 0
            || channel
                .groups
                .values()
                .any(|g| !g.require_mention.unwrap_or(channel.require_mention)));
    if wants_context && !telegram.can_read_all_group_messages() {
        out.push(finding(
            Level::Warn,
            subject,
            "the bot's group privacy mode is on, so Telegram sends it only commands, mentions and replies in groups: un-mentioned messages never arrive as context and require_mention = false has no effect; turn it off in @BotFather (/setprivacy, Disable), then remove the bot from each group and add it again",
        ));
    }
    out
}

/// The Discord bot, asked over REST (`pincer_discord::check`): the token,
/// each allowlisted channel (one the bot cannot see, or cannot answer in,
/// with what to do), each guild listened to in every channel, and what
/// `message_content = false` means. A fatal gateway close (4004, 4014)
/// the running bridge recorded is its health's finding (`bridge discord`).
#[cfg(feature = "discord")]
async fn check_discord(channel: &crate::config::ChannelSettings, subject: String) -> Vec<Finding> {
    let token = match channel.token() {
        Ok(t) => t,
        Err(why) => return vec![finding(Level::Error, subject, why)],
    };
    let mut settings = pincer_discord::DiscordSettings::new(token);
    settings.api_url = channel.api_url.clone();
    (settings.channels, settings.open_guilds) = channel.listened();
    let report = match pincer_discord::check(&settings).await {
        Ok(r) => r,
        Err(why) => return vec![finding(Level::Error, subject, why)],
    };
    let mut out = vec![finding(
        Level::Ok,
        subject.clone(),
        format!("the bot @{} answers at {}", report.bot, channel.api_url),
    )];
    for c in &report.channels {
        let name = c
            .name
            .as_ref()
            .map_or(String::new(), |n| format!(" (#{n})"));
        out.push(match &c.access {
            pincer_discord::Access::Ok => finding(
                Level::Ok,
                subject.clone(),
                format!("the bot can read and answer in channel {}{name}", c.id),
            ),
            pincer_discord::Access::Hidden => finding(
                Level::Error,
                subject.clone(),
                format!(
                    "the bot cannot see channel {}: invite it to the channel's guild (the invite link in the guide, docs/src/channels/discord.md), give it View Channel and Send Messages in that channel, or check the id in [channels.discord]",
                    c.id
                ),
            ),
            pincer_discord::Access::Missing(perms) => finding(
                Level::Error,
                subject.clone(),
                format!(
                    "the bot cannot answer in channel {}{name}: it lacks {}; give its role these permissions in the channel's settings (Permissions)",
                    c.id,
                    perms.join(", ")
                ),
            ),
            pincer_discord::Access::Unknown(why) => finding(
                Level::Warn,
                subject.clone(),
                format!("could not check channel {}: {why}", c.id),
            ),
        });
    }
    for g in &report.guilds {
        match &g.joined {
            Ok(true) => {}
            Ok(false) => out.push(finding(
                Level::Error,
                subject.clone(),
                format!(
                    "the bot is not in guild {}: invite it with the link in the guide (docs/src/channels/discord.md), or check the id in [channels.discord.guilds]",
                    g.id
                ),
            )),
            Err(why) => out.push(finding(
                Level::Warn,
                subject.clone(),
                format!("could not check guild {}: {why}", g.id),
            )),
        }
    }
    if channel.discord.as_ref().is_some_and(|d| !d.message_content) {
        let why = "message_content = false: the bot runs mention-only, so in guild channels Discord hands it only messages that mention it or reply to it (and DMs), and un-mentioned messages never reach it as context";
        let listens = !(channel.groups.is_empty() && channel.guilds.is_empty());
        let unmentioned = !channel.require_mention
            || channel
                .groups
                .values()
                .any(|g| g.require_mention == Some(false))
            || channel.guilds.values().any(|g| {
                g.require_mention == Some(false)
                    || g.roles
                        .iter()
                        .any(|(_, r)| r.require_mention == Some(false))
            });
        out.push(if listens && unmentioned {
            finding(
                Level::Warn,
                subject,
                format!(
                    "{why}; require_mention = false has no effect: enable Message Content Intent in the Developer Portal (Bot → Privileged Gateway Intents) and set message_content = true"
                ),
            )
        } else {
            finding(Level::Ok, subject, why)
        });
    }
    out
}

/// Deletes a webhook set on a polling channel's bot (`pincer doctor
/// --fix`): one finding (subject `fixed`) per thing done or not done.
pub async fn fix_channels(config: &Config) -> Vec<Finding> {
    #[cfg_attr(not(feature = "telegram"), allow(unused_mut))]
    let mut done = Vec::new();
    #[cfg(feature = "telegram")]
    for channel in config
        .channels
        .values()
        .filter(|c| c.enabled && c.name == "telegram" && polls(c))
    {
        let telegram = match connect_telegram(channel).await {
            Ok(t) => t,
            Err(why) => {
                done.push(finding(
                    Level::Warn,
                    "fixed",
                    format!("telegram: nothing done: {why}"),
                ));
                continue;
            }
        };
        if let Ok(Some(url)) = telegram.webhook_info().await {
            done.push(match telegram.delete_webhook().await {
                Ok(()) => finding(
                    Level::Ok,
                    "fixed",
                    format!(
                        "telegram: deleted the webhook {url}; the poll receives messages again"
                    ),
                ),
                Err(e) => finding(
                    Level::Error,
                    "fixed",
                    format!("telegram: could not delete the webhook {url}: {e}"),
                ),
            });
        }
    }
    #[cfg(not(feature = "telegram"))]
    let _ = config;
    done
}

/// One error per part of the running daemon that could not start (the
/// others serve).
pub fn part_failures(failures: &crate::lifecycle::Failures) -> Vec<Finding> {
    failures
        .list()
        .into_iter()
        .map(|(part, why)| {
            finding(
                Level::Error,
                part,
                format!(
                    "did not start: {why}; the rest of pincerd serves; fix it and restart pincerd"
                ),
            )
        })
        .collect()
}

/// Reachability and authentication of one provider, by listing its models.
pub async fn check_provider(p: &ProviderSettings) -> Finding {
    let subject = format!("provider {}", p.name);
    let key = match &p.api_key {
        // The sentence `Config::provider_problems` gives `pincer status`.
        ApiKey::Missing { problem } => return finding(Level::Error, subject, problem.clone()),
        ApiKey::Found { value, .. } => Some(value.0.clone()),
        ApiKey::None => None,
    };
    crate::llm::client::install_crypto_provider();
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            return finding(
                Level::Error,
                subject,
                format!("cannot build an HTTP client: {e}"),
            );
        }
    };
    let url = match p.kind {
        ProviderKind::Openai => format!("{}/models", p.base_url),
        ProviderKind::Anthropic => {
            crate::llm::anthropic::endpoint(&p.base_url).replace("/messages", "/models")
        }
    };
    let mut req = client.get(&url);
    req = match (p.kind, key) {
        (ProviderKind::Openai, Some(k)) => req.bearer_auth(k),
        (ProviderKind::Anthropic, Some(k)) => req
            .header("x-api-key", k)
            .header("anthropic-version", crate::llm::anthropic::API_VERSION),
        (_, None) => req,
    };
    for (name, value) in &p.headers {
        req = req.header(name, value);
    }
    match req.send().await {
        Err(e) if e.is_timeout() => finding(
            Level::Error,
            subject,
            format!(
                "{} did not answer within 10 s; check base_url and the network",
                p.base_url
            ),
        ),
        Err(e) => finding(
            Level::Error,
            subject,
            format!(
                "cannot reach {} ({}); check base_url and that the server runs",
                p.base_url,
                root_cause(&e)
            ),
        ),
        Ok(r) if r.status().as_u16() == 401 || r.status().as_u16() == 403 => finding(
            Level::Error,
            subject,
            format!(
                "{} rejected the API key (HTTP {}); check the key pincerd reads",
                p.base_url,
                r.status().as_u16()
            ),
        ),
        Ok(r) if r.status().is_success() => finding(
            Level::Ok,
            subject,
            format!("{} is reachable and accepts the credentials", p.base_url),
        ),
        Ok(r) => finding(
            Level::Warn,
            subject,
            format!(
                "{} is reachable but answered HTTP {} for {url}; chat may still work",
                p.base_url,
                r.status().as_u16()
            ),
        ),
    }
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tool_names::NameToCheck;
    use crate::tools::mcp::Listing;

    fn name(name: &str, server: Option<&str>) -> NameToCheck {
        NameToCheck {
            name: name.into(),
            server: server.map(str::to_string),
            place: "/h/config.toml:3:9: key `tools.deny`".into(),
        }
    }

    fn listing(server: &str, plugin: bool, tools: Result<&[&str], &str>) -> Listing {
        Listing {
            server: server.into(),
            plugin: plugin.then(|| server.to_string()),
            tools: tools
                .map(|t| t.iter().map(|s| s.to_string()).collect())
                .map_err(str::to_string),
        }
    }

    #[test]
    fn a_name_no_server_lists_is_a_warning_with_the_nearest_listed_name() {
        let listings = [
            listing(
                "time",
                false,
                Ok(&["mcp__time__get_current_time", "mcp__time__convert_time"]),
            ),
            listing("weather", true, Ok(&["forecast"])),
            listing(
                "down",
                false,
                Err("the MCP server `down` did not start within 30 s"),
            ),
        ];
        let findings = tool_name_findings(
            &[
                name("mcp__time__get_current_time", Some("time")),
                name("MCP__TIME__CONVERT_TIME", Some("time")),
                name("mcp__time__get_current_tim", Some("time")),
                name("forecast", None),
                name("forecst", None),
                name("exce", None),
                name("mcp__down__x", Some("down")),
                name("mcp__off__x", Some("off")),
            ],
            &listings,
        );
        let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
        assert!(findings.iter().all(|f| f.level == Level::Warn));
        assert_eq!(
            messages,
            [
                "/h/config.toml:3:9: key `tools.deny`: the MCP server `time` lists no tool `mcp__time__get_current_tim` (did you mean `mcp__time__get_current_time`?), so the entry matches nothing",
                "/h/config.toml:3:9: key `tools.deny`: `forecst` is no core tool and no plugin lists it (did you mean `forecast`?), so the entry matches nothing",
                "/h/config.toml:3:9: key `tools.deny`: `exce` is no core tool and no plugin lists it (did you mean `exec`?), so the entry matches nothing",
                "/h/config.toml:3:9: key `tools.deny`: `mcp__down__x` could not be checked (the MCP server `down` did not start within 30 s); until it is, the entry may match nothing",
            ]
        );
    }
}
