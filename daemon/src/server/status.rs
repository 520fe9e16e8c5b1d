//! The one mapping from our errors (the hub's, the parts', a request's
//! own) to gRPC statuses. Each status says what happened, so a client can
//! act on the code alone: only a daemon that is going away answers
//! UNAVAILABLE (which clients read as "try later"), a failed operation is
//! never mistaken for an unreachable daemon.

use tonic::Status;

use super::daemon::ReloadError;
use super::request::RequestError;
use crate::agent::hub::HubError;
use crate::channels::PairingVerbError;
use crate::schedule::manage::ManageError;
use crate::tools::approvals::Refusal;
use crate::workflow::engine::StartError;
use crate::workflow::library::LibraryError;
use crate::workflow::store::StoreError;

impl From<StartError> for Status {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Library(e) => e.into(),
            StartError::Inputs(m) => Status::invalid_argument(m),
            StartError::Store(e) => e.into(),
            e @ StartError::Transcript(_) => Status::internal(e.to_string()),
            e @ StartError::NoRun(_) => Status::not_found(e.to_string()),
            e @ (StartError::Busy { .. } | StartError::Joined { .. }) => {
                Status::failed_precondition(e.to_string())
            }
            e @ (StartError::NothingToSettle { .. } | StartError::NotOver { .. }) => {
                Status::failed_precondition(e.to_string())
            }
            e @ StartError::Scratch(_) => Status::internal(e.to_string()),
        }
    }
}

impl From<Refusal> for Status {
    fn from(e: Refusal) -> Self {
        let message = e.to_string();
        match e {
            Refusal::NotWaiting(_) => Status::not_found(message),
            Refusal::OwnerOnly | Refusal::NotApprover(_) | Refusal::Initiator => {
                Status::permission_denied(message)
            }
            Refusal::Voted { .. } => Status::already_exists(message),
            Refusal::NotInput(..)
            | Refusal::NotApproval(_)
            | Refusal::CallOnly(_)
            | Refusal::NoEdit(_)
            | Refusal::NoRevise(_) => Status::failed_precondition(message),
            Refusal::BadData(_) => Status::invalid_argument(message),
            Refusal::Store(_) => Status::internal(message),
        }
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        Status::internal(e.to_string())
    }
}

impl From<LibraryError> for Status {
    fn from(e: LibraryError) -> Self {
        let message = e.to_string();
        match e {
            LibraryError::NotFound { .. } => Status::not_found(message),
            // The file is there but cannot run as it is: the caller's
            // precondition, with every problem in the message.
            LibraryError::Invalid(_) => Status::failed_precondition(message),
            LibraryError::Read { .. } => Status::internal(message),
        }
    }
}

impl From<HubError> for Status {
    fn from(e: HubError) -> Self {
        let message = e.to_string();
        match e {
            HubError::UnknownAgent { .. }
            | HubError::UnknownSession { .. }
            | HubError::NoPrompt(_) => Status::not_found(message),
            HubError::BadSessionName(_) | HubError::TooLarge { .. } => {
                Status::invalid_argument(message)
            }
            HubError::Busy(_) => Status::failed_precondition(message),
            HubError::OtherPrincipal { .. } => Status::permission_denied(message),
            HubError::ShuttingDown => Status::unavailable(message),
            // Attempted and abandoned, nothing changed: the operation, not
            // the daemon, failed.
            HubError::Compaction(_) => Status::aborted(message),
            HubError::Registry(_) | HubError::Transcript(_) => Status::internal(message),
        }
    }
}

impl From<ManageError> for Status {
    fn from(e: ManageError) -> Self {
        let message = e.to_string();
        match e {
            ManageError::NotFound(_) => Status::not_found(message),
            ManageError::Exists(_) => Status::already_exists(message),
            ManageError::InConfig(_) => Status::failed_precondition(message),
            ManageError::Invalid { .. } => Status::invalid_argument(message),
            ManageError::Store(_) => Status::internal(message),
        }
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

impl From<ReloadError> for Status {
    fn from(e: ReloadError) -> Self {
        // The config in force stays: the file is what must change.
        Status::failed_precondition(format!(
            "the new config is invalid and was not applied: {e}"
        ))
    }
}

impl From<RequestError> for Status {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::Answer(refusal) => refusal.into(),
            e => Status::invalid_argument(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_compaction_is_not_an_unreachable_daemon() {
        let failed = crate::agent::compaction::CompactionError::Summary {
            reason: "manual",
            source: crate::llm::LlmError::NotConfigured("the model call failed".into()),
        };
        let status = Status::from(HubError::Compaction(failed));
        assert_eq!(status.code(), tonic::Code::Aborted);
        assert!(status.message().contains("the model call failed"));
        assert!(status.message().contains("kept whole"));
    }

    #[test]
    fn only_shutting_down_is_unavailable() {
        let errors = [
            HubError::UnknownAgent {
                agent: "x".into(),
                known: "main".into(),
            },
            HubError::UnknownSession {
                name: "s".into(),
                key: "agent:main:s".into(),
            },
            HubError::BadSessionName("bad".into()),
            HubError::NoPrompt("agent:main:main".into()),
            HubError::Transcript(std::io::Error::other("disk full")),
            HubError::Busy("agent:main:main".into()),
            HubError::Compaction(crate::agent::compaction::CompactionError::Off),
        ];
        for e in errors {
            assert_ne!(Status::from(e).code(), tonic::Code::Unavailable);
        }
        assert_eq!(
            Status::from(HubError::ShuttingDown).code(),
            tonic::Code::Unavailable
        );
    }
}
