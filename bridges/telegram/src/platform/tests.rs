//! The outbound verbs against the fake Bot API: what goes on the wire and
//! how answers and failures come back.

use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::error::ConnectError;
use crate::testing::{BOT_ID, Script, fake_api};

fn target(chat: &str) -> Target {
    Target {
        chat_id: chat.into(),
        thread_id: None,
        reply_to: None,
    }
}

#[tokio::test]
async fn connect_reads_the_bot_and_sorts_failures() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    assert_eq!(tg.bot_id(), BOT_ID);
    assert_eq!(tg.username(), "pincer_bot");
    assert_eq!(tg.bot_username(), "pincer_bot");
    assert!(!tg.can_read_all_group_messages());
    let shown = format!("{tg:?}");
    assert!(!shown.contains("TEST-token"), "{shown}");

    let refused = fake_api(Script {
        get_me: (
            401,
            json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
        ),
        ..Script::default()
    })
    .await;
    let err = crate::connect(refused.settings()).await.unwrap_err();
    assert!(matches!(err, ConnectError::BadToken(_)), "{err}");

    // A port nobody listens on: bind one, then let it go.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let mut settings = api.settings();
    settings.api_url = format!("http://{addr}");
    let err = crate::connect(settings).await.unwrap_err();
    assert!(matches!(err, ConnectError::Unreachable(_)), "{err}");
    assert!(!err.to_string().contains("TEST-token"), "{err}");

    let mut settings = api.settings();
    settings.token = " ".into();
    assert!(matches!(
        crate::connect(settings).await.unwrap_err(),
        ConnectError::BadToken(_)
    ));
}

#[tokio::test]
async fn send_puts_thread_reply_html_and_buttons_on_the_wire() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let to = Target {
        chat_id: "-1001234567890".into(),
        thread_id: Some("77".into()),
        reply_to: Some("-1001234567890:902".into()),
    };
    let buttons = [
        Button {
            label: "Approve".into(),
            data: "approve:AB12".into(),
        },
        Button {
            label: "Deny".into(),
            data: "deny:AB12".into(),
        },
    ];
    let id = tg
        .send(&to, "<b>hi</b>", Formatting::Html, &buttons, None)
        .await
        .unwrap();
    assert!(id.parse::<i64>().is_ok(), "the message id: {id}");
    let sent = api.calls("sendMessage")[0].json();
    assert_eq!(sent["chat_id"], json!(-1001234567890_i64));
    assert_eq!(sent["text"], "<b>hi</b>");
    assert_eq!(sent["parse_mode"], "HTML");
    assert_eq!(sent["message_thread_id"], json!(77));
    assert_eq!(sent["reply_parameters"]["message_id"], json!(902));
    assert_eq!(
        sent["reply_parameters"]["allow_sending_without_reply"],
        json!(true)
    );
    assert_eq!(sent["link_preview_options"]["is_disabled"], json!(true));
    assert_eq!(
        sent["reply_markup"]["inline_keyboard"],
        json!([[{"text": "Approve", "callback_data": "approve:AB12"},
                {"text": "Deny", "callback_data": "deny:AB12"}]])
    );

    tg.send(
        &target("5550001"),
        "plain *text*",
        Formatting::Plain,
        &[],
        None,
    )
    .await
    .unwrap();
    let plain = api.calls("sendMessage")[1].json();
    assert!(plain.get("parse_mode").is_none(), "{plain}");
    assert!(plain.get("reply_markup").is_none(), "{plain}");
    assert!(plain.get("reply_parameters").is_none(), "{plain}");
}

#[tokio::test]
async fn what_telegram_cannot_take_is_refused_before_sending() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let long = Button {
        label: "Too much".into(),
        data: "x".repeat(65),
    };
    assert!(matches!(
        tg.send(&target("1"), "t", Formatting::Plain, &[long], None)
            .await,
        Err(SendError::Permanent(_))
    ));
    assert!(matches!(
        tg.send(&target("not-a-chat"), "t", Formatting::Plain, &[], None)
            .await,
        Err(SendError::Permanent(_))
    ));
    assert!(api.calls("sendMessage").is_empty());
}

#[tokio::test]
async fn an_edit_answered_with_null_is_a_success_and_drops_the_buttons() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    tg.edit(
        &target("5550001"),
        "5550001:950",
        "Approved",
        Formatting::Plain,
    )
    .await
    .unwrap();
    let edit = api.calls("editMessageText")[0].json();
    assert_eq!(edit["message_id"], json!(950));
    assert_eq!(edit["chat_id"], json!(5550001));
    assert_eq!(edit["reply_markup"], json!({"inline_keyboard": []}));
    // teloxide's typed `EditMessageText` would read its result as a
    // `Message`; `null` is none, which is why the bridge reads the
    // envelope itself.
    assert!(serde_json::from_value::<teloxide_core::types::Message>(json!(null)).is_err());
}

#[tokio::test]
async fn a_method_the_server_lacks_fails_at_once_not_after_ten_seconds() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let to = Target {
        thread_id: Some("77".into()),
        ..target("-100")
    };
    let start = Instant::now();
    let err = tg.typing(&to).await.unwrap_err();
    assert!(matches!(err, SendError::Transient(_)), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    let action = api.calls("sendChatAction")[0].json();
    assert_eq!(action["action"], "typing");
    assert_eq!(action["message_thread_id"], json!(77));
}

#[tokio::test]
async fn a_button_press_is_answered_with_its_note() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    tg.answer_button("4382", "Approved").await.unwrap();
    let answer = api.calls("answerCallbackQuery")[0].json();
    assert_eq!(answer["callback_query_id"], "4382");
    assert_eq!(answer["text"], "Approved");
}

#[tokio::test]
async fn a_file_is_sent_as_a_document() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "some notes").unwrap();
    let id = tg
        .send_file(&target("5550001"), &file, "Here you are")
        .await
        .unwrap();
    assert!(!id.is_empty());
    let body = &api.calls("sendDocument")[0].body;
    assert!(
        body.contains("name=\"document\"; filename=\"notes.txt\""),
        "{body}"
    );
    assert!(body.contains("some notes"), "{body}");
    assert!(body.contains("Here you are"), "{body}");
    assert!(matches!(
        tg.send_file(&target("5550001"), &dir.path().join("missing"), "")
            .await,
        Err(SendError::Permanent(_))
    ));
}

fn attachment(size: Option<u64>) -> Attachment {
    Attachment {
        id: "F".into(),
        name: "f.bin".into(),
        kind: "document".into(),
        size,
    }
}

/// A new empty file, as the bridge hands it over.
fn new_file(path: &std::path::Path) -> std::fs::File {
    std::fs::File::create_new(path).unwrap()
}

#[tokio::test]
async fn a_download_streams_into_the_file_it_is_given() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("f.bin");
    let n = tg
        .download(&attachment(None), new_file(&dest), 1024)
        .await
        .unwrap();
    assert_eq!(n, 10);
    assert_eq!(std::fs::read(&dest).unwrap(), b"hello file");
    assert_eq!(api.calls("file:documents/f.bin").len(), 1);
}

#[tokio::test]
async fn a_download_over_the_limit_is_refused() {
    // The size announced by getFile is over the limit: nothing fetched.
    let api = fake_api(Script {
        file: (
            json!({"file_id": "F", "file_size": 5000, "file_path": "documents/f.bin"}),
            vec![0; 5000],
        ),
        ..Script::default()
    })
    .await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("big.bin");
    let err = tg
        .download(&attachment(None), new_file(&dest), 100)
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::Permanent(_)), "{err}");
    assert!(api.calls("file:documents/f.bin").is_empty());
    assert_eq!(std::fs::metadata(&dest).unwrap().len(), 0);

    // No size announced: the running count stops it before the limit is
    // passed on disk.
    let api = fake_api(Script {
        file: (
            json!({"file_id": "F", "file_path": "documents/f.bin"}),
            vec![0; 5000],
        ),
        ..Script::default()
    })
    .await;
    let tg = api.connect().await;
    let dest = dir.path().join("big2.bin");
    let err = tg
        .download(&attachment(None), new_file(&dest), 100)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("larger than the limit"), "{err}");
    assert!(std::fs::metadata(&dest).unwrap().len() <= 100);
}

#[tokio::test]
async fn the_bots_own_settings() {
    let api = fake_api(Script {
        webhook_url: "https://example.org/hook".into(),
        ..Script::default()
    })
    .await;
    let tg = api.connect().await;
    assert_eq!(
        tg.webhook_info().await.unwrap().as_deref(),
        Some("https://example.org/hook")
    );
    tg.delete_webhook().await.unwrap();
    assert_eq!(api.calls("deleteWebhook").len(), 1);
    tg.register_commands().await.unwrap();
    let commands = api.calls("setMyCommands")[0].json();
    assert_eq!(commands["commands"][0]["command"], "new");
    assert_eq!(
        commands["commands"].as_array().unwrap().len(),
        pincer_channel::host::COMMANDS.len()
    );

    let none = fake_api(Script::default()).await.connect().await;
    assert_eq!(none.webhook_info().await.unwrap(), None);
}

#[test]
fn message_ids_are_read_from_ours() {
    assert_eq!(message_id("-100123:42").unwrap(), MessageId(42));
    assert_eq!(message_id("42").unwrap(), MessageId(42));
    assert!(message_id("x").is_err());
    assert_eq!(shortened("abcdef", 4), "abc…");
    assert_eq!(shortened("abc", 4), "abc");
}
