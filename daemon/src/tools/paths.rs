//! Confinement of file tools to the agent's workspace (SPEC §8.2): a path is
//! resolved lexically against the workspace, then through the filesystem
//! (symlinks included) as far as it exists, and refused if the result is
//! outside the workspace.

use std::path::{Component, Path, PathBuf};

/// Why a path is not one the file tools may use.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("the path contains a NUL byte")]
    Nul,
    #[error("the workspace {} is not accessible: {source}", .root.display())]
    Workspace {
        root: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{requested}` is outside the workspace ({}); file tools can only use paths inside it",
        .root.display()
    )]
    Outside { requested: String, root: PathBuf },
}

/// Resolves `requested` (relative to `root`, or absolute) to a path inside
/// `root`, or says why not.
pub fn confine(root: &Path, requested: &str) -> Result<PathBuf, ConfineError> {
    if requested.contains('\0') {
        return Err(ConfineError::Nul);
    }
    let root = root
        .canonicalize()
        .map_err(|source| ConfineError::Workspace {
            root: root.to_path_buf(),
            source,
        })?;
    let joined = if Path::new(requested).is_absolute() {
        PathBuf::from(requested)
    } else {
        root.join(requested)
    };
    let lexical = normalize(&joined);
    // Resolve symlinks in the part that exists; the rest is appended as-is
    // (it has no components that could be links yet).
    let mut existing = lexical.clone();
    let mut tail = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(real) => {
                let mut p = real;
                for c in tail.iter().rev() {
                    p.push(c);
                }
                break p;
            }
            Err(_) => match (
                existing.file_name().map(|n| n.to_os_string()),
                existing.parent(),
            ) {
                (Some(name), Some(parent)) => {
                    tail.push(name);
                    existing = parent.to_path_buf();
                }
                _ => break lexical.clone(),
            },
        }
    };
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(ConfineError::Outside {
            requested: requested.to_string(),
            root,
        })
    }
}

/// Removes `.` and applies `..` without touching the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` relative to `root` for display (falls back to the full path).
pub fn display_relative(root: &Path, path: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    match path.strip_prefix(&root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_paths_resolve_and_outside_paths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("a")).unwrap();
        let real_root = root.canonicalize().unwrap();
        assert_eq!(
            confine(&root, "a/new.txt").unwrap(),
            real_root.join("a/new.txt")
        );
        assert_eq!(
            confine(&root, "a/../b/c.txt").unwrap(),
            real_root.join("b/c.txt")
        );
        assert_eq!(confine(&root, ".").unwrap(), real_root);
        assert!(confine(&root, "../escape.txt").is_err());
        assert!(confine(&root, "a/../../escape").is_err());
        assert!(confine(&root, "/etc/passwd").is_err());
        assert!(confine(&root, real_root.join("a").to_str().unwrap()).is_ok());
        assert!(confine(&root, "bad\0name").is_err());
    }

    #[test]
    fn symlinks_leaving_the_workspace_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        assert!(confine(&root, "link/secret").is_err());
        assert!(confine(&root, "link/new-file").is_err());
        std::os::unix::fs::symlink(root.join("inner"), root.join("ok-link")).unwrap();
        std::fs::create_dir_all(root.join("inner")).unwrap();
        assert!(confine(&root, "ok-link/x").is_ok());
    }
}
