//! What an approval request is and how it ends: the data the store keeps
//! (and writes to `state/approvals.db`), the bridges show, and the CLI
//! lists. A request asks either about a tool call ([`Subject::Call`]) or
//! for a person at a workflow's halt ([`Subject::Step`]: an `approval`
//! step, with its approvers and quorum, or an `input` step, with its
//! schema).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::origin::{ChatOrigin, ChatPlace};

/// Who asked for a call, when it is not the owner at the CLI or in their
/// own DM: the person (their name as routing made it fit for one line)
/// and the chat, so the owner knows whose call they answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requester {
    pub channel: String,
    pub sender_id: String,
    pub name: String,
    /// The group's chat id; `None` for a DM.
    pub group: Option<String>,
    /// The thread (forum topic) inside the group.
    pub thread: Option<String>,
}

impl Requester {
    /// The requester of a call made for `origin`; `None` for the owner's
    /// own chats (the CLI, their DM).
    pub fn of(origin: &ChatOrigin) -> Option<Self> {
        if origin.is_owner() {
            return None;
        }
        let sender_id = origin
            .sender
            .split(',')
            .next()
            .and_then(|s| s.split_once(':'))
            .map(|(_, id)| id.to_string())
            .unwrap_or_default();
        match &origin.chat {
            ChatPlace::Cli => None,
            ChatPlace::Direct { channel, .. } => Some(Self {
                channel: channel.clone(),
                sender_id,
                name: origin.name.clone(),
                group: None,
                thread: None,
            }),
            ChatPlace::Group {
                channel,
                chat_id,
                thread_id,
            } => Some(Self {
                channel: channel.clone(),
                sender_id,
                name: origin.name.clone(),
                group: Some(chat_id.clone()),
                thread: thread_id.clone(),
            }),
        }
    }
}

/// A request waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    /// Eight characters, unique among every request ever kept.
    pub id: String,
    pub agent: String,
    /// The session of the turn that made the call, or of the run.
    pub session_key: String,
    pub requested_at: SystemTime,
    pub expires_at: SystemTime,
    pub requester: Option<Requester>,
    pub subject: Subject,
}

impl PendingApproval {
    /// The tool a call request is for; `None` for a workflow's halt.
    pub fn tool(&self) -> Option<&str> {
        match &self.subject {
            Subject::Call { tool, .. } => Some(tool),
            Subject::Step(_) => None,
        }
    }

    /// The workflow halt this request is for.
    pub fn halt(&self) -> Option<&Halt> {
        match &self.subject {
            Subject::Step(h) => Some(h),
            Subject::Call { .. } => None,
        }
    }
}

/// What a request asks about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Subject {
    /// A call of a tool the agent set to `ask`.
    Call {
        /// The session's id: what an "always" answer is remembered for.
        session_id: String,
        tool: String,
        arguments: String,
    },
    /// A workflow run halted for a person.
    Step(Halt),
}

/// A workflow run halted at a step for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Halt {
    pub run: String,
    pub workflow: String,
    /// The step's path in the run's ledger (`publish`, `each[2]`).
    pub step: String,
    /// The ledger seq of the attempt that asked: a request belongs to the
    /// step's current visit while no attempt of the step ended after it.
    pub seq: u64,
    /// The step's prompt, rendered.
    pub prompt: String,
    pub ask: HaltAsk,
}

/// What the halt asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum HaltAsk {
    /// A decision: approve (the quorum of the approvers), edit, revise or
    /// deny.
    Approval {
        /// The preview, rendered: what is approved (and what an edit
        /// replaces).
        data: Option<Value>,
        /// `owner`, or `<channel>:<user id>`.
        approvers: Vec<String>,
        quorum: u32,
        /// The approvers who approved so far (as named in `approvers`).
        votes: Vec<String>,
        edit: bool,
        /// Revisions left (0: none, or used up).
        revisions_left: u32,
        /// Who started the run, when the step says they may not approve
        /// it (`not_initiator`), as approvers are named.
        #[serde(default)]
        initiator: Option<String>,
    },
    /// Data that fits the schema.
    Input { schema: Option<Value> },
}

impl HaltAsk {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Approval { .. } => "approval",
            Self::Input { .. } => "input",
        }
    }
}

/// How a person answers a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// `always` (a tool call only): the tool's later calls in that session
    /// run without asking.
    Allow {
        always: bool,
    },
    Deny,
    /// An approval with the data changed.
    Edit(Value),
    /// A new draft, with this guidance.
    Revise(String),
    /// The data an `input` step asked for.
    Answer(Value),
}

/// Who answered a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecidedBy {
    /// A client of the socket: `pincer approvals`, `pincer chat` (the
    /// owner: the socket lets only them in).
    Cli,
    /// Someone in a chat (a button, `/approve`).
    Chat {
        channel: String,
        user_id: String,
        name: String,
    },
}

/// The one answering, and whether they are the owner (decided by the
/// channel's config, where the caller reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub by: DecidedBy,
    pub owner: bool,
}

impl Voter {
    pub fn cli() -> Self {
        Self {
            by: DecidedBy::Cli,
            owner: true,
        }
    }

    /// The approver names this voter answers to: `owner` for the owner,
    /// `<channel>:<user id>` for a person in a chat.
    pub fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.owner {
            names.push("owner".to_string());
        }
        if let DecidedBy::Chat {
            channel, user_id, ..
        } = &self.by
        {
            names.push(format!("{channel}:{user_id}"));
        }
        names
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Ending {
    /// Allowed (for a halt: the quorum was reached; `by` cast the last
    /// vote).
    Allowed { always: bool, by: DecidedBy },
    /// `by` is `None` when the request was dropped unanswered.
    Denied { by: Option<DecidedBy> },
    /// Nobody answered within `after`.
    Expired { after: Duration },
    /// The turn or the run was stopped while it waited, or pincerd
    /// restarted under a tool call's request.
    Aborted,
    /// Approved with the data changed.
    Edited { data: Value, by: DecidedBy },
    /// A new draft was asked for.
    Revised { guidance: String, by: DecidedBy },
    /// An input step's data.
    Answered { data: Value, by: DecidedBy },
}

/// A request that ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalEnded {
    pub id: String,
    pub session_key: String,
    pub subject: Subject,
    pub ending: Ending,
}

/// What the store broadcasts, in order: each request, then its end.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalEvent {
    Requested(PendingApproval),
    Ended(ApprovalEnded),
}

/// What a decision did.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// The request ended.
    Ended(Ending),
    /// An approval was counted; the quorum is not reached yet.
    Counted { votes: usize, quorum: u32 },
}

impl Decided {
    /// One sentence for the one who answered request `id`.
    pub fn note(&self, id: &str) -> String {
        match self {
            Self::Counted { votes, quorum } => {
                format!("Your approval of {id} is counted: {votes} of {quorum}.")
            }
            Self::Ended(Ending::Allowed { always: true, .. }) => {
                format!("Approved {id} for the rest of this session.")
            }
            Self::Ended(Ending::Allowed { .. }) => format!("Approved {id}."),
            Self::Ended(Ending::Denied { .. }) => format!("Denied {id}."),
            Self::Ended(Ending::Edited { .. }) => format!("Approved {id} with your changes."),
            Self::Ended(Ending::Revised { .. }) => {
                format!("Asked for a new draft for {id}; it comes back for approval.")
            }
            Self::Ended(Ending::Answered { .. }) => format!("Answered {id}."),
            Self::Ended(Ending::Expired { .. } | Ending::Aborted) => format!("{id} had ended."),
        }
    }
}

impl Decision {
    /// Reads an answer given as text: the JSON of an edit or an input,
    /// checked here so a typo is refused with the parser's words.
    pub fn json(text: &str, what: &str) -> Result<Value, Refusal> {
        serde_json::from_str(text.trim())
            .map_err(|e| Refusal::BadData(format!("the {what} is not JSON: {e}")))
    }
}

/// Why a decision was refused: a sentence for the one who answered.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "nothing is waiting for an answer under id `{0}` (answered already, expired, or never asked); `pincer approvals list` shows what waits"
    )]
    NotWaiting(String),
    #[error("only the owner can answer a tool call's approval")]
    OwnerOnly,
    #[error(
        "only the step's approvers ({0}) can approve this; the owner may always deny it or cancel the run"
    )]
    NotApprover(String),
    #[error(
        "you started this run, and its step asks someone else to approve it (`not_initiator`); you may still deny it"
    )]
    Initiator,
    #[error("your approval is counted already: {votes} of {quorum} so far")]
    Voted { votes: usize, quorum: u32 },
    #[error("`{0}` asks for a decision, not data: approve, deny{1}")]
    NotInput(String, String),
    #[error("`{0}` asks for data: answer it with `input {0} <json>`")]
    NotApproval(String),
    #[error("`{0}` is a tool call's approval: allow or deny it")]
    CallOnly(String),
    #[error("step `{0}` takes no edits (its workflow does not set `edit = true`)")]
    NoEdit(String),
    #[error(
        "step `{0}` cannot be revised (its workflow names no `revise` step, or its revisions are used up): approve, edit or deny it"
    )]
    NoRevise(String),
    #[error("{0}")]
    BadData(String),
    #[error("the approvals store: {0}")]
    Store(#[from] crate::sqlite::DbError),
}
