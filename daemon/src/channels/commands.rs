//! The chat commands a bridge hands to the daemon (`/new`, `/reset`,
//! `/stop`, `/status`): who may do what is decided here, once, over the
//! hub's verbs. The bridge only parses them.
//!
//! - `/new` and `/reset` start a new conversation. In a DM it is the
//!   person's own conversation: they may. In a group it belongs to the
//!   channel's `owner` and to the group entry's `admins`
//!   (`[channels.<name>.groups."<id>"] admins = ["42"]`; on Discord, when
//!   the channel's entry lists none, its guild's); anyone else is told who
//!   may.
//! - `/stop`: the owner stops any answer ([`Hub::abort`]); anyone else
//!   only an answer to their own messages alone, and otherwise has their
//!   own queued messages dropped ([`Hub::stop_for`]): one member cannot
//!   cut off another's answer.
//! - `/status` tells the owner in their DM the agent, model, session and
//!   tokens; anyone else — the owner in a group too, since everyone there
//!   reads the answer — only what is theirs: the agent, whether an answer
//!   is being written, and how many of their messages wait.
//!
//! - `/run NAME key=value …` runs a workflow as the chat's origin, when
//!   that origin's policy offers the `workflow_run` tool.
//! - `/schedules` lists the schedules to the owner in their DM, and
//!   `/schedules pause|resume|run|remove NAME` changes one; anyone else is
//!   told it is the owner's.
//!
//! Who is the owner: the channel's `owner` id, and never a sender without
//! an id (`ChannelSettings::is_owner`).

use pincer_channel::{ChatKind, Command, HostError, Inbound};

use crate::agent::hub::stop::StopOutcome;
use crate::agent::hub::{Hub, HubError};
use crate::config::Config;
use crate::routing::Route;

/// The answer to `command` from `msg`, routed to `route`.
pub async fn answer(
    hub: &Hub,
    config: &Config,
    msg: &Inbound,
    route: &Route,
    command: &Command,
) -> Result<String, HostError> {
    let key = route.key.to_string();
    let channel = config.channels.get(&msg.channel);
    let is_owner = config.is_channel_owner(&msg.channel, &msg.sender.id);
    match command {
        Command::New | Command::Reset => {
            let allowed = match msg.kind {
                ChatKind::Direct => !msg.sender.id.trim().is_empty(),
                ChatKind::Group | ChatKind::Thread => channel.is_some_and(|c| {
                    c.may_reset_group(msg.guild_id.as_deref(), &msg.chat_id, &msg.sender.id)
                }),
            };
            if !allowed {
                return Ok(
                    "Only the owner or an admin of this group can start a new conversation here."
                        .into(),
                );
            }
            reset(hub, &key).await
        }
        Command::Stop if is_owner => Ok(if hub.abort(&key) {
            "Stopped.".into()
        } else {
            "Nothing is running.".into()
        }),
        Command::Stop => Ok(match hub.stop_for(&key, &route.origin.sender) {
            StopOutcome::Stopped => "Stopped.".into(),
            StopOutcome::Idle => "Nothing is running.".into(),
            StopOutcome::Dropped(0) => {
                "The answer being written is not yours alone, so it goes on.".into()
            }
            StopOutcome::Dropped(n) => format!(
                "The answer being written is not yours alone, so it goes on; your {n} waiting message{} will not be answered.",
                if n == 1 { "" } else { "s" }
            ),
        }),
        Command::Status if route.origin.is_owner() => owners_status(hub, config, route).await,
        Command::Status => {
            let mut text = format!("Agent {}.", route.agent);
            text.push_str(if hub.is_running(&key) {
                " An answer is being written."
            } else {
                " Nothing is running."
            });
            let waiting = hub.queued_from(&key, &route.origin.sender);
            if waiting > 0 {
                text.push_str(&format!(
                    " {waiting} of your messages wait{} to be answered.",
                    if waiting == 1 { "s" } else { "" }
                ));
            }
            Ok(text)
        }
        Command::Run(text) => run_workflow(hub, route, text).await,
        Command::Schedules(text) if route.origin.is_owner() => schedules(hub, route, text).await,
        Command::Schedules(_) => Ok("Only the owner sees schedules, in their own DM.".into()),
        Command::Help
        | Command::Approve(_)
        | Command::Deny(_)
        | Command::Edit(..)
        | Command::Revise(..)
        | Command::Input(..) => Err(HostError::Refused("not a daemon command".into())),
    }
}

/// `/run NAME key=value …`: the workflow runs as this chat's origin, if
/// its policy offers `workflow_run` (the engine checks); the answer is its
/// result, or what it waits for, or that it goes on.
async fn run_workflow(hub: &Hub, route: &Route, text: &str) -> Result<String, HostError> {
    let mut words = text.split_whitespace();
    let Some(name) = words.next() else {
        return Ok("Say which workflow: /run NAME key=value …".into());
    };
    let mut inputs = serde_json::Map::new();
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return Ok(format!(
                "`{word}` is not an input: write key=value (no spaces around =)"
            ));
        };
        inputs.insert(
            key.to_string(),
            serde_json::Value::String(value.to_string()),
        );
    }
    let Some(runner) = hub.workflows() else {
        return Ok("No workflow engine runs in this pincerd.".into());
    };
    match runner
        .run(&route.agent, &route.origin, name, inputs, RUN_WAIT)
        .await
    {
        Ok(report) => Ok(report.sentence(name)),
        Err(e) => Ok(format!("Not run: {e}")),
    }
}

/// `/schedules [pause|resume|run|remove NAME]`, for the owner in their
/// DM: the same verbs as the `schedule` tool.
async fn schedules(hub: &Hub, route: &Route, text: &str) -> Result<String, HostError> {
    use crate::tools::schedule_book::{Asker, BookVerb};
    let mut words = text.split_whitespace();
    let verb = match (words.next(), words.next()) {
        (None, _) => BookVerb::List,
        (Some("pause"), Some(n)) => BookVerb::Pause(n.into()),
        (Some("resume"), Some(n)) => BookVerb::Resume(n.into()),
        (Some("run"), Some(n)) => BookVerb::RunNow(n.into()),
        (Some("remove"), Some(n)) => BookVerb::Remove(n.into()),
        _ => {
            return Ok(
                "Write /schedules to list them, or /schedules pause|resume|run|remove NAME.".into(),
            );
        }
    };
    let Some(book) = hub.schedules() else {
        return Ok("No scheduler runs in this pincerd.".into());
    };
    let key = route.key.to_string();
    let asker = Asker {
        agent: &route.agent,
        session_key: &key,
        origin: &route.origin,
    };
    Ok(book
        .act(asker, verb)
        .await
        .unwrap_or_else(|e| e.to_string()))
}

/// How long `/run` waits for the run to end or halt before it answers.
const RUN_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

async fn reset(hub: &Hub, key: &str) -> Result<String, HostError> {
    let row = hub.session_of(key).await.map_err(refused)?;
    let Some(row) = row else {
        return Ok("This is a new conversation already.".into());
    };
    match hub.reset(&row).await {
        Ok(_) => {
            Ok("Started a new conversation. The old one is kept in the owner's history.".into())
        }
        Err(HubError::Busy(_)) => {
            Ok("An answer is being written; send /stop first, then /reset.".into())
        }
        Err(e) => Err(refused(e)),
    }
}

/// The whole status, for the owner in their DM.
async fn owners_status(hub: &Hub, config: &Config, route: &Route) -> Result<String, HostError> {
    let key = route.key.to_string();
    let row = hub.session_of(&key).await.map_err(refused)?;
    let model = config
        .agent(&route.agent)
        .and_then(|a| a.models.first())
        .map(|m| m.label())
        .unwrap_or_default();
    let mut text = format!("Agent {} (model {model}).", route.agent);
    match row {
        Some(row) => text.push_str(&format!(
            "\nSession {}, started {}: {} tokens in, {} out{}.",
            row.id,
            crate::util::moment(&row.created_at, &chrono::Local::now()),
            row.input_tokens,
            row.output_tokens,
            if hub.is_running(&key) {
                "; an answer is being written"
            } else {
                ""
            }
        )),
        None => text.push_str("\nNo conversation yet."),
    }
    Ok(text)
}

pub(super) fn refused(e: HubError) -> HostError {
    match e {
        HubError::ShuttingDown => HostError::ShuttingDown,
        other => HostError::Refused(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use pincer_channel::Sender;

    use super::*;

    const CONFIG: &str = "[agents.main]\n\
        [channels.telegram]\nowner = \"1\"\ndm_policy = \"open\"\n\
        [channels.telegram.groups.\"-100\"]\nadmins = [\"5\"]\n";

    fn hub() -> Hub {
        Hub::for_tests(CONFIG)
    }

    fn msg(kind: ChatKind, sender: &str) -> Inbound {
        Inbound {
            channel: "telegram".into(),
            account: "default".into(),
            kind,
            chat_id: if kind == ChatKind::Direct {
                sender.into()
            } else {
                "-100".into()
            },
            thread_id: None,
            guild_id: None,
            sender_roles: Vec::new(),
            sender: Sender {
                id: sender.into(),
                name: format!("user {sender}"),
                is_bot: false,
            },
            text: String::new(),
            mentions_bot: true,
            reply_to: None,
            attachments: Vec::new(),
            message_id: "m".into(),
        }
    }

    async fn ask(hub: &Hub, msg: &Inbound, command: Command) -> String {
        let config = hub.config();
        let route = crate::routing::route(&config, &super::super::host::to_routing(msg)).unwrap();
        answer(hub, &config, msg, &route, &command).await.unwrap()
    }

    const REFUSED: &str = "Only the owner or an admin of this group";
    const ALLOWED: &str = "This is a new conversation already.";

    #[tokio::test]
    async fn in_a_group_only_the_owner_and_admins_reset() {
        let hub = hub();
        for (sender, allowed) in [("1", true), ("5", true), ("7", false), ("", false)] {
            for command in [Command::Reset, Command::New] {
                let said = ask(&hub, &msg(ChatKind::Group, sender), command).await;
                let expected = if allowed { ALLOWED } else { REFUSED };
                assert!(said.starts_with(expected), "{sender}: {said}");
            }
        }
        // In their own DM everyone may start anew.
        let said = ask(&hub, &msg(ChatKind::Direct, "7"), Command::Reset).await;
        assert_eq!(said, ALLOWED);
    }

    #[tokio::test]
    async fn only_the_owner_in_their_dm_reaches_the_schedules() {
        let hub = hub();
        let list = || Command::Schedules(String::new());
        // A stranger's DM, and any group (the owner's message there too:
        // everyone reads the answer).
        for m in [
            msg(ChatKind::Direct, "7"),
            msg(ChatKind::Group, "7"),
            msg(ChatKind::Group, "1"),
        ] {
            let said = ask(&hub, &m, list()).await;
            assert_eq!(said, "Only the owner sees schedules, in their own DM.");
        }
        // The owner's DM gets through to the scheduler (none runs in this
        // test's hub).
        let said = ask(&hub, &msg(ChatKind::Direct, "1"), list()).await;
        assert_eq!(said, "No scheduler runs in this pincerd.");
    }

    #[tokio::test]
    async fn status_tells_a_non_owner_only_what_is_theirs() {
        let hub = hub();
        for m in [
            msg(ChatKind::Group, "7"),
            msg(ChatKind::Group, "1"),
            msg(ChatKind::Direct, "7"),
        ] {
            let said = ask(&hub, &m, Command::Status).await;
            assert_eq!(said, "Agent main. Nothing is running.", "{}", m.sender.id);
        }
        let said = ask(&hub, &msg(ChatKind::Direct, "1"), Command::Status).await;
        assert!(said.contains("(model "), "the owner in their DM: {said}");
        assert!(said.contains("No conversation yet."), "{said}");
    }

    #[tokio::test]
    async fn the_owners_status_says_when_the_session_started_as_people_read_it() {
        let hub = hub();
        let owner = msg(ChatKind::Direct, "1");
        let config = hub.config();
        let route =
            crate::routing::route(&config, &super::super::host::to_routing(&owner)).unwrap();
        let row = hub
            .runtime()
            .registry()
            .get_or_create(
                &route.key.to_string(),
                "main",
                "telegram",
                crate::session::registry::NewSession::of(route.origin.principal.clone()),
            )
            .await
            .unwrap();
        let said = ask(&hub, &owner, Command::Status).await;
        assert!(
            said.contains(&format!("Session {}, started just now (", row.id)),
            "{said}"
        );
        assert!(
            !said.contains(&row.created_at),
            "no raw RFC 3339 time stamp: {said}"
        );
    }

    #[tokio::test]
    async fn stop_with_nothing_running_says_so_to_everyone() {
        let hub = hub();
        for m in [msg(ChatKind::Group, "7"), msg(ChatKind::Group, "1")] {
            assert_eq!(ask(&hub, &m, Command::Stop).await, "Nothing is running.");
        }
    }
}
