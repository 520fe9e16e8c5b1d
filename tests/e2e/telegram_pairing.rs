//! Pairing after the code: `pincer pairing allowed` lists whom the owner
//! approved or denied, with when, and `pincer pairing revoke` takes it
//! back — the person's next message gets a pairing code again. pincerd
//! against the Bot API emulator, as in `telegram.rs`.

use pincer_testkit::telegram::{ChatSpec, UserSpec};

use crate::telegram::{rig, text};

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_sender_is_listed_and_once_revoked_must_pair_again() {
    let r = rig("", "").await;
    let eve = UserSpec::new(4242, "Eve");
    let dm = ChatSpec::private(&eve);
    r.tg.user_says(&dm, &eve, "hello").await;
    r.wait_for(4242, 1).await;
    let list = r.home.cli(&["--json", "pairing", "list"]).await.json();
    let code = list[0]["code"]
        .as_str()
        .expect("a pending code")
        .to_string();
    let none = r.home.cli(&["pairing", "allowed"]).await;
    assert!(
        none.ok().contains("nobody was approved or denied"),
        "{}",
        none.ok()
    );
    r.home
        .cli(&["pairing", "approve", "telegram", &code])
        .await
        .ok();
    r.wait_for(4242, 2).await;

    let allowed = r
        .home
        .cli(&["--json", "pairing", "allowed", "telegram"])
        .await
        .json();
    assert_eq!(allowed.as_array().map(Vec::len), Some(1), "{allowed}");
    assert_eq!(allowed[0]["sender_id"], "4242");
    assert_eq!(allowed[0]["sender_name"], "Eve");
    assert_eq!(allowed[0]["approved"], true);
    assert!(
        allowed[0]["decided_at"].as_u64().unwrap_or(0) > 0,
        "{allowed}"
    );
    let shown = r.home.cli(&["pairing", "allowed"]).await;
    assert!(
        shown.ok().contains("telegram  approved  Eve (4242)  "),
        "{}",
        shown.ok()
    );

    // Clear errors for what does not exist.
    let unknown = r.home.cli(&["pairing", "revoke", "telegram", "999"]).await;
    assert_eq!(unknown.code, 1);
    assert!(
        unknown
            .stderr
            .contains("no approved or denied sender with id 999 on telegram"),
        "{}",
        unknown.stderr
    );
    let channel = r.home.cli(&["pairing", "revoke", "discord", "4242"]).await;
    assert_eq!(channel.code, 1);
    assert!(
        channel
            .stderr
            .contains("no channel `discord` is configured"),
        "{}",
        channel.stderr
    );

    let out = r.home.cli(&["pairing", "revoke", "telegram", "4242"]).await;
    assert!(
        out.ok()
            .contains("revoked the approval of Eve (4242) on telegram"),
        "{}",
        out.ok()
    );
    let allowed = r.home.cli(&["--json", "pairing", "allowed"]).await.json();
    assert_eq!(allowed, serde_json::json!([]));

    // A stranger again: the next message gets a new code, not the model.
    r.tg.user_says(&dm, &eve, "hello again").await;
    let sent = r.wait_for(4242, 3).await;
    assert!(
        text(&sent[2]).contains("pincer pairing approve telegram"),
        "{sent:?}"
    );
    assert!(r.llm.journal().is_empty(), "never reached the model");
}
