//! Skills (SPEC §9): `skills/<name>/SKILL.md` in an agent's workspace, each
//! with a front matter block naming it and saying when it applies. The
//! prompt lists name and description only; the model reads the whole file
//! with `read` when a task calls for it, so a hundred skills cost a hundred
//! lines, not a hundred files.
//!
//! The front matter is YAML, but a skill needs exactly two string keys, so
//! this reads `key: value` lines (plain, quoted, or `|` / `>` blocks)
//! rather than pulling a YAML library into the daemon.

use std::path::Path;

/// Skills listed in the prompt at most (the rest are reported).
pub const MAX_LISTED: usize = 100;
/// Characters of a description shown in the prompt.
pub const MAX_DESCRIPTION: usize = 300;

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Relative to the workspace: `skills/<dir>/SKILL.md`.
    pub path: String,
    /// Why the skill is incomplete (no front matter, no description).
    pub problem: Option<String>,
}

/// Bytes of a `SKILL.md` read at most (only its front matter is used).
const MAX_SKILL_BYTES: u64 = 1 << 20;

/// The skills of a workspace, sorted by folder name. Folders without a
/// `SKILL.md` are ignored; links are not followed.
pub fn discover(workspace: &Path) -> Vec<Skill> {
    let Ok(dir) = std::fs::read_dir(workspace.join("skills")) else {
        return Vec::new();
    };
    let mut folders: Vec<String> = dir
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    folders.sort();
    let mut out = Vec::new();
    for folder in folders {
        let path = workspace.join("skills").join(&folder).join("SKILL.md");
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(bytes) = crate::util::read_regular(&path, MAX_SKILL_BYTES) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        out.push(parse(&folder, &text));
    }
    out
}

/// A skill from its folder name and the text of its `SKILL.md`.
pub fn parse(folder: &str, text: &str) -> Skill {
    let path = format!("skills/{folder}/SKILL.md");
    let Some(block) = front_matter(text) else {
        return Skill {
            name: folder.to_string(),
            description: String::new(),
            path,
            problem: Some("no front matter (a `---` block with name and description)".into()),
        };
    };
    let name = field(block, "name").filter(|n| !n.is_empty());
    let description = field(block, "description").unwrap_or_default();
    let problem = description
        .is_empty()
        .then(|| "the front matter has no description".to_string());
    Skill {
        name: name.unwrap_or_else(|| folder.to_string()),
        description: one_line(&description, MAX_DESCRIPTION),
        path,
        problem,
    }
}

/// The text between a leading `---` line and the next `---` line.
fn front_matter(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..offset]);
        }
        offset += line.len();
    }
    None
}

/// The string value of a top-level `key:` in a front matter block.
fn field(block: &str, key: &str) -> Option<String> {
    let lines: Vec<&str> = block.lines().collect();
    let (i, value) = lines.iter().enumerate().find_map(|(i, line)| {
        let rest = line.strip_prefix(key)?.trim_start();
        Some((i, rest.strip_prefix(':')?.trim()))
    })?;
    if let Some(style) = value.chars().next().filter(|c| *c == '|' || *c == '>') {
        let body: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.starts_with(' ') || l.starts_with('\t'))
            .map(|l| l.trim())
            .collect();
        let sep = if style == '|' { "\n" } else { " " };
        return Some(body.join(sep).trim().to_string());
    }
    let unquoted = if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        inner.replace("\\\"", "\"").replace("\\n", " ")
    } else if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        inner.replace("''", "'")
    } else {
        // A plain scalar ends at a comment.
        value.split(" #").next().unwrap_or(value).trim().to_string()
    };
    Some(unquoted)
}

/// Whitespace collapsed to single spaces, cut at `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let cut: String = joined.chars().take(max - 1).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_quoted_and_block_values() {
        let s = parse(
            "tdd",
            "---\nname: test-driven-development\ndescription: \"Write the test first: red, green, refactor.\"\n---\n# TDD\n",
        );
        assert_eq!(s.name, "test-driven-development");
        assert_eq!(s.description, "Write the test first: red, green, refactor.");
        assert_eq!(s.path, "skills/tdd/SKILL.md");
        assert_eq!(s.problem, None);

        let s = parse(
            "x",
            "---\nname: 'it''s'\ndescription: >\n  Folded over\n  two lines.\nlicense: MIT\n---\n",
        );
        assert_eq!(s.name, "it's");
        assert_eq!(s.description, "Folded over two lines.");

        let s = parse(
            "x",
            "---\r\nname: plain # a comment\r\ndescription: d\r\n---\r\n",
        );
        assert_eq!(s.name, "plain");
        assert_eq!(s.description, "d");
    }

    #[test]
    fn missing_parts_are_reported_not_fatal() {
        let s = parse("notes", "# just markdown\n");
        assert_eq!(s.name, "notes");
        assert!(s.problem.unwrap().contains("no front matter"));
        let s = parse("n", "---\nname: n\n---\n");
        assert!(s.problem.unwrap().contains("no description"));
        // An unterminated block is not front matter.
        assert!(parse("n", "---\nname: n\n").problem.is_some());
    }

    #[test]
    fn long_descriptions_are_cut_to_one_line() {
        let long = "word ".repeat(200);
        let s = parse("n", &format!("---\ndescription: {long}\n---\n"));
        assert_eq!(s.description.chars().count(), MAX_DESCRIPTION);
        assert!(s.description.ends_with('…'));
    }

    #[test]
    fn discover_sorts_folders_and_skips_those_without_skill_md() {
        let dir = tempfile::tempdir().unwrap();
        for (folder, body) in [
            ("zeta", "---\nname: zeta\ndescription: last\n---\n"),
            ("alpha", "---\nname: alpha\ndescription: first\n---\n"),
        ] {
            std::fs::create_dir_all(dir.path().join("skills").join(folder)).unwrap();
            std::fs::write(
                dir.path().join("skills").join(folder).join("SKILL.md"),
                body,
            )
            .unwrap();
        }
        std::fs::create_dir_all(dir.path().join("skills/empty")).unwrap();
        let names: Vec<String> = discover(dir.path()).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["alpha", "zeta"]);
        assert!(discover(&dir.path().join("missing")).is_empty());
    }
}
