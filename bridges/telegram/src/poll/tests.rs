//! The reader against the fake Bot API and a real bridge: the watchdog,
//! a server that sends the same update again, errors in the health.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::testing::{Script, Updates, bridge, fake_api, until};

fn private_message(update_id: i64, message_id: i64, text: &str) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": message_id,
            "from": {"id": 5550001, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": 5550001, "first_name": "Ada", "type": "private"},
            "date": 1735689612345_i64,
            "text": text
        }
    })
}

#[test]
fn the_watchdog_waits_twice_the_poll_and_a_margin() {
    assert_eq!(
        watchdog_limit(Duration::from_secs(30)),
        Duration::from_secs(65)
    );
    assert_eq!(
        watchdog_limit(Duration::from_secs(2)),
        Duration::from_secs(6)
    );
    assert_eq!(watchdog_limit(Duration::ZERO), Duration::from_secs(1));
}

#[tokio::test]
async fn a_poll_that_never_returns_is_abandoned() {
    let api = fake_api(Script {
        updates: Updates::Hang,
        ..Script::default()
    })
    .await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let (bridge, _host) = bridge(tg.clone(), dir.path(), "5550001", "polling");
    let stop = CancellationToken::new();
    let reader = crate::spawn(tg, bridge.clone(), stop.clone());
    // poll_timeout 100 ms: the watchdog gives up after 1 s.
    let fired = until(Duration::from_secs(10), || {
        let n = bridge.health().snapshot().watchdog_restarts;
        async move { n >= 2 }
    })
    .await;
    let health = bridge.health().snapshot();
    assert!(fired, "{health:?}");
    let (_, why) = health.last_error.unwrap();
    assert!(why.contains("abandoned"), "{why}");
    assert!(
        api.calls("getUpdates").len() >= 2,
        "a new poll after each abandoned one"
    );
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(2), reader)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_update_sent_again_is_answered_once() {
    let update = private_message(41, 7, "hello");
    let api = fake_api(Script {
        updates: Updates::Same(vec![update]),
        ..Script::default()
    })
    .await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let (bridge, host) = bridge(tg.clone(), dir.path(), "5550001", "polling");
    let stop = CancellationToken::new();
    let reader = crate::spawn(tg, bridge.clone(), stop.clone());
    let api2 = api.clone();
    assert!(
        until(Duration::from_secs(5), || {
            let n = api2.calls("sendMessage").len();
            async move { n >= 1 }
        })
        .await
    );
    // Many more polls bring the same update back.
    let polls = api.calls("getUpdates").len();
    let api3 = api.clone();
    assert!(
        until(Duration::from_secs(5), || {
            let n = api3.calls("getUpdates").len();
            async move { n >= polls + 5 }
        })
        .await
    );
    stop.cancel();
    reader.await.unwrap();
    let sent = api.calls("sendMessage");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].json()["text"], "echo: hello");
    assert_eq!(sent[0].json()["chat_id"], json!(5550001));
    assert_eq!(host.turns.lock().unwrap().len(), 1);
    assert_eq!(
        bridge.cursor(CURSOR_SCOPE).await.unwrap().as_deref(),
        Some("42")
    );
    // The next poll asks from there.
    let last = api.calls("getUpdates").last().unwrap().json();
    assert_eq!(last["offset"], json!(42));
    assert_eq!(
        last["allowed_updates"],
        json!(["message", "edited_message", "callback_query"])
    );
    assert_eq!(bridge.health().snapshot().messages_in, 1);
}

#[tokio::test]
async fn a_server_that_answers_at_once_is_not_hammered() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let (bridge, _host) = bridge(tg.clone(), dir.path(), "5550001", "polling");
    let stop = CancellationToken::new();
    let reader = crate::spawn(tg, bridge, stop.clone());
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    reader.await.unwrap();
    let polls = api.calls("getUpdates").len();
    let most = (start.elapsed().as_millis() / IDLE_PAUSE.as_millis()) as usize + 1;
    assert!(polls >= 2 && polls <= most, "{polls} polls, at most {most}");
}

#[tokio::test]
async fn a_conflict_and_a_bad_token_are_told_in_sentences() {
    for (status, description, expect) in [
        (
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            "a webhook is set on this bot",
        ),
        (401, "Unauthorized", "does not accept the bot token"),
    ] {
        let api = fake_api(Script {
            updates: Updates::Fail(status, description.into()),
            ..Script::default()
        })
        .await;
        let tg = api.connect().await;
        let dir = tempfile::tempdir().unwrap();
        let (bridge, _host) = bridge(tg.clone(), dir.path(), "5550001", "polling");
        let stop = CancellationToken::new();
        let reader = crate::spawn(tg, bridge.clone(), stop.clone());
        let b = bridge.clone();
        assert!(
            until(Duration::from_secs(5), || {
                let e = b.health().snapshot().last_error;
                async move { e.is_some() }
            })
            .await
        );
        let health = bridge.health().snapshot();
        assert!(!health.connected);
        let (_, why) = health.last_error.unwrap();
        assert!(why.contains(expect), "{why}");
        assert!(!why.contains("TEST-token"), "{why}");
        // Backing off: one poll, not a stream of them.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(api.calls("getUpdates").len(), 1);
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(2), reader)
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test]
async fn updates_go_to_the_bridge_in_order_past_odd_ones() {
    let api = fake_api(Script {
        updates: Updates::Same(vec![
            private_message(10, 1, "first"),
            json!({"update_id": 11, "message": {"broken": true}}),
            json!({"update_id": 12, "edited_message": {"message_id": 1}}),
            private_message(13, 2, "second"),
        ]),
        ..Script::default()
    })
    .await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let (bridge, host) = bridge(tg.clone(), dir.path(), "5550001", "polling");
    let stop = CancellationToken::new();
    let reader = crate::spawn(tg, bridge.clone(), stop.clone());
    let api2 = api.clone();
    assert!(
        until(Duration::from_secs(5), || {
            let n = api2.calls("sendMessage").len();
            async move { n >= 2 }
        })
        .await
    );
    stop.cancel();
    reader.await.unwrap();
    assert_eq!(*host.turns.lock().unwrap(), vec!["first", "second"]);
    assert_eq!(
        bridge.cursor(CURSOR_SCOPE).await.unwrap().as_deref(),
        Some("14")
    );
}
