//! Fetching an attachment: `getFile` for its path, then the file itself,
//! streamed into the file the bridge created (in the chat's folder,
//! through the workspace opener) with a running count, so a file larger
//! than allowed is refused without ever being held whole. The bridge
//! removes the file when this fails.

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

fn cannot_write(e: std::io::Error) -> SendError {
    SendError::Permanent(format!("cannot write the file: {e}"))
}

/// Downloads `attachment` into `dest`, a new empty file; answers the bytes
/// written.
pub(crate) async fn download(
    api: &Api,
    attachment: &Attachment,
    dest: std::fs::File,
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
    let mut out = tokio::fs::File::from_std(dest);
    let mut count: u64 = 0;
    while let Some(chunk) = response.chunk().await.map_err(|e| send_error(network(e)))? {
        count += chunk.len() as u64;
        if count > max_bytes {
            return Err(too_big(count, max_bytes));
        }
        out.write_all(&chunk).await.map_err(cannot_write)?;
    }
    out.flush().await.map_err(cannot_write)?;
    Ok(count)
}
