//! `pincer.v1.Channels`: the bridges' health (`pincer channels status`),
//! the pairing codes (`pincer pairing list|approve|deny`) and the senders
//! approved or denied (`pincer pairing allowed|revoke`). Converts
//! and calls [`crate::channels::Channels`]; nothing is decided here.

use pincer_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::State;
use pincer_channel::KnownSender;

use crate::channels::{ChannelStatus, PairingVerbError};

pub struct ChannelsService {
    state: State,
}

impl ChannelsService {
    pub fn new(state: State) -> Self {
        Self { state }
    }
}

impl From<PairingVerbError> for Status {
    fn from(e: PairingVerbError) -> Self {
        use pincer_channel::{PairingError, PairingsError};
        let message = e.to_string();
        match e {
            PairingVerbError::UnknownChannel(..) => Status::not_found(message),
            PairingVerbError::AllowedInConfig(..) => Status::failed_precondition(message),
            PairingVerbError::Pairings(PairingsError::Pairing(PairingError::UnknownSender {
                ..
            })) => Status::not_found(message),
            PairingVerbError::Pairings(PairingsError::Pairing(PairingError::UnknownCode {
                ..
            })) => Status::not_found(message),
            PairingVerbError::Pairings(PairingsError::Pairing(PairingError::Expired {
                ..
            })) => Status::failed_precondition(message),
            PairingVerbError::Pairings(_) => Status::internal(message),
        }
    }
}

/// One bridge's status on the wire (also part of `Daemon.Status`).
pub(super) fn to_proto(s: ChannelStatus) -> pb::ChannelStatus {
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

/// An approved or denied sender on the wire.
fn paired_to_proto(k: KnownSender) -> pb::PairedSender {
    pb::PairedSender {
        channel: k.channel,
        sender_id: k.sender_id,
        sender_name: k.sender_name,
        approved: k.approved,
        decided_at: k.at,
    }
}

#[tonic::async_trait]
impl pb::channels_server::Channels for ChannelsService {
    async fn status(
        &self,
        _request: Request<pb::ChannelsStatusRequest>,
    ) -> Result<Response<pb::ChannelsStatusResponse>, Status> {
        let channels = self
            .state
            .channels
            .status()
            .into_iter()
            .map(to_proto)
            .collect();
        Ok(Response::new(pb::ChannelsStatusResponse { channels }))
    }

    async fn list_pairings(
        &self,
        request: Request<pb::ListPairingsRequest>,
    ) -> Result<Response<pb::ListPairingsResponse>, Status> {
        let channel = request.into_inner().channel.trim().to_lowercase();
        let pairings = self
            .state
            .channels
            .pairings_list(&channel)
            .into_iter()
            .map(|p| pb::Pairing {
                channel: p.channel,
                expires: p.pending.expires(),
                code: p.pending.code,
                sender_id: p.pending.sender_id,
                sender_name: p.pending.sender_name,
                created: p.pending.created,
            })
            .collect();
        Ok(Response::new(pb::ListPairingsResponse { pairings }))
    }

    async fn list_paired(
        &self,
        request: Request<pb::ListPairedRequest>,
    ) -> Result<Response<pb::ListPairedResponse>, Status> {
        let senders = self
            .state
            .channels
            .paired(&request.into_inner().channel)?
            .into_iter()
            .map(paired_to_proto)
            .collect();
        Ok(Response::new(pb::ListPairedResponse { senders }))
    }

    async fn revoke_pairing(
        &self,
        request: Request<pb::RevokePairingRequest>,
    ) -> Result<Response<pb::RevokePairingResponse>, Status> {
        let req = request.into_inner();
        if req.sender_id.trim().is_empty() {
            return Err(Status::invalid_argument(
                "name the sender's id (pincer pairing allowed lists them)",
            ));
        }
        let revoked = self
            .state
            .channels
            .revoke_pairing(&req.channel, &req.sender_id)?;
        Ok(Response::new(pb::RevokePairingResponse {
            revoked: Some(paired_to_proto(revoked)),
        }))
    }

    async fn decide_pairing(
        &self,
        request: Request<pb::DecidePairingRequest>,
    ) -> Result<Response<pb::DecidePairingResponse>, Status> {
        let req = request.into_inner();
        if req.code.trim().is_empty() {
            return Err(Status::invalid_argument(
                "name the code the sender was given (pincer pairing list shows them)",
            ));
        }
        let (sender_id, sender_name) = self
            .state
            .channels
            .decide_pairing(&req.channel, &req.code, req.approve)
            .await?;
        Ok(Response::new(pb::DecidePairingResponse {
            channel: req.channel.trim().to_lowercase(),
            sender_id,
            sender_name,
            approved: req.approve,
        }))
    }
}
