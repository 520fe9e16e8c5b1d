//! The exec sandbox: what commands the model starts may touch.
//!
//! A hostile model can talk `exec` into anything its user could do, so
//! `exec` (foreground and background), and hooks or stdio MCP servers that
//! opt in with `sandbox = true`, run under a launcher — `pincer-sandbox`
//! (the `pincer-sandbox` crate, `daemon/sandbox/`), a fresh single-threaded
//! process that confines itself and then `exec`s the command (the design
//! of Codex CLI's Linux sandbox):
//!
//! - **Landlock**: read-write on the workspace (and extra `write_paths`)
//!   and a private temp folder, read-only on the system's folders, a few
//!   device files, and nothing else: `PINCER_HOME` (config, secrets,
//!   state, logs), the owner's home and other users' homes are out of
//!   reach. Landlock also keeps the command from reading the daemon's
//!   `/proc` entries (ptrace-like access across domains) and, from ABI 6,
//!   from signalling processes outside the sandbox.
//! - **seccomp**: no Unix-domain sockets at all, so no command can reach
//!   pincerd's socket (Landlock before ABI 9 does not cover `connect()` to
//!   a path) nor any other local daemon that acts for the user (systemd's
//!   bus, ssh-agent, docker); no io_uring (it would bypass the socket
//!   rule); no sockets at all when `network = false`.
//! - **No privileges**: `no_new_privs`, and every capability dropped (the
//!   bounding, ambient and own sets), so a daemon running as root starts
//!   commands that keep root's uid but none of its powers.
//!
//! This module decides the rules ([`rules`]: which folders) and writes
//! them as the launcher's arguments; the launcher enforces them. Whether
//! the kernel offers this is probed once ([`probe`]), and the launcher is
//! opened once, beside pincerd, at start ([`launcher`]); what happens
//! where the kernel does not follows `tools.exec.sandbox` (`auto`: run and
//! say so; `required`: refuse), and a missing launcher refuses `exec`
//! unless the sandbox is off. The daemon itself is made non-dumpable at
//! start ([`make_daemon_undumpable`]), which closes its
//! `/proc/PID/environ` to other processes of its user even where no
//! sandbox is had.

pub mod launcher;
mod probe;
mod rules;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{ExecSandboxMode, ExecSandboxSettings};
use crate::home::Home;

pub use launcher::{Launcher, LauncherError};
pub use probe::Support;

/// What this machine offers the sandbox: the kernel's Landlock and
/// seccomp, and pincerd's launcher (opened on the first call).
pub fn probe() -> Support {
    fold_launcher(probe::kernel(), launcher::at_start()).0
}

/// `kernel` with the launcher's absence folded in, and the launcher.
fn fold_launcher(
    kernel: Support,
    launcher: &Result<Arc<Launcher>, LauncherError>,
) -> (Support, Option<Arc<Launcher>>) {
    match (kernel, launcher) {
        (Support::Available { .. }, Err(e)) => (Support::NoLauncher(e.to_string()), None),
        (support @ Support::Available { .. }, Ok(l)) => (support, Some(l.clone())),
        (other, _) => (other, None),
    }
}

impl Support {
    /// Whether commands run sandboxed under `settings`.
    pub fn active(&self, settings: &ExecSandboxSettings) -> bool {
        settings.mode != ExecSandboxMode::Off && matches!(self, Support::Available { .. })
    }

    /// One sentence on the sandbox's state under `settings`.
    pub fn sentence(&self, settings: &ExecSandboxSettings) -> String {
        match (self, settings.mode) {
            (_, ExecSandboxMode::Off) => {
                "exec is not sandboxed: tools.exec.sandbox is off".to_string()
            }
            (Support::Available { landlock_abi }, _) => format!(
                "exec is sandboxed (Landlock ABI {landlock_abi}, seccomp; network {})",
                if settings.network { "on" } else { "off" }
            ),
            (Support::Unavailable(why), ExecSandboxMode::Auto) => {
                format!("exec is not sandboxed: {why}")
            }
            (Support::Unavailable(why), ExecSandboxMode::Required) => {
                SandboxError::Required { why: why.clone() }.to_string()
            }
            (Support::NoLauncher(why), _) => {
                SandboxError::NoLauncher { why: why.clone() }.to_string()
            }
        }
    }
}

/// Why a command was not started in the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `tools.exec.sandbox = "required"` on a kernel without the sandbox.
    #[error("exec is refused: tools.exec.sandbox is required but {why}")]
    Required { why: String },
    /// The kernel has the sandbox but pincerd's launcher is missing: a
    /// broken install, which must not quietly run commands unconfined.
    #[error("exec is refused: {why}; tools.exec.sandbox = \"off\" would run commands unconfined")]
    NoLauncher { why: String },
    #[error("the sandbox has no temp folder (see the log)")]
    NoTempRoot,
    #[error("cannot make the temp folder {}: {source}", .dir.display())]
    TempFolder {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// The daemon's sandbox: what the kernel offers, the folders every
/// sandboxed command may read, and the private temp folder. Built once at
/// start; the `[tools.exec]` settings are passed per command so a reload
/// takes effect at once.
#[derive(Debug)]
pub struct Sandbox {
    support: Support,
    /// Folders no sandboxed command may see: `PINCER_HOME`.
    hidden: Vec<PathBuf>,
    /// Private temp folders live below this (0700, removed at exit).
    tmp: Option<tempfile::TempDir>,
    /// The launcher, opened at start; `None` where commands run bare.
    launcher: Option<Arc<Launcher>>,
}

/// Where one sandboxed command may write, besides its temp folder.
pub struct Jail<'a> {
    /// The workspace, or an MCP server's folder.
    pub write: Vec<PathBuf>,
    /// Folders it may read besides the system's, even inside
    /// `PINCER_HOME` (a chat's command reads the workspace it may not
    /// write).
    pub read: Vec<PathBuf>,
    /// What is carved out of `read` and `write` besides `PINCER_HOME`
    /// (the owner's memory, other chats' folders).
    pub hidden: Vec<PathBuf>,
    /// Names its private temp folder: `agents/<id>`, `chats/<id>/<chat>`,
    /// `hooks/<name>`, `mcp/<server>` (one per kind and name, so none
    /// shares another's).
    pub tmp_name: &'a str,
}

impl<'a> Jail<'a> {
    /// Read-write on `write` and nothing more but the system.
    pub fn writing(write: Vec<PathBuf>, tmp_name: &'a str) -> Self {
        Self {
            write,
            read: Vec::new(),
            hidden: Vec::new(),
            tmp_name,
        }
    }
}

impl Sandbox {
    /// Probes the kernel, opens the launcher beside pincerd (once per
    /// process, see [`launcher::at_start`]) and makes the private temp
    /// folder.
    pub fn new(home: &Home) -> Self {
        let (support, launcher) = fold_launcher(probe::kernel(), launcher::at_start());
        let tmp = tempfile::Builder::new()
            .prefix("pincer-exec-")
            .tempdir()
            .map_err(|e| tracing::warn!("cannot make the exec sandbox's temp folder: {e}"))
            .ok();
        let hidden = vec![canonical(home.root())];
        Self {
            support,
            hidden,
            tmp,
            launcher,
        }
    }

    /// A sandbox that never confines: `Off` and `Auto` run commands bare,
    /// `Required` refuses them with `why` (tools tested on their own).
    pub fn unavailable(why: &str) -> Self {
        Self {
            support: Support::Unavailable(why.into()),
            hidden: Vec::new(),
            tmp: None,
            launcher: None,
        }
    }

    /// Uses the launcher at `path` instead of the one beside this
    /// program: for programs that run the daemon's code but are not
    /// pincerd (the benchmarks).
    pub fn with_launcher(mut self, path: &Path) -> Self {
        let opened = Launcher::open(path).map(Arc::new);
        (self.support, self.launcher) = fold_launcher(probe::kernel(), &opened);
        self
    }

    /// What the kernel and the launcher offer.
    pub fn support(&self) -> &Support {
        &self.support
    }

    /// Whether commands run sandboxed under `settings`.
    pub fn active(&self, settings: &ExecSandboxSettings) -> bool {
        self.support.active(settings)
    }

    /// One sentence on the sandbox's state under `settings`: for `pincer
    /// status`, `pincer doctor` and the log.
    pub fn sentence(&self, settings: &ExecSandboxSettings) -> String {
        self.support.sentence(settings)
    }

    /// A command that runs `program` in the sandbox (or bare, where the
    /// settings allow running without one); the caller adds the program's
    /// arguments. Refused, with a sentence, where the sandbox is required
    /// and cannot be had.
    pub fn command(
        &self,
        settings: &ExecSandboxSettings,
        jail: &Jail<'_>,
        program: &str,
    ) -> Result<tokio::process::Command, SandboxError> {
        let launcher = match (settings.mode, &self.support, &self.launcher) {
            (ExecSandboxMode::Off, _, _) => return Ok(tokio::process::Command::new(program)),
            (_, Support::Available { .. }, Some(launcher)) => launcher,
            (_, Support::Available { .. }, None) => {
                return Err(SandboxError::NoLauncher {
                    why: "no sandbox launcher was opened".into(),
                });
            }
            (_, Support::NoLauncher(why), _) => {
                return Err(SandboxError::NoLauncher { why: why.clone() });
            }
            (ExecSandboxMode::Required, Support::Unavailable(why), _) => {
                return Err(SandboxError::Required { why: why.clone() });
            }
            (ExecSandboxMode::Auto, Support::Unavailable(_), _) => {
                return Ok(tokio::process::Command::new(program));
            }
        };
        let tmp = self.private_tmp(jail.tmp_name)?;
        let mut write: Vec<PathBuf> = jail.write.iter().map(|p| canonical(p)).collect();
        write.extend(settings.write_paths.iter().map(|p| canonical(p)));
        write.push(tmp.clone());
        let mut read: Vec<PathBuf> = rules::SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(settings.read_paths.iter().map(|p| canonical(p)));
        let mut hidden = self.hidden.clone();
        hidden.extend(jail.hidden.iter().map(|p| canonical(p)));
        let granted: Vec<PathBuf> = jail.read.iter().map(|p| canonical(p)).collect();
        let plan = rules::Plan::new(&read, &write, &hidden)
            .granting(&granted, &hidden)
            .launch(settings.network);
        let mut cmd = tokio::process::Command::new(launcher.program());
        cmd.args(plan.args()).arg(program).env("TMPDIR", &tmp);
        Ok(cmd)
    }

    /// `<tmp>/<name>`, made on first use; each `/`-separated part of
    /// `name` is made a safe file name.
    fn private_tmp(&self, name: &str) -> Result<PathBuf, SandboxError> {
        let Some(root) = &self.tmp else {
            return Err(SandboxError::NoTempRoot);
        };
        let mut dir = root.path().to_path_buf();
        for part in name.split('/').filter(|p| !p.is_empty()) {
            let safe: String = part
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            dir.push(safe);
        }
        // 0700 all the way down, even if a cleaner removed the root.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| SandboxError::TempFolder {
                dir: dir.clone(),
                source,
            })?;
        Ok(dir)
    }
}

/// The path with symlinks resolved where it exists (Landlock judges
/// resolved paths), else as given.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Makes pincerd non-dumpable: its `/proc/PID/environ`, `mem` and fds are
/// then closed to other processes of the same user (not to root with
/// `CAP_SYS_PTRACE`; the sandbox covers that), and it writes no core dump
/// holding keys.
pub fn make_daemon_undumpable() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments only changes a process flag.
        let r = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if r != 0 {
            tracing::warn!(
                "cannot make pincerd non-dumpable: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_daemon_makes_itself_non_dumpable() {
        make_daemon_undumpable();
        // SAFETY: PR_GET_DUMPABLE only reads a process flag.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }, 0);
    }

    /// The launcher's command line: the workspace and the temp folder
    /// writable, `PINCER_HOME` nowhere, the program after `--`; bare where
    /// the settings say off.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_sandboxed_command_is_the_launcher_with_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"));
        let ws = dir.path().join("home/workspace");
        std::fs::create_dir_all(home.secrets_dir()).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let sandbox = Sandbox {
            support: Support::Available { landlock_abi: 7 },
            launcher: Some(Arc::new(Launcher::open(Path::new("/bin/sh")).unwrap())),
            ..Sandbox::new(&home)
        };
        let jail = Jail::writing(vec![ws.clone()], "agents/main");
        let settings = ExecSandboxSettings {
            network: false,
            ..Default::default()
        };
        let cmd = sandbox.command(&settings, &jail, "sh").unwrap();
        let std = cmd.as_std();
        assert!(
            Path::new(std.get_program()).starts_with("/proc/self/fd"),
            "{:?}",
            std.get_program()
        );
        let args: Vec<String> = std
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let home_root = std::fs::canonicalize(home.root()).unwrap();
        let pairs: Vec<(&str, &str)> = args
            .chunks(2)
            .take_while(|c| c[0] != "--no-network" && c[0] != "--")
            .map(|c| (c[0].as_str(), c[1].as_str()))
            .collect();
        assert!(
            pairs.contains(&("--write", ws.to_str().unwrap())),
            "{args:?}"
        );
        assert!(pairs.contains(&("--read", "/usr")), "{args:?}");
        assert!(
            !pairs
                .iter()
                .any(|(_, p)| std::path::Path::new(p) == home_root
                    || std::path::Path::new(p).starts_with(home_root.join("secrets"))),
            "{args:?}"
        );
        assert!(
            args.ends_with(&["--no-network".into(), "--".into(), "sh".into()]),
            "{args:?}"
        );
        let tmp = std
            .get_envs()
            .find(|(k, _)| *k == "TMPDIR")
            .and_then(|(_, v)| v)
            .unwrap();
        assert!(
            pairs.contains(&("--write", tmp.to_str().unwrap())),
            "{args:?}"
        );

        let off = ExecSandboxSettings {
            mode: ExecSandboxMode::Off,
            ..Default::default()
        };
        let bare = sandbox.command(&off, &jail, "sh").unwrap();
        assert_eq!(bare.as_std().get_program(), "sh");
        assert_eq!(bare.as_std().get_args().count(), 0);
    }

    /// Without its launcher a kernel that has the sandbox runs nothing
    /// (unless the sandbox is off), and every sentence says why.
    #[test]
    fn a_missing_launcher_refuses_exec_unless_the_sandbox_is_off() {
        let dir = tempfile::tempdir().unwrap();
        let opened = Launcher::open(&dir.path().join(pincer_sandbox::BINARY)).map(Arc::new);
        let (support, launcher) = fold_launcher(Support::Available { landlock_abi: 7 }, &opened);
        assert!(launcher.is_none());
        let sandbox = Sandbox {
            support,
            launcher,
            ..Sandbox::unavailable("")
        };
        let jail = Jail::writing(vec![dir.path().to_path_buf()], "agents/main");
        for mode in [ExecSandboxMode::Auto, ExecSandboxMode::Required] {
            let settings = ExecSandboxSettings {
                mode,
                ..Default::default()
            };
            assert!(!sandbox.active(&settings));
            let refused = sandbox.command(&settings, &jail, "sh").unwrap_err();
            let sentence = sandbox.sentence(&settings);
            assert_eq!(refused.to_string(), sentence);
            assert!(
                sentence.starts_with("exec is refused: the sandbox's launcher ")
                    && sentence.contains("pincer-sandbox is missing"),
                "{sentence}"
            );
        }
        let off = ExecSandboxSettings {
            mode: ExecSandboxMode::Off,
            ..Default::default()
        };
        let bare = sandbox.command(&off, &jail, "sh").unwrap();
        assert_eq!(bare.as_std().get_program(), "sh");
        // Where the kernel has no sandbox, the launcher does not matter.
        let (support, _) = fold_launcher(Support::Unavailable("no Landlock".into()), &opened);
        assert_eq!(support, Support::Unavailable("no Landlock".into()));
    }

    #[test]
    fn each_mode_has_its_sentence() {
        let missing = Support::Unavailable("this kernel has no Landlock".into());
        let here = Support::Available { landlock_abi: 7 };
        let mut s = ExecSandboxSettings::default();
        assert_eq!(
            missing.sentence(&s),
            "exec is not sandboxed: this kernel has no Landlock"
        );
        assert!(!missing.active(&s));
        assert_eq!(
            here.sentence(&s),
            "exec is sandboxed (Landlock ABI 7, seccomp; network on)"
        );
        assert!(here.active(&s));
        s.mode = ExecSandboxMode::Required;
        assert_eq!(
            missing.sentence(&s),
            "exec is refused: tools.exec.sandbox is required but this kernel has no Landlock"
        );
        s.mode = ExecSandboxMode::Off;
        assert!(!here.active(&s));
        assert_eq!(
            here.sentence(&s),
            "exec is not sandboxed: tools.exec.sandbox is off"
        );
    }
}
