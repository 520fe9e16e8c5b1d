//! The fuzz target of the gRPC layer's request validation (see
//! `crate::fuzz`): a request body as any client on the socket may send
//! it, decoded as tonic decodes it and parsed as the service parses it.
//! Not used by pincerd.

use pincer_proto::v1 as pb;
use prost::Message;
use tonic::{Code, Status};

use super::request::RequestError;

/// The first byte picks the request kind; the rest is its protobuf body.
/// A body that decodes is accepted or refused as INVALID_ARGUMENT with a
/// sentence, never a panic.
pub fn requests(data: &[u8]) {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    match kind % 8 {
        0 => check::<pb::ChatRequest, super::agent::pb::ChatInput>(body),
        1 => check::<pb::MemorySearchRequest, super::memory::pb::SearchInput>(body),
        2 => check::<pb::AddScheduleRequest, super::schedules::pb::AddInput>(body),
        3 => check::<pb::EditScheduleRequest, super::schedules::pb::EditInput>(body),
        4 => check::<pb::RevokePairingRequest, super::channels::pb::RevokeInput>(body),
        5 => check::<pb::DecidePairingRequest, super::channels::pb::DecideInput>(body),
        6 => check::<pb::ResolveRunRequest, super::workflows::pb::ResolveInput>(body),
        _ => check::<pb::DecideRequest, super::tools::pb::DecideInput>(body),
    }
}

fn check<M, I>(body: &[u8])
where
    M: Message + Default,
    I: TryFrom<M, Error = RequestError>,
{
    let Ok(request) = M::decode(body) else {
        return;
    };
    if let Err(refused) = I::try_from(request) {
        let status = Status::from(refused);
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(!status.message().is_empty(), "a refusal without a sentence");
    }
}
