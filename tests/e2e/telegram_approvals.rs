//! Approvals through the Telegram bridge end to end (issue 23): an
//! "always" answer ends with its session, the owner's approval message is
//! edited whichever way the approval ends (the CLI, `/approve`, a button,
//! expiry), and a chat that is not the owner's is told its call waits.
//! pincerd against the Bot API emulator and the scripted model, as in
//! `telegram.rs`.

use std::time::{Duration, Instant};

use pincer_testkit::scripted::Step;
use pincer_testkit::telegram::{BotMessage, ChatSpec, UserSpec};
use serde_json::json;

use crate::telegram::{OWNER, Rig, rig, text};

/// Asks for `exec` (the coding profile offers it).
const ASK_EXEC: &str = "tools = { profile = \"coding\", ask = [\"exec\"] }";

/// Waits (20 s at most) until the bot's messages in `chat` satisfy `done`.
pub(crate) async fn until(
    r: &Rig,
    chat: i64,
    what: &str,
    done: impl Fn(&[BotMessage]) -> bool,
) -> Vec<BotMessage> {
    let start = Instant::now();
    loop {
        let got = r.tg.bot_messages(chat).await;
        if done(&got) {
            return got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: the bot's messages in chat {chat} are {:?}\npincerd log:\n{}",
            got.iter().map(text).collect::<Vec<_>>(),
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The approval id behind a message's Approve button.
pub(crate) fn approval_id(m: &BotMessage) -> String {
    let keyboard = m.reply_markup.clone().expect("an approval has buttons");
    keyboard["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .and_then(|d| d.strip_prefix("approve:"))
        .expect("an Approve button")
        .to_string()
}

/// Whether a message still offers buttons.
fn has_buttons(m: &BotMessage) -> bool {
    m.reply_markup
        .as_ref()
        .and_then(|k| k["inline_keyboard"].as_array())
        .is_some_and(|rows| !rows.is_empty())
}

#[tokio::test(flavor = "multi_thread")]
async fn always_ends_with_the_session_and_each_answer_edits_the_request() {
    let r = rig(ASK_EXEC, "").await;
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    let ws = r.home.workspace();
    r.llm.script(
        "[tg-always-1]",
        vec![
            Step::tool("exec", json!({"command": "echo 1 > one.txt"})),
            Step::text("one done"),
            Step::tool("exec", json!({"command": "echo 2 > two.txt"})),
            Step::text("two done"),
        ],
    );
    r.llm.script(
        "[tg-always-2]",
        vec![
            Step::tool("exec", json!({"command": "echo 3 > three.txt"})),
            Step::text("three done"),
        ],
    );

    r.tg.user_says(&dm, &owner, "first [tg-always-1]").await;
    let sent = until(&r, OWNER, "an approval", |s| !s.is_empty()).await;
    let first = sent[0].clone();
    assert!(text(&first).starts_with("Approval needed"), "{first:?}");
    let id = approval_id(&first);
    let out = r.home.cli(&["approvals", "allow", &id, "--always"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let sent = until(&r, OWNER, "the first answer", |s| {
        s.iter().any(|m| text(m) == "one done")
    })
    .await;
    assert!(ws.join("one.txt").exists());
    // Answered at the CLI: the request says so, without buttons.
    let edited = sent
        .iter()
        .find(|m| m.message_id == first.message_id)
        .expect("the approval message");
    assert!(
        text(edited)
            .starts_with("Approved always (for the rest of this session) by you in the CLI."),
        "{edited:?}"
    );
    assert!(!has_buttons(edited), "{edited:?}");

    // The same session: allowed without asking.
    r.tg.user_says(&dm, &owner, "second").await;
    until(&r, OWNER, "the second answer", |s| {
        s.iter().any(|m| text(m) == "two done")
    })
    .await;
    assert!(ws.join("two.txt").exists());

    // A new session in the same chat asks again.
    r.tg.user_says(&dm, &owner, "/new").await;
    until(&r, OWNER, "the reset", |s| {
        s.iter().any(|m| text(m).contains("new conversation"))
    })
    .await;
    r.tg.user_says(&dm, &owner, "third [tg-always-2]").await;
    let sent = until(&r, OWNER, "a second approval", |s| {
        s.iter()
            .filter(|m| text(m).starts_with("Approval needed"))
            .count()
            == 1
    })
    .await;
    let second = sent
        .iter()
        .find(|m| text(m).starts_with("Approval needed"))
        .expect("the second approval")
        .clone();
    assert!(has_buttons(&second));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !ws.join("three.txt").exists(),
        "the new session's exec waited for an answer"
    );

    // Answered with /approve in the chat: the request says so.
    let id = approval_id(&second);
    r.tg.user_says(&dm, &owner, &format!("/approve {id}")).await;
    let sent = until(&r, OWNER, "the third answer", |s| {
        s.iter().any(|m| text(m) == "three done")
    })
    .await;
    assert!(ws.join("three.txt").exists());
    let edited = sent
        .iter()
        .find(|m| m.message_id == second.message_id)
        .expect("the second approval message");
    let edited = until(&r, OWNER, "the second approval edited", |s| {
        s.iter()
            .any(|m| m.message_id == second.message_id && !has_buttons(m))
    })
    .await
    .into_iter()
    .find(|m| m.message_id == edited.message_id)
    .expect("the second approval message");
    assert!(
        text(&edited).starts_with("Approved by you in Telegram."),
        "{edited:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_always_button_allows_the_rest_of_the_session() {
    let r = rig(ASK_EXEC, "").await;
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    let ws = r.home.workspace();
    r.llm.script(
        "[tg-always-button]",
        vec![
            Step::tool("exec", json!({"command": "echo 1 > b1.txt"})),
            Step::text("b1 done"),
            Step::tool("exec", json!({"command": "echo 2 > b2.txt"})),
            Step::text("b2 done"),
        ],
    );
    r.tg.user_says(&dm, &owner, "go [tg-always-button]").await;
    let sent = until(&r, OWNER, "an approval", |s| !s.is_empty()).await;
    let ask = sent[0].clone();
    let keyboard = ask.reply_markup.clone().expect("an approval has buttons");
    let row: Vec<(String, String)> = keyboard["inline_keyboard"][0]
        .as_array()
        .expect("one row of buttons")
        .iter()
        .map(|b| {
            (
                b["text"].as_str().unwrap_or_default().to_string(),
                b["callback_data"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let id = approval_id(&ask);
    assert_eq!(
        row,
        [
            ("Approve".to_string(), format!("approve:{id}")),
            (
                "Always for this session".to_string(),
                format!("always:{id}")
            ),
            ("Deny".to_string(), format!("deny:{id}")),
        ]
    );
    r.tg.press_button(&dm, &owner, ask.message_id, &format!("always:{id}"))
        .await;
    until(&r, OWNER, "the first answer", |s| {
        s.iter().any(|m| text(m) == "b1 done")
    })
    .await;
    // The session's next exec runs without asking.
    r.tg.user_says(&dm, &owner, "again").await;
    let sent = until(&r, OWNER, "the second answer", |s| {
        s.iter().any(|m| text(m) == "b2 done")
    })
    .await;
    assert!(ws.join("b1.txt").exists() && ws.join("b2.txt").exists());
    assert_eq!(
        sent.iter()
            .filter(|m| text(m).starts_with("Approval needed"))
            .count(),
        0,
        "{sent:?}"
    );
    let edited = until(&r, OWNER, "the request edited", |s| {
        s.iter()
            .any(|m| m.message_id == ask.message_id && !has_buttons(m))
    })
    .await
    .into_iter()
    .find(|m| m.message_id == ask.message_id)
    .expect("the approval message");
    assert!(
        text(&edited)
            .starts_with("Approved always (for the rest of this session) by you in Telegram."),
        "{edited:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_approval_says_so_and_loses_its_buttons() {
    let r = rig(ASK_EXEC, "\n[tools]\napproval_timeout_s = 5\n").await;
    let owner = UserSpec::new(OWNER, "Owner");
    r.llm.script(
        "[tg-expire]",
        vec![
            Step::tool("exec", json!({"command": "echo x > expired.txt"})),
            Step::text("gave up"),
        ],
    );
    r.tg.user_says(&ChatSpec::private(&owner), &owner, "go [tg-expire]")
        .await;
    let sent = until(&r, OWNER, "an approval", |s| !s.is_empty()).await;
    let ask = sent[0].clone();
    assert!(text(&ask).contains("It expires in 5 s;"), "{ask:?}");
    let sent = until(&r, OWNER, "the answer after expiry", |s| {
        s.iter().any(|m| text(m) == "gave up")
    })
    .await;
    let edited = sent
        .iter()
        .find(|m| m.message_id == ask.message_id)
        .expect("the approval message");
    assert!(
        text(edited).starts_with("Expired after 5 s — not run."),
        "{edited:?}"
    );
    assert!(!has_buttons(edited));
    assert!(!r.home.workspace().join("expired.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_is_told_their_call_waits_and_the_owner_sees_who_asks() {
    // The owner offered exec to this person's DM (the data boundary keeps
    // it from strangers otherwise), and it still asks.
    let r = rig(
        ASK_EXEC,
        "dm_policy = \"open\"\n[channels.telegram.peers.\"4242\"]\ntools = { allow = [\"exec\"] }",
    )
    .await;
    let owner = UserSpec::new(OWNER, "Owner");
    let eve = UserSpec::new(4242, "Eve *the* <b>");
    r.llm.script(
        "[tg-stranger-ask]",
        vec![
            Step::tool("exec", json!({"command": "echo secret-argument"})),
            Step::text("could not run it"),
        ],
    );
    r.tg.user_says(&ChatSpec::private(&eve), &eve, "run it [tg-stranger-ask]")
        .await;
    let asked = until(&r, OWNER, "the owner's approval", |s| !s.is_empty()).await;
    let ask = asked[0].clone();
    assert!(
        text(&ask).contains("Asked by Eve *the* b (telegram 4242) in their DM."),
        "the person and the chat are named, their name made fit for one line and not read as Markdown: {ask:?}"
    );
    assert!(
        text(&ask).contains("agent:main:telegram:dm:4242"),
        "{ask:?}"
    );
    let told = until(&r, 4242, "the stranger told", |s| !s.is_empty()).await;
    assert_eq!(
        text(&told[0]),
        "Waiting for the owner to approve <code>exec</code>…"
    );
    assert!(!text(&told[0]).contains("secret-argument"));

    // The owner denies with the button: the request says so, the
    // stranger's turn goes on without the call, told only once.
    let id = approval_id(&ask);
    r.tg.press_button(
        &ChatSpec::private(&owner),
        &owner,
        ask.message_id,
        &format!("deny:{id}"),
    )
    .await;
    let told = until(&r, 4242, "the stranger's answer", |s| {
        s.iter().any(|m| text(m) == "could not run it")
    })
    .await;
    assert_eq!(told.len(), 2, "{told:?}");
    let edited = until(&r, OWNER, "the request edited", |s| {
        s.iter()
            .any(|m| m.message_id == ask.message_id && !has_buttons(m))
    })
    .await
    .into_iter()
    .find(|m| m.message_id == ask.message_id)
    .expect("the approval message");
    assert!(
        text(&edited).starts_with("Denied by you in Telegram — not run."),
        "{edited:?}"
    );
}

/// A workflow's approval (SPEC §13) in chats: the owner and a named
/// approver each get it in their DM with Approve and Deny; with a quorum
/// of two the owner's press is counted, the approver's ends it, and both
/// messages say so.
#[tokio::test(flavor = "multi_thread")]
async fn a_workflows_approval_is_pressed_by_the_owner_and_a_named_approver_for_a_quorum_of_two() {
    const APPROVER: i64 = 2002;
    let r = rig("", "").await;
    let owner = UserSpec::new(OWNER, "Owner");
    let approver = UserSpec::new(APPROVER, "Ana");
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/ship.toml"),
        format!(
            r#"
[[steps]]
id = "ok"
kind = "approval"
prompt = "Ship release 1.2?"
preview = "{{{{ {{'version': '1.2'}} }}}}"
approvers = ["owner", "telegram:{APPROVER}"]
quorum = 2

[[steps]]
id = "shipped"
kind = "tool"
tool = "write"
arguments = {{ path = "shipped.txt", content = "{{{{ steps.ok.output.data.version }}}}" }}
"#
        ),
    )
    .unwrap();
    let _cli = r.home.cli_spawn(&["workflows", "run", "ship"]);
    let asked = until(&r, OWNER, "the owner's request", |s| !s.is_empty()).await[0].clone();
    assert!(
        text(&asked).starts_with("Approval needed: workflow <code>ship</code>"),
        "{asked:?}"
    );
    assert!(text(&asked).contains("Ship release 1.2?"), "{asked:?}");
    assert!(text(&asked).contains("It needs 2 of"), "{asked:?}");
    let id = approval_id(&asked);
    let buttons: Vec<String> = asked.reply_markup.clone().unwrap()["inline_keyboard"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(buttons, ["Approve", "Deny"]);
    let theirs = until(&r, APPROVER, "the approver's request", |s| !s.is_empty()).await[0].clone();
    assert_eq!(approval_id(&theirs), id);

    let owner_dm = ChatSpec::private(&owner);
    r.tg.press_button(
        &owner_dm,
        &owner,
        asked.message_id,
        &format!("approve:{id}"),
    )
    .await;
    // Counted, not ended: the run still waits.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = r.home.cli(&["--json", "approvals", "list"]).await;
        let votes = out.json()[0]["votes"].clone();
        if votes == json!(["owner"]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the owner's vote: {}",
            out.stdout
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!ws.join("shipped.txt").exists());
    // A second press by the owner is not a second vote.
    let out = r.home.cli(&["workflows", "approve", &id]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("your approval is counted already: 1 of 2"),
        "{}",
        out.stderr
    );

    let approver_dm = ChatSpec::private(&approver);
    r.tg.press_button(
        &approver_dm,
        &approver,
        theirs.message_id,
        &format!("approve:{id}"),
    )
    .await;
    let start = Instant::now();
    while !ws.join("shipped.txt").exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "{}", r.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("shipped.txt")).unwrap(),
        "1.2"
    );
    for (chat, message, by) in [
        (OWNER, asked.message_id, "by Ana in Telegram"),
        (APPROVER, theirs.message_id, "by you in Telegram"),
    ] {
        let edited = until(&r, chat, "the request edited", |s| {
            s.iter().any(|m| m.message_id == message && !has_buttons(m))
        })
        .await
        .into_iter()
        .find(|m| m.message_id == message)
        .unwrap();
        assert!(
            text(&edited).starts_with(&format!("Approved {by}.")),
            "{edited:?}"
        );
    }
}

/// The guide's flow from the phone: `/run` a workflow in the owner's DM, the
/// run halts at its approval, the owner presses Approve, the run goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_run_from_the_owners_chat_is_approved_with_a_button() {
    // Chats get the `messaging` profile unless the agent says otherwise:
    // `workflow_run` (and the workflow's `write`) need more.
    let r = rig("tools = { profile = \"full\" }", "").await;
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/post.toml"),
        r#"
[inputs.text]
type = "string"

[[steps]]
id = "ok"
kind = "approval"
prompt = "Post {{ inputs.text }}?"

[[steps]]
id = "post"
kind = "tool"
tool = "write"
arguments = { path = "posted.txt", content = "{{ inputs.text }}" }
"#,
    )
    .unwrap();
    r.tg.user_says(&dm, &owner, "/run post text=hello").await;
    let sent = until(&r, OWNER, "the request and the reply", |s| {
        s.iter().any(|m| text(m).starts_with("Approval needed"))
            && s.iter().any(|m| text(m).starts_with("Run "))
    })
    .await;
    let ask = sent
        .iter()
        .find(|m| text(m).starts_with("Approval needed"))
        .unwrap()
        .clone();
    let id = approval_id(&ask);
    let reply = sent.iter().find(|m| text(m).starts_with("Run ")).unwrap();
    assert!(
        text(reply).ends_with(&format!("of post waits at step ok for approval {id}.")),
        "{reply:?}"
    );
    r.tg.press_button(&dm, &owner, ask.message_id, &format!("approve:{id}"))
        .await;
    let start = Instant::now();
    while !ws.join("posted.txt").exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "{}", r.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("posted.txt")).unwrap(),
        "hello"
    );
    // The chat that started it is told how it ended.
    until(&r, OWNER, "the run's end", |s| {
        s.iter()
            .any(|m| text(m).starts_with("Run ") && text(m).contains(" of post succeeded"))
    })
    .await;
    // A workflow that is not there: the reply says so, nothing runs.
    r.tg.user_says(&dm, &owner, "/run nosuch").await;
    until(&r, OWNER, "the refusal", |s| {
        s.iter()
            .any(|m| text(m).starts_with("Not run: no workflow <code>nosuch</code>"))
    })
    .await;
}

/// A run started from a group acts as that group: a workflow using a tool
/// a member there may not use (`exec`: never for anyone but the owner
/// unless the group's layer names it) is refused before it starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_started_by_a_group_member_cannot_do_what_the_member_may_not() {
    let r = rig(
        "tools = { profile = \"full\" }",
        "[channels.telegram.groups.\"-100900\"]\nrequire_mention = false\n",
    )
    .await;
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/shell.toml"),
        "[[steps]]\nid = \"run\"\nkind = \"command\"\ncommand = \"touch pwned\"\n",
    )
    .unwrap();
    let group = ChatSpec::supergroup(-100900, "Team");
    let member = UserSpec::new(31, "Mia");
    r.tg.user_says(&group, &member, "/run shell").await;
    let sent = until(&r, -100900, "the refusal", |s| !s.is_empty()).await;
    assert!(
        text(&sent[0]).starts_with("Not run: ") && text(&sent[0]).contains("exec"),
        "{sent:?}"
    );
    assert!(!ws.join("pwned").exists());
    let out = r.home.cli(&["--json", "workflows", "runs"]).await;
    assert_eq!(out.json()["runs"].as_array().unwrap().len(), 0);
}

/// A run a group member started, halted at an approval, survives a
/// `kill -9`: after the restart the group is routed again under the
/// config and the run goes on as the group once the owner approves with
/// the button they were sent before the kill.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_started_in_a_group_resumes_after_a_kill_as_that_group() {
    let mut r = rig(
        "tools = { profile = \"full\" }",
        "[channels.telegram.groups.\"-100900\"]\nrequire_mention = false\n",
    )
    .await;
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("workflows")).unwrap();
    std::fs::write(
        ws.join("workflows/post.toml"),
        r#"
[inputs.text]
type = "string"

[[steps]]
id = "ok"
kind = "approval"
prompt = "Post {{ inputs.text }}?"

[[steps]]
id = "post"
kind = "tool"
tool = "write"
arguments = { path = "inbox/telegram-group--100900/posted.txt", content = "{{ inputs.text }}" }
"#,
    )
    .unwrap();
    let group = ChatSpec::supergroup(-100900, "Team");
    let member = UserSpec::new(31, "Mia");
    r.tg.user_says(&group, &member, "/run post text=hi").await;
    let reply = until(&r, -100900, "the group's reply", |s| {
        s.iter().any(|m| text(m).starts_with("Run "))
    })
    .await;
    assert!(
        text(&reply[0]).contains("waits at step ok for approval"),
        "{reply:?}"
    );
    let asks = until(&r, OWNER, "the owner's request", |s| {
        s.iter().any(|m| text(m).starts_with("Approval needed"))
    })
    .await;
    let ask = asks
        .iter()
        .find(|m| text(m).starts_with("Approval needed"))
        .unwrap()
        .clone();
    let id = approval_id(&ask);
    let out = r.home.cli(&["--json", "workflows", "runs"]).await;
    let run = out.json()["runs"][0].clone();
    let run_id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["principal"], "telegram:group:-100900", "{run}");

    r.kill_and_start().await;
    crate::workflows::status_until(&r.home, &run_id, "the run to wait again", |s| {
        s["run"]["status"] == "waiting"
    })
    .await;
    let owner = UserSpec::new(OWNER, "Owner");
    let dm = ChatSpec::private(&owner);
    r.tg.press_button(&dm, &owner, ask.message_id, &format!("approve:{id}"))
        .await;
    let status = crate::workflows::status_until(&r.home, &run_id, "the run to succeed", |s| {
        s["run"]["status"] == "succeeded"
    })
    .await;
    // As the group: its own folder is the one it may write in.
    let posted = ws.join("inbox/telegram-group--100900/posted.txt");
    assert_eq!(std::fs::read_to_string(posted).unwrap(), "hi");
    assert_eq!(status["run"]["principal"], "telegram:group:-100900");
    // The group, answered before the kill, is told how the run ended,
    // once.
    let told = until(&r, -100900, "the group told of the end", |s| {
        s.iter().any(|m| text(m).contains("succeeded"))
    })
    .await;
    let ends = told
        .iter()
        .filter(|m| text(m).starts_with(&format!("Run {run_id} of post succeeded")))
        .count();
    assert_eq!(ends, 1, "{told:?}");
}
