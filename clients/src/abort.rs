//! `pincer abort`: stop a session's running turn (model stream and tools).

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::cli::Target;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::rpc;

pub async fn run(ctx: &Ctx, target: Target) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .agent
        .abort(pb::AbortRequest {
            agent: target.agent.unwrap_or_default(),
            session: target.session.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if ctx.json {
        out::json(&json!({"aborted": r.aborted}));
    } else if r.aborted {
        outln!("aborted the running turn");
    } else {
        outln!("no turn was running in that session");
    }
    Ok(0)
}
