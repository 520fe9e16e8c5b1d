//! End-to-end tests: the real `pincerd` and `pincer` binaries in temporary
//! homes, against our scripted model and the real peers of SPEC §15.

mod boundary;
mod chat_tty;
mod cli;
mod cli_output;
mod config_check;
mod context;
mod discord;
mod discord_crabline;
mod discord_emulator;
mod escapes;
mod fakellm;
mod grpc;
mod guard;
mod hostile;
mod lifecycle;
mod llmock;
mod markdown;
mod mcp;
mod memory;
mod messages;
mod models;
mod package;
mod plugins;
mod policy;
mod sandbox;
mod scripted;
mod service;
mod sessions_tools;
mod shutdown;
mod telegram;
mod telegram_approvals;
mod telegram_emulator;
mod telegram_pairing;
mod telegram_recovery;
mod textformat;
