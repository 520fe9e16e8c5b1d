//! The Discord test peers themselves: crabline (`tests/support/discord.rs`,
//! the real npm server through our launcher) and our own fake
//! (`tests/support/discord_fake.rs`), driven the way the Discord bridge
//! drives them: REST v10 requests and a raw gateway v10 websocket client
//! (HELLO, IDENTIFY, READY, dispatches, heartbeats, RESUME). If these fail,
//! a Discord bridge test's failure says nothing about the bridge.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use pincer_testkit::discord::{self, Crabline, http};
use pincer_testkit::discord_fake::{
    self, Author, BOT_ID, CHANNEL_ID, DiscordFake, FORUM_ID, Fault, GUILD_ID, Options, ROLE_ID,
    Say, TOKEN, intents,
};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const WAIT: Duration = Duration::from_secs(5);

/// What the Discord bridge asks for: guilds, guild and direct messages,
/// their content.
const BRIDGE_INTENTS: u64 =
    intents::GUILDS | intents::GUILD_MESSAGES | intents::DIRECT_MESSAGES | intents::MESSAGE_CONTENT;

/// A raw gateway client: what the bridge's gateway (`gateway.rs`) does on
/// the wire, one payload at a time.
struct Gateway {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Gateway {
    /// Connects as the bridge does (`?v=10&encoding=json`) and reads HELLO;
    /// answers it with its `d`.
    async fn connect(url: &str) -> (Self, Value) {
        // A bare origin gets its `/`, as the bridge writes it.
        let slash = if url.matches('/').count() == 2 {
            "/"
        } else {
            ""
        };
        let (ws, _) = tokio_tungstenite::connect_async(format!("{url}{slash}?v=10&encoding=json"))
            .await
            .unwrap_or_else(|e| panic!("connect to the gateway {url}: {e}"));
        let mut gateway = Self { ws };
        let hello = gateway.recv().await;
        assert_eq!(hello["op"], 10, "{hello}");
        (gateway, hello["d"].clone())
    }

    async fn send(&mut self, payload: Value) {
        self.ws
            .send(Message::Text(payload.to_string().into()))
            .await
            .expect("send on the gateway");
    }

    /// The next payload; panics on a close or after 5 s.
    async fn recv(&mut self) -> Value {
        loop {
            let next = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a gateway payload within 5 s");
            match next {
                Some(Ok(Message::Text(text))) => {
                    return serde_json::from_str(&text).expect("JSON payload");
                }
                Some(Ok(Message::Close(frame))) => panic!("the gateway closed: {frame:?}"),
                Some(Ok(_)) => continue,
                other => panic!("the gateway ended: {other:?}"),
            }
        }
    }

    /// The next dispatch of event `t`, skipping others.
    async fn event(&mut self, t: &str) -> Value {
        loop {
            let payload = self.recv().await;
            if payload["op"] == 0 && payload["t"] == t {
                return payload;
            }
        }
    }

    /// Whether nothing arrives for `quiet`.
    async fn silent_for(&mut self, quiet: Duration) -> Option<Value> {
        match tokio::time::timeout(quiet, self.ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                Some(serde_json::from_str(&text).expect("JSON payload"))
            }
            _ => None,
        }
    }

    /// The close code the server ends with (skipping payloads before it).
    async fn close_code(&mut self) -> u16 {
        loop {
            let next = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("the gateway to close within 5 s");
            match next {
                Some(Ok(Message::Close(Some(frame)))) => return u16::from(frame.code),
                Some(Ok(Message::Close(None))) => return 1005,
                Some(Ok(_)) => continue,
                other => panic!("the gateway ended without a close frame: {other:?}"),
            }
        }
    }

    async fn identify(&mut self, token: &str, intents: u64) {
        self.send(json!({"op": 2, "d": {
            "token": token, "intents": intents,
            "properties": {"os": "linux", "browser": "pincer", "device": "pincer"},
        }}))
        .await;
    }

    /// Closes with 1000 (normal closure).
    async fn close(mut self) {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = self.ws.close(Some(frame)).await;
    }
}

fn ann() -> Author {
    Author::user("200000000000000001", "ann")
}

// ----- crabline -----

#[tokio::test(flavor = "multi_thread")]
async fn crabline_serves_the_rest_api_the_bridge_uses() {
    let crab = Crabline::start(discord::TOKEN);
    let origin = crab.origin();
    assert!(origin.starts_with("http://127.0.0.1:"), "{origin}");
    assert_eq!(crab.token(), discord::TOKEN);
    let file_mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(crab.dir().join("ready.json"))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    assert_eq!(file_mode, 0o600);

    let gateway = crab.api("GET", "/api/v10/gateway/bot", None).await;
    assert_eq!(gateway.status, 200);
    assert_eq!(gateway.json()["url"], crab.gateway_url());
    assert_eq!(gateway.json()["shards"], 1);
    let me = crab.api("GET", "/api/v10/users/@me", None).await.json();
    assert_eq!(me["id"], crab.bot_user_id());
    assert_eq!(me["bot"], true);
    let wrong = http(
        &origin,
        "GET",
        "/api/v10/users/@me",
        &[("Authorization", "Bot nope")],
        Vec::new(),
    )
    .await;
    assert_eq!(wrong.status, 401);

    // A user's message through the admin endpoint is in the history.
    let channel = crab.channel_id();
    let said = crab
        .user_says(crab.guild_message("200000000000000001", "ann", "hello there"))
        .await;
    assert_eq!(said["content"], "hello there");
    assert_eq!(said["guild_id"], crab.guild_id());

    // The bot's message, with its allowed_mentions, reads back.
    let posted = crab
        .api(
            "POST",
            &format!("/api/v10/channels/{channel}/messages"),
            Some(json!({
                "content": "hi @everyone",
                "allowed_mentions": {"parse": []},
                "message_reference": {"message_id": said["id"]},
            })),
        )
        .await;
    assert_eq!(
        posted.status,
        200,
        "{}",
        String::from_utf8_lossy(&posted.body)
    );
    let mine = crab.wait_for_bot_messages(&channel, 1, WAIT).await;
    assert_eq!(mine.len(), 1, "{mine:#?}");
    assert_eq!(mine[0]["content"], "hi @everyone");
    assert_eq!(mine[0]["message_reference"]["message_id"], said["id"]);
    assert_eq!(mine[0]["referenced_message"]["content"], "hello there");
    let recorded = crab.calls_to("POST", &format!("/api/v10/channels/{channel}/messages"));
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    assert_eq!(
        recorded[0]["body"]["allowed_mentions"],
        json!({"parse": []})
    );
    // Our own reads are not among the bridge's calls.
    assert!(
        crab.calls().iter().all(|c| !(c["method"] == "GET"
            && c["path"].as_str().is_some_and(|p| p.ends_with("/messages")))),
        "{:#?}",
        crab.calls()
    );

    // The DM channel id the test computes is the one the API opens.
    let dm = crab
        .api(
            "POST",
            "/api/v10/users/@me/channels",
            Some(json!({"recipient_id": "200000000000000001"})),
        )
        .await
        .json();
    assert_eq!(dm["id"], crab.dm_channel_id("200000000000000001"));
    assert_eq!(dm["type"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn crabline_gateway_takes_the_bridges_identify_and_dispatches_messages() {
    let crab = Crabline::start(discord::TOKEN);
    let (mut gw, hello) = Gateway::connect(&crab.gateway_url()).await;
    assert!(hello["heartbeat_interval"].as_u64().is_some(), "{hello}");
    // The bridge identifies with the bare token, as Discord documents.
    gw.identify(&crab.token(), BRIDGE_INTENTS).await;
    let ready = gw.event("READY").await;
    assert_eq!(ready["d"]["user"]["id"], crab.bot_user_id());
    assert!(ready["d"]["session_id"].is_string());
    let guild = gw.event("GUILD_CREATE").await;
    assert_eq!(guild["d"]["id"], crab.guild_id());

    gw.send(json!({"op": 1, "d": ready["s"]})).await;
    assert_eq!(gw.recv().await["op"], 11);

    let bot = crab.bot_user_id();
    let said = crab
        .user_says(crab.guild_message("200000000000000001", "ann", &format!("<@{bot}> ping")))
        .await;
    let created = gw.event("MESSAGE_CREATE").await;
    assert_eq!(created["d"]["id"], said["id"]);
    assert_eq!(created["d"]["content"], format!("<@{bot}> ping"));
    assert_eq!(created["d"]["mentions"][0]["id"], bot);
    assert_eq!(created["d"]["author"]["id"], "200000000000000001");
    gw.close().await;

    // A wrong token is refused as Discord refuses it.
    let (mut gw, _) = Gateway::connect(&crab.gateway_url()).await;
    gw.identify("nope", BRIDGE_INTENTS).await;
    assert_eq!(gw.close_code().await, 4004);
}

// ----- our fake -----

#[tokio::test(flavor = "multi_thread")]
async fn fake_gateway_identifies_and_dispatches_full_messages() {
    let fake = DiscordFake::start().await;
    let bot_gateway = http(
        &fake.origin(),
        "GET",
        "/api/v10/gateway/bot",
        &[("Authorization", &format!("Bot {TOKEN}"))],
        Vec::new(),
    )
    .await
    .json();
    assert_eq!(bot_gateway["url"], fake.gateway_url());
    assert_eq!(bot_gateway["session_start_limit"]["max_concurrency"], 1);

    let (mut gw, hello) = Gateway::connect(&fake.gateway_url()).await;
    assert_eq!(hello["heartbeat_interval"], 1000);
    gw.identify(&format!("Bot {TOKEN}"), BRIDGE_INTENTS).await;
    let ready = gw.event("READY").await;
    assert_eq!(ready["s"], 1);
    assert_eq!(ready["d"]["user"]["id"], BOT_ID);
    assert_eq!(ready["d"]["resume_gateway_url"], fake.gateway_url());
    assert_eq!(
        ready["d"]["guilds"],
        json!([{"id": GUILD_ID, "unavailable": true}])
    );
    let guild = gw.event("GUILD_CREATE").await;
    assert_eq!(guild["s"], 2);
    let channels = guild["d"]["channels"].as_array().unwrap();
    assert!(
        channels
            .iter()
            .any(|c| c["id"] == FORUM_ID && c["type"] == 15),
        "{channels:#?}"
    );
    assert!(
        guild["d"]["roles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == ROLE_ID)
    );
    assert_eq!(fake.wait_ready(WAIT).await, 1);

    // A mention from a member with a role, then a reply to it.
    let said = fake.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("hi").mention_bot().roles(&[ROLE_ID]),
    );
    let created = gw.event("MESSAGE_CREATE").await;
    assert_eq!(created["s"], 3);
    let m = &created["d"];
    assert_eq!(m["id"], said["id"]);
    assert!(m["id"].as_str().unwrap().parse::<u64>().is_ok(), "{m}");
    assert_eq!(m["content"], format!("<@{BOT_ID}> hi"));
    assert_eq!(m["guild_id"], GUILD_ID);
    assert_eq!(m["member"]["roles"], json!([ROLE_ID]));
    assert_eq!(m["mentions"][0]["id"], BOT_ID);
    assert_eq!(m["author"]["username"], "ann");
    assert!(m["timestamp"].as_str().unwrap().ends_with("+00:00"), "{m}");

    let bob = Author::user("200000000000000002", "bob");
    let reply = fake.user_says(
        CHANNEL_ID,
        &bob,
        Say::text("same").reply_to(said["id"].as_str().unwrap()),
    );
    let m = gw.event("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(m["type"], 19);
    assert_eq!(m["message_reference"]["message_id"], said["id"]);
    assert_eq!(m["referenced_message"]["content"], said["content"]);
    assert_eq!(
        m["mentions"][0]["id"], "200000000000000001",
        "the reply pings its author"
    );
    assert!(
        reply["id"].as_str().unwrap().parse::<u64>().unwrap()
            > said["id"].as_str().unwrap().parse::<u64>().unwrap()
    );

    // A DM from a bot: no guild, no member.
    let other_bot = Author::user("300000000000000001", "otherbot").bot();
    let dm = fake.dm_channel(&other_bot);
    fake.user_says(&dm, &other_bot, Say::text("beep"));
    let m = gw.event("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(m["channel_id"], dm);
    assert_eq!(m["author"]["bot"], true);
    assert!(
        m.get("guild_id").is_none() && m.get("member").is_none(),
        "{m}"
    );

    // Heartbeats are acknowledged until the fake stops (a zombie).
    gw.send(json!({"op": 1, "d": 5})).await;
    assert_eq!(gw.recv().await["op"], 11);
    fake.stop_acking();
    gw.send(json!({"op": 1, "d": 5})).await;
    assert_eq!(gw.silent_for(Duration::from_millis(300)).await, None);
    assert_eq!(fake.connections()[0].heartbeats, 2);

    // Threads and forum posts.
    let thread = fake.create_thread(CHANNEL_ID, "side talk", &ann());
    let created = gw.event("THREAD_CREATE").await["d"].clone();
    assert_eq!(created["id"], thread);
    assert_eq!(created["parent_id"], CHANNEL_ID);
    assert_eq!(created["type"], 11);
    let (post, first) = fake.forum_post(FORUM_ID, &ann(), "a question", Say::text("how?"));
    let created = gw.event("THREAD_CREATE").await["d"].clone();
    assert_eq!(created["id"], post);
    assert_eq!(created["parent_id"], FORUM_ID);
    let m = gw.event("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(m["channel_id"], post);
    assert_eq!(
        m["id"], post,
        "a forum post's first message has the thread's id"
    );
    assert_eq!(first["content"], "how?");

    let delivered: Vec<_> = fake
        .deliveries()
        .iter()
        .map(|d| (d.connection, d.event.clone()))
        .collect();
    assert_eq!(delivered[0], (1, "READY".to_string()));
    assert_eq!(delivered.len(), 8, "{delivered:?}");
    gw.close().await;
    fake.wait_for("the socket to close", WAIT, |f| {
        (f.live_sockets() == 0).then_some(())
    })
    .await;
    assert_eq!(fake.connections()[0].close_code, Some(1000));
}

#[tokio::test(flavor = "multi_thread")]
async fn fake_gateway_resumes_and_replays() {
    let fake = DiscordFake::start().await;
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.identify(TOKEN, BRIDGE_INTENTS).await;
    let session = gw.event("READY").await["d"]["session_id"].clone();
    gw.event("GUILD_CREATE").await;
    let mut seqs = Vec::new();
    for text in ["one", "two", "three"] {
        fake.user_says(CHANNEL_ID, &ann(), Say::text(text));
        seqs.push(gw.event("MESSAGE_CREATE").await["s"].as_u64().unwrap());
    }
    // RECONNECT asks the client to resume elsewhere; the server closes.
    fake.send_reconnect();
    assert_eq!(gw.recv().await["op"], 7);
    fake.close(4000);
    assert_eq!(gw.close_code().await, 4000);
    // Written while the bot was away: buffered for the session.
    fake.user_says(CHANNEL_ID, &ann(), Say::text("four"));

    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.send(json!({"op": 6, "d": {"token": format!("Bot {TOKEN}"), "session_id": session, "seq": seqs[1]}}))
        .await;
    let three = gw.recv().await;
    assert_eq!(
        (three["t"].as_str(), three["d"]["content"].as_str()),
        (Some("MESSAGE_CREATE"), Some("three"))
    );
    assert_eq!(three["s"].as_u64(), Some(seqs[2]));
    let four = gw.recv().await;
    assert_eq!(four["d"]["content"], "four");
    let resumed = gw.recv().await;
    assert_eq!(resumed["t"], "RESUMED");

    let conns = fake.connections();
    assert_eq!(conns.len(), 2);
    assert!(conns[1].resumed);
    let first_closed = conns[0].closed_at.expect("the first socket closed");
    let deliveries = fake.deliveries();
    let on_second: Vec<_> = deliveries.iter().filter(|d| d.connection == 2).collect();
    assert!(on_second.iter().all(|d| d.at >= first_closed));
    assert_eq!(on_second.iter().filter(|d| d.replayed).count(), 2);

    // The next RESUME replays the last 3 events though seq says none.
    let latest = resumed["s"].as_u64().unwrap();
    gw.close().await;
    fake.replay_on_resume(3);
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.send(json!({"op": 6, "d": {"token": TOKEN, "session_id": session, "seq": latest}}))
        .await;
    let replayed: Vec<String> = [gw.recv().await, gw.recv().await, gw.recv().await]
        .iter()
        .map(|p| p["d"]["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(replayed, ["two", "three", "four"]);
    assert_eq!(gw.recv().await["t"], "RESUMED");

    // Invalidated, the session cannot be resumed.
    fake.invalidate_session(false);
    assert_eq!(gw.recv().await, json!({"op": 9, "d": false}));
    gw.close().await;
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.send(json!({"op": 6, "d": {"token": TOKEN, "session_id": session, "seq": latest}}))
        .await;
    let invalid = gw.recv().await;
    assert_eq!(
        (invalid["op"].as_u64(), invalid["d"].as_bool()),
        (Some(9), Some(false))
    );
    assert_eq!(fake.resumes().len(), 3);
    assert_eq!(fake.resumes()[0]["token"], "[redacted]");

    // Two sessions identified at once both get each message.
    gw.identify(TOKEN, BRIDGE_INTENTS).await;
    gw.event("GUILD_CREATE").await;
    let (mut second, _) = Gateway::connect(&fake.gateway_url()).await;
    second.identify(TOKEN, BRIDGE_INTENTS).await;
    second.event("GUILD_CREATE").await;
    assert_eq!(fake.live_sockets(), 2);
    fake.user_says(CHANNEL_ID, &ann(), Say::text("twice"));
    assert_eq!(gw.event("MESSAGE_CREATE").await["d"]["content"], "twice");
    assert_eq!(
        second.event("MESSAGE_CREATE").await["d"]["content"],
        "twice"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fake_gateway_refuses_tokens_and_intents_as_discord_does() {
    let fake = DiscordFake::start_with(Options {
        message_content_enabled: false,
        ..Options::default()
    })
    .await;
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.identify("Bot wrong", BRIDGE_INTENTS).await;
    assert_eq!(gw.close_code().await, 4004);
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.identify(TOKEN, BRIDGE_INTENTS).await;
    assert_eq!(gw.close_code().await, 4014);
    let closed = fake.connections();
    assert_eq!(
        (closed[1].close_code, closed[1].closed_by_server),
        (Some(4014), true)
    );
    assert_eq!(fake.identifies()[1]["intents"], BRIDGE_INTENTS);

    // Without MESSAGE_CONTENT a guild message arrives blank unless it
    // mentions the bot; without DIRECT_MESSAGES no DM arrives at all.
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.identify(TOKEN, intents::GUILDS | intents::GUILD_MESSAGES)
        .await;
    gw.event("GUILD_CREATE").await;
    let dm = fake.dm_channel(&ann());
    fake.user_says(&dm, &ann(), Say::text("private"));
    fake.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("chatter").attach("a.txt", "text/plain", b"a"),
    );
    fake.user_says(CHANNEL_ID, &ann(), Say::text("for you").mention_bot());
    let blank = gw.event("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(
        (
            blank["content"].as_str(),
            blank["attachments"].as_array().map(Vec::len)
        ),
        (Some(""), Some(0))
    );
    let mention = gw.event("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(mention["content"], format!("<@{BOT_ID}> for you"));

    // Rejected handshakes: another API version, compression.
    for query in ["?v=9", "?v=10&encoding=etf", "?v=10&compress=zlib-stream"] {
        let url = format!("{}/{query}", fake.gateway_url());
        assert!(
            tokio_tungstenite::connect_async(url).await.is_err(),
            "{query}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fake_rest_answers_limits_uploads_and_history_like_discord() {
    let fake = DiscordFake::start().await;
    let origin = fake.origin();
    let auth = format!("Bot {TOKEN}");
    let json_headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let post = |body: Value| {
        let origin = origin.clone();
        let headers = json_headers;
        async move {
            http(
                &origin,
                "POST",
                &format!("/api/v10/channels/{CHANNEL_ID}/messages"),
                &headers,
                body.to_string().into_bytes(),
            )
            .await
        }
    };

    let denied = http(
        &origin,
        "GET",
        "/api/v10/users/@me",
        &[("Authorization", "Bot wrong")],
        Vec::new(),
    )
    .await;
    assert_eq!(
        (denied.status, denied.json()["message"].as_str()),
        (401, Some("401: Unauthorized"))
    );

    // A 429 with Discord's body and headers, then the retry goes through.
    fake.rate_limit_next("POST", "/api/v10/channels/*/messages", 1, 0.5);
    let limited = post(json!({"content": "one"})).await;
    assert_eq!(limited.status, 429);
    assert_eq!(
        limited.json(),
        json!({"message": "You are being rate limited.", "retry_after": 0.5, "global": false})
    );
    assert_eq!(limited.header("retry-after"), Some("1"));
    assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(limited.header("x-ratelimit-reset-after"), Some("0.500"));
    assert_eq!(limited.header("x-ratelimit-scope"), Some("user"));
    assert!(limited.header("x-ratelimit-bucket").is_some());
    let sent = post(json!({"content": "one", "allowed_mentions": {"parse": []}})).await;
    assert_eq!(sent.status, 200);
    assert_eq!(sent.json()["author"]["id"], BOT_ID);

    fake.fail_next(
        "POST",
        "/api/v10/channels/*/messages",
        1,
        Fault::Status(502),
    );
    assert_eq!(post(json!({"content": "two"})).await.status, 502);

    let long = post(json!({"content": "x".repeat(2001)})).await;
    assert_eq!(
        (long.status, long.json()["code"].as_u64()),
        (400, Some(50035))
    );
    assert_eq!(post(json!({"content": ""})).await.json()["code"], 50006);
    let everyone = post(json!({"content": "@everyone look", "allowed_mentions": {"parse": []}}))
        .await
        .json();
    assert_eq!(everyone["mention_everyone"], false);

    let messages = fake.bot_messages(CHANNEL_ID);
    assert_eq!(
        messages.iter().map(|m| m.content()).collect::<Vec<_>>(),
        ["one", "@everyone look"]
    );
    assert_eq!(
        messages[0].request["allowed_mentions"],
        json!({"parse": []})
    );
    let statuses: Vec<u16> = fake
        .calls_to("POST", "/api/v10/channels/*/messages")
        .iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(statuses, [429, 200, 502, 400, 400, 200]);

    // An upload as serenity and reqwest send it: payload_json + files[0].
    let boundary = "pincer-discord-boundary";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n{}\r\n",
            json!({"content": "the notes", "attachments": [{"id": 0, "filename": "notes.txt"}]})
        )
        .as_bytes(),
    );
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(b"line one\r\nline two");
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let uploaded = http(
        &origin,
        "POST",
        &format!("/api/v10/channels/{CHANNEL_ID}/messages"),
        &[("Authorization", &auth), ("Content-Type", &content_type)],
        body,
    )
    .await;
    assert_eq!(
        uploaded.status,
        200,
        "{}",
        String::from_utf8_lossy(&uploaded.body)
    );
    let attachment = uploaded.json()["attachments"][0].clone();
    assert_eq!(attachment["filename"], "notes.txt");
    assert_eq!(attachment["size"], 18);
    let stored = fake.bot_messages(CHANNEL_ID).pop().unwrap();
    assert_eq!(stored.files[0].bytes, b"line one\r\nline two");
    assert_eq!(stored.content(), "the notes");

    // A user's attachment downloads from the CDN URL, query and all.
    let said = fake.user_says(
        CHANNEL_ID,
        &ann(),
        Say::text("see").attach("photo.png", "image/png", b"\x89PNG fake"),
    );
    let url = said["attachments"][0]["url"].as_str().unwrap().to_string();
    let path = url.strip_prefix(&origin).unwrap();
    let file = http(&origin, "GET", path, &[], Vec::new()).await;
    assert_eq!(
        (file.status, file.body.as_slice()),
        (200, b"\x89PNG fake".as_slice())
    );
    assert_eq!(file.header("content-type"), Some("image/png"));
    let unsigned = path.split('?').next().unwrap();
    assert_eq!(
        http(&origin, "GET", unsigned, &[], Vec::new()).await.status,
        404
    );

    // History: newest first; `after` pages forward from its anchor.
    let quiet = Author::user("200000000000000003", "quiet");
    let old = fake.put_history(
        discord_fake::OTHER_CHANNEL_ID,
        &quiet,
        Say::text("old").ago(Duration::from_secs(3 * 86_400)),
    );
    let a = fake.put_history(discord_fake::OTHER_CHANNEL_ID, &quiet, Say::text("a"));
    let b = fake.put_history(discord_fake::OTHER_CHANNEL_ID, &quiet, Say::text("b"));
    let c = fake.put_history(discord_fake::OTHER_CHANNEL_ID, &quiet, Say::text("c"));
    assert!(old["timestamp"].as_str().unwrap() < a["timestamp"].as_str().unwrap());
    let history = |query: String| {
        let origin = origin.clone();
        let auth = auth.clone();
        async move {
            let path = format!(
                "/api/v10/channels/{}/messages?{query}",
                discord_fake::OTHER_CHANNEL_ID
            );
            let reply = http(
                &origin,
                "GET",
                &path,
                &[("Authorization", &auth)],
                Vec::new(),
            )
            .await;
            reply
                .json()
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(history("limit=10".into()).await, ["c", "b", "a", "old"]);
    assert_eq!(
        history(format!("after={}&limit=2", old["id"].as_str().unwrap())).await,
        ["b", "a"]
    );
    assert_eq!(
        history(format!("before={}&limit=2", c["id"].as_str().unwrap())).await,
        ["b", "a"]
    );
    assert_eq!(b["author"]["id"], "200000000000000003");

    // Members with roles; a DM channel; typing.
    fake.set_roles(&quiet, &[ROLE_ID]);
    let member = http(
        &origin,
        "GET",
        &format!("/api/v10/guilds/{GUILD_ID}/members/200000000000000003"),
        &[("Authorization", &auth)],
        Vec::new(),
    )
    .await
    .json();
    assert_eq!(member["roles"], json!([ROLE_ID]));
    assert_eq!(member["user"]["username"], "quiet");
    let dm = http(
        &origin,
        "POST",
        "/api/v10/users/@me/channels",
        &json_headers,
        json!({"recipient_id": "200000000000000003"})
            .to_string()
            .into_bytes(),
    )
    .await
    .json();
    assert_eq!(dm["type"], 1);
    assert_eq!(dm["id"], fake.dm_channel(&quiet));
    let typing = http(
        &origin,
        "POST",
        &format!("/api/v10/channels/{CHANNEL_ID}/typing"),
        &[("Authorization", &auth)],
        Vec::new(),
    )
    .await;
    assert_eq!(typing.status, 204);
}

#[tokio::test(flavor = "multi_thread")]
async fn fake_interactions_are_dispatched_and_callbacks_recorded() {
    let fake = DiscordFake::start().await;
    let origin = fake.origin();
    let auth = format!("Bot {TOKEN}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.identify(TOKEN, BRIDGE_INTENTS).await;
    gw.event("GUILD_CREATE").await;

    let commands = json!([{"name": "new", "description": "Start a new session", "type": 1}]);
    let put = http(
        &origin,
        "PUT",
        &format!(
            "/api/v10/applications/{}/commands",
            discord_fake::APPLICATION_ID
        ),
        &headers,
        commands.to_string().into_bytes(),
    )
    .await;
    assert_eq!(put.status, 200);
    let registered = fake.commands(None);
    assert_eq!(registered.len(), 1);

    let buttons = json!([{"type": 1, "components": [
        {"type": 2, "style": 3, "label": "Approve", "custom_id": "approve:7"},
        {"type": 2, "style": 4, "label": "Deny", "custom_id": "deny:7"},
    ]}]);
    let sent = http(
        &origin,
        "POST",
        &format!("/api/v10/channels/{CHANNEL_ID}/messages"),
        &headers,
        json!({"content": "Run `ls`?", "components": buttons})
            .to_string()
            .into_bytes(),
    )
    .await
    .json();
    let message_id = sent["id"].as_str().unwrap().to_string();
    assert_eq!(
        gw.event("MESSAGE_CREATE").await["d"]["author"]["id"],
        BOT_ID,
        "the bot sees its own message"
    );

    let owner = Author::user(discord_fake::OWNER_ID, "owner");
    let pressed = fake.press_button(CHANNEL_ID, &message_id, &owner, "approve:7");
    let event = gw.event("INTERACTION_CREATE").await["d"].clone();
    assert_eq!(event["id"], pressed.id);
    assert_eq!(event["type"], 3);
    assert_eq!(event["data"]["custom_id"], "approve:7");
    assert_eq!(event["message"]["id"], message_id);
    assert_eq!(event["member"]["user"]["id"], discord_fake::OWNER_ID);
    assert_eq!(event["token"], pressed.token);

    let callback = |id: String, token: String, body: Value| {
        let origin = origin.clone();
        async move {
            http(
                &origin,
                "POST",
                &format!("/api/v10/interactions/{id}/{token}/callback"),
                &[("Content-Type", "application/json")],
                body.to_string().into_bytes(),
            )
            .await
        }
    };
    let update = json!({"type": 7, "data": {"content": "Approved by owner", "components": []}});
    let answered = callback(pressed.id.clone(), pressed.token.clone(), update.clone()).await;
    assert_eq!(answered.status, 204);
    let again = callback(pressed.id.clone(), pressed.token.clone(), update).await;
    assert_eq!(again.json()["code"], 40060);
    let callbacks = fake.callbacks();
    assert_eq!(callbacks.len(), 2);
    assert_eq!((callbacks[0].kind, callbacks[0].in_time), (7, true));
    assert!(callbacks[0].after < discord_fake::INTERACTION_WINDOW);
    let edited = &fake.bot_messages(CHANNEL_ID)[0];
    assert_eq!(edited.content(), "Approved by owner");
    assert_eq!(edited.message["components"], json!([]));
    assert_eq!(
        gw.event("MESSAGE_UPDATE").await["d"]["content"],
        "Approved by owner"
    );

    // A slash command carries the registered command's id; its answer is a message.
    let command = fake.slash_command(CHANNEL_ID, &ann(), "new", json!([]));
    let event = gw.event("INTERACTION_CREATE").await["d"].clone();
    assert_eq!(event["type"], 2);
    assert_eq!(event["data"]["name"], "new");
    assert_eq!(event["data"]["id"], registered[0]["id"]);
    let answered = callback(
        command.id.clone(),
        command.token.clone(),
        json!({"type": 4, "data": {"content": "New session."}}),
    )
    .await;
    assert_eq!(answered.status, 204);
    let last = fake.bot_messages(CHANNEL_ID).pop().unwrap();
    assert_eq!(last.content(), "New session.");
    let wrong = callback(
        command.id,
        "not-the-token".into(),
        json!({"type": 4, "data": {"content": "x"}}),
    )
    .await;
    assert_eq!(wrong.status, 401);
}

/// What the load bench leans on: text channels added to the guild, and one
/// channel's bot messages handed over as they are posted.
#[tokio::test(flavor = "multi_thread")]
async fn fake_adds_text_channels_and_hands_over_one_channels_bot_messages() {
    let fake = DiscordFake::start().await;
    let origin = fake.origin();
    let auth = format!("Bot {TOKEN}");
    let added = fake.add_text_channel("load-0");
    let channel = http(
        &origin,
        "GET",
        &format!("/api/v10/channels/{added}"),
        &[("Authorization", auth.as_str())],
        Vec::new(),
    )
    .await
    .json();
    assert_eq!(
        (&channel["type"], &channel["guild_id"], &channel["name"]),
        (&json!(0), &json!(GUILD_ID), &json!("load-0"))
    );

    let (mut gw, _) = Gateway::connect(&fake.gateway_url()).await;
    gw.identify(&auth, BRIDGE_INTENTS).await;
    let guild = gw.event("GUILD_CREATE").await;
    assert!(
        guild["d"]["channels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == added.as_str() && c["type"] == 0),
        "{guild}"
    );
    // One added while the bot is connected is announced.
    let later = fake.add_text_channel("load-1");
    let created = gw.event("CHANNEL_CREATE").await;
    assert_eq!(created["d"]["id"], later.as_str());
    assert_eq!(created["d"]["guild_id"], GUILD_ID);
    // A person writes there as in any guild channel.
    let said = fake.user_says(&later, &ann(), Say::text("hi").mention_bot());
    let message = gw.event("MESSAGE_CREATE").await;
    assert_eq!(message["d"]["id"], said["id"]);
    assert_eq!(message["d"]["channel_id"], later.as_str());

    // The watcher of `added` gets the bot's message there, and not one
    // posted in another channel.
    let mut watched = fake.watch(&added);
    for (channel, content) in [(CHANNEL_ID, "elsewhere"), (added.as_str(), "here")] {
        let posted = http(
            &origin,
            "POST",
            &format!("/api/v10/channels/{channel}/messages"),
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ],
            json!({"content": content}).to_string().into_bytes(),
        )
        .await;
        assert_eq!(posted.status, 200);
    }
    let got = tokio::time::timeout(WAIT, watched.recv())
        .await
        .expect("the watched channel's bot message")
        .expect("the watcher open");
    assert_eq!((got.channel_id(), got.content()), (added.as_str(), "here"));
    assert!(watched.try_recv().is_err(), "only the watched channel's");
    gw.close().await;
}
