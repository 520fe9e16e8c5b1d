//! `pincer skills list`: the skills of an agent's workspace and whether the
//! prompt lists them.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::render::one_line;
use crate::rpc;

pub async fn list(ctx: &Ctx, agent: Option<String>) -> Result<u8, CliError> {
    let mut c = rpc::connect(&ctx.home, ctx.explicit_home).await?;
    let r = c
        .skills
        .list(pb::ListSkillsRequest {
            agent: agent.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if ctx.json {
        let skills: Vec<serde_json::Value> = r
            .skills
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "path": s.path, "problem": s.problem}))
            .collect();
        out::json(
            &json!({"agent": r.agent, "workspace": r.workspace, "listed_in_prompt": r.listed_in_prompt, "note": r.note, "skills": skills}),
        );
        return Ok(0);
    }
    if r.skills.is_empty() {
        outln!(
            "agent {} has no skills; add one as {}/skills/<name>/SKILL.md with a front matter block:\n---\nname: <name>\ndescription: <when to use it>\n---",
            r.agent,
            r.workspace
        );
        return Ok(0);
    }
    for s in &r.skills {
        outln!("{:<28} {}", s.name, one_line(&s.description, 90));
        outln!("{:<28} {}", "", s.path);
        if !s.problem.is_empty() {
            outln!("{:<28} ! {}", "", s.problem);
        }
    }
    if !r.note.is_empty() {
        outln!("\n{}", r.note);
    }
    Ok(0)
}
