//! `pincer channels status` and `pincer pairing list|approve|deny|allowed|
//! revoke`: the chat bridges' health, the codes strangers were sent, and
//! the senders approved or denied.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::cli::{ChannelsCommand, PairingCommand};
use crate::error::CliError;
use crate::out::{self, outln};
use crate::rpc;

pub async fn run(ctx: &Ctx, command: ChannelsCommand) -> Result<u8, CliError> {
    let ChannelsCommand::Status = command;
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let channels = c
        .channels
        .status(pb::ChannelsStatusRequest {})
        .await?
        .into_inner()
        .channels;
    if ctx.json {
        let v: Vec<_> = channels
            .iter()
            .map(|s| {
                json!({"channel": s.channel, "account": s.account, "enabled": s.enabled,
                       "connected": s.connected, "mode": s.mode, "bot": s.bot,
                       "last_update": s.last_update, "last_error": s.last_error,
                       "last_error_at": s.last_error_at, "recovered_at": s.recovered_at, "pending_pairings": s.pending_pairings,
                       "messages_in": s.messages_in, "messages_out": s.messages_out,
                       "watchdog_restarts": s.watchdog_restarts})
            })
            .collect();
        out::json(&serde_json::Value::Array(v));
        return Ok(0);
    }
    if channels.is_empty() {
        outln!(
            "no chat channels are configured (add [channels.telegram] or [channels.discord] to config.toml; the guide: docs/src/channels/index.md)"
        );
        return Ok(0);
    }
    let now = crate::memory::unix_now().max(0) as u64;
    for s in &channels {
        let state = if !s.enabled {
            "disabled".to_string()
        } else if s.connected {
            format!("connected ({})", s.mode)
        } else {
            format!("NOT connected ({})", s.mode)
        };
        let bot = if s.bot.is_empty() {
            String::new()
        } else {
            format!(" as @{}", s.bot)
        };
        outln!("{}{bot}: {state}", s.channel);
        outln!(
            "  last update: {}",
            if s.last_update == 0 {
                "none yet".to_string()
            } else {
                ago(now, s.last_update)
            }
        );
        if !s.last_error.is_empty() && s.recovered_at > 0 {
            // Past: it says "trying again in 16 s", which is no longer so.
            outln!(
                "  recovered {} from an error {}: {}",
                ago(now, s.recovered_at),
                ago(now, s.last_error_at),
                s.last_error
            );
        } else if !s.last_error.is_empty() {
            outln!(
                "  last error ({}): {}",
                ago(now, s.last_error_at),
                s.last_error
            );
        }
        if s.watchdog_restarts > 0 {
            outln!("  polls restarted by the watchdog: {}", s.watchdog_restarts);
        }
        outln!(
            "  messages: {} in, {} out; pending pairings: {}",
            s.messages_in,
            s.messages_out,
            s.pending_pairings
        );
    }
    Ok(0)
}

fn ago(now: u64, then: u64) -> String {
    let s = now.saturating_sub(then);
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..172_800 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

pub async fn pairing(ctx: &Ctx, command: PairingCommand) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let (channel, code, approve) = match command {
        PairingCommand::List { channel } => {
            let pairings = c
                .channels
                .list_pairings(pb::ListPairingsRequest {
                    channel: channel.unwrap_or_default(),
                })
                .await?
                .into_inner()
                .pairings;
            return list(ctx, &pairings);
        }
        PairingCommand::Allowed { channel } => {
            let senders = c
                .channels
                .list_paired(pb::ListPairedRequest {
                    channel: channel.unwrap_or_default(),
                })
                .await?
                .into_inner()
                .senders;
            return allowed(ctx, &senders);
        }
        PairingCommand::Revoke { channel, user } => {
            let revoked = c
                .channels
                .revoke_pairing(pb::RevokePairingRequest {
                    channel,
                    sender_id: user,
                })
                .await?
                .into_inner()
                .revoked
                .unwrap_or_default();
            if ctx.json {
                out::json(&paired_json(&revoked));
            } else {
                outln!(
                    "revoked the {} of {} ({}) on {}: their next message gets a pairing code",
                    if revoked.approved {
                        "approval"
                    } else {
                        "denial"
                    },
                    revoked.sender_name,
                    revoked.sender_id,
                    revoked.channel
                );
            }
            return Ok(0);
        }
        PairingCommand::Approve { channel, code } => (channel, code, true),
        PairingCommand::Deny { channel, code } => (channel, code, false),
    };
    let r = c
        .channels
        .decide_pairing(pb::DecidePairingRequest {
            channel,
            code,
            approve,
        })
        .await?
        .into_inner();
    if ctx.json {
        out::json(&json!({"channel": r.channel, "sender_id": r.sender_id,
                          "sender_name": r.sender_name, "approved": r.approved}));
    } else if r.approved {
        outln!(
            "approved {} ({}) on {}: they can talk to the agent now",
            r.sender_name,
            r.sender_id,
            r.channel
        );
    } else {
        outln!(
            "denied {} ({}) on {}: their messages are ignored from now on",
            r.sender_name,
            r.sender_id,
            r.channel
        );
    }
    Ok(0)
}

fn paired_json(p: &pb::PairedSender) -> serde_json::Value {
    json!({"channel": p.channel, "sender_id": p.sender_id, "sender_name": p.sender_name,
           "approved": p.approved, "decided_at": p.decided_at})
}

fn allowed(ctx: &Ctx, senders: &[pb::PairedSender]) -> Result<u8, CliError> {
    if ctx.json {
        out::json(&serde_json::Value::Array(
            senders.iter().map(paired_json).collect(),
        ));
        return Ok(0);
    }
    if senders.is_empty() {
        outln!("nobody was approved or denied by pairing");
    }
    let now = crate::memory::unix_now().max(0) as u64;
    for p in senders {
        outln!(
            "{}  {}  {} ({})  {}",
            p.channel,
            if p.approved { "approved" } else { "denied  " },
            p.sender_name,
            p.sender_id,
            if p.decided_at == 0 {
                "(when: not recorded)".to_string()
            } else {
                ago(now, p.decided_at)
            }
        );
    }
    Ok(0)
}

fn list(ctx: &Ctx, pairings: &[pb::Pairing]) -> Result<u8, CliError> {
    if ctx.json {
        let v: Vec<_> = pairings
            .iter()
            .map(|p| {
                json!({"channel": p.channel, "code": p.code, "sender_id": p.sender_id,
                       "sender_name": p.sender_name, "created": p.created, "expires": p.expires})
            })
            .collect();
        out::json(&serde_json::Value::Array(v));
        return Ok(0);
    }
    if pairings.is_empty() {
        outln!("no pairing codes are waiting");
    }
    let now = crate::memory::unix_now().max(0) as u64;
    for p in pairings {
        outln!(
            "{}  {}  {} ({})  expires in {} min",
            p.channel,
            p.code,
            p.sender_name,
            p.sender_id,
            p.expires.saturating_sub(now).div_ceil(60)
        );
    }
    Ok(0)
}
