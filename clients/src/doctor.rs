//! `pincer doctor`: the daemon's findings when it answers, else pincerd's
//! offline checks; one sentence per finding, exit 1 if any is an error.

use pincer_proto::v1 as pb;
use serde_json::json;

use crate::Ctx;
use crate::error::CliError;
use crate::out::{self, outln};
use crate::{pincerd, rpc};

struct Finding {
    level: String,
    subject: String,
    message: String,
}

pub async fn run(ctx: &Ctx, fix: bool) -> Result<u8, CliError> {
    let mut findings: Vec<Finding> = Vec::new();
    match rpc::connect(&ctx.home, ctx.explicit_home).await {
        Ok(mut c) => {
            findings.push(Finding {
                level: "ok".into(),
                subject: "socket".into(),
                message: "pincerd answers on its socket".into(),
            });
            // The daemon repairs with its own environment (the tokens).
            let r = c
                .daemon
                .doctor(pb::DoctorRequest { fix })
                .await?
                .into_inner();
            findings.extend(r.findings.into_iter().map(|f| Finding {
                level: f.level,
                subject: f.subject,
                message: f.message,
            }));
        }
        Err(e) => {
            findings.push(Finding {
                level: "error".into(),
                subject: "socket".into(),
                message: e.message,
            });
            // Without the daemon, check the config and providers directly.
            let args: &[&str] = if fix {
                &["doctor", "--fix"]
            } else {
                &["doctor"]
            };
            let result = pincerd::run(&ctx.home, args)?;
            findings.extend(parse(&result.stdout));
        }
    }
    let failed = findings.iter().any(|f| f.level == "error");
    if ctx.json {
        let v: Vec<_> = findings
            .iter()
            .map(|f| json!({"level": f.level, "subject": f.subject, "message": f.message}))
            .collect();
        out::json(&serde_json::Value::Array(v));
    } else {
        for f in &findings {
            let mark = match f.level.as_str() {
                "ok" => "✓",
                "warn" => "!",
                _ => "✗",
            };
            outln!("{mark} {}: {}", f.subject, f.message);
        }
    }
    Ok(if failed { 1 } else { 0 })
}

/// pincerd's offline findings: one `level<TAB>subject<TAB>message` line each.
fn parse(stdout: &[u8]) -> impl Iterator<Item = Finding> + '_ {
    std::str::from_utf8(stdout)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, '\t');
            Some(Finding {
                level: parts.next()?.into(),
                subject: parts.next()?.into(),
                message: parts.next()?.into(),
            })
        })
}
