//! `pincer.v1.Channels`: the bridges' health (`pincer channels status`),
//! the pairing codes (`pincer pairing list|approve|deny`) and the senders
//! approved or denied (`pincer pairing allowed|revoke`). Converts (`pb`)
//! and calls [`crate::channels::Channels`]; nothing is decided here.

pub(super) mod pb;

use tonic::{Request, Response, Status};

use super::State;
use pb::{DecideInput, RevokeInput};

pub struct ChannelsService {
    state: State,
}

impl ChannelsService {
    pub fn new(state: State) -> Self {
        Self { state }
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
            .map(pb::ChannelStatus::from)
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
            .map(pb::pairing)
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
            .map(pb::paired_sender)
            .collect();
        Ok(Response::new(pb::ListPairedResponse { senders }))
    }

    async fn revoke_pairing(
        &self,
        request: Request<pb::RevokePairingRequest>,
    ) -> Result<Response<pb::RevokePairingResponse>, Status> {
        let req = RevokeInput::try_from(request.into_inner())?;
        let revoked = self
            .state
            .channels
            .revoke_pairing(&req.channel, &req.sender_id)?;
        Ok(Response::new(pb::RevokePairingResponse {
            revoked: Some(pb::paired_sender(revoked)),
        }))
    }

    async fn decide_pairing(
        &self,
        request: Request<pb::DecidePairingRequest>,
    ) -> Result<Response<pb::DecidePairingResponse>, Status> {
        let req = DecideInput::try_from(request.into_inner())?;
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
