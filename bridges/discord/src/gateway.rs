//! The gateway connection (API v10, JSON, no compression): HELLO,
//! IDENTIFY or RESUME, READY / RESUMED, heartbeats with their ACKs,
//! RECONNECT, INVALID_SESSION and the close codes — one socket at a time,
//! read by one loop. Messages are read into `model.rs`'s types.
//!
//! Why not serenity's own gateway client: it sends `Bot <token>` in
//! IDENTIFY where Discord documents the bare token (crabline, the Discord
//! server the tests run against, refuses it), it hands each event to a
//! task of its own so two messages of one chat can reach the bridge out of
//! order, and its shard cannot be driven from outside (receiving is
//! crate-private). Here:
//!
//! - **One socket.** Before a new connection is opened the old one is
//!   closed (code 4000, which keeps the session resumable) and dropped, so
//!   nothing can arrive from it after the new one starts delivering.
//! - **Zombies.** A heartbeat not ACKed by the next one closes the
//!   socket and resumes on a new one.
//! - **Exactly once.** Events go, in the order they came, through one
//!   queue to one task that hands them to the bridge, which claims each
//!   message in the ledger by id before anything answers it: an event a
//!   RESUME replays, or any second delivery, is dropped there.
//! - **Health** follows the socket: READY and RESUMED connect the bridge,
//!   a dropped socket disconnects it until the next one is up.
//! - **Catch-up** runs after every READY: the first of a run, and after a
//!   reconnect that could not resume (`catch_up`).
//! - **Fatal closes** (4004 a refused token, 4010–4014 shard and intent
//!   errors) end [`run`] with [`Ended::Fatal`] and one sentence naming the
//!   fix; the bridge stops and never loops.
//!
//! Interactions are acknowledged the moment they arrive, well within
//! Discord's 3 s: a button press with a deferred update, a slash command
//! with a deferred answer that the bridge's reply fills in.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use pincer_channel::{Backoff, Bridge, Ended, pause};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

use crate::discord::{ChannelInfo, Discord, lock};
use crate::events::{self, Item};

/// The gateway's first frame (HELLO) must come within this.
const HELLO_TIMEOUT: Duration = Duration::from_secs(15);

/// Intents: guilds (channels, threads), guild messages, DMs, and the
/// privileged Message Content unless the config turns it off.
const GUILDS: u64 = 1 << 0;
const GUILD_MESSAGES: u64 = 1 << 9;
const DIRECT_MESSAGES: u64 = 1 << 12;
const MESSAGE_CONTENT: u64 = 1 << 15;

/// A session that can be resumed.
#[derive(Debug, Clone)]
struct Session {
    id: String,
    resume_url: String,
    seq: u64,
}

/// Connections in a row to a session's resume address that open no
/// session before the bridge identifies anew at `/gateway/bot`'s address.
const RESUME_TRIES: u32 = 3;

/// How one connection ended.
enum Closed {
    Stopped,
    /// Reconnect and resume the session (a dropped socket, RECONNECT, a
    /// zombie, INVALID_SESSION(true)).
    Resume(String),
    /// Reconnect and identify anew (INVALID_SESSION(false), 4007, 4009).
    Reidentify(String),
    /// No session started on this socket: it could not be opened or sent
    /// no HELLO. Resumed like [`Closed::Resume`], but a resume address
    /// that keeps failing is given up for `/gateway/bot`'s.
    Unreachable(String),
    Fatal(String),
}

/// Runs the gateway for `bridge` until `stop` or a fatal close.
pub async fn run(discord: Arc<Discord>, bridge: Arc<Bridge>, stop: CancellationToken) -> Ended {
    let (tx, rx) = mpsc::unbounded_channel();
    let feeder = tokio::spawn(events::feed(discord.clone(), bridge.clone(), rx));
    let mut session: Option<Session> = None;
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let mut unreachable = 0u32;
    let ended = loop {
        let started = Instant::now();
        let closed = connection(&discord, &bridge, &mut session, &tx, &stop).await;
        if !matches!(closed, Closed::Unreachable(_)) {
            unreachable = 0;
        }
        let why = match closed {
            Closed::Stopped => break Ended::Retry("stopped".into()),
            Closed::Fatal(why) => break Ended::Fatal(why),
            Closed::Resume(why) => why,
            Closed::Reidentify(why) => {
                session = None;
                why
            }
            Closed::Unreachable(why) => {
                unreachable += 1;
                if unreachable >= RESUME_TRIES && session.take().is_some() {
                    // The session's resume address is gone: identify anew
                    // at /gateway/bot's (catch-up reads what was missed).
                    tracing::warn!(
                        "discord: the resume address failed {unreachable} times; identifying anew"
                    );
                }
                why
            }
        };
        tracing::warn!("discord: {why}; reconnecting");
        bridge
            .health()
            .disconnected(&format!("{why}; reconnecting"));
        if started.elapsed() > Duration::from_secs(30) {
            backoff.reset();
        }
        if !pause(&stop, backoff.next_wait()).await {
            break Ended::Retry("stopped".into());
        }
    };
    drop(tx);
    feeder.abort();
    ended
}

fn intents(message_content: bool) -> u64 {
    GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | if message_content { MESSAGE_CONTENT } else { 0 }
}

/// One socket, from connect to close.
async fn connection(
    discord: &Arc<Discord>,
    bridge: &Arc<Bridge>,
    session: &mut Option<Session>,
    queue: &mpsc::UnboundedSender<Item>,
    stop: &CancellationToken,
) -> Closed {
    let base = session
        .as_ref()
        .map_or(discord.gateway_url.as_str(), |s| s.resume_url.as_str());
    let url = gateway_url(base);
    let (mut ws, _) = match tokio::select! {
        c = tokio_tungstenite::connect_async(url.as_str()) => c,
        _ = stop.cancelled() => return Closed::Stopped,
    } {
        Ok(ws) => ws,
        Err(e) => return Closed::Unreachable(format!("cannot connect to the gateway {base}: {e}")),
    };
    let interval = match tokio::time::timeout(HELLO_TIMEOUT, ws.next()).await {
        Ok(Some(Ok(Frame::Text(text)))) => {
            let hello: Value = serde_json::from_str(&text).unwrap_or_default();
            match (
                hello["op"].as_u64(),
                hello["d"]["heartbeat_interval"].as_u64(),
            ) {
                (Some(10), Some(ms)) if ms > 0 => Duration::from_millis(ms),
                _ => return Closed::Unreachable("the gateway did not start with HELLO".into()),
            }
        }
        Ok(Some(Ok(Frame::Close(frame)))) => return close_reason(frame.as_ref()),
        _ => return Closed::Unreachable("the gateway sent no HELLO".into()),
    };
    let token = discord.settings.token.trim();
    let token = token.strip_prefix("Bot ").unwrap_or(token);
    let opening = match session {
        Some(s) => json!({"op": 6, "d": {"token": token, "session_id": s.id, "seq": s.seq}}),
        None => json!({"op": 2, "d": {
            "token": token,
            "intents": intents(discord.settings.message_content),
            "properties": {"os": std::env::consts::OS, "browser": "pincer", "device": "pincer"},
        }}),
    };
    if let Err(e) = ws.send(Frame::Text(opening.to_string().into())).await {
        return Closed::Resume(format!("the gateway connection dropped: {e}"));
    }
    // The first beat comes after a random part of the interval, as
    // Discord asks, so that reconnecting bots do not beat in step.
    let jitter =
        Duration::from_millis(u64::from(jitter_byte()) * interval.as_millis() as u64 / 256);
    let mut next_beat = Instant::now() + jitter;
    let mut acked = true;
    loop {
        let frame = tokio::select! {
            _ = stop.cancelled() => {
                let _ = ws.close(Some(CloseFrame { code: CloseCode::Normal, reason: "pincerd stops".into() })).await;
                return Closed::Stopped;
            }
            _ = tokio::time::sleep_until(next_beat) => {
                if !acked {
                    let _ = ws.close(Some(CloseFrame { code: CloseCode::Library(4000), reason: "zombie".into() })).await;
                    return Closed::Resume("the gateway did not acknowledge a heartbeat (a zombie connection)".into());
                }
                acked = false;
                next_beat = Instant::now() + interval;
                let seq = session.as_ref().map(|s| s.seq);
                if let Err(e) = ws.send(Frame::Text(json!({"op": 1, "d": seq}).to_string().into())).await {
                    return Closed::Resume(format!("the gateway connection dropped: {e}"));
                }
                continue;
            }
            frame = ws.next() => frame,
        };
        let text = match frame {
            Some(Ok(Frame::Text(text))) => text,
            Some(Ok(Frame::Close(frame))) => return close_reason(frame.as_ref()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Closed::Resume(format!("the gateway connection dropped: {e}")),
            None => return Closed::Resume("the gateway closed the connection".into()),
        };
        let payload: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("discord: a gateway payload that is not JSON: {e}");
                continue;
            }
        };
        match payload["op"].as_u64() {
            Some(0) => {
                if let (Some(s), Some(seq)) = (session.as_mut(), payload["s"].as_u64()) {
                    s.seq = s.seq.max(seq);
                }
                let kind = payload["t"].as_str().unwrap_or_default();
                let data = &payload["d"];
                match kind {
                    "READY" => {
                        *session = Some(Session {
                            id: data["session_id"].as_str().unwrap_or_default().to_string(),
                            resume_url: data["resume_gateway_url"]
                                .as_str()
                                .unwrap_or(&discord.gateway_url)
                                .to_string(),
                            seq: payload["s"].as_u64().unwrap_or(0),
                        });
                        bridge.health().connected();
                        tracing::info!("discord: gateway ready");
                        let _ = queue.send(Item::CatchUp);
                    }
                    "RESUMED" => {
                        bridge.health().connected();
                        tracing::info!("discord: gateway session resumed");
                    }
                    _ => dispatch(discord, kind, data, queue),
                }
            }
            Some(1) => next_beat = Instant::now(),
            Some(7) => {
                let _ = ws
                    .close(Some(CloseFrame {
                        code: CloseCode::Library(4000),
                        reason: "reconnect".into(),
                    }))
                    .await;
                return Closed::Resume("the gateway asked to reconnect".into());
            }
            Some(9) => {
                let _ = ws
                    .close(Some(CloseFrame {
                        code: CloseCode::Library(4000),
                        reason: "invalid session".into(),
                    }))
                    .await;
                return if payload["d"].as_bool() == Some(true) && session.is_some() {
                    Closed::Resume("the gateway invalidated the session (resumable)".into())
                } else {
                    Closed::Reidentify("the gateway invalidated the session".into())
                };
            }
            Some(11) => acked = true,
            _ => {}
        }
    }
}

/// The address to open: the gateway's with the version and encoding
/// asked for; a bare host gets the path `/` (`wss://gateway.discord.gg/?v=10…`).
fn gateway_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let has_path = base
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    let slash = if has_path { "" } else { "/" };
    format!("{base}{slash}?v=10&encoding=json")
}

/// One dispatch besides READY / RESUMED.
pub(crate) fn dispatch(
    discord: &Arc<Discord>,
    kind: &str,
    data: &Value,
    queue: &mpsc::UnboundedSender<Item>,
) {
    match kind {
        "GUILD_CREATE" => {
            let guild = data["id"].as_str().map(str::to_string);
            let nested = data["channels"].as_array().into_iter().flatten();
            for channel in nested.chain(data["threads"].as_array().into_iter().flatten()) {
                if let Some((id, mut info)) = ChannelInfo::from_json(channel) {
                    info.guild_id = info.guild_id.or_else(|| guild.clone());
                    lock(&discord.channels).insert(id, info);
                }
            }
        }
        "CHANNEL_CREATE" | "THREAD_CREATE" | "CHANNEL_UPDATE" | "THREAD_UPDATE" => {
            if let Some((id, info)) = ChannelInfo::from_json(data) {
                lock(&discord.channels).insert(id, info);
            }
        }
        "MESSAGE_CREATE" => match serde_json::from_value(data.clone()) {
            Ok(msg) => {
                let _ = queue.send(Item::Message(Box::new(msg)));
            }
            Err(e) => tracing::warn!(
                message = data["id"].as_str().unwrap_or_default(),
                "discord: a message Discord sent could not be read: {e}"
            ),
        },
        "INTERACTION_CREATE" => events::interaction(discord, data, queue),
        _ => {}
    }
}

/// A close frame as what to do next.
fn close_reason(frame: Option<&CloseFrame>) -> Closed {
    let code = frame.map(|f| u16::from(f.code));
    let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
    match code {
        Some(4004) => Closed::Fatal(
            "Discord closed the gateway with 4004 (authentication failed): copy the bot token again from the Developer Portal (Bot → Reset Token) into DISCORD_BOT_TOKEN or token_file".into(),
        ),
        Some(4014) => Closed::Fatal(
            "Discord closed the gateway with 4014 (disallowed intents): enable Message Content Intent in the Developer Portal (Bot → Privileged Gateway Intents), or set message_content = false in [channels.discord] to run mention-only".into(),
        ),
        Some(4013) => Closed::Fatal(
            "Discord closed the gateway with 4013 (invalid intents): this is a pincer bug, please report it".into(),
        ),
        Some(code @ 4010..=4012) => Closed::Fatal(format!(
            "Discord closed the gateway with {code} ({reason}): the bot needs sharding or a newer API version, which pincer does not do"
        )),
        Some(code @ (4007 | 4009)) => {
            Closed::Reidentify(format!("the gateway closed the session ({code} {reason})"))
        }
        Some(code) => Closed::Resume(format!("the gateway closed the connection ({code} {reason})")),
        None => Closed::Resume("the gateway closed the connection".into()),
    }
}

/// A byte that differs between starts (the heartbeat's jitter): the clock's
/// nanoseconds, enough to keep reconnecting bots out of step.
fn jitter_byte() -> u8 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u8)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(code: u16) -> CloseFrame {
        CloseFrame {
            code: CloseCode::from(code),
            reason: "x".into(),
        }
    }

    #[test]
    fn fatal_closes_stop_and_name_the_fix() {
        let Closed::Fatal(why) = close_reason(Some(&frame(4014))) else {
            panic!("4014 is fatal");
        };
        assert!(why.contains("Message Content Intent"), "{why}");
        assert!(why.contains("message_content = false"), "{why}");
        assert!(matches!(close_reason(Some(&frame(4004))), Closed::Fatal(_)));
        assert!(matches!(
            close_reason(Some(&frame(4009))),
            Closed::Reidentify(_)
        ));
        assert!(matches!(
            close_reason(Some(&frame(1001))),
            Closed::Resume(_)
        ));
        assert!(matches!(close_reason(None), Closed::Resume(_)));
    }

    #[test]
    fn the_gateway_address_keeps_its_path_and_gets_one_when_bare() {
        assert_eq!(
            gateway_url("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_url("ws://127.0.0.1:9/gateway/"),
            "ws://127.0.0.1:9/gateway?v=10&encoding=json"
        );
    }

    #[test]
    fn intents_ask_for_message_content_only_when_configured() {
        assert_eq!(intents(true) & MESSAGE_CONTENT, MESSAGE_CONTENT);
        assert_eq!(intents(false) & MESSAGE_CONTENT, 0);
        assert_eq!(intents(false), GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES);
    }
}
