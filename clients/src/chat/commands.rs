//! The chat's local commands and keys: what `pincer chat` handles itself
//! and never sends to the model. `COMMANDS` and `KEYS` are the one list
//! of them; `/help` prints it and the guide (docs/src/cli.md) repeats it.

/// What a local command does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Local {
    Help,
    Exit,
    Reset,
}

/// One local command and its aliases.
pub struct Command {
    pub names: &'static [&'static str],
    pub what: &'static str,
    pub does: Local,
}

pub const COMMANDS: &[Command] = &[
    Command {
        names: &["/help"],
        what: "list these commands and keys",
        does: Local::Help,
    },
    Command {
        names: &["/exit", "/quit"],
        what: "leave the chat",
        does: Local::Exit,
    },
    Command {
        names: &["/new", "/reset"],
        what: "start the session afresh (the old transcript is kept on disk)",
        does: Local::Reset,
    },
];

/// The keys of the line editor worth knowing (on a terminal).
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "send the message"),
    ("\\ then Enter", "continue on a new line (Alt-Enter too)"),
    ("↑ ↓, Ctrl-R", "earlier messages, search them"),
    (
        "Ctrl-C",
        "abort the running turn; at the prompt, clear the line; twice on an empty line, leave",
    ),
    ("Ctrl-D", "leave (on an empty line)"),
];

/// What a line typed at the prompt asks for.
#[derive(Debug, PartialEq)]
pub enum Input {
    Empty,
    Local(Local),
    /// `/word` that is no command.
    Unknown(String),
    Message(String),
}

/// Reads a line: `/word` (letters only) is a local command; `//` starts a
/// message with a literal `/`; anything else, paths like `/etc/hosts`
/// included, is a message.
pub fn parse(line: &str) -> Input {
    let text = line.trim();
    if text.is_empty() {
        return Input::Empty;
    }
    if let Some(rest) = text.strip_prefix("//") {
        return Input::Message(format!("/{rest}"));
    }
    let Some(word) = text.strip_prefix('/') else {
        return Input::Message(text.to_string());
    };
    let (word, rest) = word.split_once(char::is_whitespace).unwrap_or((word, ""));
    if word.is_empty() || !word.chars().all(|c| c.is_ascii_alphabetic() || c == '-') {
        return Input::Message(text.to_string());
    }
    let name = format!("/{word}");
    match COMMANDS.iter().find(|c| c.names.contains(&name.as_str())) {
        Some(c) if rest.trim().is_empty() => Input::Local(c.does),
        _ => Input::Unknown(name),
    }
}

/// The text `/help` prints. `keys` is false when stdin is not a terminal
/// (there is no line editor then).
pub fn help(keys: bool) -> String {
    let mut out = String::from("commands (handled here, never sent to the model):\n");
    for c in COMMANDS {
        out.push_str(&format!("  {:<16} {}\n", c.names.join(" "), c.what));
    }
    out.push_str("  //…              send a message that starts with /\n");
    if keys {
        out.push_str("keys:\n");
        for (key, what) in KEYS {
            out.push_str(&format!("  {key:<16} {what}\n"));
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_local_and_everything_else_is_a_message() {
        assert_eq!(parse("  "), Input::Empty);
        assert_eq!(parse("/help"), Input::Local(Local::Help));
        assert_eq!(parse(" /quit "), Input::Local(Local::Exit));
        assert_eq!(parse("/exit"), Input::Local(Local::Exit));
        assert_eq!(parse("/new"), Input::Local(Local::Reset));
        assert_eq!(parse("/reset"), Input::Local(Local::Reset));
        assert_eq!(parse("/hlep"), Input::Unknown("/hlep".into()));
        assert_eq!(parse("/help me"), Input::Unknown("/help".into()));
        assert_eq!(parse("//help"), Input::Message("/help".into()));
        assert_eq!(
            parse("/etc/hosts has what?"),
            Input::Message("/etc/hosts has what?".into())
        );
        assert_eq!(parse("hi\nthere\n"), Input::Message("hi\nthere".into()));
    }

    #[test]
    fn help_lists_every_command() {
        let text = help(true);
        for c in COMMANDS {
            for name in c.names {
                assert!(text.contains(name), "{name} missing from {text}");
            }
        }
        assert!(text.contains("Ctrl-R"));
        assert!(!help(false).contains("Ctrl-R"));
    }
}
