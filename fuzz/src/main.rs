//! `pincer-fuzz <target>`: the fuzz target named, in AFL++'s persistent
//! mode (afl-fuzz feeds it inputs without a new process each);
//! `pincer-fuzz --list` names every target. Built and run by fuzz/run.sh.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: pincer-fuzz <target> | --list");
        return ExitCode::from(2);
    };
    if name == "--list" {
        for t in pincer_daemon::fuzz::TARGETS {
            println!("{}", t.name);
        }
        return ExitCode::SUCCESS;
    }
    let Some(target) = pincer_daemon::fuzz::target(&name) else {
        eprintln!("pincer-fuzz: no target `{name}`; `pincer-fuzz --list` names them");
        return ExitCode::from(2);
    };
    let run = target.run;
    afl::fuzz!(|data: &[u8]| {
        run(data);
    });
    ExitCode::SUCCESS
}
