//! Snapshot tests of whole assembled prompts (insta): the owner's private
//! session, a group chat, a sub-agent, an agent with skills, and bootstrap
//! files over their caps. The workspace is real (a temporary folder with
//! files); the runtime facts are fixed so the snapshots are stable.

use std::path::Path;

use super::bootstrap::{self, Caps};
use super::prompt::{ChatKind, PromptInputs, RuntimeInfo, assemble};
use super::{bootstrap_names, skills};
use crate::config::PromptMode;
use crate::llm::ToolSpec;
use crate::tools::ToolRegistry;

const CAPS: Caps = Caps {
    file_chars: 20_000,
    total_chars: 60_000,
};

fn tools(names: &[&str]) -> Vec<ToolSpec> {
    let registry = ToolRegistry::core();
    names
        .iter()
        .map(|n| {
            registry
                .get(n)
                .map(|t| t.spec())
                .unwrap_or_else(|| panic!("no tool {n}"))
        })
        .collect()
}

fn runtime(chat: ChatKind) -> RuntimeInfo {
    RuntimeInfo {
        agent: "main".into(),
        workspace: "/home/ada/.pincer/workspace".into(),
        os: "linux".into(),
        time_zone: "Europe/Berlin".into(),
        model: "openai/gpt-4.1-mini".into(),
        chat,
    }
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    w(
        "SOUL.md",
        "# SOUL.md\n\nCalm, brief, a little dry. Never gushes.\n",
    );
    w(
        "AGENTS.md",
        "# AGENTS.md\n\n- Answer in the language of the question.\n- Run tests before saying code works.\n",
    );
    w(
        "USER.md",
        "# USER.md\n\nAda, works on compilers, prefers short answers.\n",
    );
    w(
        "MEMORY.md",
        "# MEMORY.md\n\n- The staging server is at 10.0.0.7.\n",
    );
    dir
}

fn prompt(dir: &Path, mode: PromptMode, chat: ChatKind, tool_names: &[&str]) -> String {
    let files = bootstrap::load(dir, &bootstrap_names(mode, &chat), CAPS);
    let skills = if mode == PromptMode::Full {
        skills::discover(dir)
    } else {
        Vec::new()
    };
    let tools = tools(tool_names);
    assemble(&PromptInputs {
        mode,
        instructions: None,
        chat_instructions: None,
        tools: &tools,
        skills: &skills,
        files: &files,
        runtime: &runtime(chat),
    })
}

const CODING: &[&str] = &[
    "read",
    "write",
    "edit",
    "exec",
    "memory_search",
    "memory_get",
];

#[test]
fn owner_private_session() {
    let dir = workspace();
    let p = prompt(dir.path(), PromptMode::Full, ChatKind::OwnerPrivate, CODING);
    assert!(p.contains("10.0.0.7"), "the owner sees MEMORY.md");
    insta::assert_snapshot!(p);
}

#[test]
fn owner_dm_on_a_channel() {
    let dir = workspace();
    let chat = ChatKind::Direct {
        channel: "telegram".into(),
        owner: true,
    };
    let p = prompt(
        dir.path(),
        PromptMode::Full,
        chat,
        &["read", "memory_search"],
    );
    assert!(p.contains("10.0.0.7"), "the owner's DM sees MEMORY.md");
    insta::assert_snapshot!(p);
    // A stranger's DM on the same channel does not.
    let stranger = ChatKind::Direct {
        channel: "telegram".into(),
        owner: false,
    };
    let p = prompt(dir.path(), PromptMode::Full, stranger, &["read"]);
    assert!(!p.contains("10.0.0.7"));
    assert!(p.contains("not talking to the owner"));
}

#[test]
fn group_chat_never_sees_memory_md() {
    let dir = workspace();
    let chat = ChatKind::Group {
        channel: "telegram".into(),
    };
    let p = prompt(
        dir.path(),
        PromptMode::Full,
        chat,
        &["web_fetch", "memory_search"],
    );
    assert!(
        !p.contains("MEMORY.md\n"),
        "no MEMORY.md section in a group"
    );
    assert!(!p.contains("10.0.0.7"));
    insta::assert_snapshot!(p);
}

#[test]
fn sub_agent_gets_the_minimal_prompt() {
    let dir = workspace();
    let mode = PromptMode::Auto.resolve(1_000_000, true);
    assert_eq!(mode, PromptMode::Minimal);
    let p = prompt(dir.path(), mode, ChatKind::SubAgent, &["read", "exec"]);
    assert!(!p.contains("Calm, brief"), "no SOUL.md in minimal");
    assert!(!p.contains("Ada, works"), "no USER.md in minimal");
    assert!(p.contains("Run tests before saying code works"));
    insta::assert_snapshot!(p);
}

#[test]
fn agent_with_skills() {
    let dir = workspace();
    for (folder, text) in [
        (
            "release",
            "---\nname: release\ndescription: Cut a release: bump the version, tag, write the changelog.\n---\n# Release\n1. ...\n",
        ),
        (
            "tdd",
            "---\nname: test-driven-development\ndescription: >\n  Write the failing test first,\n  then the code.\n---\n",
        ),
    ] {
        std::fs::create_dir_all(dir.path().join("skills").join(folder)).unwrap();
        std::fs::write(
            dir.path().join("skills").join(folder).join("SKILL.md"),
            text,
        )
        .unwrap();
    }
    let p = prompt(
        dir.path(),
        PromptMode::Full,
        ChatKind::OwnerPrivate,
        &["read", "exec"],
    );
    insta::assert_snapshot!(p);
    // Without `read` the model could not open a skill: no section.
    let p = prompt(
        dir.path(),
        PromptMode::Full,
        ChatKind::OwnerPrivate,
        &["exec"],
    );
    assert!(!p.contains("# Skills"));
}

#[test]
fn bootstrap_files_over_their_caps_are_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let numbered = |prefix: &str, lines: usize| -> String {
        (0..lines)
            .map(|i| format!("{prefix} line {i:05}\n"))
            .collect()
    };
    // AGENTS.md over the per-file cap, USER.md over what the total leaves.
    std::fs::write(dir.path().join("AGENTS.md"), numbered("agents", 1500)).unwrap();
    std::fs::write(dir.path().join("USER.md"), numbered("user", 600)).unwrap();
    let caps = Caps {
        file_chars: 2_000,
        total_chars: 3_000,
    };
    let chat = ChatKind::OwnerPrivate;
    let files = bootstrap::load(dir.path(), &bootstrap_names(PromptMode::Full, &chat), caps);
    // The trailing newline is trimmed before counting.
    assert_eq!(
        files[0].trimmed.map(|t| (t.from, t.cap)),
        Some((1500 * 18 - 1, 2_000))
    );
    assert!(files[1].trimmed.is_some());
    let tools = tools(&["read"]);
    let p = assemble(&PromptInputs {
        mode: PromptMode::Full,
        instructions: Some("Reply in English."),
        chat_instructions: None,
        tools: &tools,
        skills: &[],
        files: &files,
        runtime: &runtime(chat),
    });
    assert!(p.contains("agents line 00000"), "the head is kept");
    assert!(p.contains("agents line 01499"), "the tail is kept");
    assert!(!p.contains("agents line 00700"), "the middle is gone");
    insta::assert_snapshot!(p);
}

#[test]
fn none_mode_is_the_identity_line_and_instructions_only() {
    let dir = workspace();
    let files = bootstrap::load(
        dir.path(),
        &bootstrap_names(PromptMode::None, &ChatKind::OwnerPrivate),
        CAPS,
    );
    assert!(files.is_empty());
    let tools = tools(&["read"]);
    let p = assemble(&PromptInputs {
        mode: PromptMode::None,
        instructions: Some("You are a terse shell helper."),
        chat_instructions: None,
        tools: &tools,
        skills: &[],
        files: &files,
        runtime: &runtime(ChatKind::OwnerPrivate),
    });
    assert_eq!(
        p,
        format!(
            "{}\n\nYou are a terse shell helper.\n",
            super::prompt::IDENTITY_LINE
        )
    );
}

#[test]
fn auto_mode_is_minimal_for_small_windows() {
    assert_eq!(PromptMode::Auto.resolve(8_192, false), PromptMode::Minimal);
    assert_eq!(PromptMode::Auto.resolve(128_000, false), PromptMode::Full);
    assert_eq!(PromptMode::Full.resolve(8_192, false), PromptMode::Full);
    assert_eq!(PromptMode::None.resolve(128_000, true), PromptMode::None);
}

#[test]
fn a_group_prompt_follows_the_agents_instructions() {
    let dir = workspace();
    let chat = ChatKind::Group {
        channel: "telegram".into(),
    };
    let files = bootstrap::load(dir.path(), &bootstrap_names(PromptMode::Full, &chat), CAPS);
    let tools = tools(&["memory_search"]);
    let inputs = PromptInputs {
        mode: PromptMode::Full,
        instructions: Some("You help the Tuesday chess club."),
        chat_instructions: Some("  Answer in French; keep it to two sentences.\n"),
        tools: &tools,
        skills: &[],
        files: &files,
        runtime: &runtime(chat),
    };
    let p = assemble(&inputs);
    let at = |needle: &str| p.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    assert!(at("Tuesday chess club") < at("# This chat"));
    assert!(at("## SOUL.md") < at("# This chat"));
    assert!(at("# This chat") < at("# Safety"));
    insta::assert_snapshot!(p);
    // Also where the prompt is only the identity and the instructions.
    let p = assemble(&PromptInputs {
        mode: PromptMode::None,
        files: &[],
        ..inputs
    });
    assert_eq!(
        p,
        format!(
            "{}\n\nYou help the Tuesday chess club.\n\n# This chat\nThe owner's instructions for this chat:\nAnswer in French; keep it to two sentences.\n",
            super::prompt::IDENTITY_LINE
        )
    );
}
