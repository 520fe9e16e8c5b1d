//! The `message` tool (SPEC §8.2, §11): sends text, a workspace file, or
//! both to a chat on a channel the agent is bound to — never to a chat id
//! the model makes up.
//!
//! Which chats those are is decided once, by the routing layer
//! (`crate::routing::message_targets`, from the config and the turn's
//! origin) into [`MessageTargets`]; sending is the bridges'
//! (`crate::channels`). Both sit above the tools, so the tool reaches
//! them through [`Outbox`], which the channels implement and install into
//! the runtime when they start. This file owns the arguments, matching
//! `to` against the targets, and the file: confined and opened exactly
//! as the file tools do ([`super::paths`], [`super::open`]: regular files
//! only, no symlink out, no hard link unless allowed), then copied from
//! the opened descriptor into a private temporary file which the bridge
//! uploads — the bridge opens files by name, and a name swapped for a
//! symbolic link after the check must not make it upload another file.

use std::io::Read;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use super::open::open_regular;
use super::origin::{BadChatAddress, ChatAddress, ChatOrigin};
use super::paths::display_relative;
use super::sessions::BoxFuture;
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};
use crate::config::FsSettings;

/// The largest file sent: the Bot API's upload limit for bots (a
/// self-hosted Bot API server takes more, but the copy is on local disk
/// and the upload holds a request open, so the limit stays).
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// The longest text sent as a file's caption (Telegram's limit); longer
/// text follows the file as messages of its own.
pub const MAX_CAPTION_CHARS: usize = 1024;

/// How many allowed chats a refusal names before "and N more".
const LISTED: usize = 10;

/// One chat the agent may send to, and why (shown in refusals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundChat {
    pub address: ChatAddress,
    /// `this chat`, `group`, `DM`, `the owner's DM`.
    pub what: String,
}

/// Why a message without `to` has no chat to go to: a clause, completed
/// by [`MessageTargets::pick`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoDefaultChat {
    /// A merged turn: the chats it came from, `the CLI` for the owner's.
    #[error("this turn answers messages from several chats ({})", .0.join(", "))]
    SeveralChats(Vec<String>),
    #[error("this turn came from no chat")]
    NoChat,
    #[error("this turn came from the CLI and no channel has an `owner` whose DM it could go to")]
    NoOwner,
    /// The channels that have an owner.
    #[error("this turn came from the CLI and several channels have an owner ({})", .0.join(", "))]
    SeveralOwners(Vec<String>),
    #[error("pincerd is shutting down; nothing was sent")]
    ShuttingDown,
}

/// Why the `message` tool may not send where it was asked; each names the
/// chats it may use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetRefused {
    /// No `to`, and no chat to default to; `allowed` is the sentence on
    /// the chats it may name.
    #[error("{why}, so the message needs `to`; {allowed}")]
    NeedsTo { why: NoDefaultChat, allowed: String },
    #[error(transparent)]
    BadAddress(#[from] BadChatAddress),
    #[error("`{address}` is not a chat this agent is bound to, so nothing was sent; {allowed}")]
    NotBound {
        address: ChatAddress,
        allowed: String,
    },
}

/// Why a bridge did not send what the `message` tool gave it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("pincerd is shutting down; nothing was sent")]
    ShuttingDown,
    #[error("no channel `{channel}` is configured in this daemon")]
    NoChannel { channel: String },
    #[error("the {channel} bridge is disabled ([channels.{channel}] enabled = false)")]
    Disabled { channel: String },
    /// `why`: the bridge's last error, or that it is still connecting.
    #[error("the {channel} bridge is not connected ({why})")]
    NotConnected { channel: String, why: String },
    #[error("cannot open the DM with {to}: {why}")]
    NoDm { to: ChatAddress, why: String },
    #[error("{channel} did not take the message: {why}")]
    TextRefused { channel: String, why: String },
    #[error("{channel} did not take the file: {why}")]
    FileRefused { channel: String, why: String },
}

/// Where the `message` tool of one agent may send in one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTargets {
    /// Where a message without `to` goes, or why there is no such chat.
    pub default: Result<ChatAddress, NoDefaultChat>,
    /// Every chat the agent may name in `to`; a group's entry also admits
    /// its threads.
    pub allowed: Vec<BoundChat>,
}

impl MessageTargets {
    /// The chat `to` names (or the default without it), if the agent may
    /// send there; the refusal names the chats it may use.
    pub fn pick(&self, to: Option<&str>) -> Result<ChatAddress, TargetRefused> {
        let Some(to) = to.map(str::trim).filter(|t| !t.is_empty()) else {
            return self.default.clone().map_err(|why| TargetRefused::NeedsTo {
                why,
                allowed: self.allowed_sentence(),
            });
        };
        let address = ChatAddress::parse(to)?;
        if let Some(bound) = self.bound(&address) {
            // As routing knows it (a person's DM), with the thread asked.
            return Ok(ChatAddress {
                thread_id: address.thread_id,
                ..bound.clone()
            });
        }
        Err(TargetRefused::NotBound {
            address,
            allowed: self.allowed_sentence(),
        })
    }

    /// The bound chat `address` names (a group's entry admits its
    /// threads).
    fn bound(&self, address: &ChatAddress) -> Option<&ChatAddress> {
        self.allowed.iter().map(|b| &b.address).find(|b| {
            b.same_chat(address) || (b.thread_id.is_none() && b.same_chat(&address.chat()))
        })
    }

    /// "it can send to: a (why), b (why), … and N more".
    fn allowed_sentence(&self) -> String {
        if self.allowed.is_empty() {
            return "this agent is bound to no chat: a group under [channels.<channel>.groups] whose agent it is, a [[bindings]] entry naming a group or a peer, or the owner's DM routed to it".into();
        }
        let mut listed: Vec<String> = self
            .allowed
            .iter()
            .take(LISTED)
            .map(|b| format!("{} ({})", b.address, b.what))
            .collect();
        if self.allowed.len() > LISTED {
            listed.push(format!("and {} more", self.allowed.len() - LISTED));
        }
        format!("it can send to: {}", listed.join(", "))
    }
}

/// What the `message` tool needs from the bridges, which live above the
/// tools.
pub trait Outbox: Send + Sync {
    /// Where `agent` may send in a turn from `origin` (the routing
    /// layer's decision under the live config).
    fn targets(&self, agent: &str, origin: &ChatOrigin) -> MessageTargets;
    /// Sends `text` (Markdown, cut into messages as answers are); answers
    /// the platform's message ids.
    fn send_text<'a>(
        &'a self,
        to: &'a ChatAddress,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, SendError>>;
    /// Uploads `file` (named as it should arrive) with `caption`; answers
    /// the message id.
    fn send_file<'a>(
        &'a self,
        to: &'a ChatAddress,
        file: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<String, SendError>>;
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageArgs {
    /// The text to send (Markdown). Optional when `file` is given; with a file, it is the file's caption.
    #[serde(default)]
    pub text: Option<String>,
    /// A file in the workspace to send (a path relative to the workspace).
    #[serde(default)]
    pub file: Option<String>,
    /// Where: `telegram:<chat id>` or `telegram:<chat id>/<thread id>`, a chat this agent is bound to. Leave it out to send to the chat this conversation is in (from the CLI: the owner's DM).
    #[serde(default)]
    pub to: Option<String>,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "message",
        "Send a message, a workspace file, or both to a chat this agent is bound to on a channel (Telegram): this conversation's chat by default, or `to`.",
        &["messaging"],
        ToolFlags::default(),
        run,
    )
    .with_aliases(&[
        ("message", "text"),
        ("path", "file"),
        ("chat", "to"),
        ("target", "to"),
    ])
}

async fn run(args: MessageArgs, ctx: ToolContext) -> ToolOutput {
    let text = args.text.unwrap_or_default();
    let file = args.file.filter(|f| !f.trim().is_empty());
    if text.trim().is_empty() && file.is_none() {
        return ToolOutput::error("nothing to send: give `text`, `file`, or both");
    }
    let Some(outbox) = ctx.outbox.clone() else {
        return ToolOutput::error(
            "no chat bridge runs in this daemon, so `message` cannot send anything (configure [channels.telegram])",
        );
    };
    let to = match outbox
        .targets(&ctx.agent, &ctx.origin)
        .pick(args.to.as_deref())
    {
        Ok(to) => to,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let staged = match file {
        Some(requested) => {
            // The file follows `read`'s rules for this turn (the data
            // boundary): never the owner's memory or another chat's
            // folder for anyone but the owner.
            let path = match ctx.files.send(&requested) {
                Ok(path) => path,
                Err(refusal) => return refusal.output(),
            };
            let workspace = ctx.workspace.clone();
            let fs = ctx.settings.fs;
            match tokio::task::spawn_blocking(move || stage(&workspace, &path, &requested, fs))
                .await
            {
                Ok(Ok(staged)) => Some(staged),
                Ok(Err(e)) => return ToolOutput::error(e),
                Err(e) => return ToolOutput::error(format!("the file could not be read: {e}")),
            }
        }
        None => None,
    };
    tokio::select! {
        out = deliver(outbox.as_ref(), &to, &text, staged.as_ref()) => out,
        _ = ctx.cancel.cancelled() => ToolOutput::error(format!(
            "aborted while sending to {to}; part of the message may have arrived"
        )),
    }
}

/// Sends the file (with the text as its caption when it fits), then the
/// text if it did not; says what went where.
async fn deliver(
    outbox: &dyn Outbox,
    to: &ChatAddress,
    text: &str,
    staged: Option<&Staged>,
) -> ToolOutput {
    let text = text.trim();
    let mut sent = Vec::new();
    let mut text_left = text;
    if let Some(file) = staged {
        let caption = if text.chars().count() <= MAX_CAPTION_CHARS {
            text_left = "";
            text
        } else {
            ""
        };
        match outbox.send_file(to, &file.path, caption).await {
            Ok(id) => sent.push(format!(
                "the file {} ({} bytes{}) as message {id}",
                file.shown,
                file.bytes,
                if caption.is_empty() {
                    ""
                } else {
                    ", the text as its caption"
                }
            )),
            Err(e) => return ToolOutput::error(format!("{e}; nothing was sent to {to}")),
        }
    }
    if !text_left.is_empty() {
        match outbox.send_text(to, text_left).await {
            Ok(ids) => sent.push(match ids.as_slice() {
                [one] => format!("the text as message {one}"),
                many => format!("the text as {} messages ({})", many.len(), many.join(", ")),
            }),
            Err(e) if sent.is_empty() => {
                return ToolOutput::error(format!("{e}; nothing was sent to {to}"));
            }
            Err(e) => {
                return ToolOutput::error(format!(
                    "sent {} to {to}, but not the text: {e}",
                    sent.join(" and ")
                ));
            }
        }
    }
    ToolOutput::ok(format!("Sent {} to {to}.", sent.join(" and ")))
}

/// A workspace file copied for the upload; the copy goes with it.
#[derive(Debug)]
struct Staged {
    path: PathBuf,
    /// The workspace-relative name, for the result.
    shown: String,
    bytes: u64,
    _dir: tempfile::TempDir,
}

/// Opens the confined `path` (`requested` as the model wrote it) as the
/// file tools do, and copies it from the opened descriptor into a private
/// folder under its own name.
fn stage(workspace: &Path, path: &Path, requested: &str, fs: FsSettings) -> Result<Staged, String> {
    let file = open_regular(path, requested, fs).map_err(|e| e.to_string())?;
    let too_big = |len: u64| {
        format!(
            "`{requested}` is {len} bytes; `message` sends files of up to {MAX_FILE_BYTES} bytes (50 MB)"
        )
    };
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read `{requested}`: {e}"))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(too_big(len));
    }
    let name = path
        .file_name()
        .ok_or_else(|| format!("`{requested}` names no file"))?;
    let dir = tempfile::Builder::new()
        .prefix("pincer-message-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary folder for the upload: {e}"))?;
    let copy = dir.path().join(name);
    let mut out = std::fs::File::create_new(&copy)
        .map_err(|e| format!("cannot copy `{requested}` for the upload: {e}"))?;
    // `take`: the file may grow after its size was read.
    let bytes = std::io::copy(&mut file.take(MAX_FILE_BYTES + 1), &mut out)
        .map_err(|e| format!("cannot read `{requested}`: {e}"))?;
    if bytes > MAX_FILE_BYTES {
        return Err(too_big(bytes));
    }
    Ok(Staged {
        path: copy,
        shown: display_relative(workspace, path),
        bytes,
        _dir: dir,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn address(text: &str) -> ChatAddress {
        ChatAddress::parse(text).unwrap()
    }

    fn bound(text: &str, what: &str) -> BoundChat {
        BoundChat {
            address: address(text),
            what: what.into(),
        }
    }

    fn targets() -> MessageTargets {
        MessageTargets {
            default: Ok(address("telegram:1001")),
            allowed: vec![
                bound("telegram:1001", "this chat"),
                bound("telegram:-100", "group"),
                bound("telegram:-300/4", "this chat"),
                bound("telegram:42", "DM"),
            ],
        }
    }

    #[test]
    fn bound_chats_and_their_threads_are_allowed() {
        let t = targets();
        assert_eq!(t.pick(None), Ok(address("telegram:1001")));
        assert_eq!(t.pick(Some("  ")), Ok(address("telegram:1001")));
        assert_eq!(t.pick(Some("telegram:-100")), Ok(address("telegram:-100")));
        assert_eq!(
            t.pick(Some("Telegram:-100/7")),
            Ok(address("telegram:-100/7")),
            "a topic of a bound group"
        );
        assert_eq!(t.pick(Some("telegram:42")), Ok(address("telegram:42")));
        assert_eq!(
            t.pick(Some("telegram:-300/4")),
            Ok(address("telegram:-300/4"))
        );
    }

    #[test]
    fn any_other_chat_is_refused_naming_the_allowed_ones() {
        let t = targets();
        for to in [
            "telegram:-999",
            "discord:-100",
            "telegram:-300",
            "telegram:-300/5",
            "telegram:43",
        ] {
            let e = t.pick(Some(to)).unwrap_err().to_string();
            assert!(
                e.contains("is not a chat this agent is bound to"),
                "{to}: {e}"
            );
            assert!(e.contains("nothing was sent"), "{e}");
            assert!(
                e.contains("telegram:-100 (group), telegram:-300/4 (this chat), telegram:42 (DM)"),
                "{e}"
            );
        }
        let e = t.pick(Some("-999")).unwrap_err().to_string();
        assert!(e.contains("is not a chat address"), "{e}");
    }

    #[test]
    fn without_a_default_the_refusal_asks_for_to_and_long_lists_are_shortened() {
        let t = MessageTargets {
            default: Err(NoDefaultChat::NoOwner),
            allowed: (0..25)
                .map(|i| bound(&format!("telegram:-{i}"), "group"))
                .collect(),
        };
        let e = t.pick(None).unwrap_err().to_string();
        assert!(
            e.starts_with("this turn came from the CLI and no channel has an `owner` whose DM it could go to, so the message needs `to`; it can send to: telegram:-0 (group)"),
            "{e}"
        );
        assert!(e.contains("telegram:-9 (group), and 15 more"), "{e}");
        assert!(!e.contains("telegram:-10 "), "{e}");
        let none = MessageTargets {
            default: Err(NoDefaultChat::NoChat),
            allowed: Vec::new(),
        };
        let e = none.pick(Some("telegram:-1")).unwrap_err().to_string();
        assert!(e.contains("this agent is bound to no chat"), "{e}");
    }

    /// One send: the address, the text (or `name|caption`), a file's bytes.
    type Sent = (String, String, Option<Vec<u8>>);

    /// Records what would be sent.
    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<Sent>>,
        fail_text: bool,
    }

    impl Outbox for Recorder {
        fn targets(&self, _agent: &str, _origin: &ChatOrigin) -> MessageTargets {
            targets()
        }
        fn send_text<'a>(
            &'a self,
            to: &'a ChatAddress,
            text: &'a str,
        ) -> BoxFuture<'a, Result<Vec<String>, SendError>> {
            Box::pin(async move {
                if self.fail_text {
                    return Err(SendError::NotConnected {
                        channel: "telegram".into(),
                        why: "it is still connecting".into(),
                    });
                }
                self.sent
                    .lock()
                    .unwrap()
                    .push((to.to_string(), text.to_string(), None));
                Ok(vec!["7".into()])
            })
        }
        fn send_file<'a>(
            &'a self,
            to: &'a ChatAddress,
            file: &'a Path,
            caption: &'a str,
        ) -> BoxFuture<'a, Result<String, SendError>> {
            Box::pin(async move {
                let name = file.file_name().unwrap().to_string_lossy().to_string();
                let bytes = std::fs::read(file).unwrap();
                self.sent.lock().unwrap().push((
                    to.to_string(),
                    format!("{name}|{caption}"),
                    Some(bytes),
                ));
                Ok("8".into())
            })
        }
    }

    async fn call(outbox: &Arc<Recorder>, workspace: &Path, args: serde_json::Value) -> ToolOutput {
        let mut ctx = super::super::tests::ctx(workspace);
        ctx.outbox = Some(outbox.clone());
        tool().call(&args.to_string(), ctx).await
    }

    #[tokio::test]
    async fn text_goes_to_the_chat_and_the_result_names_the_message() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Arc::new(Recorder::default());
        let out = call(
            &outbox,
            dir.path(),
            serde_json::json!({"text": "hi all", "to": "telegram:-100"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, "Sent the text as message 7 to telegram:-100.");
        let out = call(&outbox, dir.path(), serde_json::json!({"message": "to me"})).await;
        assert_eq!(out.content, "Sent the text as message 7 to telegram:1001.");
        let sent = outbox.sent.lock().unwrap().clone();
        assert_eq!(sent[0], ("telegram:-100".into(), "hi all".into(), None));
        assert_eq!(sent[1].0, "telegram:1001");
    }

    #[tokio::test]
    async fn a_refused_target_or_file_sends_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
        std::fs::write(ws.join("fine.txt"), "inside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), ws.join("link.txt")).unwrap();
        std::fs::hard_link(dir.path().join("secret.txt"), ws.join("hard.txt")).unwrap();
        std::fs::create_dir(ws.join("folder")).unwrap();
        let outbox = Arc::new(Recorder::default());
        let cases = [
            (
                serde_json::json!({"text": "x", "to": "telegram:-999"}),
                "not a chat this agent is bound to",
            ),
            (
                serde_json::json!({"file": "fine.txt", "to": "telegram:-999"}),
                "not a chat this agent is bound to",
            ),
            (
                serde_json::json!({"file": "../secret.txt"}),
                "outside the workspace",
            ),
            (
                serde_json::json!({"file": dir.path().join("secret.txt")}),
                "outside the workspace",
            ),
            (
                serde_json::json!({"file": "link.txt"}),
                "outside the workspace",
            ),
            (serde_json::json!({"file": "hard.txt"}), "hard links"),
            (serde_json::json!({"file": "folder"}), "not a regular file"),
            (
                serde_json::json!({"file": "missing.txt"}),
                "cannot read `missing.txt`",
            ),
            (serde_json::json!({"text": "  "}), "nothing to send"),
            (
                serde_json::json!({"text": "x", "channel": "telegram"}),
                "invalid arguments",
            ),
        ];
        for (args, why) in cases {
            let out = call(&outbox, &ws, args.clone()).await;
            assert!(out.is_error, "{args}: {}", out.content);
            assert!(out.content.contains(why), "{args}: {}", out.content);
        }
        assert!(outbox.sent.lock().unwrap().is_empty(), "nothing was sent");
    }

    #[tokio::test]
    async fn a_workspace_file_is_sent_with_its_name_bytes_and_caption() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/report.csv"), b"a,b\n1,2\n").unwrap();
        let outbox = Arc::new(Recorder::default());
        let out = call(
            &outbox,
            dir.path(),
            serde_json::json!({"file": "out/report.csv", "text": "the report", "to": "telegram:42"}),
        )
        .await;
        assert_eq!(
            out.content,
            "Sent the file out/report.csv (8 bytes, the text as its caption) as message 8 to telegram:42."
        );
        let long = "x".repeat(MAX_CAPTION_CHARS + 1);
        let out = call(
            &outbox,
            dir.path(),
            serde_json::json!({"file": "out/report.csv", "text": long}),
        )
        .await;
        assert_eq!(
            out.content,
            "Sent the file out/report.csv (8 bytes) as message 8 and the text as message 7 to telegram:1001."
        );
        let sent = outbox.sent.lock().unwrap().clone();
        assert_eq!(
            sent[0],
            (
                "telegram:42".into(),
                "report.csv|the report".into(),
                Some(b"a,b\n1,2\n".to_vec())
            )
        );
        assert_eq!(sent[1].1, "report.csv|", "no caption: the text follows");
        assert_eq!(sent[2].1, long);
    }

    #[tokio::test]
    async fn a_failed_send_says_what_arrived() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), b"a").unwrap();
        let outbox = Arc::new(Recorder {
            fail_text: true,
            ..Default::default()
        });
        let out = call(&outbox, dir.path(), serde_json::json!({"text": "hi"})).await;
        assert!(out.is_error);
        assert_eq!(
            out.content,
            "the telegram bridge is not connected (it is still connecting); nothing was sent to telegram:1001"
        );
        let long = "y".repeat(MAX_CAPTION_CHARS + 1);
        let out = call(
            &outbox,
            dir.path(),
            serde_json::json!({"file": "a.txt", "text": long}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.content.starts_with(
                "sent the file a.txt (1 bytes) as message 8 to telegram:1001, but not the text"
            ),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn without_a_bridge_the_tool_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = super::super::tests::ctx(dir.path());
        let out = tool().call(r#"{"text": "hi"}"#, ctx).await;
        assert!(out.is_error);
        assert!(
            out.content.contains("no chat bridge runs"),
            "{}",
            out.content
        );
    }
}
