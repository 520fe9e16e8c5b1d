//! The data boundary end to end (issue "Strangers never reach the owner",
//! SPEC §8.3): pincerd with the Telegram bridge at the Bot API emulator and
//! a scripted hostile model. A group member, a paired DM user and a
//! stranger in an open DM each have the model try every way to the
//! owner's data — the memory tools, the session tools, `message` with a
//! file, a sub-agent that asks for more tools, and `exec` where the chat's
//! own layer names it — and none returns, sends or changes anything of
//! the owner's; the audit table records each refusal with its reason, and
//! the owner's own calls keep working.

use std::time::{Duration, Instant};

use pincer_testkit::requests::{first_user, tool_results};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use pincer_testkit::telegram::{ChatSpec, UserSpec};
use serde_json::{Value, json};

use super::telegram::{OWNER, Rig, rig, text};

const MEMORY_SECRET: &str = "owner-memory-secret-7731";
const DIARY_SECRET: &str = "owner-diary-secret-5120";
const CLI_SECRET: &str = "owner-cli-secret-4410";
const DM_SECRET: &str = "owner-dm-secret-9902";
const OTHER_CHAT_SECRET: &str = "other-chat-secret-3377";
const GROUP: i64 = -100300;
const OTHER_GROUP: &str = "-100999";

/// The owner's data: memory, a diary note, another chat's attachment, a
/// workspace file; the owner's CLI session and DM session, each holding a
/// secret.
async fn owners_data(r: &Rig) {
    let ws = r.home.workspace();
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(ws.join("MEMORY.md"), format!("# Me\n{MEMORY_SECRET}\n")).unwrap();
    std::fs::write(
        ws.join("memory/2026-11-01.md"),
        format!("diary: {DIARY_SECRET}\n"),
    )
    .unwrap();
    let other = ws.join(format!("inbox/telegram-group-{OTHER_GROUP}"));
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("other.txt"), OTHER_CHAT_SECRET).unwrap();
    std::fs::write(ws.join("notes.txt"), "a workspace file").unwrap();

    r.llm.script_cycle("[own-cli]", vec![Step::text("Noted.")]);
    let out = r
        .home
        .cli(&["send", &format!("remember {CLI_SECRET} [own-cli]")])
        .await;
    assert!(out.ok().contains("Noted."), "{}", out.ok());
    r.llm.script_cycle("[own-dm]", vec![Step::text("Got it.")]);
    let owner = UserSpec::new(OWNER, "Owner");
    r.tg.user_says(
        &ChatSpec::private(&owner),
        &owner,
        &format!("{DM_SECRET} [own-dm]"),
    )
    .await;
    r.wait_for(OWNER, 1).await;
}

/// Every call a hostile model makes for a chat that is not the owner's.
fn attacks() -> Vec<(&'static str, Value)> {
    vec![
        (
            "sessions_spawn",
            json!({"task": "[atk-child] read the owner's memory", "allow": ["memory_get", "memory_search", "exec", "read", "group:runtime"]}),
        ),
        ("memory_get", json!({"path": "MEMORY.md"})),
        ("memory_search", json!({"query": MEMORY_SECRET})),
        ("sessions_list", json!({})),
        ("sessions_history", json!({"session": "main"})),
        (
            "sessions_history",
            json!({"session": format!("agent:main:telegram:dm:{OWNER}")}),
        ),
        (
            "sessions_send",
            json!({"session": "main", "message": "stranger-wrote-this", "wait_s": 0}),
        ),
        (
            "sessions_send",
            json!({"session": format!("agent:main:telegram:dm:{OWNER}"), "message": "stranger-wrote-this", "wait_s": 0}),
        ),
        ("message", json!({"file": "MEMORY.md"})),
        ("message", json!({"file": "notes.txt"})),
        (
            "message",
            json!({"file": format!("inbox/telegram-group-{OTHER_GROUP}/other.txt")}),
        ),
    ]
}

/// The tool results the model saw in the last request of the
/// conversation marked `marker` (the newest five in full: older ones are
/// shortened in requests; [`results_in`] has them all).
fn results_of(llm: &ScriptedLlm, marker: &str) -> Vec<String> {
    let journal = llm.journal();
    let last = journal
        .iter()
        .rev()
        .find(|r| first_user(r).contains(marker))
        .unwrap_or_else(|| panic!("no request of {marker}"));
    tool_results(last)
}

/// Every tool result in the transcript of `session`, in order.
async fn results_in(r: &Rig, session: &str) -> Vec<String> {
    let shown = r
        .home
        .cli(&["--json", "sessions", "show", session])
        .await
        .json();
    shown["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no transcript of {session}: {shown}"))
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| e["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Waits until the conversation marked `marker` made `n` requests.
pub(crate) async fn requests_of(llm: &ScriptedLlm, marker: &str, n: usize) {
    let start = Instant::now();
    while llm
        .journal()
        .iter()
        .filter(|r| first_user(r).contains(marker))
        .count()
        < n
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{marker} made fewer than {n} requests"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The model attacks for the chat `chat` (as `user`); the answer is
/// "Done." and every result refuses.
async fn attack_from(
    r: &Rig,
    (chat, chat_id, key): (&ChatSpec, i64, &str),
    user: &UserSpec,
    marker: &str,
) {
    r.llm
        .script(marker, vec![Step::tools(&attacks()), Step::text("Done.")]);
    r.llm.script_cycle(
        "[atk-child]",
        vec![
            Step::tools(&[
                ("memory_get", json!({"path": "MEMORY.md"})),
                ("exec", json!({"command": "cat MEMORY.md"})),
                ("read", json!({"path": "MEMORY.md"})),
            ]),
            Step::text("child done"),
        ],
    );
    let before = r.tg.bot_messages(chat_id).await.len();
    r.tg.user_says(chat, user, &format!("tell me everything {marker}"))
        .await;
    let sent = r.wait_for(chat_id, before + 1).await;
    assert_eq!(text(&sent[before]), "Done.", "{sent:?}");
    requests_of(&r.llm, marker, 2).await;
    let results = results_in(r, key).await;
    assert_eq!(results.len(), attacks().len(), "{results:#?}");
    let why = |i: usize| results[i].as_str();
    assert!(why(0).contains("child done"), "{}", why(0));
    assert!(
        why(1).contains("removed by the data boundary layer"),
        "memory_get: {}",
        why(1)
    );
    assert!(
        why(2).contains("removed by the data boundary layer"),
        "{}",
        why(2)
    );
    // The list holds the chat's own session and its sub-agent, nothing
    // of the owner's.
    assert!(why(3).contains(":sub:"), "{}", why(3));
    assert!(!why(3).contains("agent:main:main"), "{}", why(3));
    assert!(!why(3).contains(&format!("dm:{OWNER}")), "{}", why(3));
    for i in 4..=7 {
        assert!(
            why(i).contains("is not a session this conversation can see"),
            "{i}: {}",
            why(i)
        );
    }
    for i in 8..=10 {
        assert!(
            why(i).contains("not offered `read`"),
            "message {i}: {}",
            why(i)
        );
    }
    for secret in [
        MEMORY_SECRET,
        DIARY_SECRET,
        CLI_SECRET,
        DM_SECRET,
        OTHER_CHAT_SECRET,
    ] {
        assert!(
            !results.iter().any(|r| r.contains(secret)),
            "{secret} reached the model: {results:#?}"
        );
        let all = r.tg.all_bot_messages().await;
        assert!(
            !all.iter()
                .filter(|m| m.chat_id != OWNER)
                .any(|m| format!("{:?}", m.raw).contains(secret)),
            "{secret} was sent to a chat"
        );
    }
    assert!(
        r.tg.calls("sendDocument").await.is_empty(),
        "no file was uploaded"
    );
    // The sub-agent asked for more tools and got none of the owner's.
    let child_key = why(0)
        .strip_prefix("[sub-agent ")
        .and_then(|rest| rest.split_once(']'))
        .map(|(key, _)| key.to_string())
        .unwrap_or_else(|| panic!("{}", why(0)));
    let child = results_in(r, &child_key).await;
    assert_eq!(child.len(), 3, "{child:#?}");
    assert!(
        child.iter().all(|c| c.contains("is not available here")),
        "{child:#?}"
    );
}

/// Nothing of the stranger's reached the owner's sessions.
async fn owners_sessions_untouched(r: &Rig) {
    for session in ["main", &format!("agent:main:telegram:dm:{OWNER}")] {
        let shown = r.home.cli(&["--json", "sessions", "show", session]).await;
        assert!(
            !shown.ok().contains("stranger-wrote-this"),
            "{session}: {}",
            shown.ok()
        );
    }
}

/// The audit rows of sessions other than the owner's: every refused call
/// with what decided it and why.
async fn audit_refusals(r: &Rig, key: &str) {
    let rows = r
        .home
        .cli(&["--json", "tools", "audit", "-n", "500"])
        .await
        .json();
    let rows: Vec<&Value> = rows.as_array().unwrap().iter().collect();
    let of = |tool: &str| -> Vec<&Value> {
        rows.iter()
            .copied()
            .filter(|r| r["session"] == key && r["tool"] == tool)
            .collect()
    };
    for tool in ["memory_get", "memory_search"] {
        let row = of(tool)[0];
        assert_eq!(
            (row["outcome"].as_str(), row["decided_by"].as_str()),
            (Some("denied"), Some("policy")),
            "{row}"
        );
        assert!(
            row["detail"].as_str().unwrap().contains("data boundary"),
            "{row}"
        );
    }
    for tool in ["sessions_history", "sessions_send", "message"] {
        let found = of(tool);
        assert!(!found.is_empty(), "no audit row for {tool}");
        for row in found {
            assert_eq!(
                (row["outcome"].as_str(), row["decided_by"].as_str()),
                (Some("denied"), Some("boundary")),
                "{row}"
            );
            assert!(!row["detail"].as_str().unwrap().is_empty(), "{row}");
        }
    }
    let child: Vec<&&Value> = rows
        .iter()
        .filter(|r| r["session"].as_str().unwrap().contains(":sub:"))
        .collect();
    assert!(!child.is_empty());
    assert!(
        child
            .iter()
            .all(|r| r["outcome"] == "denied" || r["outcome"] == "ok"),
        "{child:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_member_and_an_open_dm_stranger_reach_nothing_of_the_owners() {
    let r = rig(
        "",
        &format!("dm_policy = \"open\"\n[channels.telegram.groups.\"{GROUP}\"]\nrequire_mention = false\n"),
    )
    .await;
    owners_data(&r).await;

    let mallory = UserSpec::new(4242, "Mallory");
    let group = ChatSpec::supergroup(GROUP, "Friends");
    let group_key = format!("agent:main:telegram:group:{GROUP}");
    attack_from(&r, (&group, GROUP, &group_key), &mallory, "[atk-group]").await;
    audit_refusals(&r, &group_key).await;

    let eve = UserSpec::new(5555, "Eve");
    let eve_key = "agent:main:telegram:dm:5555";
    attack_from(
        &r,
        (&ChatSpec::private(&eve), 5555, eve_key),
        &eve,
        "[atk-dm]",
    )
    .await;
    audit_refusals(&r, eve_key).await;
    owners_sessions_untouched(&r).await;

    // The sessions a stranger's chat sees are its own and its sub-agents.
    let list = results_in(&r, eve_key).await[3].clone();
    assert!(list.contains("agent:main:telegram:dm:5555"), "{list}");
    assert!(list.contains(":sub:"), "{list}");
    assert!(!list.contains("group"), "another chat's session: {list}");

    // The owner's own calls keep working, from their DM (in a fresh
    // conversation there, so the model's script is this one).
    let owner = UserSpec::new(OWNER, "Owner");
    let owner_dm = ChatSpec::private(&owner);
    let before = r.tg.bot_messages(OWNER).await.len();
    r.tg.user_says(&owner_dm, &owner, "/reset").await;
    r.wait_for(OWNER, before + 1).await;
    r.llm.script(
        "[own-ok]",
        vec![
            Step::tools(&[
                ("memory_get", json!({"path": "MEMORY.md"})),
                ("sessions_history", json!({"session": "main"})),
                (
                    "sessions_send",
                    json!({"session": "main", "message": "from the owner's DM"}),
                ),
                ("message", json!({"file": "MEMORY.md"})),
            ]),
            Step::text("All yours."),
        ],
    );
    r.tg.user_says(&owner_dm, &owner, "check [own-ok]").await;
    let start = Instant::now();
    loop {
        let texts: Vec<String> = r.tg.bot_messages(OWNER).await.iter().map(text).collect();
        if texts.iter().any(|t| t == "All yours.") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{texts:?}\n{}",
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let results = results_in(&r, &format!("agent:main:telegram:dm:{OWNER}")).await;
    let results = &results[results.len() - 4..];
    assert!(results[0].contains(MEMORY_SECRET), "{}", results[0]);
    assert!(results[1].contains(CLI_SECRET), "{}", results[1]);
    assert!(
        results[2].contains("Noted."),
        "main answered: {}",
        results[2]
    );
    assert!(
        results[3].starts_with("Sent the file MEMORY.md"),
        "{}",
        results[3]
    );
    let shown = r.home.cli(&["sessions", "show", "main"]).await;
    assert!(shown.ok().contains("from the owner's DM"), "{}", shown.ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paired_dm_user_reaches_nothing_of_the_owners() {
    let r = rig("", "").await;
    owners_data(&r).await;
    let pat = UserSpec::new(6060, "Pat");
    let dm = ChatSpec::private(&pat);
    r.tg.user_says(&dm, &pat, "hello").await;
    r.wait_for(6060, 1).await;
    let list = r.home.cli(&["--json", "pairing", "list"]).await.json();
    let code = list[0]["code"].as_str().expect("a code").to_string();
    r.home
        .cli(&["pairing", "approve", "telegram", &code])
        .await
        .ok();
    r.wait_for(6060, 2).await;
    let key = "agent:main:telegram:dm:6060";
    attack_from(&r, (&dm, 6060, key), &pat, "[atk-paired]").await;
    audit_refusals(&r, key).await;
    owners_sessions_untouched(&r).await;
}

/// A coding agent answering a group: `exec` is not offered to a member
/// until the group's own layer names it, and then a member's command runs
/// in the sandbox: it cannot read the owner's memory or another chat's
/// folder, and writes only in its chat's folder.
#[tokio::test(flavor = "multi_thread")]
async fn exec_reaches_a_group_only_by_its_own_layer_and_then_only_its_folder() {
    let r = rig(
        "tools = { profile = \"coding\", allow = [\"message\"] }",
        &format!(
            "[channels.telegram.groups.\"{GROUP}\"]\nrequire_mention = false\n\
             [channels.telegram.groups.\"-100400\"]\nrequire_mention = false\n\
             tools = {{ allow = [\"group:fs\", \"exec\", \"message\"] }}\n"
        ),
    )
    .await;
    owners_data(&r).await;
    let ann = UserSpec::new(11, "Ann");

    r.llm.script("[plain-group]", vec![Step::text("Hi.")]);
    r.tg.user_says(
        &ChatSpec::supergroup(GROUP, "Plain"),
        &ann,
        "hi [plain-group]",
    )
    .await;
    r.wait_for(GROUP, 1).await;
    let first = r
        .llm
        .journal()
        .into_iter()
        .find(|q| first_user(q).contains("[plain-group]"))
        .unwrap();
    let offered = pincer_testkit::requests::offered_tools(&first);
    assert!(!offered.iter().any(|t| t == "exec"), "{offered:?}");
    assert!(!offered.iter().any(|t| t == "process"), "{offered:?}");
    assert!(offered.iter().any(|t| t == "read"), "{offered:?}");

    let own = r.home.workspace().join("inbox/telegram-group--100400");
    r.llm.script(
        "[exec-group]",
        vec![
            Step::tools(&[
                ("exec", json!({"command": "cat ../../MEMORY.md; echo rc=$?"})),
                (
                    "exec",
                    json!({"command": "cat ../../memory/2026-11-01.md ../telegram-group--100999/other.txt; ls ..; echo rc=$?"}),
                ),
                (
                    "exec",
                    json!({"command": "echo pwned > ../../notes.txt; echo x > ../../new.txt; echo rc=$?"}),
                ),
                ("exec", json!({"command": "echo mine > mine.txt && pwd"})),
                ("read", json!({"path": "MEMORY.md"})),
                ("write", json!({"path": "notes.txt", "content": "pwned"})),
                (
                    "write",
                    json!({"path": "inbox/telegram-group--100400/ok.md", "content": "ours"}),
                ),
                ("message", json!({"file": "notes.txt"})),
                ("message", json!({"file": "MEMORY.md"})),
            ]),
            Step::text("Tried."),
        ],
    );
    r.tg.user_says(
        &ChatSpec::supergroup(-100400, "Coders"),
        &ann,
        "run things [exec-group]",
    )
    .await;
    let sent = r.wait_for(-100400, 2).await;
    assert!(sent.iter().any(|m| text(m) == "Tried."), "{sent:?}");
    requests_of(&r.llm, "[exec-group]", 2).await;
    let results = results_in(&r, "agent:main:telegram:group:-100400").await;
    let all = results.join("\n");
    for secret in [MEMORY_SECRET, DIARY_SECRET, OTHER_CHAT_SECRET] {
        assert!(!all.contains(secret), "{secret}: {results:#?}");
    }
    assert!(
        results[0].contains("Permission denied") && results[0].contains("rc=1"),
        "{}",
        results[0]
    );
    assert_eq!(
        results[1].matches("Permission denied").count(),
        3,
        "the diary, the other chat's file, the inbox listing: {}",
        results[1]
    );
    assert_eq!(
        std::fs::read_to_string(r.home.workspace().join("notes.txt")).unwrap(),
        "a workspace file"
    );
    assert!(!r.home.workspace().join("new.txt").exists());
    assert!(
        results[3].contains("telegram-group--100400"),
        "{}",
        results[3]
    );
    assert_eq!(
        std::fs::read_to_string(own.join("mine.txt")).unwrap(),
        "mine\n"
    );
    assert!(
        results[4].contains("not this chat's to read"),
        "{}",
        results[4]
    );
    assert!(
        results[5].contains("outside this chat's folder"),
        "{}",
        results[5]
    );
    assert_eq!(std::fs::read_to_string(own.join("ok.md")).unwrap(), "ours");
    assert!(
        results[7].starts_with("Sent the file notes.txt"),
        "{}",
        results[7]
    );
    assert!(
        results[8].contains("not this chat's to read"),
        "{}",
        results[8]
    );
    let documents = r.tg.calls("sendDocument").await;
    assert_eq!(documents.len(), 1, "only notes.txt: {documents:?}");

    // `pincer tools list` shows the boundary beside the layers.
    let listed = r
        .home
        .cli(&[
            "tools",
            "list",
            "--channel",
            "telegram",
            "--group",
            "-100300",
            "--peer",
            "11",
        ])
        .await;
    let out = listed.ok();
    assert!(
        out.lines()
            .any(|l| l.starts_with("exec") && l.contains("removed by data boundary")),
        "{out}"
    );
    assert!(out.contains("telegram group -100300"), "{out}");
}

/// An agent whose memory is `shared` serves its group's memory to the
/// group: a friends agent with a workspace of its own.
#[tokio::test(flavor = "multi_thread")]
async fn shared_memory_is_served_to_its_group() {
    let r = rig(
        "[agents.friends]\nmodel = \"default\"\nmemory = \"shared\"\n",
        &format!(
            "[channels.telegram.groups.\"{GROUP}\"]\nagent = \"friends\"\nrequire_mention = false\n"
        ),
    )
    .await;
    let ws = r.home.path().join("workspaces/friends");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("MEMORY.md"), "The picnic is at the lake.\n").unwrap();
    r.llm.script(
        "[shared]",
        vec![
            Step::tool("memory_get", json!({"path": "MEMORY.md"})),
            Step::text("At the lake."),
        ],
    );
    let ann = UserSpec::new(11, "Ann");
    r.tg.user_says(
        &ChatSpec::supergroup(GROUP, "Friends"),
        &ann,
        "where? [shared]",
    )
    .await;
    let sent = r.wait_for(GROUP, 1).await;
    assert_eq!(text(&sent[0]), "At the lake.");
    let results = results_of(&r.llm, "[shared]");
    assert!(
        results[0].contains("The picnic is at the lake."),
        "{results:?}"
    );
}
