//! `pincer-scripted-llm`: the zero-latency scripted model as a standalone
//! server for benches and manual tries. Every conversation gets the text
//! given as the first argument (default "ok"); it prints its base URL and
//! serves until killed.

use pincer_testkit::scripted::{ScriptedLlm, Step};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let reply = std::env::args().nth(1).unwrap_or_else(|| "ok".into());
    let llm = ScriptedLlm::start().await?;
    llm.set_journal(false);
    llm.script_cycle("", vec![Step::text(&reply)]);
    println!("{}", llm.base_url());
    std::future::pending::<()>().await;
    Ok(())
}
