//! The user guide (`docs/`, an mdBook) builds with the pinned mdbook, and
//! its links hold: every link between pages of the built book leads to a
//! page that exists and, with a `#fragment`, to an element with that id;
//! every chapter is in `SUMMARY.md`; and the links from README.md,
//! CONTRIBUTING.md and ARCHITECTURE.md into the repository lead to files
//! that exist (into the guide, to the heading named too). All offline.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use pincer_testkit::peers::peers_dir;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// The mdbook tests/setup.sh installs, or a failure that says how.
fn mdbook() -> PathBuf {
    let path = peers_dir().join("mdbook/bin/mdbook");
    assert!(
        path.is_file(),
        "mdbook is not installed at {}: run `bash tests/setup.sh` (it installs mdbook 0.5.4 from crates.io with `cargo install`)",
        path.display()
    );
    path
}

/// Builds the book into a temporary folder.
fn build() -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("a temporary folder");
    let done = Command::new(mdbook())
        .arg("build")
        .arg(repo().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .expect("mdbook runs");
    assert!(
        done.status.success(),
        "mdbook build docs failed:\n{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    out
}

/// The values of `attr="…"` in an HTML page.
fn attributes<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    html.match_indices(&needle)
        .filter_map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

fn external(link: &str) -> bool {
    ["http://", "https://", "mailto:", "//"]
        .iter()
        .any(|scheme| link.starts_with(scheme))
}

/// Decodes the `%xx` escapes mdbook writes in hrefs.
fn unescape(link: &str) -> String {
    let bytes = link.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = link
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `page` (an HTML file of the book) has an element with `id`.
fn has_id(page: &Path, id: &str) -> bool {
    let html = std::fs::read_to_string(page).unwrap_or_default();
    attributes(&html, "id").contains(&id)
}

fn html_pages(dir: &Path) -> Vec<PathBuf> {
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the built book") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            pages.extend(html_pages(&path));
        } else if path.extension().is_some_and(|e| e == "html") {
            pages.push(path);
        }
    }
    pages
}

#[test]
fn the_guide_builds_and_every_link_in_it_holds() {
    let out = build();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in html_pages(out.path()) {
        let name = page.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // The print page repeats every chapter with rewritten anchors;
        // 404 and the table of contents are mdbook's own.
        if ["print.html", "404.html", "toc.html"].contains(&name) {
            continue;
        }
        let html = std::fs::read_to_string(&page).expect("a page");
        // Only the chapter's own text: the navigation around it is mdbook's.
        let body = html
            .split_once("<main>")
            .and_then(|(_, rest)| rest.split_once("</main>"))
            .map_or(html.as_str(), |(main, _)| main);
        for link in attributes(body, "href") {
            if external(link) {
                continue;
            }
            checked += 1;
            let link = unescape(link);
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a folder").join(file)
            };
            let relative = page
                .strip_prefix(out.path())
                .unwrap_or(&page)
                .display()
                .to_string();
            if !target.is_file() {
                broken.push(format!("{relative}: {link} (no such page)"));
            } else if !fragment.is_empty() && !has_id(&target, fragment) {
                broken.push(format!(
                    "{relative}: {link} (no heading `#{fragment}` there)"
                ));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the book's HTML laid out as expected?"
    );
    assert!(
        broken.is_empty(),
        "broken links in the guide:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_chapter_is_in_the_summary() {
    let src = repo().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("SUMMARY.md");
    let listed: BTreeSet<String> = summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_owned)
        .collect();
    let mut orphans = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/src") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path
                    .strip_prefix(&src)
                    .expect("inside")
                    .display()
                    .to_string();
                if rel != "SUMMARY.md" && !listed.contains(&rel) {
                    orphans.push(rel);
                }
            }
        }
    }
    assert!(
        orphans.is_empty(),
        "chapters missing from docs/src/SUMMARY.md: {orphans:?}"
    );
}

/// The repository's front pages link to files that exist, and into the
/// guide to headings that exist.
#[test]
fn the_front_pages_link_to_what_exists() {
    let out = build();
    let root = repo();
    let mut broken = Vec::new();
    for doc in ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect(doc);
        for link in text
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
        {
            if external(link) || link.starts_with('#') {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
            if !root.join(file).exists() {
                broken.push(format!("{doc}: {link} (no such file)"));
                continue;
            }
            if fragment.is_empty() {
                continue;
            }
            let page = file
                .strip_prefix("docs/src/")
                .map(|chapter| out.path().join(chapter.replace(".md", ".html")));
            if page.is_none_or(|page| !has_id(&page, fragment)) {
                broken.push(format!(
                    "{doc}: {link} (no heading `#{fragment}` in the guide)"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
