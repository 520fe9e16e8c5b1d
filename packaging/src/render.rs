//! The service definitions as text: the systemd user unit and the launchd
//! plist, rendered from `templates/` with the escaping each format needs
//! (systemd: `%` specifiers and `$` variables doubled, arguments with
//! spaces or quotes double-quoted; plist: XML entities). Also the marker
//! line by which `pincer service install` recognises a file it wrote, and
//! the packaged unit (`dist/pincer.service`, shipped in the .deb).

use std::path::{Path, PathBuf};

use crate::error::ServiceError;

/// The systemd unit's name.
pub const UNIT_NAME: &str = "pincer.service";
/// The launchd job's label (and the plist's file name without `.plist`).
pub const LAUNCHD_LABEL: &str = "dev.pincer.pincerd";
/// The start of the first line of every file `pincer service install`
/// writes; a file without it is someone else's and is not overwritten.
pub const MARKER: &str = "Written by `pincer service install`";

const UNIT_TEMPLATE: &str = include_str!("../templates/pincer.service");
const PLIST_TEMPLATE: &str = include_str!("../templates/dev.pincer.pincerd.plist");

const UNIT_HEADER: &str = "# Written by `pincer service install`; `pincer service uninstall` removes it.\n# A reinstall replaces it: keep changes in a drop-in (systemctl --user edit pincer.service).";
const PACKAGED_HEADER: &str = "# pincer's systemd user unit, shipped in the pincer package. Enable it with\n# `systemctl --user enable --now pincer.service`, or run `pincer service install`.";
const EXAMPLE_PLIST_HEADER: &str = "<!-- An example LaunchAgent for ~/Library/LaunchAgents/: replace YOU with your user name (and the pincerd path if it lives elsewhere), or let `pincer service install` write one. -->";
const PLIST_HEADER: &str =
    "<!-- Written by `pincer service install`; `pincer service uninstall` removes it. -->";

/// What a service runs: the absolute `pincerd` and the absolute home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub pincerd: PathBuf,
    pub home: PathBuf,
}

impl Spec {
    /// `HOME/service.env`: the daemon's environment (provider keys).
    pub fn env_file(&self) -> PathBuf {
        env_file(&self.home)
    }
}

/// `HOME/service.env`.
pub fn env_file(home: &Path) -> PathBuf {
    home.join("service.env")
}

/// Whether `text` is a file we wrote: the marker in its first lines (a
/// plist has the XML declaration and doctype before it).
pub fn is_ours(text: &str) -> bool {
    text.lines().take(4).any(|l| l.contains(MARKER))
}

/// The user unit `pincer service install` writes for `spec`.
pub fn unit(spec: &Spec) -> Result<String, ServiceError> {
    let pincerd = systemd_arg(text_of(&spec.pincerd)?);
    let home = systemd_arg(text_of(&spec.home)?);
    let env_file = systemd_specifiers(text_of(&spec.env_file())?);
    Ok(fill(
        UNIT_TEMPLATE,
        &[
            ("header", UNIT_HEADER),
            ("exec_start", &format!("{pincerd} --home {home}")),
            ("env_file", &env_file),
        ],
    ))
}

/// The unit the package ships (`/usr/lib/systemd/user/pincer.service`):
/// `/usr/bin/pincerd` and `%h/.pincer`, left for systemd to expand.
pub fn packaged_unit() -> String {
    fill(
        UNIT_TEMPLATE,
        &[
            ("header", PACKAGED_HEADER),
            ("exec_start", "/usr/bin/pincerd --home %h/.pincer"),
            ("env_file", "%h/.pincer/service.env"),
        ],
    )
}

/// The example LaunchAgent the release tarball ships
/// (`dist/dev.pincer.pincerd.plist`): `/usr/local/bin/pincerd` and
/// `/Users/YOU/.pincer`, since launchd expands neither `~` nor variables.
/// Without the marker: `pincer service install` writes the real one.
pub fn example_plist() -> String {
    fill(
        PLIST_TEMPLATE,
        &[
            ("header", EXAMPLE_PLIST_HEADER),
            ("pincerd", "/usr/local/bin/pincerd"),
            ("home", "/Users/YOU/.pincer"),
            ("env_file", "/Users/YOU/.pincer/service.env"),
            ("stdout", "/Users/YOU/.pincer/logs/launchd.out.log"),
            ("stderr", "/Users/YOU/.pincer/logs/launchd.err.log"),
        ],
    )
}

/// The LaunchAgent plist for `spec`: pincerd reads the environment file
/// itself (`--env-file`), since launchd has none.
pub fn plist(spec: &Spec) -> Result<String, ServiceError> {
    let logs = spec.home.join("logs");
    Ok(fill(
        PLIST_TEMPLATE,
        &[
            ("header", PLIST_HEADER),
            ("pincerd", &xml(text_of(&spec.pincerd)?)),
            ("home", &xml(text_of(&spec.home)?)),
            ("env_file", &xml(text_of(&spec.env_file())?)),
            ("stdout", &xml(text_of(&logs.join("launchd.out.log"))?)),
            ("stderr", &xml(text_of(&logs.join("launchd.err.log"))?)),
        ],
    ))
}

/// Replaces each `{{name}}` once; the values are already escaped.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    values.iter().fold(template.to_string(), |text, (k, v)| {
        text.replace(&format!("{{{{{k}}}}}"), v)
    })
}

/// A path as text for a definition file: UTF-8 (both formats are text)
/// and without control characters (a newline would start a new setting).
fn text_of(path: &Path) -> Result<&str, ServiceError> {
    let text = path.to_str().ok_or_else(|| ServiceError::UnusablePath {
        path: path.to_path_buf(),
        why: "it is not valid UTF-8",
    })?;
    if text.chars().any(char::is_control) {
        return Err(ServiceError::UnusablePath {
            path: path.to_path_buf(),
            why: "it contains a control character",
        });
    }
    Ok(text)
}

/// `%` starts a specifier wherever systemd expands them (ExecStart,
/// EnvironmentFile): a literal one is `%%`.
fn systemd_specifiers(text: &str) -> String {
    text.replace('%', "%%")
}

/// One word of an ExecStart command line: specifiers and `$` doubled;
/// quoted when it has whitespace, a quote or a backslash, with `"` and
/// `\` escaped inside the quotes (systemd.service(5), "Command lines").
fn systemd_arg(text: &str) -> String {
    let plain = systemd_specifiers(text).replace('$', "$$");
    if plain
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'))
    {
        let escaped = plain.replace('\\', "\\\\").replace('"', "\\\"");
        format!("\"{escaped}\"")
    } else {
        plain
    }
}

/// Text inside an XML element.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Spec {
        Spec {
            pincerd: PathBuf::from("/opt/pincer 1/bin/pincerd"),
            home: PathBuf::from("/home/ann/My 100% <agent>"),
        }
    }

    #[test]
    fn the_unit_for_a_home_with_a_space_and_a_percent() {
        insta::assert_snapshot!(unit(&sample()).unwrap());
    }

    #[test]
    fn the_unit_for_a_plain_home() {
        let spec = Spec {
            pincerd: PathBuf::from("/usr/local/bin/pincerd"),
            home: PathBuf::from("/home/ann/.pincer"),
        };
        insta::assert_snapshot!(unit(&spec).unwrap());
    }

    #[test]
    fn the_plist_for_a_home_with_a_space_and_a_percent() {
        insta::assert_snapshot!(plist(&sample()).unwrap());
    }

    #[test]
    fn the_packaged_unit_is_the_committed_file() {
        let committed = include_str!("../dist/pincer.service");
        assert_eq!(
            packaged_unit(),
            committed,
            "packaging/dist/pincer.service is stale: write `pincer service unit --packaged` into it"
        );
    }

    #[test]
    fn the_example_plist_is_the_committed_file() {
        let committed = include_str!("../dist/dev.pincer.pincerd.plist");
        assert_eq!(
            example_plist(),
            committed,
            "packaging/dist/dev.pincer.pincerd.plist is stale: write `render::example_plist()` into it"
        );
        assert!(!is_ours(committed));
    }

    #[test]
    fn every_file_we_write_carries_the_marker_and_others_do_not() {
        assert!(is_ours(&unit(&sample()).unwrap()));
        assert!(is_ours(&plist(&sample()).unwrap()));
        assert!(!is_ours(&packaged_unit()));
        assert!(!is_ours("[Unit]\nDescription=mine\n"));
    }

    #[test]
    fn exec_start_words_are_escaped_for_systemd() {
        assert_eq!(systemd_arg("/usr/bin/pincerd"), "/usr/bin/pincerd");
        assert_eq!(systemd_arg("/a b"), "\"/a b\"");
        assert_eq!(systemd_arg("/a%b"), "/a%%b");
        assert_eq!(systemd_arg("/a$HOME"), "/a$$HOME");
        assert_eq!(systemd_arg("/a\"b c"), "\"/a\\\"b c\"");
        assert_eq!(systemd_arg("/a\\b"), "\"/a\\\\b\"");
    }

    #[test]
    fn a_path_with_a_newline_is_refused() {
        let spec = Spec {
            pincerd: PathBuf::from("/usr/bin/pincerd"),
            home: PathBuf::from("/home/x\nExecStartPre=/bin/evil"),
        };
        let e = unit(&spec).unwrap_err().to_string();
        assert!(e.contains("control character"), "{e}");
    }
}
