//! The webhook server with real HTTP requests, a real bridge and the fake
//! Bot API behind the platform.

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::settings::Mode;
use crate::testing::{Script, bridge, fake_api, serve, until};

fn update(update_id: i64, text: &str) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "from": {"id": 5550001, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": 5550001, "first_name": "Ada", "type": "private"},
            "date": 1735689600,
            "text": text
        }
    })
}

#[test]
fn secrets_are_compared_whole() {
    assert!(same(b"abc", b"abc"));
    assert!(!same(b"abd", b"abc"));
    assert!(!same(b"ab", b"abc"));
    assert!(!same(b"", b"abc"));
    assert_eq!(path_of("https://example.org/tg/hook").unwrap(), "/tg/hook");
    assert_eq!(path_of("https://example.org").unwrap(), "/");
    assert!(path_of("not a url").is_err());
}

#[tokio::test]
async fn deliveries_need_the_secret_and_are_answered_once() {
    let api = fake_api(Script::default()).await;
    let tg = api.connect().await;
    let dir = tempfile::tempdir().unwrap();
    let (bridge, host) = bridge(tg.clone(), dir.path(), "5550001", "webhook");
    let addr = serve(router(tg, bridge, "/tg/hook".into(), "s3cret-_".into())).await;
    let url = format!("http://{addr}/tg/hook");
    let client = reqwest::Client::new();
    let post = |secret: Option<&'static str>, body: Value| {
        let mut r = client.post(&url).json(&body);
        if let Some(s) = secret {
            r = r.header(SECRET_HEADER, s);
        }
        r.send()
    };
    assert_eq!(post(None, update(1, "x")).await.unwrap().status(), 401);
    assert_eq!(
        post(Some("s3cret-X"), update(1, "x"))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        client
            .post(format!("http://{addr}/other"))
            .header(SECRET_HEADER, "s3cret-_")
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(client.get(&url).send().await.unwrap().status(), 405);
    assert!(host.turns.lock().unwrap().is_empty(), "nothing got through");

    // Telegram delivers again until it gets a 200: twice is answered once.
    for _ in 0..2 {
        assert_eq!(
            post(Some("s3cret-_"), update(5, "hello"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    let api2 = api.clone();
    assert!(
        until(Duration::from_secs(5), || {
            let n = api2.calls("sendMessage").len();
            async move { n >= 1 }
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(api.calls("sendMessage").len(), 1);
    assert_eq!(*host.turns.lock().unwrap(), vec!["hello"]);
    // Not JSON at all.
    let raw = client
        .post(&url)
        .header(SECRET_HEADER, "s3cret-_")
        .body("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);
}

#[tokio::test]
async fn webhook_mode_sets_the_webhook_then_serves() {
    let api = fake_api(Script::default()).await;
    let free = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let listen = free.local_addr().unwrap();
    drop(free);
    let mut settings = api.settings();
    settings.mode = Mode::Webhook {
        url: "https://bot.example.org/telegram/hook".into(),
        listen,
        secret: "the-secret".into(),
    };
    let tg = crate::connect(settings).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (bridge, host) = bridge(tg.clone(), dir.path(), "5550001", "webhook");
    let stop = CancellationToken::new();
    let task = crate::spawn(tg, bridge.clone(), stop.clone());
    let api2 = api.clone();
    assert!(
        until(Duration::from_secs(5), || {
            let n = api2.calls("setWebhook").len();
            async move { n == 1 }
        })
        .await
    );
    let set = api.calls("setWebhook")[0].json();
    assert_eq!(set["url"], "https://bot.example.org/telegram/hook");
    assert_eq!(set["secret_token"], "the-secret");
    assert!(api.calls("getUpdates").is_empty(), "no polling");

    let client = reqwest::Client::new();
    let url = format!("http://{listen}/telegram/hook");
    let delivered = until(Duration::from_secs(5), || {
        let r = client
            .post(&url)
            .header(SECRET_HEADER, "the-secret")
            .json(&update(9, "via hook"))
            .send();
        async move { r.await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    assert!(delivered);
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*host.turns.lock().unwrap(), vec!["via hook"]);
    assert!(bridge.health().snapshot().connected);
}
