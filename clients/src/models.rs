//! `pincer models fetch`: the embedding model, fetched by `pincerd
//! fetch-model` (pincerd has the HTTP client; this binary has none), so a
//! package user needs no source folder and no Python.

use std::ffi::OsStr;
use std::path::PathBuf;

use serde_json::json;

use crate::error::CliError;
use crate::{Ctx, out, pincerd};

pub fn fetch(ctx: &Ctx, dir: Option<PathBuf>, from: Option<String>) -> Result<u8, CliError> {
    let mut args: Vec<&OsStr> = vec![OsStr::new("fetch-model")];
    if let Some(d) = &dir {
        args.extend([OsStr::new("--dir"), d.as_os_str()]);
    }
    if let Some(u) = &from {
        args.extend([OsStr::new("--from"), OsStr::new(u.as_str())]);
    }
    if !ctx.json {
        return pincerd::run_attached(&ctx.home, &args);
    }
    let result = pincerd::run(&ctx.home, &args)?;
    let code = result.status.code().unwrap_or(1).clamp(0, 255) as u8;
    if code != 0 {
        let stderr = String::from_utf8_lossy(&result.stderr);
        return Err(CliError::new(
            code,
            stderr.trim().trim_start_matches("pincerd: "),
        ));
    }
    let stdout = String::from_utf8_lossy(&result.stdout);
    out::json(&json!({
        "fetched": true,
        "message": stdout.lines().last().unwrap_or_default(),
    }));
    Ok(0)
}
