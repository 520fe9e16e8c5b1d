//! The Channels service's wire types and their conversions. `pincer.v1`
//! is re-exported here, so the handlers name its messages `pb::X`; the
//! pairing verbs' requests are checked into [`RevokeInput`] and
//! [`DecideInput`], and a bridge's status, a waiting code and a decided
//! sender go out as their messages (the last two are the channel crate's
//! types, so functions rather than `From`). Our `ChannelStatus` is named
//! by its path: imported, it would hide the message of the same name.

pub(super) use pincer_proto::v1::*;

use pincer_channel::KnownSender;
use pincer_channel::access::PendingView;
use pincer_proto::v1 as pb;

use crate::server::request::RequestError;

/// A revoke request, checked: it names a sender.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct RevokeInput {
    pub channel: String,
    pub sender_id: String,
}

impl TryFrom<pb::RevokePairingRequest> for RevokeInput {
    type Error = RequestError;

    fn try_from(req: pb::RevokePairingRequest) -> Result<Self, RequestError> {
        if req.sender_id.trim().is_empty() {
            return Err(RequestError::NoSender);
        }
        Ok(Self {
            channel: req.channel,
            sender_id: req.sender_id,
        })
    }
}

/// An approve or deny of a pairing code, checked: it names the code.
#[derive(Debug, PartialEq)]
pub(in crate::server) struct DecideInput {
    pub channel: String,
    pub code: String,
    pub approve: bool,
}

impl TryFrom<pb::DecidePairingRequest> for DecideInput {
    type Error = RequestError;

    fn try_from(req: pb::DecidePairingRequest) -> Result<Self, RequestError> {
        if req.code.trim().is_empty() {
            return Err(RequestError::NoCode);
        }
        Ok(Self {
            channel: req.channel,
            code: req.code,
            approve: req.approve,
        })
    }
}

/// One bridge's status on the wire (also part of `Daemon.Status`).
impl From<crate::channels::ChannelStatus> for pb::ChannelStatus {
    fn from(s: crate::channels::ChannelStatus) -> Self {
        let (last_error_at, last_error) = s.health.last_error.unwrap_or_default();
        pb::ChannelStatus {
            channel: s.channel,
            account: s.account,
            enabled: s.enabled,
            connected: s.health.connected,
            mode: s.health.mode,
            last_update: s.health.last_update.unwrap_or(0),
            last_error,
            last_error_at,
            pending_pairings: s.pending_pairings as u32,
            messages_in: s.health.messages_in,
            messages_out: s.health.messages_out,
            watchdog_restarts: s.health.watchdog_restarts,
            bot: s.bot,
            recovered_at: s.health.recovered_at.unwrap_or(0),
        }
    }
}

/// A code waiting for the owner on the wire.
pub(super) fn pairing(p: PendingView) -> pb::Pairing {
    pb::Pairing {
        channel: p.channel,
        expires: p.pending.expires(),
        code: p.pending.code,
        sender_id: p.pending.sender_id,
        sender_name: p.pending.sender_name,
        created: p.pending.created,
    }
}

/// An approved or denied sender on the wire.
pub(super) fn paired_sender(k: KnownSender) -> pb::PairedSender {
    pb::PairedSender {
        channel: k.channel,
        sender_id: k.sender_id,
        sender_name: k.sender_name,
        approved: k.approved,
        decided_at: k.at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::ChannelStatus;
    use pincer_channel::HealthSnapshot;
    use pincer_channel::access::PendingCode;

    #[test]
    fn a_revoke_names_a_sender() {
        let ok = RevokeInput::try_from(pb::RevokePairingRequest {
            channel: "telegram".into(),
            sender_id: "42".into(),
        })
        .unwrap();
        assert_eq!(
            ok,
            RevokeInput {
                channel: "telegram".into(),
                sender_id: "42".into(),
            }
        );
        let none = RevokeInput::try_from(pb::RevokePairingRequest {
            channel: "telegram".into(),
            sender_id: "  ".into(),
        })
        .unwrap_err();
        assert_eq!(
            none.to_string(),
            "name the sender's id (pincer pairing allowed lists them)"
        );
    }

    #[test]
    fn a_decision_names_a_code() {
        let ok = DecideInput::try_from(pb::DecidePairingRequest {
            channel: "Telegram".into(),
            code: "ABCD1234".into(),
            approve: true,
        })
        .unwrap();
        assert_eq!(
            ok,
            DecideInput {
                channel: "Telegram".into(),
                code: "ABCD1234".into(),
                approve: true,
            }
        );
        let none = DecideInput::try_from(pb::DecidePairingRequest {
            channel: "telegram".into(),
            code: String::new(),
            approve: false,
        })
        .unwrap_err();
        assert_eq!(
            none.to_string(),
            "name the code the sender was given (pincer pairing list shows them)"
        );
    }

    #[test]
    fn a_status_keeps_its_fields() {
        let status = pb::ChannelStatus::from(ChannelStatus {
            channel: "telegram".into(),
            account: "default".into(),
            enabled: true,
            bot: "@bot".into(),
            health: HealthSnapshot {
                connected: true,
                mode: "polling".into(),
                last_update: Some(10),
                last_error: Some((5, "timed out".into())),
                recovered_at: None,
                messages_in: 3,
                messages_out: 4,
                watchdog_restarts: 1,
            },
            pending_pairings: 2,
        });
        assert_eq!(status.channel, "telegram");
        assert_eq!(status.bot, "@bot");
        assert!(status.connected && status.enabled);
        assert_eq!(
            (status.last_error_at, status.last_error.as_str()),
            (5, "timed out")
        );
        assert_eq!((status.last_update, status.recovered_at), (10, 0));
        assert_eq!((status.messages_in, status.messages_out), (3, 4));
        assert_eq!((status.pending_pairings, status.watchdog_restarts), (2, 1));
    }

    #[test]
    fn a_code_and_a_sender_keep_their_fields() {
        let p = pairing(PendingView {
            channel: "discord".into(),
            pending: PendingCode {
                sender_id: "7".into(),
                sender_name: "Ann".into(),
                code: "ABCD1234".into(),
                created: 100,
            },
        });
        assert_eq!(
            (p.channel.as_str(), p.code.as_str()),
            ("discord", "ABCD1234")
        );
        assert_eq!((p.sender_id.as_str(), p.sender_name.as_str()), ("7", "Ann"));
        assert_eq!(p.created, 100);
        assert!(p.expires > p.created);
        let k = paired_sender(KnownSender {
            channel: "discord".into(),
            sender_id: "7".into(),
            sender_name: "Ann".into(),
            approved: false,
            at: 9,
        });
        assert_eq!(
            (k.sender_id.as_str(), k.approved, k.decided_at),
            ("7", false, 9)
        );
    }
}
