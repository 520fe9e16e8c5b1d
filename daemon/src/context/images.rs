//! Images of user messages (a photo sent in a chat) for a model with
//! vision. The transcript keeps each image as a path relative to the
//! agent's workspace (`Body::User::images`), never its bytes; the request
//! to the model reads the file again, through the file tools' rules: the
//! name confined to the workspace (`tools::paths::confine`), then a
//! regular file opened without following a swapped-in link or blocking on
//! a FIFO (`tools::open::open_regular`). An image that cannot be sent —
//! gone, too large, not one of the four types both wire formats take —
//! is left out, quietly: the message's text still names the file, so the
//! model can still `read` it or say it cannot see it.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine as _;

use crate::config::{AgentSettings, FsSettings};
use crate::llm::Part;

/// The largest image file sent, in bytes: 3.75 MiB, whose base64 is
/// Anthropic's 5 MiB limit per image (it measures the encoded string;
/// OpenAI allows more). A Telegram photo is far smaller; a larger
/// document stays a text note.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024 / 4 * 3;

/// Reads the images of one agent's workspace for its requests, each file
/// once per loader (a turn rebuilds its request for every model call).
pub struct ImageLoader {
    workspace: PathBuf,
    fs: FsSettings,
    cache: Mutex<HashMap<String, Option<Part>>>,
}

impl ImageLoader {
    pub fn new(workspace: PathBuf, fs: FsSettings) -> Self {
        Self {
            workspace,
            fs,
            cache: Mutex::default(),
        }
    }

    /// The loader for `agent`'s requests; `None` when none of its models
    /// has `vision`, so nothing is read for a model that cannot see it.
    /// Any of them rather than the first: a fallback with vision gets the
    /// images, and the wire formats leave them out for the others.
    pub fn for_agent(agent: &AgentSettings, fs: FsSettings) -> Option<Self> {
        agent
            .models
            .iter()
            .any(|m| m.vision)
            .then(|| Self::new(agent.workspace.clone(), fs))
    }

    /// The image at `path` (relative to the workspace) as an image part,
    /// or `None` when it cannot be sent (the reason is logged).
    pub fn load(&self, path: &str) -> Option<Part> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(path.to_string())
            .or_insert_with(|| match self.read(path) {
                Ok(part) => Some(part),
                Err(why) => {
                    tracing::info!(image = path, "image left out of the request: {why}");
                    None
                }
            })
            .clone()
    }

    fn read(&self, path: &str) -> Result<Part, String> {
        let real =
            crate::tools::paths::confine(&self.workspace, path).map_err(|e| e.to_string())?;
        let file =
            crate::tools::open::open_regular(&real, path, self.fs).map_err(|e| e.to_string())?;
        let mut bytes = Vec::new();
        // `take`: the file may grow after it was saved.
        file.take(MAX_IMAGE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
        if bytes.len() as u64 > MAX_IMAGE_BYTES {
            return Err(format!(
                "`{path}` is larger than the {MAX_IMAGE_BYTES} bytes an image may have"
            ));
        }
        let media_type = media_type(&bytes).ok_or_else(|| {
            format!("`{path}` is not a JPEG, PNG, GIF or WebP image (by its first bytes)")
        })?;
        Ok(Part::Image {
            media_type: media_type.to_string(),
            data: Arc::from(base64::engine::general_purpose::STANDARD.encode(&bytes)),
        })
    }
}

/// The media type of an image file by its first bytes, for the four types
/// both wire formats take (`llm::IMAGE_TYPES`). By content, not by name:
/// a document called `x.png` may be anything, and a provider refuses an
/// image whose declared type does not match its bytes.
pub fn media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_types_are_told_by_their_first_bytes() {
        assert_eq!(media_type(b"\xff\xd8\xff\xe0rest"), Some("image/jpeg"));
        assert_eq!(media_type(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(media_type(b"GIF89a...."), Some("image/gif"));
        assert_eq!(media_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(media_type(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(media_type(b"%PDF-1.7"), None);
        assert_eq!(media_type(b""), None);
        for t in [b"\xff\xd8\xff".as_slice(), b"\x89PNG\r\n\x1a\n", b"GIF87a"] {
            assert!(crate::llm::IMAGE_TYPES.contains(&media_type(t).unwrap()));
        }
    }

    #[test]
    fn an_image_is_read_as_base64_and_anything_else_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir(ws.join("inbox")).unwrap();
        std::fs::write(ws.join("inbox/p.jpg"), b"\xff\xd8\xff\xe0").unwrap();
        std::fs::write(ws.join("inbox/notes.png"), b"not an image").unwrap();
        std::fs::write(
            ws.join("inbox/big.jpg"),
            [
                &[0xFF, 0xD8, 0xFF][..],
                &vec![0u8; MAX_IMAGE_BYTES as usize],
            ]
            .concat(),
        )
        .unwrap();
        std::fs::write(dir.path().with_extension("jpg"), b"\xff\xd8\xff").unwrap();
        let loader = ImageLoader::new(ws.to_path_buf(), FsSettings::default());
        assert_eq!(
            loader.load("inbox/p.jpg"),
            Some(Part::Image {
                media_type: "image/jpeg".into(),
                data: "/9j/4A==".into()
            })
        );
        assert_eq!(loader.load("inbox/notes.png"), None, "not an image");
        assert_eq!(loader.load("inbox/big.jpg"), None, "over the cap");
        assert_eq!(loader.load("inbox/gone.jpg"), None, "missing");
        let outside = dir.path().with_extension("jpg").display().to_string();
        assert_eq!(loader.load(&outside), None, "outside the workspace");
        std::os::unix::fs::symlink(dir.path().with_extension("jpg"), ws.join("inbox/l.jpg"))
            .unwrap();
        assert_eq!(loader.load("inbox/l.jpg"), None, "a link out of it");
        std::fs::remove_file(dir.path().with_extension("jpg")).unwrap();
    }
}
