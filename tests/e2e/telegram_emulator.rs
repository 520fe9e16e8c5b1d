//! The Telegram Bot API emulator itself (SPEC §15), without pincerd: the
//! routes our launcher adds answer what teloxide needs, injected updates
//! carry the fields teloxide parses, and what a bot does (messages, chat
//! actions, commands, button answers, uploads) is visible to the tests.
//! These pin down the emulator's behaviour the Telegram bridge relies on or
//! must cope with, so a new emulator version that changes it fails here
//! first. A missing `node` or package fails with the install sentence.

use std::time::Duration;

use pincer_testkit::telegram::{
    BOT_ID, BOT_USERNAME, ChatKind, ChatSpec, Failure, Say, TelegramEmulator, UserSpec,
    auto_entities,
};
use serde_json::{Value, json};

fn ann() -> UserSpec {
    UserSpec::new(7001, "Ann").username("ann_example")
}

/// The `getUpdates` result as the bot reads it.
async fn updates(tg: &TelegramEmulator, params: Value) -> Vec<Value> {
    match tg.bot_call("getUpdates", params).await.result() {
        Value::Array(updates) => updates,
        other => panic!("getUpdates answered {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn get_me_and_webhook_info_answer_what_teloxide_needs() {
    let tg = TelegramEmulator::start();
    assert!(tg.api_url().starts_with("http://127.0.0.1:"));
    assert_eq!(tg.token(), "123456:TEST");

    let me = tg.bot_call("getMe", json!({})).await.result();
    assert_eq!(me["id"], BOT_ID);
    assert_eq!(me["is_bot"], true);
    assert_eq!(me["username"], BOT_USERNAME);
    assert!(me["first_name"].is_string(), "{me}");
    for flag in [
        "can_join_groups",
        "can_read_all_group_messages",
        "supports_inline_queries",
        "has_main_web_app",
    ] {
        assert!(me[flag].is_boolean(), "getMe lacks {flag}: {me}");
    }

    let info = tg.bot_call("getWebhookInfo", json!({})).await.result();
    assert_eq!(info["url"], "");
    assert_eq!(info["has_custom_certificate"], false);
    assert_eq!(info["pending_update_count"], 0);

    // setWebhook answers true (the emulator alone answers null) and is
    // reported; deleteWebhook forgets it.
    let set = tg
        .bot_call("setWebhook", json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    assert_eq!(set.result(), true);
    let info = tg.bot_call("getWebhookInfo", json!({})).await.result();
    assert_eq!(info["url"], "http://127.0.0.1:9/hook");
    assert_eq!(tg.bot_call("deleteWebhook", json!({})).await.result(), true);
    let info = tg.bot_call("getWebhookInfo", json!({})).await.result();
    assert_eq!(info["url"], "");

    // A method nobody answers is an HTTP 500 (teloxide then sleeps 10 s).
    let unknown = tg.bot_call("getChatMenuButton", json!({})).await;
    assert_eq!(unknown.status, 500);
}

#[tokio::test(flavor = "multi_thread")]
async fn injected_messages_arrive_once_with_the_fields_teloxide_parses() {
    let tg = TelegramEmulator::start();
    let ann = ann();
    let dm = ChatSpec::private(&ann);
    let group = ChatSpec::group(-4001, "Friends");
    let topic = ChatSpec::topic(-1001234567890, "Forum", 42);

    let hello = tg.user_says(&dm, &ann, "hello").await;
    let info = tg.bot_call("getWebhookInfo", json!({})).await.result();
    assert_eq!(info["pending_update_count"], 1);
    let mention = tg
        .user_says(&group, &ann, "@pincer_test_bot what's up?")
        .await;
    let in_topic = tg.user_says(&topic, &ann, "/status").await;

    let got = updates(&tg, json!({"offset": 0, "timeout": 10})).await;
    assert_eq!(got.len(), 3, "{got:#?}");
    let ids: Vec<i64> = got
        .iter()
        .map(|u| u["update_id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ids,
        [hello.update_id, mention.update_id, in_topic.update_id]
    );
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    let m = &got[0]["message"];
    assert_eq!(m["message_id"], hello.message_id);
    assert_eq!(m["text"], "hello");
    assert_eq!(m["from"]["id"], 7001);
    assert_eq!(m["from"]["is_bot"], false);
    assert_eq!(m["chat"]["type"], "private");
    assert_eq!(m["chat"]["id"], 7001);
    // Injected updates are dated in seconds, as the package's client does.
    let date = m["date"].as_i64().unwrap();
    assert!((1_600_000_000..10_000_000_000).contains(&date), "{date}");

    let m = &got[1]["message"];
    assert_eq!(
        m["chat"],
        json!({"id": -4001, "type": "group", "title": "Friends"})
    );
    assert_eq!(
        m["entities"],
        json!([{"type": "mention", "offset": 0, "length": 16}])
    );

    let m = &got[2]["message"];
    assert_eq!(m["chat"]["type"], "supergroup");
    assert_eq!(m["chat"]["is_forum"], true);
    assert_eq!(m["message_thread_id"], 42);
    assert_eq!(m["is_topic_message"], true);
    assert_eq!(m["entities"][0]["type"], "bot_command");
    assert_eq!(m["reply_to_message"]["message_id"], 42);
    assert!(m["reply_to_message"]["forum_topic_created"].is_object());

    // Each update is handed out once: offset and timeout are ignored, the
    // answer comes at once and holds only what is new.
    let started = std::time::Instant::now();
    assert!(
        updates(&tg, json!({"offset": 0, "timeout": 5}))
            .await
            .is_empty()
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    let later = tg.user_says(&dm, &ann, "again").await;
    let got = updates(&tg, json!({"offset": later.update_id + 100})).await;
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0]["message"]["text"], "again");
    assert!(tg.count("getUpdates").await >= 3);
    assert_eq!(tg.last_get_updates().await["offset"], later.update_id + 100);

    // A reply to the bot carries the bot's message.
    let sent = tg
        .bot_call(
            "sendMessage",
            json!({"chat_id": -4001, "text": "I am here"}),
        )
        .await
        .result();
    let bot_msg = sent["message_id"].as_i64().unwrap();
    let thanks = tg.user_replies(&group, &ann, bot_msg, "thanks").await;
    let got = updates(&tg, json!({})).await;
    let reply = &got[0]["message"]["reply_to_message"];
    assert_eq!(reply["message_id"], bot_msg);
    assert_eq!(reply["from"]["id"], BOT_ID);
    assert_eq!(reply["from"]["is_bot"], true);
    assert_eq!(reply["text"], "I am here");
    assert_eq!(reply["chat"]["id"], -4001);
    assert!(reply["date"].as_i64().unwrap() < 10_000_000_000);

    // A reply to a user's reply carries that message, without its own reply.
    let bob = UserSpec::new(7002, "Bob");
    tg.user_replies(&group, &bob, thanks.message_id, "same")
        .await;
    let got = updates(&tg, json!({})).await;
    let reply = &got[0]["message"]["reply_to_message"];
    assert_eq!(reply["message_id"], thanks.message_id);
    assert_eq!(reply["text"], "thanks");
    assert_eq!(reply["from"]["id"], 7001);
    assert!(reply.get("reply_to_message").is_none(), "{reply}");
    assert!(reply.get("botToken").is_none(), "{reply}");

    // Explicit entities replace the ones Telegram would find.
    let pill = json!({"type": "text_mention", "offset": 4, "length": 6, "user": tg.bot_user()});
    tg.user_sends(
        &group,
        &ann,
        Say::text("hey Pincer").entities(vec![pill.clone()]),
    )
    .await;
    let got = updates(&tg, json!({})).await;
    assert_eq!(got[0]["message"]["entities"], json!([pill]));
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_bot_sends_is_visible_to_the_test() {
    let tg = TelegramEmulator::start();
    let ann = ann();
    let topic = ChatSpec::topic(-1001234567890, "Forum", 42);
    let asked = tg.user_says(&topic, &ann, "@pincer_test_bot hi").await;

    let keyboard =
        json!({"inline_keyboard": [[{"text": "Approve", "callback_data": "approve:1"}]]});
    let sent = tg
        .bot_call(
            "sendMessage",
            json!({
                "chat_id": -1001234567890i64,
                "message_thread_id": 42,
                "text": "<b>Hello</b> there",
                "parse_mode": "HTML",
                "reply_parameters": {"message_id": asked.message_id},
                "reply_markup": keyboard,
            }),
        )
        .await
        .result();
    // The emulator's quirk: the sent message is dated in milliseconds.
    assert!(sent["date"].as_i64().unwrap() > 100_000_000_000, "{sent}");
    assert_eq!(sent["message_thread_id"], 42);
    let id = sent["message_id"].as_i64().unwrap();

    let messages = tg
        .wait_for_bot_messages(-1001234567890, 1, Duration::from_secs(5))
        .await;
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert_eq!(m.message_id, id);
    assert_eq!(m.text.as_deref(), Some("<b>Hello</b> there"));
    assert_eq!(m.parse_mode.as_deref(), Some("HTML"));
    assert_eq!(m.thread_id, Some(42));
    assert_eq!(m.reply_to, Some(asked.message_id));
    assert_eq!(m.reply_markup.as_ref(), Some(&keyboard));
    assert!(tg.bot_messages(7001).await.is_empty());

    // Edits answer null (the emulator's quirk) but change what is stored;
    // editMessageReplyMarkup without a markup removes the keyboard.
    let edited = tg
        .bot_call(
            "editMessageText",
            json!({"chat_id": -1001234567890i64, "message_id": id, "text": "Hello again"}),
        )
        .await;
    assert_eq!(edited.json(), json!({"ok": true, "result": null}));
    tg.bot_call(
        "editMessageReplyMarkup",
        json!({"chat_id": -1001234567890i64, "message_id": id}),
    )
    .await
    .result();
    let m = &tg.bot_messages(-1001234567890).await[0];
    assert_eq!(m.text.as_deref(), Some("Hello again"));
    assert_eq!(
        m.reply_markup.as_ref(),
        Some(&json!({"inline_keyboard": []}))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_actions_commands_and_reactions_are_recorded() {
    let tg = TelegramEmulator::start();
    // teloxide writes method names capitalised; the API ignores case.
    for (method, action, thread) in [
        ("sendChatAction", "typing", None),
        ("SendChatAction", "upload_document", Some(42)),
    ] {
        let mut params = json!({"chat_id": -1001234567890i64, "action": action});
        if let Some(thread) = thread {
            params["message_thread_id"] = json!(thread);
        }
        assert_eq!(tg.bot_call(method, params).await.result(), true);
    }
    let actions = tg.chat_actions().await;
    assert_eq!(actions.len(), 2);
    assert_eq!(actions[0].action, "typing");
    assert_eq!(actions[0].chat_id, -1001234567890);
    assert_eq!(actions[1].thread_id, Some(42));

    assert!(tg.commands().await.is_empty());
    let commands = json!({"commands": [
        {"command": "new", "description": "Start a new session"},
        {"command": "status", "description": "Show the session"},
    ]});
    assert_eq!(tg.bot_call("setMyCommands", commands).await.result(), true);
    assert_eq!(
        tg.commands().await,
        [
            ("new".to_string(), "Start a new session".to_string()),
            ("status".to_string(), "Show the session".to_string()),
        ]
    );
    assert_eq!(tg.calls("setMyCommands").await.len(), 1);

    let reaction =
        json!({"chat_id": 7001, "message_id": 1, "reaction": [{"type": "emoji", "emoji": "👀"}]});
    assert_eq!(
        tg.bot_call("setMessageReaction", reaction).await.result(),
        true
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pressed_button_arrives_as_a_callback_query() {
    let tg = TelegramEmulator::start();
    let ann = ann();
    let dm = ChatSpec::private(&ann);
    let keyboard = json!({"inline_keyboard": [[
        {"text": "Approve", "callback_data": "approve:7"},
        {"text": "Deny", "callback_data": "deny:7"},
    ]]});
    let sent = tg
        .bot_call(
            "sendMessage",
            json!({"chat_id": 7001, "text": "Run `ls`?", "reply_markup": keyboard}),
        )
        .await
        .result();
    let id = sent["message_id"].as_i64().unwrap();

    let update_id = tg.press_button(&dm, &ann, id, "approve:7").await;
    let got = updates(&tg, json!({})).await;
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0]["update_id"], update_id);
    let query = &got[0]["callback_query"];
    assert!(query["id"].is_string(), "{query}");
    assert!(query["chat_instance"].is_string(), "{query}");
    assert_eq!(query["data"], "approve:7");
    assert_eq!(query["from"]["id"], 7001);
    assert_eq!(query["message"]["message_id"], id);
    assert_eq!(query["message"]["chat"]["id"], 7001);
    assert_eq!(query["message"]["from"]["id"], BOT_ID);
    assert_eq!(query["message"]["reply_markup"], keyboard);
    let date = query["message"]["date"].as_i64().unwrap();
    assert!(date > 0 && date < 10_000_000_000, "{date}");

    let answered = tg
        .bot_call(
            "answerCallbackQuery",
            json!({"callback_query_id": query["id"], "text": "Approved"}),
        )
        .await;
    assert_eq!(answered.result(), true);
    let answers = tg.callback_answers().await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["callback_query_id"], query["id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn injected_failures_answer_like_the_real_api() {
    let tg = TelegramEmulator::start();
    tg.fail_next_send(Failure::RetryAfter(3)).await;
    tg.fail_next_send(Failure::CantParseEntities).await;

    let limited = tg
        .bot_call("SendMessage", json!({"chat_id": 7001, "text": "one"}))
        .await;
    assert_eq!(limited.status, 429);
    let body = limited.json();
    assert_eq!(body["ok"], false);
    assert_eq!(body["error_code"], 429);
    assert_eq!(body["parameters"]["retry_after"], 3);

    // The entities failure waits for a formatted send; plain text passes.
    let plain = tg
        .bot_call("sendMessage", json!({"chat_id": 7001, "text": "two"}))
        .await;
    assert_eq!(plain.result()["text"], "two");
    let formatted = tg
        .bot_call(
            "sendMessage",
            json!({"chat_id": 7001, "text": "<b>three", "parse_mode": "HTML"}),
        )
        .await;
    assert_eq!(formatted.status, 400);
    assert!(
        formatted.json()["description"]
            .as_str()
            .unwrap()
            .starts_with("Bad Request: can't parse entities"),
        "{}",
        formatted.json()
    );
    let retried = tg
        .bot_call("sendMessage", json!({"chat_id": 7001, "text": "<b>three"}))
        .await;
    assert_eq!(retried.result()["text"], "<b>three");

    let texts: Vec<_> = tg
        .bot_messages(7001)
        .await
        .into_iter()
        .filter_map(|m| m.text)
        .collect();
    assert_eq!(texts, ["two", "<b>three"]);
    let calls = tg.calls("sendMessage").await;
    let failed: Vec<_> = calls.iter().map(|c| c["failed"] == true).collect();
    assert_eq!(failed, [true, false, true, false]);
}

#[tokio::test(flavor = "multi_thread")]
async fn files_go_both_ways() {
    let tg = TelegramEmulator::start();
    let ann = ann();
    let group = ChatSpec::supergroup(-1009, "Team");
    assert_eq!(group.kind, ChatKind::Supergroup);

    let pdf = b"%PDF-1.4 not really".to_vec();
    tg.send_document(
        &group,
        &ann,
        &pdf,
        "report.pdf",
        "application/pdf",
        Some("@pincer_test_bot read this"),
    )
    .await;
    tg.send_photo(&group, &ann, b"\xff\xd8\xff jpeg", None)
        .await;
    tg.send_voice(&group, &ann, b"OggS voice", 3).await;
    let got = updates(&tg, json!({})).await;
    assert_eq!(got.len(), 3, "{got:#?}");
    let document = &got[0]["message"]["document"];
    assert_eq!(document["file_name"], "report.pdf");
    assert_eq!(document["mime_type"], "application/pdf");
    assert_eq!(got[0]["message"]["caption"], "@pincer_test_bot read this");
    assert_eq!(got[0]["message"]["caption_entities"][0]["type"], "mention");
    assert!(got[1]["message"]["photo"].as_array().unwrap().len() >= 2);
    assert_eq!(got[2]["message"]["voice"]["duration"], 3);

    // The bot fetches the document: getFile, then the file route.
    let file = tg
        .bot_call("getFile", json!({"file_id": document["file_id"]}))
        .await
        .result();
    assert_eq!(file["file_size"], pdf.len());
    let path = format!(
        "/file/bot{}/{}",
        tg.token(),
        file["file_path"].as_str().unwrap()
    );
    let download = tg.request("GET", &path, "", Vec::new()).await;
    assert_eq!(download.status, 200);
    assert_eq!(download.body, pdf);
    let missing = tg.bot_call("getFile", json!({"file_id": "nope"})).await;
    assert_eq!(
        missing.json()["description"],
        "Bad Request: invalid file_id"
    );

    // The bot uploads one as teloxide does: multipart, `attach://<part>`.
    let sent = tg
        .bot_call_multipart(
            "sendDocument",
            &[
                ("chat_id", "-1009"),
                ("caption", "here it is"),
                ("document", "attach://f1"),
            ],
            &[("f1", "notes.txt", b"the notes")],
        )
        .await
        .result();
    assert_eq!(sent["document"]["file_name"], "notes.txt");
    assert_eq!(sent["chat"]["title"], "Team");
    assert!(sent["date"].as_i64().unwrap() < 10_000_000_000);
    let messages = tg.bot_messages(-1009).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].caption.as_deref(), Some("here it is"));
    let file_id = messages[0].raw["document"]["file_id"].as_str().unwrap();
    assert_eq!(tg.file_bytes(file_id).await, b"the notes");
}

#[test]
fn entities_count_utf16_units_like_telegram() {
    assert_eq!(
        auto_entities("/new@pincer_test_bot now"),
        [json!({"type": "bot_command", "offset": 0, "length": 20})]
    );
    // 👋 is two UTF-16 units; e-mail addresses and short names are no mentions.
    assert_eq!(
        auto_entities("👋 @pincer_test_bot a@b.cd @abc"),
        [json!({"type": "mention", "offset": 3, "length": 16})]
    );
    assert!(auto_entities("plain text").is_empty());
}
