//! The opener against a workspace with links planted at every position a
//! verb passes, hard links, a FIFO and a folder where a file should be;
//! every case runs twice, with `openat2` and with the walk that replaces
//! it on older kernels and macOS.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

/// A workspace `ws` and an `outside` folder beside it, which no verb may
/// ever write into.
struct Place {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("authorized_keys"), "ssh-ed25519 AAAA mine\n").unwrap();
        Self {
            _dir: dir,
            ws,
            outside,
        }
    }

    /// The workspace emptied, then opened each way in turn: with
    /// `openat2`, then with the walk.
    fn roots(&self) -> impl Iterator<Item = Root> + '_ {
        [false, true].into_iter().map(|walk| {
            self.reset();
            let root = Root::open(&self.ws).unwrap();
            if walk { root.walking() } else { root }
        })
    }

    /// What the outside folder holds: names and contents.
    fn outside(&self) -> Vec<(String, String)> {
        let mut out: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(e.path()).unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out
    }

    fn untouched(&self) -> Vec<(String, String)> {
        vec![("authorized_keys".into(), "ssh-ed25519 AAAA mine\n".into())]
    }

    /// Empties the workspace for the next case.
    fn reset(&self) {
        std::fs::remove_dir_all(&self.ws).unwrap();
        std::fs::create_dir_all(&self.ws).unwrap();
    }
}

fn assert_link(err: FsError, link: &str) {
    match &err {
        FsError::Link { link: found, .. } => assert_eq!(found, Path::new(link), "{err}"),
        other => panic!("expected the link `{link}` refused, got: {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&format!("`{link}` in ")) && text.contains("is a symbolic link"),
        "{text}"
    );
}

#[test]
fn making_folders_refuses_a_link_at_every_position() {
    let p = Place::new();
    for position in ["a", "a/b", "a/b/c"] {
        for root in p.roots() {
            // Real folders up to the link, then the link to the outside.
            if let Some(parent) = Path::new(position).parent() {
                std::fs::create_dir_all(p.ws.join(parent)).unwrap();
            }
            symlink(&p.outside, p.ws.join(position)).unwrap();
            assert_link(root.create_dir_all("a/b/c").unwrap_err(), position);
            assert_link(root.open_dir("a/b/c").unwrap_err(), position);
            assert_eq!(p.outside(), p.untouched(), "{position}");
        }
    }
    // A link that stays inside is refused too: pincerd follows none.
    for root in p.roots() {
        std::fs::create_dir_all(p.ws.join("real")).unwrap();
        symlink(p.ws.join("real"), p.ws.join("inner")).unwrap();
        assert_link(root.create_dir_all("inner/x").unwrap_err(), "inner");
    }
}

#[test]
fn folders_are_made_and_opened_with_their_workspace_relative_name() {
    let p = Place::new();
    for root in p.roots() {
        let dir = root.create_dir_all("inbox/./telegram-group--100").unwrap();
        assert_eq!(dir.relative(), Path::new("inbox/telegram-group--100"));
        assert_eq!(
            dir.path(),
            p.ws.canonicalize()
                .unwrap()
                .join("inbox/telegram-group--100")
        );
        assert!(p.ws.join("inbox/telegram-group--100").is_dir());
        // Made again: it is there, and opened.
        root.create_dir_all("inbox/telegram-group--100").unwrap();
        assert_eq!(root.create_dir_all("").unwrap().relative(), Path::new(""));
    }
}

#[test]
fn a_new_file_is_never_created_through_a_link_nor_over_anything() {
    let p = Place::new();
    for root in p.roots() {
        let inbox = root.create_dir_all("inbox").unwrap();
        // A link at the file's name: to an existing outside file, and
        // dangling to a new one.
        symlink(
            p.outside.join("authorized_keys"),
            p.ws.join("inbox/1-0-a.txt"),
        )
        .unwrap();
        symlink(p.outside.join("new.txt"), p.ws.join("inbox/1-1-b.txt")).unwrap();
        assert_link(
            inbox.create_new("1-0-a.txt").unwrap_err(),
            "inbox/1-0-a.txt",
        );
        assert_link(
            inbox.create_new("1-1-b.txt").unwrap_err(),
            "inbox/1-1-b.txt",
        );
        // A link at the folder on the way.
        symlink(&p.outside, p.ws.join("inbox/chat")).unwrap();
        assert_link(inbox.create_new("chat/x.txt").unwrap_err(), "inbox/chat");
        assert_eq!(p.outside(), p.untouched());

        // An ordinary file: created once, never over itself.
        let mut f = inbox.create_new("1-2-c.txt").unwrap();
        std::io::Write::write_all(&mut f, b"hello").unwrap();
        assert_eq!(
            std::fs::read(p.ws.join("inbox/1-2-c.txt")).unwrap(),
            b"hello"
        );
        assert!(matches!(
            inbox.create_new("1-2-c.txt"),
            Err(FsError::Exists { .. })
        ));
        assert_eq!(
            std::fs::read(p.ws.join("inbox/1-2-c.txt")).unwrap(),
            b"hello"
        );
    }
}

#[test]
fn an_opened_folder_swapped_for_a_link_still_writes_where_it_was_opened() {
    let p = Place::new();
    for root in p.roots() {
        let inbox = root.create_dir_all("inbox").unwrap();
        std::fs::rename(p.ws.join("inbox"), p.ws.join("moved")).unwrap();
        symlink(&p.outside, p.ws.join("inbox")).unwrap();
        inbox.create_new("doc.txt").unwrap();
        assert!(p.ws.join("moved/doc.txt").is_file());
        assert_eq!(p.outside(), p.untouched());
    }
}

#[test]
fn appending_refuses_links_hard_links_fifos_and_folders() {
    let p = Place::new();
    for root in p.roots() {
        // The link at the file (the memory flush's `memory/<today>.md`).
        std::fs::create_dir_all(p.ws.join("memory")).unwrap();
        symlink(
            p.outside.join("authorized_keys"),
            p.ws.join("memory/2026-01-02.md"),
        )
        .unwrap();
        assert_link(
            root.open_append("memory/2026-01-02.md").unwrap_err(),
            "memory/2026-01-02.md",
        );
        // The link at the folder.
        std::fs::remove_dir_all(p.ws.join("memory")).unwrap();
        symlink(&p.outside, p.ws.join("memory")).unwrap();
        assert_link(
            root.open_append("memory/authorized_keys").unwrap_err(),
            "memory",
        );
        assert_eq!(p.outside(), p.untouched());
        std::fs::remove_file(p.ws.join("memory")).unwrap();

        // A second name of an outside file.
        std::fs::create_dir_all(p.ws.join("memory")).unwrap();
        std::fs::hard_link(
            p.outside.join("authorized_keys"),
            p.ws.join("memory/hard.md"),
        )
        .unwrap();
        match root.open_append("memory/hard.md").unwrap_err() {
            e @ FsError::HardLinked { links: 2, .. } => {
                assert!(e.to_string().contains("has 2 hard links"), "{e}")
            }
            other => panic!("{other}"),
        }
        assert_eq!(p.outside(), p.untouched());

        // A FIFO with no reader: refused at once, not a blocked thread.
        let fifo = std::ffi::CString::new(p.ws.join("memory/fifo.md").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let start = Instant::now();
        match root.open_append("memory/fifo.md").unwrap_err() {
            e @ FsError::NotRegular { .. } => assert!(e.to_string().contains("FIFO"), "{e}"),
            other => panic!("{other}"),
        }
        assert!(start.elapsed() < Duration::from_secs(2));
        std::fs::create_dir_all(p.ws.join("memory/dir.md")).unwrap();
        assert!(matches!(
            root.open_append("memory/dir.md"),
            Err(FsError::NotRegular {
                kind: "a folder",
                ..
            })
        ));

        // An ordinary file: created, then appended to.
        for line in ["one\n", "two\n"] {
            let mut f = root.open_append("memory/notes.md").unwrap();
            std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(p.ws.join("memory/notes.md")).unwrap(),
            "one\ntwo\n"
        );
    }
}

#[test]
fn an_atomic_write_replaces_a_file_but_never_a_link_and_leaves_no_temp_file() {
    let p = Place::new();
    for root in p.roots() {
        let src = root.create_dir_all("src").unwrap();
        src.write_atomic("lib.rs", b"one").unwrap();
        root.write_atomic("src/lib.rs", b"two").unwrap();
        assert_eq!(std::fs::read(p.ws.join("src/lib.rs")).unwrap(), b"two");

        symlink(p.outside.join("authorized_keys"), p.ws.join("src/keys")).unwrap();
        assert_link(root.write_atomic("src/keys", b"x").unwrap_err(), "src/keys");
        symlink(&p.outside, p.ws.join("out")).unwrap();
        assert_link(
            root.write_atomic("out/authorized_keys", b"x").unwrap_err(),
            "out",
        );
        std::fs::create_dir_all(p.ws.join("src/folder")).unwrap();
        assert!(matches!(
            root.write_atomic("src/folder", b"x"),
            Err(FsError::NotRegular { .. })
        ));
        assert_eq!(p.outside(), p.untouched());
        let left: Vec<_> = std::fs::read_dir(p.ws.join("src"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".pincer-write"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn links_planted_at_the_next_temporary_names_are_skipped_not_followed() {
    let p = Place::new();
    for root in p.roots() {
        // Other tests of this process may take some of these names first;
        // whichever this write gets, it never writes through a link.
        let next = crate::dir::next_temp();
        for n in next..next + 3 {
            symlink(
                p.outside.join("authorized_keys"),
                p.ws.join(crate::dir::temp_name(n)),
            )
            .unwrap();
        }
        root.write_atomic("notes.md", b"mine").unwrap();
        assert_eq!(std::fs::read(p.ws.join("notes.md")).unwrap(), b"mine");
        assert_eq!(p.outside(), p.untouched());
        for n in next..next + 3 {
            assert!(p.ws.join(crate::dir::temp_name(n)).is_symlink());
        }
    }
}

#[test]
fn removing_takes_the_name_never_what_a_link_points_to() {
    let p = Place::new();
    for root in p.roots() {
        symlink(&p.outside, p.ws.join("out")).unwrap();
        assert_link(root.remove_file("out/authorized_keys").unwrap_err(), "out");
        symlink(p.outside.join("authorized_keys"), p.ws.join("keys")).unwrap();
        root.remove_file("keys").unwrap();
        assert!(std::fs::symlink_metadata(p.ws.join("keys")).is_err());
        assert_eq!(p.outside(), p.untouched());
        std::fs::write(p.ws.join("gone.txt"), "x").unwrap();
        root.remove_file("gone.txt").unwrap();
        assert!(!p.ws.join("gone.txt").exists());
        assert!(matches!(
            root.remove_file("gone.txt"),
            Err(FsError::Io { .. })
        ));
    }
}

#[test]
fn paths_that_could_lead_out_are_refused_before_any_call() {
    let p = Place::new();
    for root in p.roots() {
        for bad in ["../outside/x", "a/../../outside/x", "/etc/passwd"] {
            assert!(
                matches!(root.create_new(bad), Err(FsError::NotBeneath { .. })),
                "{bad}"
            );
            assert!(matches!(
                root.create_dir_all(bad),
                Err(FsError::NotBeneath { .. })
            ));
        }
        assert!(matches!(
            root.create_new(""),
            Err(FsError::NoFileName { .. })
        ));
    }
    assert_eq!(p.outside(), p.untouched());
}

#[test]
fn the_configured_workspace_path_may_itself_be_a_link() {
    // The user's own link (`~/.pincer/workspace` → a data disk) is
    // resolved when the root is opened; links beneath it are not.
    let p = Place::new();
    let configured = p.ws.parent().unwrap().join("configured");
    symlink(&p.ws, &configured).unwrap();
    let root = Root::open(&configured).unwrap();
    assert_eq!(root.path(), p.ws.canonicalize().unwrap());
    root.create_dir_all("memory").unwrap();
    assert!(p.ws.join("memory").is_dir());

    let missing = p.ws.join("not-yet/ws");
    assert!(matches!(
        Root::open(&missing),
        Err(FsError::Workspace { .. })
    ));
    let made = Root::create(&missing).unwrap();
    assert!(missing.is_dir());
    assert_eq!(made.relative(), Path::new(""));
}

#[test]
fn a_workspace_is_resolved_once_and_a_link_put_on_its_path_later_is_refused() {
    // A workspace configured inside another's: that agent's commands may
    // replace a folder of its path with a link after the start.
    let p = Place::new();
    let nested = p.ws.join("friends/ws");
    let first = Root::create(&nested).unwrap();
    assert_eq!(first.path(), nested.canonicalize().unwrap());
    drop(first);
    std::fs::rename(p.ws.join("friends"), p.ws.join("friends-old")).unwrap();
    symlink(&p.outside, p.ws.join("friends")).unwrap();
    std::fs::create_dir_all(p.outside.join("ws")).unwrap();
    for reached in [Root::open(&nested), Root::create(&nested)] {
        match reached {
            Err(e) => assert!(e.is_link(), "{e}"),
            Ok(root) => panic!("followed the link to {}", root.path().display()),
        }
    }
    assert_eq!(
        std::fs::read_dir(p.outside.join("ws")).unwrap().count(),
        0,
        "nothing was made outside"
    );

    // Removed by its user, the workspace is made again where it was
    // resolved, not where a link would lead now.
    std::fs::remove_file(p.ws.join("friends")).unwrap();
    let again = Root::create(&nested).unwrap();
    assert_eq!(
        again.path(),
        p.ws.canonicalize().unwrap().join("friends/ws")
    );
    assert!(p.ws.join("friends/ws").is_dir());
}
