//! The seam to the daemon ([`Host`]): everything a bridge needs from
//! pincerd, and nothing more. The daemon implements it over its hub and
//! routing (which agent, which session, which policy: decided there, once);
//! the bridge never sees a session key or a tool policy.
//!
//! A trait because the bridge must not depend on the daemon (the daemon
//! depends on the bridges), and the bridge's own tests drive it with a
//! scripted host.
//!
//! Attachments cross this seam as an opened folder ([`Dir`]), not a path:
//! the daemon opens the chat's folder of the workspace without following
//! a link, and the bridge creates each file through it, so a folder
//! swapped for a link (a model or a command may make links in a
//! workspace) cannot send a file anywhere else.

use pincer_fs::Dir;
use tokio::sync::mpsc;

use crate::message::Inbound;
use crate::platform::BoxFuture;

/// What a turn reports back to the bridge, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEvent {
    /// The turn that will answer this message started. Several queued
    /// messages of one chat can be answered by one turn: they all see the
    /// same `turn_id`, and the bridge sends that answer once.
    Started { turn_id: String },
    /// Streamed answer text (for the live preview).
    Text(String),
    /// The turn ended; `text` is the whole answer (empty: nothing to send,
    /// as after `/stop`).
    Finished { turn_id: String, text: String },
    /// The turn failed; a sentence the chat may read (no secrets: the
    /// daemon's errors never carry them).
    Failed { turn_id: String, message: String },
    /// A call of `tool` waits for the owner's approval. Sent only for a
    /// chat that is not the owner's own (the owner gets the request
    /// itself): the bridge tells the chat once that it waits.
    WaitingForApproval { tool: String },
}

/// Why the host could not take a message or a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// pincerd is stopping: leave the message unanswered, it is taken up
    /// again after the restart.
    #[error("pincerd is shutting down")]
    ShuttingDown,
    /// Refused for a reason the sender should read (too long, no such
    /// session, an agent that is not configured).
    #[error("{0}")]
    Refused(String),
}

/// A chat command (SPEC §11). Parsed by [`Command::parse`]; the bridge
/// answers `/help` itself and turns `/approve` and `/deny` into
/// [`Host::decide_approval`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/new`: a fresh session (same as `/reset`).
    New,
    /// `/reset`: a fresh session.
    Reset,
    /// `/stop`: abort the running turn.
    Stop,
    /// `/status`: the session's agent, model, tokens.
    Status,
    /// `/help`: the commands.
    Help,
    /// `/approve ID`
    Approve(String),
    /// `/deny ID`
    Deny(String),
    /// `/edit ID <json>`: approve a workflow's step with the data changed.
    Edit(String, String),
    /// `/revise ID <guidance>`: ask a workflow for a new draft.
    Revise(String, String),
    /// `/input ID <json>`: give a workflow's input step its data.
    Input(String, String),
    /// `/run NAME key=value …`: run a workflow (the text after `/run`).
    Run(String),
    /// `/schedules [pause|resume|run|remove NAME]`: the owner's schedules
    /// (the text after `/schedules`).
    Schedules(String),
}

impl Command {
    /// The answer to an approval or a workflow's halt this command gives,
    /// with the request's id; `None` for the other commands.
    pub fn answer(&self) -> Option<(&str, ApprovalAnswer)> {
        Some(match self {
            Self::Approve(id) => (id, ApprovalAnswer::Allow),
            Self::Deny(id) => (id, ApprovalAnswer::Deny),
            Self::Edit(id, json) => (id, ApprovalAnswer::Edit(json.clone())),
            Self::Revise(id, text) => (id, ApprovalAnswer::Revise(text.clone())),
            Self::Input(id, json) => (id, ApprovalAnswer::Input(json.clone())),
            _ => return None,
        })
    }
}

/// The commands a platform registers (Telegram's `setMyCommands`), with
/// their one-line descriptions.
pub const COMMANDS: &[(&str, &str)] = &[
    ("new", "Start a new conversation"),
    ("reset", "Start a new conversation"),
    ("stop", "Stop the answer being written"),
    ("status", "Show the agent, model and session"),
    ("help", "List the commands"),
    ("run", "Run a workflow: /run NAME key=value"),
    (
        "schedules",
        "Your schedules: /schedules [pause|resume|run|remove NAME]",
    ),
];

/// The `/help` answer.
pub const HELP: &str = "Commands:\n/new or /reset: start a new conversation\n/stop: stop the answer being written\n/status: the agent, model and session\n/help: this list\n/run NAME key=value…: run a workflow\n/schedules: your schedules (/schedules pause|resume|run|remove NAME)\nFor what waits on you (a tool call, a workflow's approval or question): /approve ID, /deny ID, /edit ID <json>, /revise ID <guidance>, /input ID <json>.";

impl Command {
    /// Reads a command at the start of `text`. `/cmd@name` is ours only
    /// when `name` is `bot_username` (compared case-insensitively);
    /// anything else, including unknown commands, is `None` (ordinary
    /// text for the agent).
    pub fn parse(text: &str, bot_username: &str) -> Option<Self> {
        let text = text.trim();
        let rest = text.strip_prefix('/')?;
        let (word, arg) = match rest.split_once(char::is_whitespace) {
            Some((w, a)) => (w, a.trim()),
            None => (rest, ""),
        };
        let word = match word.split_once('@') {
            Some((w, name))
                if !bot_username.is_empty() && name.eq_ignore_ascii_case(bot_username) =>
            {
                w
            }
            Some(_) => return None,
            None => word,
        };
        let id = || arg.split_whitespace().next().map(str::to_string);
        // `/edit ID <rest>`: the id, then everything after it (both needed).
        let with_rest = || {
            let (id, rest) = arg.split_once(char::is_whitespace)?;
            let rest = rest.trim();
            (!rest.is_empty()).then(|| (id.to_string(), rest.to_string()))
        };
        Some(match word.to_ascii_lowercase().as_str() {
            "new" | "start" => Self::New,
            "reset" => Self::Reset,
            "stop" => Self::Stop,
            "status" => Self::Status,
            "help" => Self::Help,
            "approve" => Self::Approve(id()?),
            "deny" => Self::Deny(id()?),
            "edit" => {
                let (id, json) = with_rest()?;
                Self::Edit(id, json)
            }
            "revise" => {
                let (id, text) = with_rest()?;
                Self::Revise(id, text)
            }
            "input" => {
                let (id, json) = with_rest()?;
                Self::Input(id, json)
            }
            "run" if !arg.is_empty() => Self::Run(arg.to_string()),
            "schedules" => Self::Schedules(arg.to_string()),
            _ => return None,
        })
    }
}

/// An answer from a chat to what waits on a person: the buttons Approve,
/// Always for this session and Deny, or the commands `/approve`, `/deny`,
/// `/edit`, `/revise`, `/input`. Who may give it is the daemon's to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Allow,
    /// Allow, and the tool's later calls in that session without asking.
    AllowAlways,
    Deny,
    /// Approve a workflow's step with this data (JSON text) instead.
    Edit(String),
    /// Ask the workflow for a new draft, with this guidance.
    Revise(String),
    /// A workflow's input step's data (JSON text).
    Input(String),
}

impl ApprovalAnswer {
    /// The verb in a button's data (`approve:ID`, `always:ID`, `deny:ID`).
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Allow => "approve",
            Self::AllowAlways => "always",
            Self::Deny => "deny",
            Self::Edit(_) => "edit",
            Self::Revise(_) => "revise",
            Self::Input(_) => "input",
        }
    }

    /// The decision a button's data carries, with the approval id.
    pub fn from_button(data: &str) -> Option<(Self, &str)> {
        let (verb, id) = data.split_once(':')?;
        let decision = [Self::Allow, Self::AllowAlways, Self::Deny]
            .into_iter()
            .find(|d| d.verb() == verb)?;
        Some((decision, id))
    }

    pub fn allows(&self) -> bool {
        *self != Self::Deny
    }
}

/// Someone on a channel: who asked for a call, or who answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPerson {
    /// `telegram`, `discord`.
    pub channel: String,
    /// Their platform user id.
    pub id: String,
    /// Their display name, as given (not trusted; shown through
    /// [`crate::display_name`]).
    pub name: String,
}

/// Who asked for a call waiting for approval, when it is not the owner in
/// their own chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub person: ChatPerson,
    /// The group's chat id; `None` for the person's DM.
    pub group: Option<String>,
    /// The thread (forum topic) in that group.
    pub thread: Option<String>,
}

/// Something waiting on a person, as the bridge shows it: a tool call
/// waiting for the owner, or (with `halt`) a workflow run halted at a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub id: String,
    pub agent: String,
    pub session: String,
    /// The tool called; empty for a halt.
    pub tool: String,
    /// The JSON text shown (shortened by the bridge): the call's
    /// arguments; for a halt, the data to approve or the schema to fit.
    pub arguments: String,
    pub expires_in_s: u64,
    /// `None`: the owner asked, at the CLI or in their DM.
    pub requester: Option<Requester>,
    pub halt: Option<HaltRequest>,
}

/// A workflow run halted at a step, waiting on a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaltRequest {
    pub workflow: String,
    pub run: String,
    pub step: String,
    /// The step's prompt (rendered from the run's data: not trusted).
    pub prompt: String,
    pub ask: HaltKind,
}

/// What a halt asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HaltKind {
    /// A decision by `quorum` of `approvers` (`owner`, `telegram:42`):
    /// they are sent the request in their DMs.
    Approval {
        approvers: Vec<String>,
        quorum: u32,
        votes: u32,
        edit: bool,
        revise: bool,
    },
    /// Data from the owner (`arguments` holds the schema, if any).
    Input,
}

/// Who answered an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answerer {
    /// At the computer: `pincer approvals`, `pincer chat`.
    Cli,
    /// Someone in a chat (a button, `/approve`).
    Chat(ChatPerson),
}

/// How an approval ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Approved; `always`: the tool runs without asking for the rest of
    /// the session.
    Approved { always: bool, by: Answerer },
    /// Denied (`by` is `None` when the request was dropped unanswered).
    Denied { by: Option<Answerer> },
    /// Nobody answered within `after_s` seconds: not run.
    Expired { after_s: u64 },
    /// The turn was stopped while it waited: not run.
    Aborted,
    /// A workflow's step approved with the data changed.
    Edited { by: Answerer },
    /// A new draft was asked for (it comes as a new request).
    Revised { by: Answerer },
    /// A workflow's input step got its data.
    Answered { by: Answerer },
}

/// An approval ended (any way): the bridge edits the message that asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalEnd {
    pub id: String,
    pub outcome: ApprovalOutcome,
}

/// What the bridge needs from the daemon.
pub trait Host: Send + Sync + 'static {
    /// Runs `text` (the message with any context and attachment notes
    /// already added) as a turn for `msg`'s chat and sender: the daemon
    /// routes it (agent, session, policy) and streams the turn's events.
    /// `images` are the saved attachments that may be images (photos,
    /// documents named like one), relative to the workspace
    /// (`inbox/telegram-dm-42/7-0-photo.jpg`, in the folder
    /// [`Host::inbox`] answered): the daemon sends them to a model that can
    /// see them, after checking what each file really is; the text names
    /// them for every other model.
    fn chat<'a>(
        &'a self,
        msg: &'a Inbound,
        text: String,
        images: Vec<String>,
    ) -> BoxFuture<'a, Result<mpsc::UnboundedReceiver<TurnEvent>, HostError>>;

    /// Runs a chat command for `msg`'s session; answers the reply text.
    /// Never called with [`Command::Help`] nor a command that answers a
    /// request ([`Command::answer`]).
    fn command<'a>(
        &'a self,
        msg: &'a Inbound,
        command: &'a Command,
    ) -> BoxFuture<'a, Result<String, HostError>>;

    /// `by` answered request `id`; answers a short note.
    /// [`HostError::Refused`] with the reason when they may not (only the
    /// owner answers a tool call, only a step's approvers approve it) or
    /// nothing waits under that id (answered already, expired).
    fn decide_approval<'a>(
        &'a self,
        id: &'a str,
        decision: ApprovalAnswer,
        by: &'a ChatPerson,
    ) -> BoxFuture<'a, Result<String, HostError>>;

    /// Whether request `id` still waits (an answer refused for who gave
    /// it leaves its messages as they are).
    fn is_waiting(&self, id: &str) -> bool;

    /// The folder attachments of `msg` are saved in, opened: the chat's
    /// own folder under the inbox of the workspace of the agent that
    /// answers it (created if missing, refused if a link is on the way).
    /// Its [`Dir::relative`] is how the agent finds the files.
    fn inbox(&self, msg: &Inbound) -> Result<Dir, HostError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_with_and_without_the_bot_name() {
        assert_eq!(Command::parse("/reset", "pincer_bot"), Some(Command::Reset));
        assert_eq!(Command::parse(" /new ", "pincer_bot"), Some(Command::New));
        assert_eq!(Command::parse("/start", "pincer_bot"), Some(Command::New));
        assert_eq!(
            Command::parse("/STATUS@Pincer_Bot", "pincer_bot"),
            Some(Command::Status)
        );
        assert_eq!(Command::parse("/reset@other_bot", "pincer_bot"), None);
        assert_eq!(
            Command::parse("/approve AB12 now", "x"),
            Some(Command::Approve("AB12".into()))
        );
        assert_eq!(Command::parse("/approve", "x"), None, "an id is needed");
        assert_eq!(
            Command::parse("/edit AB12 {\"to\": [1, 2]}", "x"),
            Some(Command::Edit("AB12".into(), "{\"to\": [1, 2]}".into()))
        );
        assert_eq!(
            Command::parse("/revise AB12  shorter, please ", "x"),
            Some(Command::Revise("AB12".into(), "shorter, please".into()))
        );
        assert_eq!(Command::parse("/input AB12", "x"), None, "data is needed");
        assert_eq!(Command::parse("/weather", "x"), None);
        assert_eq!(Command::parse("reset", "x"), None);
        assert_eq!(Command::parse("/", "x"), None);
    }
}
