//! Channels (SPEC §5, §11): `[channels.telegram]` and `[channels.discord]`
//! into [`ChannelSettings`], one per table present in the file. The bridge
//! crates know nothing of the config; the daemon builds their settings
//! from these, and routing reads the owner and the group entries.
//!
//! ```toml
//! [channels.telegram]
//! enabled = true                     # default when the table exists
//! token_env = "TELEGRAM_BOT_TOKEN"   # default; or token_file = "telegram.token" (in PINCER_HOME/secrets/)
//! api_url = "https://api.telegram.org"
//! owner = "123456789"                # the owner's user id here (optional)
//! dm_policy = "pairing"              # pairing | allowlist | open | disabled
//! allow_from = ["123456789"]         # user ids that may always DM the bot
//! require_mention = true             # in groups
//! context_messages = 50              # un-mentioned group messages kept (0..=500)
//! max_attachment_mb = 20             # larger attachments are not saved
//! preview = false                    # live preview by editing one message
//! max_messages_per_answer = 10       # 1..=100; a longer answer: the first 9, the rest as answer.md
//! mode = "polling"                   # Telegram: polling | webhook
//! poll_timeout_secs = 30             # Telegram: 1..=50
//! [channels.telegram.webhook]        # Telegram, read in webhook mode
//! url = "https://bot.example.org/tg" # public https URL Telegram calls (required)
//! listen = "127.0.0.1:8443"          # where pincerd listens (behind a TLS proxy)
//! secret_env = "TELEGRAM_WEBHOOK_SECRET"   # or secret_file (required)
//! [channels.telegram.groups."-1001234567890"]   # an allowlisted group
//! agent = "friends"
//! require_mention = false
//! allow_from = ["42"]                # who may summon the agent; others are context
//! admins = ["42"]                    # who besides the owner may /new and /reset here
//! tools = { deny = ["web_fetch"] }   # the group's policy layer (no `ask`)
//! prompt = "Answer in French."       # added to this chat's system prompt
//! [channels.telegram.groups."-1001234567890".senders."42"]
//! tools = { deny = ["memory_get"] }  # this sender's layer in that group
//! [channels.telegram.peers."42"]
//! tools = { allow = ["web_fetch"] }  # the layer of 42's direct messages
//! [channels.discord.guilds."987654321098765432"]   # Discord: a whole guild
//! channels = ["111111111111111111"]  # its channels listened to (absent: all)
//! allow_roles = ["555555555555555555"]   # role ids that may summon the agent
//! [channels.discord.guilds."987654321098765432".roles."555555555555555555"]
//! agent = "helper"                   # also tools, prompt, require_mention
//! ```
//!
//! On Discord a `groups."<chat id>"` entry is a guild channel (a thread is
//! its parent channel's), and `guilds."<guild id>"` ([`guilds`]) takes the
//! keys of a group entry (`agent`, `require_mention`, `allow_from`,
//! `admins`, `tools`, `prompt`, `senders`) plus `allow_roles` (also in a
//! Discord channel entry), `channels` and `roles."<role id>"` (`agent`,
//! `require_mention`, `tools`, `prompt`). A channel entry needs no guild
//! entry; where both exist the channel's keys override the guild's, and a
//! role's override both: sender > role > channel > guild ([`entries`]).
//! `guilds` and `allow_roles` anywhere but `[channels.discord]` are
//! errors.
//!
//! The config records where a token comes from, never the token:
//! [`ChannelSettings::token`] reads it when a bridge starts. Ids are
//! strings of digits (Telegram and Discord ids are numbers; group chat
//! ids may be negative; guild, channel and role ids are Discord's
//! snowflakes); a TOML integer is refused with the string to write
//! instead.
//!
//! Files: this one reads the keys every channel has (`parse`, `Parser`);
//! `settings` holds what they come to ([`ChannelSettings`],
//! [`GroupSettings`]), `telegram` and `discord` each platform's own keys,
//! `ids` the ids, [`guilds`] Discord's guilds and [`entries`] what a
//! group message's entries come to.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::file::{ChannelGroupSection, ChannelSection, ConfigFile};
use super::locate::{ConfigError, Locator};
use super::secret::SecretSource;
use super::tool_names::ToolNames;
use super::tools::layer;
use super::url::check_http_url;
use super::{AgentSettings, ToolLayer};
use crate::home::Home;

mod discord;
pub mod entries;
pub mod guilds;
mod ids;
mod settings;
mod telegram;

pub use discord::{DiscordSettings, MAX_CATCH_UP_HOURS, MAX_CATCH_UP_MESSAGES};
pub use entries::ChatEntries;
pub use guilds::{GuildSettings, RoleSettings};
use ids::IdKind;
pub use settings::{ChannelSettings, DmPolicy, GroupSettings};
pub use telegram::{TelegramMode, TelegramSettings, WebhookSettings};

/// The channels pincer has bridges for (`[channels.<name>]`,
/// `[[bindings]] channel`).
pub const CHANNELS: &[&str] = &["telegram", "discord"];

/// Most group messages kept as context, on any channel.
pub const MAX_CONTEXT_MESSAGES: usize = 500;

/// Largest `max_attachment_mb` (a self-hosted Telegram Bot API server
/// downloads up to 2000 MB).
pub const MAX_ATTACHMENT_MB: u64 = 2000;

/// `max_messages_per_answer` when the file does not say.
pub const DEFAULT_MESSAGES_PER_ANSWER: usize = 10;

/// The largest `max_messages_per_answer`: a hundred messages already
/// spend a group's rate limit (about 20 a minute on Telegram) for five
/// minutes.
pub const MAX_MESSAGES_PER_ANSWER: usize = 100;

/// What differs between channels.
struct Defaults {
    label: &'static str,
    token_env: &'static str,
    api_url: &'static str,
    context_messages: usize,
    max_attachment_mb: u64,
}

const TELEGRAM: Defaults = Defaults {
    label: "Telegram",
    token_env: "TELEGRAM_BOT_TOKEN",
    api_url: "https://api.telegram.org",
    context_messages: 50,
    max_attachment_mb: 20,
};

const DISCORD: Defaults = Defaults {
    label: "Discord",
    token_env: "DISCORD_BOT_TOKEN",
    api_url: "https://discord.com",
    context_messages: 20,
    max_attachment_mb: 10,
};

/// The `[channels.*]` tables of `file`, each checked.
pub(super) fn parse(
    loc: &Locator<'_>,
    names: &ToolNames,
    home: &Home,
    file: &ConfigFile,
    agents: &BTreeMap<String, AgentSettings>,
) -> Result<BTreeMap<String, ChannelSettings>, ConfigError> {
    let mut out = BTreeMap::new();
    let tables = [
        ("telegram", &file.channels.telegram, &TELEGRAM),
        ("discord", &file.channels.discord, &DISCORD),
    ];
    for (name, section, defaults) in tables {
        if let Some(section) = section {
            let settings = Parser {
                loc,
                names,
                home,
                agents,
                name,
                defaults,
            }
            .channel(section)?;
            out.insert(name.to_string(), settings);
        }
    }
    Ok(out)
}

struct Parser<'a> {
    loc: &'a Locator<'a>,
    names: &'a ToolNames,
    home: &'a Home,
    agents: &'a BTreeMap<String, AgentSettings>,
    name: &'static str,
    defaults: &'static Defaults,
}

impl Parser<'_> {
    fn err(&self, span: Range<usize>, why: impl Into<String>) -> ConfigError {
        self.loc.at(span, why)
    }

    fn channel(&self, s: &ChannelSection) -> Result<ChannelSettings, ConfigError> {
        let token = self.secret(
            (s.token_env.as_ref(), "token_env"),
            (s.token_file.as_ref(), "token_file"),
        )?;
        let token = token.unwrap_or_else(|| SecretSource::Env(self.defaults.token_env.into()));
        let api_url = match &s.api_url {
            Some(url) => {
                let value = url.get_ref().trim().trim_end_matches('/').to_string();
                check_http_url(&value).map_err(|why| self.err(url.span(), why.to_string()))?;
                value
            }
            None => self.defaults.api_url.to_string(),
        };
        let owner = match &s.owner {
            Some(v) => Some(self.user_id(v)?),
            None => None,
        };
        let dm_policy = match &s.dm_policy {
            None => DmPolicy::Pairing,
            Some(p) => match p.get_ref().trim() {
                "pairing" => DmPolicy::Pairing,
                "allowlist" => DmPolicy::Allowlist,
                "open" => DmPolicy::Open,
                "disabled" => DmPolicy::Disabled,
                other => {
                    return Err(self.err(
                        p.span(),
                        format!(
                            "unknown dm_policy `{other}`: use pairing, allowlist, open or disabled"
                        ),
                    ));
                }
            },
        };
        let allow_from = self.user_ids(&s.allow_from)?;
        let context_messages = match &s.context_messages {
            Some(n) if *n.get_ref() > MAX_CONTEXT_MESSAGES => {
                return Err(self.err(
                    n.span(),
                    format!("at most {MAX_CONTEXT_MESSAGES} messages are kept (0 keeps none)"),
                ));
            }
            Some(n) => *n.get_ref(),
            None => self.defaults.context_messages,
        };
        let max_attachment_mb = match &s.max_attachment_mb {
            Some(n) if *n.get_ref() > MAX_ATTACHMENT_MB => {
                return Err(self.err(
                    n.span(),
                    format!("at most {MAX_ATTACHMENT_MB} MB (0 saves no attachment)"),
                ));
            }
            Some(n) => *n.get_ref(),
            None => self.defaults.max_attachment_mb,
        };
        let max_messages_per_answer = match &s.max_messages_per_answer {
            Some(n) if !(1..=MAX_MESSAGES_PER_ANSWER).contains(n.get_ref()) => {
                return Err(self.err(
                    n.span(),
                    format!(
                        "max_messages_per_answer must be between 1 and {MAX_MESSAGES_PER_ANSWER}: an answer longer than that many messages is sent as its first ones and the rest as a file"
                    ),
                ));
            }
            Some(n) => *n.get_ref(),
            None => DEFAULT_MESSAGES_PER_ANSWER,
        };
        let require_mention = s.require_mention.unwrap_or(true);
        let mut groups = BTreeMap::new();
        for (id, group) in &s.groups {
            groups.insert(
                self.key(id, group.span(), IdKind::Chat)?,
                self.group(group.get_ref())?,
            );
        }
        let mut guilds = BTreeMap::new();
        for (id, guild) in &s.guilds {
            if self.name != "discord" {
                return Err(self.err(
                    guild.span(),
                    format!(
                        "`guilds` is a Discord setting; [channels.{}] has no guilds: list its groups under [channels.{}.groups.\"<chat id>\"]",
                        self.name, self.name
                    ),
                ));
            }
            guilds.insert(
                self.key(id, guild.span(), IdKind::Guild)?,
                self.guild(guild.get_ref())?,
            );
        }
        let mut peers = BTreeMap::new();
        for (id, peer) in &s.peers {
            peers.insert(
                self.key(id, peer.span(), IdKind::User)?,
                layer(self.loc, self.names, &peer.get_ref().tools)?,
            );
        }
        let telegram = if self.name == "telegram" {
            Some(self.telegram(s)?)
        } else {
            self.refuse_telegram_keys(s)?;
            None
        };
        let discord = if self.name == "discord" {
            Some(self.discord(s)?)
        } else {
            self.refuse_discord_keys(s)?;
            None
        };
        Ok(ChannelSettings {
            name: self.name.to_string(),
            enabled: s.enabled.unwrap_or(true),
            token_source: token,
            api_url,
            owner,
            dm_policy,
            allow_from,
            require_mention,
            context_messages,
            max_attachment_bytes: max_attachment_mb * 1024 * 1024,
            preview: s.preview.unwrap_or(false),
            max_messages_per_answer,
            groups,
            guilds,
            peers,
            telegram,
            discord,
        })
    }

    /// An env/file pair: at most one of them, neither empty.
    fn secret(
        &self,
        (env, env_key): (Option<&Spanned<String>>, &str),
        (file, file_key): (Option<&Spanned<String>>, &str),
    ) -> Result<Option<SecretSource>, ConfigError> {
        for (value, key) in [(env, env_key), (file, file_key)] {
            if let Some(v) = value
                && v.get_ref().trim().is_empty()
            {
                return Err(self.err(v.span(), format!("{key} is empty; leave the key out")));
            }
        }
        match (env, file) {
            (Some(_), Some(f)) => {
                Err(self.err(f.span(), format!("set {env_key} or {file_key}, not both")))
            }
            (Some(v), None) => Ok(Some(SecretSource::Env(v.get_ref().trim().to_string()))),
            (None, Some(f)) => Ok(Some(SecretSource::file(self.home, f.get_ref().trim()))),
            (None, None) => Ok(None),
        }
    }

    fn group(&self, g: &ChannelGroupSection) -> Result<GroupSettings, ConfigError> {
        let allow_from = match &g.allow_from {
            Some(list) => Some(self.user_ids(list)?),
            None => None,
        };
        Ok(GroupSettings {
            agent: self.agent(g.agent.as_ref())?,
            require_mention: g.require_mention,
            allow_from,
            allow_roles: self.allow_roles(g.allow_roles.as_ref())?,
            admins: self.user_ids(&g.admins)?,
            tools: layer(self.loc, self.names, &g.tools)?,
            prompt: prompt(g.prompt.as_deref()),
            senders: self.senders(&g.senders)?,
        })
    }

    /// An entry's `agent`, which must be configured.
    fn agent(&self, agent: Option<&Spanned<String>>) -> Result<Option<String>, ConfigError> {
        let Some(a) = agent else {
            return Ok(None);
        };
        let id = a.get_ref().trim();
        if !self.agents.contains_key(id) {
            let known: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            return Err(self.err(
                a.span(),
                format!("no agent `{id}` (agents: {})", known.join(", ")),
            ));
        }
        Ok(Some(id.to_string()))
    }

    /// An entry's `senders."<user id>"` layers.
    fn senders(
        &self,
        senders: &BTreeMap<String, Spanned<super::file::ChannelSenderSection>>,
    ) -> Result<BTreeMap<String, ToolLayer>, ConfigError> {
        let mut out = BTreeMap::new();
        for (id, sender) in senders {
            out.insert(
                self.key(id, sender.span(), IdKind::User)?,
                layer(self.loc, self.names, &sender.get_ref().tools)?,
            );
        }
        Ok(out)
    }
}

/// A `prompt` addition, trimmed; `None` when empty.
fn prompt(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::config::{Config, Problem};

    fn parse_in(home: &Home, text: &str) -> Result<Config, ConfigError> {
        crate::config::load::parse(home, Path::new("/h/config.toml"), text, &|| None)
    }

    fn parse(text: &str) -> Config {
        match parse_in(&Home::at("/tmp/pincer-channels-test"), text) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    fn problem(text: &str) -> Problem {
        match parse_in(&Home::at("/tmp/pincer-channels-test"), text) {
            Err(ConfigError::Invalid(p)) => *p,
            other => panic!("expected a problem, got {other:?}"),
        }
    }

    /// The problem's line, dotted key and reason.
    fn located(text: &str) -> (usize, String, String) {
        let p = problem(text);
        (p.line, p.key.unwrap_or_default(), p.reason)
    }

    const AGENTS: &str = "[agents.main]\n[agents.friends]\n";

    #[test]
    fn no_table_no_channel_and_an_empty_table_has_the_defaults() {
        assert!(parse("").channels.is_empty());
        let c = parse("[channels.telegram]\n");
        assert_eq!(c.channels.keys().collect::<Vec<_>>(), ["telegram"]);
        let t = &c.channels["telegram"];
        assert!(t.enabled);
        assert_eq!(
            t.token_source,
            SecretSource::Env("TELEGRAM_BOT_TOKEN".into())
        );
        assert_eq!(t.api_url, "https://api.telegram.org");
        assert_eq!(t.owner, None);
        assert_eq!(t.dm_policy, DmPolicy::Pairing);
        assert!(t.allow_from.is_empty());
        assert!(t.require_mention);
        assert_eq!(t.context_messages, 50);
        assert_eq!(t.max_attachment_bytes, 20 * 1024 * 1024);
        assert!(!t.preview);
        assert_eq!(t.max_messages_per_answer, 10);
        assert!(t.groups.is_empty());
        assert_eq!(
            t.telegram,
            Some(TelegramSettings {
                mode: TelegramMode::Polling {
                    timeout: Duration::from_secs(30)
                }
            })
        );

        let d = &parse("[channels.discord]\nenabled = false\n").channels["discord"];
        assert!(!d.enabled);
        assert_eq!(
            d.token_source,
            SecretSource::Env("DISCORD_BOT_TOKEN".into())
        );
        assert_eq!(d.context_messages, 20);
        assert_eq!(d.telegram, None);
    }

    #[test]
    fn every_key_is_read() {
        let c = parse(&format!(
            "{AGENTS}[channels.telegram]\n\
             token_file = \"telegram.token\"\n\
             api_url = \"http://127.0.0.1:8081/\"\n\
             owner = \"123456789\"\n\
             dm_policy = \"allowlist\"\n\
             allow_from = [\"123456789\", \" 42 \"]\n\
             require_mention = false\n\
             context_messages = 0\n\
             max_attachment_mb = 50\n\
             preview = true\n\
             max_messages_per_answer = 3\n\
             mode = \"webhook\"\n\
             poll_timeout_secs = 10\n\
             [channels.telegram.webhook]\n\
             url = \"https://bot.example.org/tg\"\n\
             secret_file = \"tg-webhook\"\n\
             [channels.telegram.groups.\"-1001234567890\"]\n\
             agent = \"friends\"\n\
             allow_from = [\"42\"]\n\
             admins = [\"43\"]\n\
             tools = {{ profile = \"messaging\", deny = [\"web_fetch\"] }}\n\
             prompt = \"  Answer in French.  \"\n\
             [channels.telegram.groups.\"-1001234567890\".senders.\"42\"]\n\
             tools = {{ deny = [\"memory_get\"] }}\n\
             [channels.telegram.groups.\"-5\"]\n\
             require_mention = true\n"
        ));
        let t = &c.channels["telegram"];
        assert_eq!(
            t.token_source,
            SecretSource::File("/tmp/pincer-channels-test/secrets/telegram.token".into())
        );
        assert_eq!(t.api_url, "http://127.0.0.1:8081");
        assert!(t.is_owner("123456789") && !t.is_owner("42"));
        assert_eq!(t.dm_policy, DmPolicy::Allowlist);
        assert_eq!(t.allow_from, ["123456789", "42"]);
        assert!(!t.require_mention);
        assert_eq!(t.context_messages, 0);
        assert_eq!(t.max_attachment_bytes, 50 * 1024 * 1024);
        assert!(t.preview);
        assert_eq!(t.max_messages_per_answer, 3);
        let Some(TelegramSettings {
            mode: TelegramMode::Webhook(w),
        }) = &t.telegram
        else {
            panic!("{:?}", t.telegram);
        };
        assert_eq!(w.url, "https://bot.example.org/tg");
        assert_eq!(w.listen, SocketAddr::from(([127, 0, 0, 1], 8443)));
        assert_eq!(
            w.secret_source,
            SecretSource::File("/tmp/pincer-channels-test/secrets/tg-webhook".into())
        );
        let g = t.group("-1001234567890").unwrap();
        assert_eq!(g.agent.as_deref(), Some("friends"));
        assert_eq!(
            g.require_mention, None,
            "unset: the channel's, when the group says nothing"
        );
        assert_eq!(g.allow_from.as_deref(), Some(&["42".to_string()][..]));
        assert_eq!(g.tools.profile.as_deref(), Some("messaging"));
        assert_eq!(g.tools.deny, ["web_fetch"]);
        assert_eq!(g.prompt.as_deref(), Some("Answer in French."));
        assert_eq!(g.senders["42"].deny, ["memory_get"]);
        let other = t.group("-5").unwrap();
        assert_eq!(other.require_mention, Some(true), "the group's own");
        assert_eq!(other.agent, None);
        assert_eq!(other.allow_from, None);
        assert!(t.group("-6").is_none());
        assert_eq!(g.admins, ["43"]);
        assert!(other.admins.is_empty());
        // Who may start a new conversation in a group: the owner, admins.
        assert!(t.may_reset_group(None, "-1001234567890", "123456789"));
        assert!(t.may_reset_group(None, "-1001234567890", "43"));
        assert!(!t.may_reset_group(None, "-1001234567890", "42"));
        assert!(
            !t.may_reset_group(None, "-5", "43"),
            "an admin of another group"
        );
        assert!(!t.may_reset_group(None, "-1001234567890", ""));
    }

    #[test]
    fn an_empty_id_is_never_the_owner() {
        let mut t = parse("[channels.telegram]\n").channels["telegram"].clone();
        assert!(!t.is_owner(""), "no owner configured");
        t.owner = Some(String::new());
        assert!(!t.is_owner(""), "not even an owner of \"\"");
        assert!(!t.is_owner(" "));
    }

    #[test]
    fn webhook_keys_are_ignored_in_polling_mode_but_still_checked() {
        let c = parse(
            "[channels.telegram]\npoll_timeout_secs = 50\n[channels.telegram.webhook]\nlisten = \"0.0.0.0:8443\"\n",
        );
        assert_eq!(
            c.channels["telegram"].telegram.as_ref().map(|t| &t.mode),
            Some(&TelegramMode::Polling {
                timeout: Duration::from_secs(50)
            })
        );
        let (line, key, why) =
            located("[channels.telegram]\n[channels.telegram.webhook]\nlisten = \"localhost\"\n");
        assert_eq!(
            (line, key.as_str()),
            (3, "channels.telegram.webhook.listen")
        );
        assert!(why.contains("not an address and port"), "{why}");
    }

    #[test]
    fn an_unknown_channel_names_the_known_ones() {
        let (line, key, why) = located("[daemon]\n\n[channels.irc]\nenabled = true\n");
        assert_eq!(line, 3);
        assert_eq!(key, "channels.irc");
        assert!(why.contains("unknown key `irc`"), "{why}");
        assert!(why.contains("telegram, discord"), "{why}");
        let (_, key, why) = located("[channels.telegran]\n");
        assert_eq!(key, "channels.telegran");
        assert!(why.contains("did you mean `telegram`?"), "{why}");
    }

    #[test]
    fn bad_values_are_located_by_line_and_key() {
        let cases: &[(&str, usize, &str, &str)] = &[
            (
                "[channels.telegram]\ntokn_env = \"X\"\n",
                2,
                "channels.telegram.tokn_env",
                "did you mean `token_env`?",
            ),
            (
                "[channels.telegram]\ntoken_env = \"A\"\ntoken_file = \"a\"\n",
                3,
                "channels.telegram.token_file",
                "set token_env or token_file, not both",
            ),
            (
                "[channels.telegram]\ntoken_env = \" \"\n",
                2,
                "channels.telegram.token_env",
                "token_env is empty",
            ),
            (
                "[channels.telegram]\napi_url = \"api.telegram.org\"\n",
                2,
                "channels.telegram.api_url",
                "not an http:// or https:// URL",
            ),
            (
                "[channels.telegram]\ndm_policy = \"friends\"\n",
                2,
                "channels.telegram.dm_policy",
                "use pairing, allowlist, open or disabled",
            ),
            (
                "[channels.telegram]\nallow_from = [\"1\", 123456789]\n",
                2,
                "channels.telegram.allow_from",
                "write ids as strings: \"123456789\", not 123456789",
            ),
            (
                "[channels.telegram]\nallow_from = [\"@bob\"]\n",
                2,
                "channels.telegram.allow_from",
                "`@bob` is not a Telegram user id",
            ),
            (
                "[channels.telegram]\nallow_from = [\"\"]\n",
                2,
                "channels.telegram.allow_from",
                "an empty id matches nobody",
            ),
            (
                "[channels.discord]\nowner = 42\n",
                2,
                "channels.discord.owner",
                "write ids as strings: \"42\"",
            ),
            (
                "[channels.telegram]\nowner = true\n",
                2,
                "channels.telegram.owner",
                "a Telegram user id is a string of digits",
            ),
            (
                "[channels.telegram]\ncontext_messages = 501\n",
                2,
                "channels.telegram.context_messages",
                "at most 500 messages",
            ),
            (
                "[channels.telegram]\ncontext_messages = -1\n",
                2,
                "channels.telegram.context_messages",
                "-1",
            ),
            (
                "[channels.telegram]\nmax_messages_per_answer = 0\n",
                2,
                "channels.telegram.max_messages_per_answer",
                "must be between 1 and 100",
            ),
            (
                "[channels.discord]\nmax_messages_per_answer = 101\n",
                2,
                "channels.discord.max_messages_per_answer",
                "the rest as a file",
            ),
            (
                "[channels.telegram]\nmax_attachment_mb = 5000\n",
                2,
                "channels.telegram.max_attachment_mb",
                "at most 2000 MB",
            ),
            (
                "[channels.telegram]\npoll_timeout_secs = 0\n",
                2,
                "channels.telegram.poll_timeout_secs",
                "between 1 and 50",
            ),
            (
                "[channels.telegram]\npoll_timeout_secs = 51\n",
                2,
                "channels.telegram.poll_timeout_secs",
                "between 1 and 50",
            ),
            (
                "[channels.telegram]\nmode = \"push\"\n",
                2,
                "channels.telegram.mode",
                "use polling or webhook",
            ),
            (
                "[channels.telegram]\nmode = \"webhook\"\n",
                2,
                "channels.telegram.mode",
                "webhook mode needs the public https URL",
            ),
            (
                "[channels.telegram]\nmode = \"webhook\"\n[channels.telegram.webhook]\nurl = \"https://x.example/tg\"\n",
                2,
                "channels.telegram.mode",
                "webhook mode needs a secret token",
            ),
            (
                "[channels.telegram]\n[channels.telegram.webhook]\nurl = \"http://x.example/tg\"\n",
                3,
                "channels.telegram.webhook.url",
                "Telegram calls webhooks over https only",
            ),
            (
                "[channels.telegram]\n[channels.telegram.webhook]\nsecret_env = \"A\"\nsecret_file = \"b\"\n",
                4,
                "channels.telegram.webhook.secret_file",
                "set secret_env or secret_file, not both",
            ),
            (
                "[channels.telegram.webhook]\nport = 8443\n",
                2,
                "channels.telegram.webhook.port",
                "unknown key `port`",
            ),
            (
                "[channels.discord]\nmode = \"webhook\"\n",
                2,
                "channels.discord.mode",
                "`mode` is a Telegram setting; [channels.discord] has no `mode`",
            ),
            (
                "[channels.discord]\nenabled = true\n[channels.discord.webhook]\nurl = \"https://x\"\n",
                3,
                "channels.discord.webhook",
                "`webhook` is a Telegram setting",
            ),
        ];
        for (text, line, key, why) in cases {
            let (got_line, got_key, got_why) = located(text);
            assert_eq!(
                (got_line, got_key.as_str()),
                (*line, *key),
                "{text}: {got_why}"
            );
            assert!(got_why.contains(why), "{text}: {got_why}");
        }
    }

    #[test]
    fn bad_group_entries_are_located() {
        let g = "[channels.telegram]\n[channels.telegram.groups.\"-100\"]\n";
        let cases: &[(String, usize, &str, &str)] = &[
            (
                format!("{AGENTS}{g}agent = \"nobody\"\n"),
                5,
                "channels.telegram.groups.-100.agent",
                "no agent `nobody` (agents: friends, main)",
            ),
            (
                format!("{AGENTS}{g}tools = {{ ask = [\"exec\"] }}\n"),
                5,
                "channels.telegram.groups.-100.tools",
                "`ask` is set per agent",
            ),
            (
                format!("{AGENTS}{g}tools = {{ deny = [\"group:nope\"] }}\n"),
                5,
                "channels.telegram.groups.-100.tools",
                "unknown tool group",
            ),
            (
                format!("{AGENTS}{g}allow_from = [42]\n"),
                5,
                "channels.telegram.groups.-100.allow_from",
                "write ids as strings",
            ),
            (
                format!("{AGENTS}{g}admins = [\"\", \"42\"]\n"),
                5,
                "channels.telegram.groups.-100.admins",
                "an empty id matches nobody",
            ),
            (
                format!("{AGENTS}{g}agnet = \"main\"\n"),
                5,
                "channels.telegram.groups.-100.agnet",
                "did you mean `agent`?",
            ),
            (
                format!("{AGENTS}[channels.telegram.groups.\"general\"]\nagent = \"main\"\n"),
                3,
                "channels.telegram.groups.general",
                "`general` is not a Telegram chat id",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.telegram.groups.\"-100\".senders.\"bob\"]\ntools = {{ deny = [\"exec\"] }}\n"
                ),
                5,
                "channels.telegram.groups.-100.senders.bob",
                "senders.\"bob\": `bob` is not a Telegram user id",
            ),
            (
                format!(
                    "{AGENTS}{g}[channels.telegram.groups.\"-100\".senders.\"7\"]\ntool = {{ deny = [\"exec\"] }}\n"
                ),
                6,
                "channels.telegram.groups.-100.senders.7.tool",
                "did you mean `tools`?",
            ),
        ];
        for (text, line, key, why) in cases {
            let (got_line, got_key, got_why) = located(text);
            assert_eq!(
                (got_line, got_key.as_str()),
                (*line, *key),
                "{text}: {got_why}"
            );
            assert!(got_why.contains(why), "{text}: {got_why}");
        }
    }

    #[test]
    fn the_token_is_read_from_its_variable_or_file_and_named_when_missing() {
        // A variable cargo sets for every test process.
        let c = parse("[channels.telegram]\ntoken_env = \"CARGO_PKG_NAME\"\n");
        assert_eq!(
            c.channels["telegram"].token().ok().as_deref(),
            Some(env!("CARGO_PKG_NAME"))
        );
        let c = parse("[channels.discord]\ntoken_env = \"PINCER_SURELY_UNSET_TOKEN\"\n");
        assert_eq!(
            c.channels["discord"].token().map_err(|e| e.to_string()),
            Err("[channels.discord] reads its bot token from $PINCER_SURELY_UNSET_TOKEN, which is not set in pincerd's environment".into())
        );

        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let text = "[channels.telegram]\ntoken_file = \"telegram.token\"\n";
        let c = parse_in(&home, text).unwrap();
        let path = dir.path().join("secrets/telegram.token");
        assert_eq!(
            c.channels["telegram"].token().map_err(|e| e.to_string()),
            Err(format!(
                "[channels.telegram] reads its bot token from {}, which is missing or empty",
                path.display()
            ))
        );
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "123:AAsecret-token-value\n").unwrap();
        let settings = &c.channels["telegram"];
        assert_eq!(
            settings.token().ok().as_deref(),
            Some("123:AAsecret-token-value")
        );
        // The settings hold where the token is, never the token.
        assert!(!format!("{settings:?}").contains("secret-token-value"));
    }

    #[test]
    fn the_variables_holding_secrets_are_named() {
        let c = parse(
            "[channels.telegram]\nmode = \"webhook\"\n[channels.telegram.webhook]\nurl = \"https://x.example/tg\"\nlisten = \"[::1]:9000\"\nsecret_env = \"TG_HOOK_SECRET\"\n[channels.discord]\ntoken_file = \"discord.token\"\n",
        );
        let vars: Vec<&str> = c
            .channels
            .values()
            .flat_map(|c| c.secret_env_vars())
            .collect();
        assert_eq!(vars, ["TELEGRAM_BOT_TOKEN", "TG_HOOK_SECRET"]);
        let Some(TelegramMode::Webhook(w)) =
            c.channels["telegram"].telegram.as_ref().map(|t| &t.mode)
        else {
            panic!("not webhook mode");
        };
        assert_eq!(w.listen, "[::1]:9000".parse::<SocketAddr>().unwrap());
        assert!(
            w.secret()
                .unwrap_err()
                .to_string()
                .contains("$TG_HOOK_SECRET")
        );
    }
}
