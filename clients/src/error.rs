//! `CliError`: a sentence and the exit code SPEC §4 assigns to it, and how
//! a gRPC status becomes one. A status the server sent keeps the server's
//! words and is exit 1 whatever its code (UNAVAILABLE with "pincerd is
//! shutting down" included). A status tonic made up because the connection
//! failed is marked `lost_connection`: `main` and `chat` turn it into a
//! sentence that says what happened, never transport text.

use std::error::Error as _;

/// Exit codes (SPEC §4; `send` adds 130 for an aborted turn).
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
pub const NOT_RUNNING: u8 = 3;

/// An error with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
    /// The connection to pincerd broke (the daemon died or closed it);
    /// `message` is tonic's text, for nobody but a debugger.
    pub lost_connection: bool,
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            lost_connection: false,
        }
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(FAILED, message)
    }
}

impl From<tonic::Status> for CliError {
    fn from(s: tonic::Status) -> Self {
        // Statuses decoded from the server's trailers carry no source;
        // tonic attaches the transport error to the ones it makes itself.
        // A response body that ends without trailers is the daemon going
        // away mid-stream, too.
        let lost = s.source().is_some() || s.message() == "Unexpected EOF decoding stream.";
        Self {
            code: FAILED,
            message: s.message().to_string(),
            lost_connection: lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_from_the_server_is_exit_1_with_its_words() {
        for status in [
            tonic::Status::unavailable("pincerd is shutting down"),
            tonic::Status::not_found("no session `x`"),
            tonic::Status::internal("registry failed"),
        ] {
            let e = CliError::from(status.clone());
            assert_eq!(e.code, FAILED);
            assert_eq!(e.message, status.message());
            assert!(!e.lost_connection);
        }
    }

    #[test]
    fn a_status_tonic_made_from_a_transport_error_is_a_lost_connection() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = CliError::from(tonic::Status::from_error(Box::new(io)));
        assert!(e.lost_connection);
        assert_eq!(e.code, FAILED);
    }
}
