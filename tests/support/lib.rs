//! Shared support for the end-to-end tests: the real binaries in temporary
//! homes ([`harness`]), our scripted LLM ([`scripted`]) and the real test
//! peers installed by `tests/setup.sh` ([`peers`]).

pub mod harness;
pub mod no_landlock;
pub mod peers;
pub mod requests;
pub mod scripted;
