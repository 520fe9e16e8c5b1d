//! Fetching an attachment: `getFile` for its path, then the file itself,
//! streamed to disk with a running count so a file larger than allowed
//! is refused without ever being held whole, and a half-written file is
//! never left behind.

use std::path::Path;
use std::time::Duration;

use pincer_channel::{Attachment, SendError};
use serde_json::Value;
use teloxide_core::payloads::GetFile;
use teloxide_core::types::FileId;
use tokio::io::AsyncWriteExt;

use crate::api::{Api, Failure, network};
use crate::error::send_error;

/// The longest a download may take (20 MB on a slow link).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

fn too_big(size: u64, max: u64) -> SendError {
    SendError::Permanent(format!(
        "the file is larger than the limit ({size} bytes, at most {max} allowed)"
    ))
}

/// Downloads `attachment` into `dest` (created, never overwritten);
/// answers the bytes written.
pub(crate) async fn download(
    api: &Api,
    attachment: &Attachment,
    dest: &Path,
    max_bytes: u64,
) -> Result<u64, SendError> {
    let file = api
        .call(&GetFile::new(FileId(attachment.id.clone())))
        .await
        .map_err(send_error)?;
    if let Some(size) = file.get("file_size").and_then(Value::as_u64)
        && size > max_bytes
    {
        return Err(too_big(size, max_bytes));
    }
    let Some(path) = file.get("file_path").and_then(Value::as_str) else {
        return Err(SendError::Permanent(
            "Telegram gives no download for this file (the Bot API serves files up to 20 MB)"
                .into(),
        ));
    };
    let mut response = api
        .client()
        .get(api.file_url(path))
        .timeout(DOWNLOAD_TIMEOUT)
        .send()
        .await
        .map_err(|e| send_error(network(e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(send_error(Failure::Api {
            status: status.as_u16(),
            description: format!("the file download answered HTTP {}", status.as_u16()),
            retry_after: None,
        }));
    }
    if let Some(size) = response.content_length()
        && size > max_bytes
    {
        return Err(too_big(size, max_bytes));
    }
    let mut out = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => SendError::Permanent(format!(
                "{} exists already; it is not overwritten",
                dest.display()
            )),
            _ => SendError::Permanent(format!("cannot create {}: {e}", dest.display())),
        })?;
    // From here on the file is ours: any failure removes it.
    let written = async {
        let mut count: u64 = 0;
        while let Some(chunk) = response.chunk().await.map_err(|e| send_error(network(e)))? {
            count += chunk.len() as u64;
            if count > max_bytes {
                return Err(too_big(count, max_bytes));
            }
            out.write_all(&chunk).await.map_err(|e| {
                SendError::Permanent(format!("cannot write {}: {e}", dest.display()))
            })?;
        }
        out.flush()
            .await
            .map_err(|e| SendError::Permanent(format!("cannot write {}: {e}", dest.display())))?;
        Ok(count)
    }
    .await;
    drop(out);
    if written.is_err() {
        let _ = tokio::fs::remove_file(dest).await;
    }
    written
}
