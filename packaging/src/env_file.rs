//! `PINCER_HOME/service.env`: the environment pincerd gets as a service
//! (provider keys, bot tokens), KEY=VALUE lines in a file only the user can
//! read. Created once with a commented header and never overwritten; no
//! secret is ever copied into it (the user pastes them).

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::ServiceError;

/// The variables most configs read keys from, listed in the new file.
pub const COMMON: [&str; 4] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "TELEGRAM_BOT_TOKEN",
];

/// The variables pincer's service may need: the common ones and every
/// `*_env = "NAME"` setting of `config.toml` (e.g. `api_key_env`).
pub fn wanted(home: &Path) -> Vec<String> {
    let mut names: BTreeSet<String> = COMMON.iter().map(|s| s.to_string()).collect();
    if let Ok(config) = std::fs::read_to_string(home.join("config.toml")) {
        for line in config.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            if key.trim().ends_with("_env")
                && !value.is_empty()
                && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                names.insert(value.to_string());
            }
        }
    }
    names.into_iter().collect()
}

/// Creates the file (mode 0600) when it is missing; true when it did.
pub fn create(path: &Path, names: &[String]) -> Result<bool, ServiceError> {
    let mut text = String::from(
        "# The environment of pincerd when it runs as a service, one KEY=VALUE per line\n\
         # (lines starting with # are ignored). Put provider keys and bot tokens here:\n\
         # this file is readable by you only (mode 0600) and they never go into the\n\
         # unit file. After a change run `pincer service restart`.\n",
    );
    for name in names {
        text.push_str(&format!("#{name}=\n"));
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match file {
        Ok(mut f) => {
            f.write_all(text.as_bytes())
                .map_err(|e| ServiceError::io("write", path, e))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(ServiceError::io("create", path, e)),
    }
}

/// Of `names`, those set in this shell but not assigned in the file: what
/// the service will lack although `pincerd` started by hand has it.
pub fn missing(path: &Path, names: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let assigned: BTreeSet<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim().trim_start_matches("export ").trim())
        .collect();
    names
        .iter()
        .filter(|n| std::env::var_os(n).is_some_and(|v| !v.is_empty()))
        .filter(|n| !assigned.contains(n.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_once_0600_with_the_names_commented() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.env");
        let names = vec!["OPENAI_API_KEY".to_string()];
        assert!(create(&path, &names).unwrap());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("\n#OPENAI_API_KEY=\n")
        );
        std::fs::write(&path, "OPENAI_API_KEY=mine\n").unwrap();
        assert!(!create(&path, &names).unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "OPENAI_API_KEY=mine\n"
        );
    }

    #[test]
    fn the_config_names_its_key_variables() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "[providers.x]\napi_key_env = \"MY_KEY\"\nbase_url = \"http://x\"\n",
        )
        .unwrap();
        let names = wanted(dir.path());
        assert!(names.contains(&"MY_KEY".to_string()));
        assert!(names.contains(&"OPENAI_API_KEY".to_string()));
        assert!(!names.iter().any(|n| n.contains("http")));
    }

    #[test]
    fn missing_lists_what_the_shell_has_and_the_file_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.env");
        std::fs::write(&path, "#HOME=\nPATH=/bin\n").unwrap();
        let names = vec![
            "HOME".to_string(),
            "PATH".to_string(),
            "PINCER_NOT_SET_X".to_string(),
        ];
        assert_eq!(missing(&path, &names), ["HOME"]);
    }
}
