//! Bindings (SPEC §11): which agent answers a chat. A binding names a
//! channel and, optionally, an account, a group (a Telegram group, a
//! Discord guild channel), a peer, and on Discord a `guild` and a `role`
//! (the sender holds it); the routing layer picks the most specific one
//! that matches (`crate::routing::bindings`: peer > role > group > guild >
//! account > channel); a chat no binding matches goes to the default
//! agent.
//!
//! ```toml
//! [[bindings]]
//! channel = "telegram"
//! group = "-1001234567890"   # this group…
//! agent = "helper"           # …is answered by `helper`
//!
//! [[bindings]]
//! channel = "discord"
//! guild = "987654321098765432"
//! role = "555555555555555555"   # this role's holders in that guild
//! agent = "mods"
//! ```

use std::collections::BTreeMap;

use super::AgentSettings;
use super::channels::CHANNELS;
use super::file::ConfigFile;
use super::locate::{ConfigError, Locator};

/// One `[[bindings]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Binding {
    /// `telegram`, `discord`, …
    pub channel: String,
    /// The bot account on that channel, when several are configured.
    pub account: Option<String>,
    /// A group or guild channel id (a thread is its parent channel's).
    pub group: Option<String>,
    /// Discord: a guild id.
    pub guild: Option<String>,
    /// Discord: a role id the sender holds.
    pub role: Option<String>,
    /// A sender id (a DM with this person, or this person in any chat).
    pub peer: Option<String>,
    /// The agent that answers.
    pub agent: String,
}

/// The `[[bindings]]` of `file`, each checked: a known channel, an agent
/// that exists, ids that are not empty.
pub(super) fn parse(
    loc: &Locator<'_>,
    file: &ConfigFile,
    agents: &BTreeMap<String, AgentSettings>,
) -> Result<Vec<Binding>, ConfigError> {
    let mut out = Vec::new();
    for entry in &file.bindings {
        let b = entry.get_ref();
        let channel = b.channel.get_ref().trim().to_lowercase();
        if !CHANNELS.contains(&channel.as_str()) {
            return Err(loc.at(
                b.channel.span(),
                format!(
                    "[[bindings]] channel: unknown channel `{}`: use {}",
                    b.channel.get_ref(),
                    CHANNELS.join(" or ")
                ),
            ));
        }
        let agent = b.agent.get_ref().trim();
        if !agents.contains_key(agent) {
            let known: Vec<&str> = agents.keys().map(String::as_str).collect();
            return Err(loc.at(
                b.agent.span(),
                format!(
                    "[[bindings]] agent: no agent `{agent}` (agents: {})",
                    known.join(", ")
                ),
            ));
        }
        let id = |v: &Option<String>| v.as_ref().map(|s| s.trim().to_string());
        for (key, value) in [
            ("account", &b.account),
            ("group", &b.group),
            ("peer", &b.peer),
        ] {
            if value.as_ref().is_some_and(|v| v.trim().is_empty()) {
                return Err(loc.at(
                    entry.span(),
                    format!("[[bindings]] {key}: an empty id matches nothing; leave the key out"),
                ));
            }
        }
        let mut discord_ids = [(&b.guild, "guild"), (&b.role, "role")]
            .into_iter()
            .map(|(value, key)| {
                let Some(v) = value else {
                    return Ok(None);
                };
                let text = v.get_ref().trim();
                if channel != "discord" {
                    return Err(loc.at(
                        v.span(),
                        format!(
                            "[[bindings]] {key}: a {key} is Discord's; a {channel} binding names a group or a peer"
                        ),
                    ));
                }
                if text.is_empty() || !text.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(loc.at(
                        v.span(),
                        format!(
                            "[[bindings]] {key}: `{text}` is not a Discord {key} id: write the number, e.g. \"123456789012345678\""
                        ),
                    ));
                }
                Ok(Some(text.to_string()))
            });
        let guild = discord_ids.next().transpose()?.flatten();
        let role = discord_ids.next().transpose()?.flatten();
        out.push(Binding {
            channel,
            account: id(&b.account),
            group: id(&b.group),
            guild,
            role,
            peer: id(&b.peer),
            agent: agent.to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};
    use crate::home::Home;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::config::load::parse(
            &Home::at("/tmp/pincer-bindings-test"),
            Path::new("/h/config.toml"),
            &format!("[agents.main]\n[agents.mods]\n{text}"),
            &|| None,
        )
    }

    #[test]
    fn a_discord_binding_names_a_guild_and_a_role() {
        let c = parse(
            "[[bindings]]\nchannel = \"discord\"\nguild = \" 987 \"\nrole = \"555\"\nagent = \"mods\"\n",
        )
        .unwrap();
        assert_eq!(c.bindings[0].guild.as_deref(), Some("987"));
        assert_eq!(c.bindings[0].role.as_deref(), Some("555"));
        assert_eq!(c.bindings[0].group, None);
    }

    #[test]
    fn a_guild_or_role_elsewhere_or_not_a_number_is_located() {
        for (text, line, why) in [
            (
                "[[bindings]]\nchannel = \"telegram\"\nguild = \"987\"\nagent = \"mods\"\n",
                5,
                "[[bindings]] guild: a guild is Discord's; a telegram binding names a group or a peer",
            ),
            (
                "[[bindings]]\nchannel = \"telegram\"\nrole = \"5\"\nagent = \"mods\"\n",
                5,
                "[[bindings]] role: a role is Discord's",
            ),
            (
                "[[bindings]]\nchannel = \"discord\"\nrole = \"@mods\"\nagent = \"mods\"\n",
                5,
                "[[bindings]] role: `@mods` is not a Discord role id",
            ),
            (
                "[[bindings]]\nchannel = \"discord\"\nguild = \"\"\nagent = \"mods\"\n",
                5,
                "[[bindings]] guild: `` is not a Discord guild id",
            ),
        ] {
            match parse(text) {
                Err(ConfigError::Invalid(p)) => {
                    assert_eq!(p.line, line, "{text}: {}", p.reason);
                    assert!(p.reason.contains(why), "{text}: {}", p.reason);
                }
                other => panic!("{text}: expected a problem, got {other:?}"),
            }
        }
    }
}
