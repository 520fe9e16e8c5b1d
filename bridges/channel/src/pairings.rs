//! The pairing state on disk: one JSON file (`state/pairing.json`) that
//! every bridge shares, written whole on each change (temporary file,
//! fsync, rename), so an approved person stays approved across restarts and
//! a crash never leaves half a file. Reads and decisions go through the
//! pure [`Pairing`] in memory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::access::{
    AccessPolicy, Approved, Decision, Denied, KnownSender, Pairing, PairingError, PendingView,
};
use crate::message::Inbound;

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PairingsError {
    #[error("cannot read the pairing state {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the pairing state {path} is not valid ({source}); move it away to start with no approved senders"
    )]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot save the pairing state {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Pairing(#[from] PairingError),
}

/// The shared, persisted pairing state.
#[derive(Debug)]
pub struct Pairings {
    path: PathBuf,
    state: Mutex<Pairing>,
}

impl Pairings {
    /// Opens the file at `path` (missing: nobody approved yet).
    pub fn open(path: &Path) -> Result<Self, PairingsError> {
        let state = match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| PairingsError::Corrupt {
                    path: path.to_path_buf(),
                    source,
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Pairing::default(),
            Err(source) => {
                return Err(PairingsError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pairing> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Pairing::decide`], saving the state when it changed (a new code).
    pub fn decide(
        &self,
        policy: &AccessPolicy,
        msg: &Inbound,
        now: u64,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Decision, PairingsError> {
        let mut state = self.lock();
        let before = state.clone();
        let decision = state.decide(policy, msg, now, random);
        if *state != before {
            self.save(&state)?;
        }
        Ok(decision)
    }

    pub fn approve(&self, channel: &str, code: &str, now: u64) -> Result<Approved, PairingsError> {
        let mut state = self.lock();
        let approved = state.approve(channel, code, now)?;
        self.save(&state)?;
        Ok(approved)
    }

    pub fn deny(&self, channel: &str, code: &str, now: u64) -> Result<Denied, PairingsError> {
        let mut state = self.lock();
        let denied = state.deny(channel, code, now)?;
        self.save(&state)?;
        Ok(denied)
    }

    /// [`Pairing::revoke`], saved: the sender is a stranger again.
    pub fn revoke(&self, channel: &str, sender_id: &str) -> Result<KnownSender, PairingsError> {
        let mut state = self.lock();
        let revoked = state.revoke(channel, sender_id)?;
        self.save(&state)?;
        Ok(revoked)
    }

    /// The approved and denied senders of every channel.
    pub fn known(&self) -> Vec<KnownSender> {
        self.lock().known()
    }

    pub fn list(&self, now: u64) -> Vec<PendingView> {
        self.lock().list(now)
    }

    /// Pending codes of one channel still valid at `now`.
    pub fn pending_count(&self, channel: &str, now: u64) -> usize {
        self.lock()
            .list(now)
            .iter()
            .filter(|p| p.channel == channel)
            .count()
    }

    pub fn approved(&self, channel: &str) -> Vec<String> {
        self.lock().approved(channel).map(str::to_string).collect()
    }

    fn save(&self, state: &Pairing) -> Result<(), PairingsError> {
        let err = |source| PairingsError::Write {
            path: self.path.clone(),
            source,
        };
        let json = serde_json::to_vec_pretty(state).map_err(|e| err(std::io::Error::other(e)))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(err)?;
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp).map_err(err)?;
        file.write_all(&json).map_err(err)?;
        file.sync_all().map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ChatKind, Sender};

    fn dm(id: &str) -> Inbound {
        Inbound {
            channel: "telegram".into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: id.into(),
            thread_id: None,
            guild_id: None,
            sender_roles: Vec::new(),
            sender: Sender {
                id: id.into(),
                name: "Eve".into(),
                is_bot: false,
            },
            text: "hi".into(),
            mentions_bot: false,
            reply_to: None,
            attachments: Vec::new(),
            message_id: "1".into(),
        }
    }

    #[test]
    fn an_approval_survives_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/pairing.json");
        let store = Pairings::open(&path).unwrap();
        let policy = AccessPolicy::default();
        let mut random = |b: &mut [u8]| b.fill(7);
        let Decision::SendPairingCode { code } =
            store.decide(&policy, &dm("42"), 100, &mut random).unwrap()
        else {
            panic!("a stranger gets a code");
        };
        let reopened = Pairings::open(&path).unwrap();
        assert_eq!(reopened.list(100).len(), 1, "the pending code was saved");
        reopened.approve("telegram", &code, 200).unwrap();
        let again = Pairings::open(&path).unwrap();
        assert_eq!(again.approved("telegram"), vec!["42".to_string()]);
        assert_eq!(
            again.decide(&policy, &dm("42"), 300, &mut random).unwrap(),
            Decision::Pass
        );
        assert_eq!(again.known()[0].at, 200, "when it was approved is kept");
        again.revoke("telegram", "42").unwrap();
        let revoked = Pairings::open(&path).unwrap();
        assert!(revoked.known().is_empty(), "the revocation was saved");
    }

    #[test]
    fn a_corrupt_file_is_a_sentence_not_an_empty_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairing.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let err = Pairings::open(&path).unwrap_err().to_string();
        assert!(err.contains("not valid"), "{err}");
    }
}
