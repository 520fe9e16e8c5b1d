//! What is generated from the clap definitions in `cli.rs` rather than
//! written by hand: `pincer completions bash|zsh|fish` (clap_complete) and
//! `pincer man` (clap_mangen). Both work without a home or a daemon, so the
//! package build runs the freshly built `pincer` to make the files it ships.

use std::path::Path;

use clap::CommandFactory;
use clap_complete::aot::{Shell, generate};

use crate::cli::{Cli, CompletionShell};
use crate::error::CliError;
use crate::out::out;

/// The completion script for `shell`, printed on stdout.
pub fn completions(shell: CompletionShell) -> Result<u8, CliError> {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut script = Vec::new();
    generate(shell, &mut Cli::command(), "pincer", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Ok(0)
}

/// `pincer.1` on stdout, or with `dir` every page (pincer.1,
/// pincer-chat.1, pincer-sessions-list.1, ...) written there.
pub fn man(dir: Option<&Path>) -> Result<u8, CliError> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), dir))
                .map_err(|e| {
                    CliError::failed(format!(
                        "cannot write the man pages into {}: {e}",
                        dir.display()
                    ))
                })?;
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .map_err(|e| CliError::failed(format!("cannot render the man page: {e}")))?;
            out!("{}", String::from_utf8_lossy(&page));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered_page() -> String {
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut page)
            .unwrap();
        String::from_utf8(page).unwrap()
    }

    #[test]
    fn the_bash_script_completes_the_subcommands() {
        let mut script = Vec::new();
        generate(Shell::Bash, &mut Cli::command(), "pincer", &mut script);
        let script = String::from_utf8(script).unwrap();
        assert!(script.contains("complete -F _pincer"), "{script}");
        for word in ["chat", "sessions", "completions", "man", "doctor"] {
            assert!(script.contains(word), "no {word} in:\n{script}");
        }
    }

    #[test]
    fn the_man_page_is_roff_with_every_subcommand() {
        let page = rendered_page();
        // clap_mangen opens with its quote-string preamble (.ie/.el), then
        // the title line.
        let title = page
            .lines()
            .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"))
            .unwrap();
        assert!(title.starts_with(".TH pincer 1 "), "{page}");
        assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
        for sub in [
            "pincer\\-chat(1)",
            "pincer\\-completions(1)",
            "pincer\\-man(1)",
        ] {
            assert!(page.contains(sub), "no {sub} in:\n{page}");
        }
        assert!(page.contains(crate::cli::VERSION), "{page}");
    }

    #[test]
    fn man_dir_writes_one_page_per_subcommand() {
        let dir = std::env::temp_dir().join(format!("pincer-man-{}", std::process::id()));
        man(Some(&dir)).unwrap();
        for page in ["pincer.1", "pincer-chat.1", "pincer-sessions-list.1"] {
            let text = std::fs::read_to_string(dir.join(page)).unwrap();
            assert!(text.contains(".TH"), "{page}: {text}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
