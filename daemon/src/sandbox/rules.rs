//! Which folders a sandboxed command may read and write: the plan the
//! daemon hands the launcher as arguments (`pincer_sandbox::Plan`).
//!
//! Landlock can only allow, never carve an exception out of an allowed
//! folder, so a hidden folder (`PINCER_HOME`) that lies inside a folder to
//! be allowed is handled by allowing that folder's entries one by one,
//! except the one that leads to the hidden folder (recursively). Entries
//! made later in such a folder stay out of reach, which errs on the safe
//! side. Folders to be written that lie *inside* a hidden one (the default
//! workspace is `PINCER_HOME/workspace`) are allowed as they are: a rule
//! covers only what is beneath it.

use std::path::{Path, PathBuf};

/// The system's folders, readable (and executable) by every sandboxed
/// command. Not `/home`, `/root`, `/tmp`, `/var` nor most of `/run`: they
/// hold people's and services' files.
pub const SYSTEM_READ: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys",
    // Where /etc/resolv.conf points on systemd-resolved machines.
    "/run/systemd/resolve",
    "/run/resolvconf",
];

/// Device files a command may read and write (not `/dev` as a whole: a
/// root daemon's commands keep uid 0, which could read disks).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The launcher's rules: read-only folders, read-write folders, devices.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub devices: Vec<PathBuf>,
}

impl Plan {
    /// `read` and `write` with every folder in `hidden` carved out of
    /// them; paths that do not exist are left out.
    pub fn new(read: &[PathBuf], write: &[PathBuf], hidden: &[PathBuf]) -> Self {
        let mut plan = Plan::default();
        for root in read {
            // A read-only folder inside a hidden one stays hidden.
            if !hidden.iter().any(|h| root.starts_with(h)) {
                carve(root, hidden, &mut plan.read);
            }
        }
        for root in write {
            carve(root, hidden, &mut plan.write);
        }
        plan.devices = DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        plan
    }

    /// Adds `granted` as read-only folders with `hidden` carved out of
    /// them, even where they lie inside a hidden folder (a workspace
    /// inside `PINCER_HOME`, which a chat's command reads but may not
    /// write).
    pub fn granting(mut self, granted: &[PathBuf], hidden: &[PathBuf]) -> Self {
        for root in granted {
            carve(root, hidden, &mut self.read);
        }
        self
    }

    /// What the launcher is told: these folders, and the network or not.
    pub fn launch(self, network: bool) -> pincer_sandbox::Plan {
        pincer_sandbox::Plan {
            read: self.read,
            write: self.write,
            devices: self.devices,
            network,
        }
    }
}

/// Pushes `root`, or, when a hidden folder lies strictly inside it, its
/// entries but the way to the hidden folder.
fn carve(root: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    // A hidden folder is never allowed itself, even as a workspace.
    if !root.exists() || hidden.iter().any(|h| h == root) {
        return;
    }
    if !hidden.iter().any(|h| h != root && h.starts_with(root)) {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if hidden.contains(&path) {
            continue;
        }
        carve(&path, hidden, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_folder_inside_an_allowed_one_is_carved_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("srv");
        for d in ["a", "b/c", "b/home/x", "b/d"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let hidden = vec![root.join("b/home")];
        let plan = Plan::new(std::slice::from_ref(&root), &[], &hidden);
        let mut read = plan.read.clone();
        read.sort();
        assert_eq!(
            read,
            vec![root.join("a"), root.join("b/c"), root.join("b/d")]
        );
    }

    #[test]
    fn a_workspace_inside_the_hidden_home_stays_writable_and_read_roots_inside_it_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = home.join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        let hidden = vec![home.clone()];
        let plan = Plan::new(&[home.join("state")], std::slice::from_ref(&ws), &hidden);
        assert_eq!(plan.write, vec![ws]);
        assert!(plan.read.is_empty());
    }

    #[test]
    fn a_granted_workspace_inside_the_home_is_read_around_what_it_hides() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = home.join("workspace");
        for d in ["memory", "inbox/chat-a", "inbox/chat-b", "src"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::write(ws.join("MEMORY.md"), "x").unwrap();
        std::fs::write(ws.join("README.md"), "x").unwrap();
        let hidden = vec![
            home.clone(),
            ws.join("MEMORY.md"),
            ws.join("memory"),
            ws.join("inbox"),
        ];
        let own = ws.join("inbox/chat-a");
        let plan = Plan::new(&[], std::slice::from_ref(&own), &hidden)
            .granting(std::slice::from_ref(&ws), &hidden);
        let mut read = plan.read.clone();
        read.sort();
        assert_eq!(read, vec![ws.join("README.md"), ws.join("src")]);
        assert_eq!(plan.write, vec![own]);
    }

    #[test]
    fn missing_folders_are_left_out() {
        let plan = Plan::new(&[PathBuf::from("/no/such/folder")], &[], &[]);
        assert!(plan.read.is_empty());
    }
}
