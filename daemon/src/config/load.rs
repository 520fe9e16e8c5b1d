//! Loading `config.toml`: read the file (or take the zero-config default),
//! parse it into the TOML shape ([`super::file`]) and resolve it into a
//! [`Config`] by calling the loader of each noun in turn — providers and
//! models ([`super::models`]), agents ([`super::agents`]), tools, hooks and
//! policy layers ([`super::tools`]), MCP servers ([`super::mcp`]), plugins
//! ([`super::plugins`]), memory, context, bindings and channels
//! ([`super::channels`]). Problems are located by
//! [`super::locate`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::agents::{agent_settings, valid_id};
use super::env::{self, Detected};
use super::file::{AgentSection, ConfigFile};
pub use super::locate::{ConfigError, Problem};
use super::locate::{Locator, header_span, join_keys, problem_from_toml};
use super::mcp::mcp_servers;
use super::models::{ModelResolver, provider_settings};
use super::tool_names::ToolNames;
use super::tools::{policy_settings, tool_settings};
use super::{Config, DaemonSettings};
use crate::home::Home;

/// Loads `home/config.toml`, or the zero-config default when it is absent.
pub fn load(home: &Home) -> Result<Config, ConfigError> {
    let path = home.config_file();
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(home, &path, &text, &env::detect),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            resolve(home, None, "", ConfigFile::default(), &env::detect)
        }
        Err(source) => Err(ConfigError::Read { path, source }),
    }
}

/// Parses and validates config text. `detect` supplies zero-config
/// providers (injected so tests do not depend on the environment).
pub fn parse(
    home: &Home,
    path: &Path,
    text: &str,
    detect: &dyn Fn() -> Option<Detected>,
) -> Result<Config, ConfigError> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        ConfigError::Invalid(Box::new(problem_from_toml(path, text, span, e.message())))
    })?;
    resolve(home, Some(path), text, file, detect)
}

fn resolve(
    home: &Home,
    path: Option<&Path>,
    text: &str,
    file: ConfigFile,
    detect: &dyn Fn() -> Option<Detected>,
) -> Result<Config, ConfigError> {
    let loc = Locator { path, text };
    // Plugins first: their ids are names the policy lists may use.
    let plugins = super::plugins::discover(&home.plugins_dir(), super::tool_names::CORE_TOOL_NAMES);
    let names = ToolNames::new(
        file.mcp.keys().cloned(),
        plugins.plugins.iter().map(|p| p.id.clone()),
    );
    let daemon = daemon_settings(&file);
    if let Some(n) = &file.daemon.max_concurrent_turns
        && *n.get_ref() == 0
    {
        return Err(loc.at(n.span(), "must be at least 1"));
    }

    let mut providers = BTreeMap::new();
    for (name, section) in &file.providers {
        providers.insert(name.clone(), provider_settings(home, &loc, name, section)?);
    }

    // Zero config: with no [providers], take one from the environment.
    let mut detected_target = None;
    let mut provider_problem = None;
    if file.providers.is_empty() {
        match detect() {
            Some(found) => {
                detected_target = Some(found.target.clone());
                providers.insert(found.provider.name.clone(), found.provider);
            }
            None => provider_problem = Some(env::NO_PROVIDER.to_string()),
        }
    }

    let resolver = ModelResolver {
        loc: &loc,
        providers: &providers,
        models: &file.models,
        detected: detected_target.as_ref(),
    };
    // Validate every [models] entry even if no agent uses it.
    for name in file.models.keys() {
        resolver.chain(name, None)?;
    }

    let mut agents = BTreeMap::new();
    let default_section = AgentSection::default();
    let main_id = "main".to_string();
    let agent_sections: Vec<(&String, &AgentSection)> = if file.agents.is_empty() {
        vec![(&main_id, &default_section)]
    } else {
        file.agents.iter().collect()
    };
    for (id, section) in agent_sections {
        if !valid_id(id) {
            return Err(loc.at(
                header_span(text, &format!("agents.{id}")),
                format!(
                    "agent id `{id}` may only contain letters, digits, `-` and `_` (it is part of session keys and file names)"
                ),
            ));
        }
        agents.insert(
            id.clone(),
            agent_settings(
                home,
                &loc,
                &names,
                &resolver,
                (id, section),
                file.context.compaction_model.as_ref(),
                provider_problem.is_some(),
            )?,
        );
    }

    let default_agent = match &file.default_agent {
        Some(name) => {
            if !agents.contains_key(name.get_ref()) {
                return Err(loc.at(
                    name.span(),
                    format!(
                        "no agent `{}` is defined (agents: {})",
                        name.get_ref(),
                        join_keys(&agents)
                    ),
                ));
            }
            name.get_ref().clone()
        }
        None if agents.contains_key("main") => "main".to_string(),
        None => agents
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| "main".into()),
    };

    let mut tools = tool_settings(&loc, &names, &file)?;
    let mcp_servers = mcp_servers(&loc, home, &file)?;
    tools
        .hooks
        .extend(plugins.plugins.iter().flat_map(|p| p.hooks.clone()));
    let bindings = super::bindings::parse(&loc, &file, &agents)?;
    let channels = super::channels::parse(&loc, &names, home, &file, &agents)?;
    let policy = policy_settings(&loc, &names, &file)?;
    let agent_ids: Vec<&str> = agents.keys().map(String::as_str).collect();
    let schedules = super::schedules::from_file(&loc, &file, &agent_ids, &default_agent)?;
    let triggers = super::triggers::from_file(&loc, &file, &agent_ids, &default_agent)?;
    let heartbeats = super::heartbeat::from_file(&loc, &file, &agent_ids)?;
    Ok(Config {
        source: path.map(Path::to_path_buf),
        daemon,
        providers,
        agents,
        default_agent,
        tools,
        policy,
        memory: super::memory::settings(home, &loc, &file.memory)?,
        context: super::context::settings(&loc, &file.context)?,
        mcp: mcp_servers
            .into_iter()
            .chain(plugins.plugins.iter().map(|p| p.server.clone()))
            .collect(),
        plugins: plugins.plugins,
        plugin_problems: plugins.problems,
        provider_problem,
        tool_names_to_check: names.into_to_check(),
        bindings,
        channels,
        schedules,
        triggers,
        heartbeats,
        text_hash: if path.is_some() {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            h.finish()
        } else {
            0
        },
    })
}

fn daemon_settings(file: &ConfigFile) -> DaemonSettings {
    DaemonSettings {
        max_concurrent_turns: file
            .daemon
            .max_concurrent_turns
            .as_ref()
            .map_or(8, |n| *n.get_ref() as usize),
        log_level: file
            .daemon
            .log_level
            .clone()
            .unwrap_or_else(|| "info".into()),
        shutdown_grace: Duration::from_secs(file.daemon.shutdown_grace_s.unwrap_or(10)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiKey, Secret};
    use std::path::PathBuf;

    fn parse_text(text: &str) -> Result<Config, ConfigError> {
        let home = Home::at("/tmp/pincer-test-home");
        parse(&home, Path::new("/h/config.toml"), text, &|| None)
    }

    fn problem(text: &str) -> Problem {
        match parse_text(text) {
            Err(ConfigError::Invalid(p)) => *p,
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    const PROVIDER: &str =
        "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";

    #[test]
    fn unknown_key_has_file_line_dotted_key_and_suggestion() {
        let p = problem("[daemon]\nmax_concurent_turns = 3\n");
        assert_eq!((p.line, p.column), (2, 1));
        assert_eq!(p.key.as_deref(), Some("daemon.max_concurent_turns"));
        assert!(
            p.reason.contains("did you mean `max_concurrent_turns`?"),
            "{}",
            p.reason
        );
        assert!(
            p.to_string()
                .starts_with("/h/config.toml:2:1: key `daemon.max_concurent_turns`"),
            "{p}"
        );
    }

    #[test]
    fn schedules_parse_and_a_bad_one_is_located_with_its_key() {
        let c = parse_text(
            "[schedules.morning]\ncron = \"0 8 * * mon-fri\"\ntz = \"Europe/Paris\"\nprompt = \"Summarise my notes\"\ndeliver = \"telegram:owner\"\n",
        )
        .unwrap();
        assert_eq!(c.schedules.len(), 1);
        assert_eq!(c.schedules[0].0, "morning");
        assert_eq!(c.schedules[0].1.tz.as_deref(), Some("Europe/Paris"));
        let p = problem("\n[schedules.bad]\ncron = \"0 25 * * *\"\ncommand = \"ls\"\n");
        assert_eq!(p.line, 2, "{p}");
        assert!(
            p.reason
                .contains("[schedules.bad] cron: `0 25 * * *` is not a cron expression"),
            "{p}"
        );
        let p = problem("[schedules.x]\nevery = \"1h\"\ncommand = \"ls\"\nwhen = \"now\"\n");
        assert_eq!(p.key.as_deref(), Some("schedules.x.when"), "{p}");
    }

    #[test]
    fn exec_sandbox_settings_parse_and_a_bad_mode_is_located() {
        let c = parse_text(
            "[tools.exec]\nsandbox = \"required\"\nnetwork = false\nread_paths = [\"/opt/sdk\"]\n",
        )
        .unwrap();
        let s = &c.tools.exec_sandbox;
        assert_eq!(s.mode, crate::config::ExecSandboxMode::Required);
        assert!(!s.network);
        assert_eq!(s.read_paths, vec![PathBuf::from("/opt/sdk")]);
        let d = parse_text("").unwrap();
        assert_eq!(
            d.tools.exec_sandbox.mode,
            crate::config::ExecSandboxMode::Auto
        );
        assert!(d.tools.exec_sandbox.network);

        let p = problem("[tools.exec]\nsandbox = \"strict\"\n");
        assert_eq!(p.line, 2);
        assert!(
            p.reason.contains("use auto, required or off"),
            "{}",
            p.reason
        );
        let p = problem("[tools.exec]\nwrite_paths = [\"rel\"]\n");
        assert!(p.reason.contains("not an absolute path"), "{}", p.reason);
        let p = problem("[mcp.r]\nurl = \"http://127.0.0.1:9/mcp\"\nsandbox = true\n");
        assert!(p.reason.contains("only a stdio server"), "{}", p.reason);
    }

    #[test]
    fn an_agents_memory_and_visibility_parse_and_bad_ones_are_located() {
        use crate::config::{MemoryScope, Visibility};
        let c = parse_text(
            "[agents.main]\n[agents.friends]\nmemory = \"shared\"\nvisibility = \"self\"\n\
             [channels.telegram]\n[channels.telegram.peers.\"42\"]\ntools = { allow = [\"web_fetch\"] }\n",
        )
        .unwrap();
        let main = c.agent("main").unwrap();
        assert_eq!((main.memory, main.visibility), (MemoryScope::Owner, None));
        assert_eq!(main.visibility_for(true), Visibility::Agent);
        assert_eq!(main.visibility_for(false), Visibility::Tree);
        let friends = c.agent("friends").unwrap();
        assert_eq!(friends.memory, MemoryScope::Shared);
        assert_eq!(friends.visibility_for(true), Visibility::Own);
        assert_eq!(c.channels["telegram"].peers["42"].allow, ["web_fetch"]);
        // Only the owner ever sees the whole agent.
        let c = parse_text("[agents.main]\nvisibility = \"agent\"\n").unwrap();
        assert_eq!(
            c.agent("main").unwrap().visibility_for(false),
            Visibility::Tree
        );

        let p = problem("[agents.main]\nmemory = \"public\"\n");
        assert_eq!(p.line, 2);
        assert!(p.reason.contains("use owner"), "{}", p.reason);
        let p = problem("[agents.main]\nvisibility = \"all\"\n");
        assert!(p.reason.contains("use self"), "{}", p.reason);
        let p = problem("[channels.telegram.peers.\"@bob\"]\n");
        assert_eq!(p.line, 1);
    }

    #[test]
    fn bindings_parse_and_bad_ones_are_located() {
        let agents = "[agents.main]\n[agents.helper]\n";
        let c = parse_text(&format!(
            "{agents}[[bindings]]\nchannel = \"Telegram\"\ngroup = \"-100123\"\nagent = \"helper\"\n[[bindings]]\nchannel = \"discord\"\npeer = \"42\"\nagent = \"main\"\n"
        ))
        .unwrap();
        assert_eq!(c.bindings.len(), 2);
        assert_eq!(c.bindings[0].channel, "telegram");
        assert_eq!(c.bindings[0].group.as_deref(), Some("-100123"));
        assert_eq!(c.bindings[0].agent, "helper");
        assert_eq!(c.bindings[1].peer.as_deref(), Some("42"));

        let p = problem(&format!(
            "{agents}[[bindings]]\nchannel = \"irc\"\nagent = \"main\"\n"
        ));
        assert_eq!(p.line, 4);
        assert!(p.reason.contains("unknown channel `irc`"), "{}", p.reason);
        let p = problem(&format!(
            "{agents}[[bindings]]\nchannel = \"telegram\"\nagent = \"nobody\"\n"
        ));
        assert_eq!(p.line, 5);
        assert!(p.reason.contains("no agent `nobody`"), "{}", p.reason);
        let p = problem(&format!(
            "{agents}[[bindings]]\nchannel = \"telegram\"\npeer = \" \"\nagent = \"main\"\n"
        ));
        assert!(
            p.reason.contains("an empty id matches nothing"),
            "{}",
            p.reason
        );
        let p = problem("[[bindings]]\nchannel = \"telegram\"\nagnet = \"main\"\n");
        assert!(p.reason.contains("agent"), "{}", p.reason);
    }

    /// `ask = ["exce"]` used to load, and `exec` then ran without asking:
    /// every list that names tools refuses a name no tool can have.
    #[test]
    fn a_misspelled_tool_is_refused_in_every_list_that_names_tools() {
        let by_provider = format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[tools.by_provider.p]\ndeny = [\"exce\"]\n"
        );
        for (text, line) in [
            ("[tools]\nallow = [\"read\", \"exce\"]\n", 2),
            ("[tools]\ndeny = [\"exce\"]\n", 2),
            (by_provider.as_str(), 8),
            ("[tools.sandbox]\ndeny = [\"exce\"]\n", 2),
            ("[tools.subagents]\nallow = [\"exce\"]\n", 2),
            ("[agents.main]\ntools = { ask = [\"exce\"] }\n", 2),
            ("[agents.main]\ntools.deny = [\"exce\"]\n", 2),
            (
                "[[tools.hooks]]\nevent = \"before_tool_call\"\ncommand = [\"true\"]\ntools = [\"exce\"]\n",
                4,
            ),
            (
                "[channels.telegram]\n[channels.telegram.peers.\"42\"]\ntools = { deny = [\"exce\"] }\n",
                3,
            ),
            (
                "[channels.telegram.groups.\"-100\"]\ntools = { deny = [\"exce\"] }\n",
                2,
            ),
            (
                "[channels.telegram.groups.\"-100\".senders.\"7\"]\ntools = { allow = [\"exce\"] }\n",
                2,
            ),
        ] {
            let p = problem(text);
            assert_eq!(p.line, line, "{text}: {p}");
            assert!(
                p.reason
                    .contains("unknown tool `exce` (did you mean `exec`?)"),
                "{text}: {p}"
            );
        }
        // The same lists with real names load.
        parse_text("[tools]\ndeny = [\"exec\", \"group:web\", \"web_*\"]\n[agents.main]\ntools = { ask = [\"Exec\"] }\n").unwrap();
    }

    /// Names only a server can confirm load, and are kept for `pincer
    /// config check` and `pincer doctor`; a server that is not configured
    /// is refused.
    #[test]
    fn mcp_tool_names_need_a_configured_server_and_are_kept_to_check() {
        let c = parse_text(
            "[mcp.time]\nurl = \"http://127.0.0.1:9/mcp\"\n[agents.main]\ntools = { ask = [\"mcp__time__now\", \"mcp:time\"] }\n",
        )
        .unwrap();
        assert_eq!(
            c.tool_names_to_check.len(),
            1,
            "{:?}",
            c.tool_names_to_check
        );
        let n = &c.tool_names_to_check[0];
        assert_eq!(
            (n.name.as_str(), n.server.as_deref()),
            ("mcp__time__now", Some("time"))
        );
        assert_eq!(n.place, "/h/config.toml:4:18: key `agents.main.tools`");
        let p = problem(
            "[mcp.time]\nurl = \"http://127.0.0.1:9/mcp\"\n[tools]\ndeny = [\"mcp__tme__now\"]\n",
        );
        assert_eq!(p.line, 4);
        assert!(
            p.reason.contains("did you mean `mcp__time__now`?"),
            "{}",
            p.reason
        );
    }

    #[test]
    fn unknown_top_level_table_lists_valid_keys_when_nothing_is_close() {
        let p = problem("[zzz]\n");
        assert_eq!(p.line, 1);
        assert!(p.reason.contains("unknown key `zzz`"), "{}", p.reason);
        assert!(p.reason.contains("valid keys here"), "{}", p.reason);
    }

    /// `[bridges.discord]` (once `[channels.discord]`, before channels
    /// were configured) used to be reported under `bridges.bridges`: the
    /// unknown name was put in place of the header's last segment.
    #[test]
    fn unknown_top_level_table_is_reported_under_its_own_key() {
        let p = problem("[daemon]\nlog_level = \"info\"\n\n[bridges.discord]\ntoken = \"x\"\n");
        assert_eq!(p.key.as_deref(), Some("bridges"), "{p}");
        assert_eq!(p.line, 4, "{p}");
        assert!(p.reason.contains("unknown key `bridges`"), "{}", p.reason);
        assert!(
            p.to_string()
                .starts_with("/h/config.toml:4:2: key `bridges`: unknown key `bridges`"),
            "{p}"
        );
        // A near miss still gets its suggestion, under its own key.
        let p = problem("[agent.main]\nmodel = \"m\"\n");
        assert_eq!(p.key.as_deref(), Some("agent"), "{p}");
        assert!(p.reason.contains("did you mean `agents`?"), "{}", p.reason);
        // An unknown table below a known one keeps its whole path.
        let p = problem("[tools.exek]\ntimeout_s = 3\n");
        assert_eq!(p.key.as_deref(), Some("tools.exek"), "{p}");
        assert!(p.reason.contains("did you mean `exec`?"), "{}", p.reason);
    }

    /// An unclosed header's trailing comment used to be reported as part
    /// of the key, with its apostrophe dropped.
    #[test]
    fn an_unclosed_header_is_reported_under_its_key_without_the_comment() {
        let p = problem("[tools  # the tools\n");
        assert_eq!(p.key.as_deref(), Some("tools"), "{p}");
        assert!(p.reason.contains("unclosed table"), "{p}");
        let p = problem("[daemon]\n[agents.main  # Bob's agent\nmodel = \"m\"\n");
        assert_eq!((p.line, p.key.as_deref()), (2, Some("agents.main")), "{p}");
        // A quoted key keeps its apostrophe.
        let p = problem("[agents.\"bob's\"]\nmodle = \"m\"\n");
        assert_eq!(p.key.as_deref(), Some("agents.bob's.modle"), "{p}");
        let p = problem("[agents.'x.y' ] # [comment]\nmodle = \"m\"\n");
        assert_eq!(p.key.as_deref(), Some("agents.x.y.modle"), "{p}");
    }

    /// Wrong types are said in words, not serde's type names.
    #[test]
    fn wrong_types_are_said_in_words() {
        for (text, want) in [
            (
                "[daemon]\nmax_concurrent_turns = \"eight\"\n",
                "expected a whole number, not the text \"eight\"",
            ),
            (
                "[daemon]\nmax_concurrent_turns = 2.5\n",
                "expected a whole number, not the number 2.5",
            ),
            (
                "[daemon]\nmax_concurrent_turns = -3\n",
                "expected a whole number from 0 to 4294967295, not -3",
            ),
            (
                "[daemon]\nshutdown_grace_s = -1\n",
                "expected a whole number of 0 or more, not -1",
            ),
            (
                "[models.default]\nprovider = \"p\"\nmodel = \"m\"\ntemperature = \"hot\"\n",
                "expected a number, not the text \"hot\"",
            ),
            (
                "[tools.fs]\nallow_hard_links = 1\n",
                "expected true or false, not the whole number 1",
            ),
            (
                "default_agent = [\"a\"]\n",
                "expected text in quotes, not a list",
            ),
            (
                "[tools.web_fetch]\nallow_hosts = \"x\"\n",
                "expected a list, such as [\"a\", \"b\"], not the text \"x\"",
            ),
            (
                "[tools]\nexec = 3\n",
                "expected a table, not the whole number 3",
            ),
            ("[tools]\ntimeouts = true\n", "expected a table, not true"),
            (
                "[providers.x]\nkind = 3\n",
                "expected one of this key's names, as text in quotes",
            ),
        ] {
            let p = problem(text);
            assert_eq!(p.reason, want, "{text}");
            assert!(
                !p.reason.contains("u32") && !p.reason.contains("u64"),
                "{p}"
            );
        }
    }

    #[test]
    fn wrong_type_and_bad_enum_are_located() {
        let p = problem("[daemon]\nmax_concurrent_turns = \"eight\"\n");
        assert_eq!(p.line, 2);
        assert_eq!(p.key.as_deref(), Some("daemon.max_concurrent_turns"));
        let p = problem("[providers.x]\nkind = \"gemini\"\n");
        assert_eq!(p.line, 2);
        assert!(p.reason.contains("gemini"), "{}", p.reason);
    }

    #[test]
    fn missing_required_key_names_it() {
        let p = problem(&format!("{PROVIDER}\n[models.default]\nprovider = \"p\"\n"));
        assert!(
            p.reason.contains("missing required key `model`"),
            "{}",
            p.reason
        );
        assert_eq!(p.key.as_deref(), Some("models.default.model"));
    }

    #[test]
    fn a_model_has_both_prices_or_neither_and_none_below_zero() {
        let p = problem(&format!(
            "{PROVIDER}\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\ninput_usd_per_mtok = 3.0\n"
        ));
        assert_eq!(p.line, 8);
        assert!(
            p.reason
                .contains("give both `input_usd_per_mtok` and `output_usd_per_mtok`, or neither"),
            "{}",
            p.reason
        );
        let p = problem(&format!(
            "{PROVIDER}\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\ninput_usd_per_mtok = 3.0\noutput_usd_per_mtok = -1.0\n"
        ));
        assert_eq!(p.line, 9);
        assert!(p.reason.contains("a price is 0 or more"), "{}", p.reason);
    }

    #[test]
    fn references_are_checked_with_locations() {
        let p = problem(&format!(
            "{PROVIDER}\n[models.default]\nprovider = \"nope\"\nmodel = \"m\"\n"
        ));
        assert_eq!(p.line, 6);
        assert!(
            p.reason.contains("provider `nope`") && p.reason.contains("providers: p"),
            "{}",
            p.reason
        );
        let p = problem(&format!("{PROVIDER}\n[agents.main]\nmodel = \"ghost\"\n"));
        assert_eq!(p.line, 6);
        assert!(p.reason.contains("unknown model `ghost`"), "{}", p.reason);
        let p = problem(&format!(
            "{PROVIDER}\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\nfallbacks = [\"q/x\"]\n"
        ));
        assert!(p.reason.contains("unknown model `q/x`"), "{}", p.reason);
        let p = problem(&format!(
            "default_agent = \"x\"\n{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n"
        ));
        assert!(p.reason.contains("no agent `x`"), "{}", p.reason);
    }

    #[test]
    fn values_are_validated() {
        assert!(
            problem("[daemon]\nmax_concurrent_turns = 0\n")
                .reason
                .contains("at least 1")
        );
        assert!(
            problem("[providers.p]\nkind = \"openai\"\nbase_url = \"ftp://x\"\n")
                .reason
                .contains("not an http")
        );
        assert!(
            problem("[providers.p]\nkind = \"openai\"\ntool_format = \"json\"\n")
                .reason
                .contains("unknown variant")
        );
        let p = problem(&format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[agents.\"bad id\"]\n"
        ));
        assert!(p.reason.contains("agent id"), "{}", p.reason);
        let p = problem(&format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n[agents.main]\ntools = {{ profile = \"everything\" }}\n"
        ));
        assert!(p.reason.contains("unknown tool profile"), "{}", p.reason);
    }

    #[test]
    fn a_valid_file_resolves_models_fallbacks_and_defaults() {
        let c = parse_text(&format!(
            "{PROVIDER}[providers.a]\nkind = \"anthropic\"\n\n[models.default]\nprovider = \"p\"\nmodel = \"gpt-4.1-mini\"\nfallbacks = [\"a/claude-x\"]\n\n[agents.main]\nmodel = \"default\"\nmax_model_calls = 7\n\n[agents.helper]\nmodel = \"p/small\"\nworkspace = \"notes\"\n"
        ))
        .unwrap();
        let main = c.agent("main").unwrap();
        assert_eq!(
            main.models.iter().map(|m| m.label()).collect::<Vec<_>>(),
            ["p/gpt-4.1-mini", "a/claude-x"]
        );
        assert_eq!(main.models[0].context_window, None);
        assert_eq!(main.max_model_calls, 7);
        assert_eq!(
            main.workspace,
            PathBuf::from("/tmp/pincer-test-home/workspace")
        );
        let helper = c.agent("helper").unwrap();
        assert_eq!(
            helper.workspace,
            PathBuf::from("/tmp/pincer-test-home/notes")
        );
        assert_eq!(helper.max_turn_duration, Duration::from_secs(1800));
        assert_eq!(c.default_agent, "main");
        assert_eq!(c.providers["a"].base_url, "https://api.anthropic.com");
        assert!(c.provider_problem.is_none());
    }

    #[test]
    fn vision_is_off_unless_a_named_model_says_so() {
        let c = parse_text(&format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"gpt-4o\"\nvision = true\nfallbacks = [\"p/gpt-4o\"]\n"
        ))
        .unwrap();
        let main = c.agent("main").unwrap();
        // A `provider/model` fallback is not assumed to see images, even
        // the same model: only a [models] entry can say so.
        assert_eq!(
            main.models.iter().map(|m| m.vision).collect::<Vec<_>>(),
            [true, false]
        );
        let p = problem(&format!(
            "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\nvision = \"yes\"\n"
        ));
        assert_eq!(
            p.reason, "expected true or false, not the text \"yes\"",
            "{p}"
        );
    }

    #[test]
    fn hard_links_are_refused_unless_the_config_allows_them() {
        assert!(!parse_text("").unwrap().tools.fs.allow_hard_links);
        let c = parse_text("[tools.fs]\nallow_hard_links = true\n").unwrap();
        assert!(c.tools.fs.allow_hard_links);
    }

    #[test]
    fn tool_arguments_have_a_cap_that_can_be_set() {
        assert_eq!(parse_text("").unwrap().tools.max_argument_chars, 200_000);
        let c = parse_text("[tools]\nmax_argument_chars = 1000\n").unwrap();
        assert_eq!(c.tools.max_argument_chars, 1000);
    }

    #[test]
    fn no_providers_and_nothing_detected_is_a_problem_not_an_error() {
        let c = parse_text("[agents.main]\n").unwrap();
        assert_eq!(c.provider_problem.as_deref(), Some(env::NO_PROVIDER));
        assert!(c.agent("main").unwrap().models.is_empty());
        let empty = parse_text("").unwrap();
        assert_eq!(empty.agents.keys().collect::<Vec<_>>(), ["main"]);
    }

    #[test]
    fn missing_api_key_env_is_reported_without_failing_the_load() {
        let c = parse_text("[providers.p]\nkind = \"openai\"\napi_key_env = \"PINCER_SURELY_UNSET_VAR\"\n[models.default]\nprovider = \"p\"\nmodel = \"m\"\n").unwrap();
        match &c.providers["p"].api_key {
            ApiKey::Missing { problem } => assert!(problem.contains("$PINCER_SURELY_UNSET_VAR")),
            other => panic!("{other:?}"),
        }
        // `pincer status` and `pincer doctor` show this one sentence.
        assert_eq!(
            c.provider_problems(),
            [
                "provider `p` reads its API key from $PINCER_SURELY_UNSET_VAR, which is not set in pincerd's environment; export it before starting pincerd"
            ]
        );
        let none = parse_text("[agents.main]\n").unwrap();
        assert_eq!(none.provider_problems(), [env::NO_PROVIDER]);
        assert!(
            parse_text(&format!(
                "{PROVIDER}[models.default]\nprovider = \"p\"\nmodel = \"m\"\n"
            ))
            .unwrap()
            .provider_problems()
            .is_empty()
        );
        // The key's value never appears in Debug output.
        let shown = format!("{:?}", Secret("sk-very-secret".into()));
        assert!(!shown.contains("sk-very"));
    }
}
