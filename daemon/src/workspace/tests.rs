//! A link planted at each path of the table in `workspace.rs` (and, for
//! the memory flush's append, a second hard link): nothing is written
//! outside the workspace, the refusal is a sentence naming the link, and
//! the same sentence is in the log.

use std::io::Write as _;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::*;

const KEYS: &str = "ssh-ed25519 AAAA the user's own key\n";

/// A workspace and a folder beside it holding a precious file.
struct Place {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("workspace");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("authorized_keys"), KEYS).unwrap();
        Self {
            _dir: dir,
            ws,
            outside,
        }
    }

    /// Replaces `rel` in the workspace by a link to `to`.
    fn plant(&self, rel: &str, to: &Path) {
        let at = self.ws.join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        if at.is_dir() && !at.is_symlink() {
            std::fs::remove_dir_all(&at).unwrap();
        } else if std::fs::symlink_metadata(&at).is_ok() {
            std::fs::remove_file(&at).unwrap();
        }
        symlink(to, at).unwrap();
    }

    /// The outside folder holds only the key file, as it was.
    fn assert_untouched(&self, case: &str) {
        let names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["authorized_keys"], "{case}");
        assert_eq!(
            std::fs::read_to_string(self.outside.join("authorized_keys")).unwrap(),
            KEYS,
            "{case}"
        );
    }
}

/// Runs `f` with the log captured; answers its result and the log.
fn logging<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let log = String::from_utf8_lossy(&buffer.0.lock().unwrap()).into_owned();
    (out, log)
}

/// `result` is the refusal of the link `link`, and the log says so.
fn assert_refused<T: std::fmt::Debug>(
    case: &str,
    link: &str,
    (result, log): (Result<T, FsError>, String),
) {
    let e = result.expect_err(case);
    assert!(e.is_link(), "{case}: {e}");
    let sentence = e.to_string();
    assert!(
        sentence.starts_with(&format!("`{link}` in "))
            && sentence.ends_with(
                "is a symbolic link; pincerd does not write through links in a workspace"
            ),
        "{case}: {sentence}"
    );
    assert!(
        log.contains("WARN") && log.contains(&sentence),
        "{case}: {log}"
    );
}

fn group() -> Principal {
    Principal::Group {
        channel: "telegram".into(),
        chat: "-100".into(),
    }
}

#[test]
fn each_chats_attachments_folder_is_made_beneath_the_inbox() {
    let p = Place::new();
    let person = Principal::Person {
        channel: "telegram".into(),
        user: "42".into(),
    };
    for (principal, folder) in [
        (Principal::Owner, "inbox"),
        (person, "inbox/telegram-dm-42"),
        (group(), "inbox/telegram-group--100"),
    ] {
        let dir = chat_inbox(&p.ws, &principal).unwrap();
        assert_eq!(dir.relative(), Path::new(folder));
        assert!(p.ws.join(folder).is_dir(), "{folder}");
    }
}

#[test]
fn the_inbox_or_a_chats_folder_planted_as_a_link_is_refused() {
    for (principal, planted) in [
        (Principal::Owner, "inbox"),
        (group(), "inbox"),
        (group(), "inbox/telegram-group--100"),
    ] {
        let p = Place::new();
        p.plant(planted, &p.outside);
        assert_refused(planted, planted, logging(|| chat_inbox(&p.ws, &principal)));
        p.assert_untouched(planted);
    }
}

#[test]
fn an_attachment_name_planted_as_a_link_is_refused() {
    // The name is predictable (`<message>-<n>-<name>`): a command in the
    // chat's folder can put a link there before the document arrives.
    let p = Place::new();
    let folder = chat_inbox(&p.ws, &group()).unwrap();
    p.plant(
        "inbox/telegram-group--100/100-5-0-keys",
        &p.outside.join("authorized_keys"),
    );
    let e = folder.create_new("100-5-0-keys").unwrap_err();
    assert!(e.is_link(), "{e}");
    assert!(
        e.to_string()
            .starts_with("`inbox/telegram-group--100/100-5-0-keys` in "),
        "{e}"
    );
    p.assert_untouched("the attachment's name");
}

#[test]
fn the_memory_flush_appends_to_todays_file_only() {
    let p = Place::new();
    for text in ["one\n", "two\n"] {
        assert_eq!(
            append_memory_notes(&p.ws, "2026-01-02.md", text).unwrap(),
            "memory/2026-01-02.md"
        );
    }
    assert_eq!(
        std::fs::read_to_string(p.ws.join("memory/2026-01-02.md")).unwrap(),
        "one\ntwo\n"
    );

    // `memory` itself a link.
    let p = Place::new();
    p.plant("memory", &p.outside);
    assert_refused(
        "memory",
        "memory",
        logging(|| append_memory_notes(&p.ws, "authorized_keys", "model text")),
    );
    p.assert_untouched("memory");

    // Today's file a link to an outside file.
    let p = Place::new();
    p.plant("memory/2026-01-02.md", &p.outside.join("authorized_keys"));
    assert_refused(
        "today's file",
        "memory/2026-01-02.md",
        logging(|| append_memory_notes(&p.ws, "2026-01-02.md", "model text")),
    );
    p.assert_untouched("today's file");

    // Today's file a second name of an outside file.
    let p = Place::new();
    std::fs::create_dir_all(p.ws.join("memory")).unwrap();
    std::fs::hard_link(
        p.outside.join("authorized_keys"),
        p.ws.join("memory/2026-01-02.md"),
    )
    .unwrap();
    let e = append_memory_notes(&p.ws, "2026-01-02.md", "model text").unwrap_err();
    assert!(matches!(e, FsError::HardLinked { links: 2, .. }), "{e}");
    assert!(e.to_string().contains("has 2 hard links"), "{e}");
    p.assert_untouched("a hard link");
}

#[test]
fn file_tool_writes_refuse_a_link_at_the_folder_and_at_the_target() {
    let p = Place::new();
    write_file(&p.ws, Path::new("src/lib.rs"), b"fn main() {}").unwrap();
    write_file(&p.ws, Path::new("src/lib.rs"), b"fn main() { }").unwrap();
    assert_eq!(
        std::fs::read_to_string(p.ws.join("src/lib.rs")).unwrap(),
        "fn main() { }"
    );
    let temps: Vec<_> = std::fs::read_dir(p.ws.join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".pincer-write"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");

    // A folder on the way (made by the write, or there already).
    p.plant("notes", &p.outside);
    assert_refused(
        "a folder on the way",
        "notes",
        logging(|| write_file(&p.ws, Path::new("notes/authorized_keys"), b"x")),
    );
    assert_refused(
        "a new folder under a link",
        "notes",
        logging(|| write_file(&p.ws, Path::new("notes/new/x.md"), b"x")),
    );
    // The target itself.
    p.plant("keys.md", &p.outside.join("authorized_keys"));
    assert_refused(
        "the target",
        "keys.md",
        logging(|| write_file(&p.ws, Path::new("keys.md"), b"x")),
    );
    p.assert_untouched("file tool writes");
}

#[test]
fn file_tool_removals_refuse_a_link_on_the_way() {
    let p = Place::new();
    p.plant("old", &p.outside);
    assert_refused(
        "a removal",
        "old",
        logging(|| remove_file(&p.ws, Path::new("old/authorized_keys"))),
    );
    p.assert_untouched("a removal");
}

#[test]
fn a_chats_own_folder_for_exec_is_not_made_through_a_link() {
    for planted in ["inbox", "inbox/telegram-group--100"] {
        let p = Place::new();
        p.plant(planted, &p.outside);
        assert_refused(
            planted,
            planted,
            logging(|| make_dir(&p.ws, Path::new("inbox/telegram-group--100"))),
        );
        p.assert_untouched(planted);
    }
}

#[test]
fn a_workspace_that_cannot_be_made_is_a_sentence() {
    let p = Place::new();
    let blocked = p.ws.join("file");
    let mut f = std::fs::File::create(&blocked).unwrap();
    f.write_all(b"x").unwrap();
    let e = create(&blocked.join("ws")).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "the workspace {} cannot be opened: ",
            blocked.join("ws").display()
        )),
        "{e}"
    );
}
