//! The config file on disk: whether it is valid, and whether the running
//! daemon runs it or an older one.

use super::{Finding, Level, finding};
use crate::config::Config;
use crate::home::Home;

/// Whether the file on disk is valid, and whether the daemon runs it.
pub(super) fn check_config_file(
    home: &Home,
    disk: &Result<Config, crate::config::ConfigError>,
    running: Option<&Config>,
) -> Vec<Finding> {
    let path = home.config_file();
    let mut out = vec![match disk {
        Err(e) => finding(
            Level::Error,
            "config",
            format!(
                "{e}; fix it and run `pincer config check`{}",
                if running.is_some() {
                    " (pincerd keeps running the config it loaded last until a reload succeeds)"
                } else {
                    ""
                }
            ),
        ),
        Ok(c) if c.source.is_none() => finding(
            Level::Ok,
            "config",
            format!(
                "no {} yet: running on zero-config defaults (`pincer init` writes a starter file)",
                path.display()
            ),
        ),
        Ok(_) => finding(Level::Ok, "config", format!("{} is valid", path.display())),
    }];
    if let (Ok(disk), Some(running)) = (disk, running)
        && disk.text_hash != running.text_hash
    {
        out.push(finding(
            Level::Warn,
            "config",
            format!(
                "pincerd runs an older config than {} ({}); `pincer config reload` applies the file",
                path.display(),
                match &running.source {
                    Some(_) => "the file changed since it was loaded",
                    None => "it started before the file existed",
                }
            ),
        ));
    }
    out
}
