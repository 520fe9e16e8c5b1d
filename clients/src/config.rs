//! `pincer config check` (asks `pincerd check-config`, so it checks the file
//! on disk with the daemon's own rules, running or not; its `note:` and
//! `warning:` lines become `notes` and `warnings` in `--json`) and `pincer
//! config reload` (applies the file to the running daemon).

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::error::CliError;
use crate::out::{self, err, out, outln};
use crate::{pincerd, rpc};

pub fn check(ctx: &Ctx) -> Result<u8, CliError> {
    let result = pincerd::run(&ctx.home, &["check-config"])?;
    let code = result.status.code().unwrap_or(1).clamp(0, 255) as u8;
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    if !ctx.json {
        out!("{stdout}");
        err!("{stderr}");
        return Ok(code);
    }
    if code != 0 {
        let message = stderr.trim().trim_start_matches("pincerd: ");
        return Err(CliError::new(code, message));
    }
    let lines: Vec<&str> = stdout.lines().collect();
    let after = |prefix: &str| -> Vec<&str> {
        lines
            .iter()
            .skip(1)
            .filter_map(|l| l.strip_prefix(prefix))
            .collect()
    };
    out::json(&json!({
        "valid": true,
        "path": ctx.home.join("config.toml"),
        "exists": ctx.home.join("config.toml").exists(),
        "message": lines.first().copied().unwrap_or_default(),
        "notes": after("note: "),
        "warnings": after("warning: "),
    }));
    Ok(0)
}

pub async fn reload(ctx: &Ctx) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c.daemon.reload(pb::ReloadRequest {}).await?.into_inner();
    if ctx.json {
        out::json(&json!({"applied": r.applied, "needs_restart": r.needs_restart}));
        return Ok(0);
    }
    if r.applied.is_empty() && r.needs_restart.is_empty() {
        outln!("config reloaded: nothing changed");
    }
    for a in &r.applied {
        outln!("applied: {a}");
    }
    for n in &r.needs_restart {
        outln!("needs a restart of pincerd: {n}");
    }
    Ok(0)
}
