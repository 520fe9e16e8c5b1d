//! Where a secret comes from (SPEC §5): secrets are never written in the
//! config; a key names an environment variable (`api_key_env`,
//! `token_env`, `secret_env`) or a file in `PINCER_HOME/secrets/`
//! (`api_key_file`, `token_file`, `secret_file`). [`SecretSource`] records
//! which, reads it, and says in one phrase why it could not; providers'
//! keys are read at load time ([`api_key`]), channel tokens when a bridge
//! asks (`ChannelSettings::token`). Nothing here prints a value.

use std::fmt;
use std::path::PathBuf;

use super::{ApiKey, Secret};
use crate::home::{Home, expand_tilde};

/// An environment variable or a file that holds a secret. Debug shows the
/// variable's name or the file's path, never the value.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// `$NAME` in pincerd's environment.
    Env(String),
    /// A file, normally in `PINCER_HOME/secrets/`.
    File(PathBuf),
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(var) => write!(f, "Env(${var})"),
            Self::File(path) => write!(f, "File({})", path.display()),
        }
    }
}

impl SecretSource {
    /// A file name from the config, relative to `PINCER_HOME/secrets/`
    /// (`~/` and absolute paths are taken as they are).
    pub fn file(home: &Home, name: &str) -> Self {
        Self::File(home.secrets_dir().join(expand_tilde(name)))
    }

    /// The value, trimmed; `None` when unset, unreadable or blank.
    pub fn read(&self) -> Option<String> {
        let value = match self {
            Self::Env(var) => std::env::var(var).ok()?,
            Self::File(path) => std::fs::read_to_string(path).ok()?,
        };
        let value = value.trim();
        (!value.is_empty()).then(|| value.to_string())
    }

    /// `$NAME` or the file's path.
    pub fn origin(&self) -> String {
        match self {
            Self::Env(var) => format!("${var}"),
            Self::File(path) => path.display().to_string(),
        }
    }

    /// The environment variable, if it is one.
    pub fn env_var(&self) -> Option<&str> {
        match self {
            Self::Env(var) => Some(var),
            Self::File(_) => None,
        }
    }

    /// What is wrong when [`Self::read`] found nothing, as the end of a
    /// sentence: "`$NAME`, which is not set in pincerd's environment".
    pub fn missing(&self) -> String {
        match self {
            Self::Env(var) => {
                format!("${var}, which is not set in pincerd's environment")
            }
            Self::File(path) => format!("{}, which is missing or empty", path.display()),
        }
    }

    /// The value, read now for `who` (`[channels.telegram]`, a provider),
    /// which reads its `what` (`bot token`) from here.
    pub fn read_for(&self, who: &str, what: &'static str) -> Result<String, MissingSecret> {
        self.read().ok_or_else(|| MissingSecret {
            who: who.to_string(),
            what,
            place: self.clone(),
        })
    }
}

/// A secret not found where the config says it is (unset, unreadable or
/// blank).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{who} reads its {what} from {}", .place.missing())]
pub struct MissingSecret {
    /// Who reads it: `[channels.telegram]`, a provider.
    pub who: String,
    /// What it is: `bot token`, `API key`.
    pub what: &'static str,
    /// Where it was looked for.
    pub place: SecretSource,
}

/// An API key named by an environment variable or a file in
/// `PINCER_HOME/secrets/` (the variable wins when both are set), read now;
/// `who` starts the sentence when it is missing.
pub(super) fn api_key(home: &Home, who: &str, env: Option<&str>, file: Option<&str>) -> ApiKey {
    let source = match (env, file) {
        (Some(var), _) => SecretSource::Env(var.to_string()),
        (None, Some(file)) => SecretSource::file(home, file),
        (None, None) => return ApiKey::None,
    };
    match source.read_for(who, "API key") {
        Ok(value) => ApiKey::Found {
            origin: source.origin(),
            value: Secret(value),
        },
        // The sentence every reader shows (a turn's error, `pincer status`,
        // `pincer doctor`), with what to do about it.
        Err(problem) => ApiKey::Missing {
            problem: format!(
                "{problem}; {}",
                match source {
                    SecretSource::Env(_) => "export it before starting pincerd",
                    SecretSource::File(_) => "write the key into it, then `pincer config reload`",
                }
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_trimmed_and_a_blank_one_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, "  value\n").unwrap();
        let source = SecretSource::File(path.clone());
        assert_eq!(source.read().as_deref(), Some("value"));
        std::fs::write(&path, "\n").unwrap();
        let err = source.read_for("x", "token").unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "x reads its token from {}, which is missing or empty",
                path.display()
            )
        );
    }

    #[test]
    fn debug_names_the_place_not_the_value() {
        let shown = format!("{:?}", SecretSource::Env("PATH".into()));
        assert_eq!(shown, "Env($PATH)");
    }
}
