//! Harness adapters: third-party agent loops driven through the runtime's harness seam.
//!
//! [`ClaudeCodeAdapter`] drives the pinned Claude Code CLI over its stream-json control
//! protocol and decides every tool call in the worker (the CLI asks through a `PreToolUse`
//! hook and `can_use_tool` requests on a pipe the worker owns). [`CodexAdapter`] drives the
//! Codex CLI's `exec --json` mode; it cannot ask the worker before a call, so it declares
//! `enforces_per_call_policy_in_worker = false` and runs only where policy is not required.
//! Both run the CLI under a [`lifeline`] (its process group dies when the worker lets go of
//! the turn) and check the binary against its pin ([`PinnedCli`]) before every turn.
//!
//! ```
//! use auto_swe_harnesses::{CODEX_LINUX_X64_SHA256, CODEX_RUNTIME, CodexAdapter, CodexConfig, PinnedCli};
//! use auto_swe_runtime::HarnessAdapter;
//!
//! let cli = PinnedCli {
//!     path: "/opt/codex/bin/codex".to_owned(),
//!     sha256: CODEX_LINUX_X64_SHA256.to_owned(),
//! };
//! let adapter = CodexAdapter::new(CodexConfig::new(cli, "gpt-5"));
//! assert_eq!(adapter.name(), CODEX_RUNTIME);
//! // Codex runs its tool calls without asking: a step that requires per-call policy refuses it.
//! assert!(!adapter.capabilities().enforces_per_call_policy_in_worker);
//! ```

pub mod claude;
pub mod codex;
mod error;
pub mod lifeline;
mod lines;
mod pinned;

/// The pinned Claude Code release (npm `@anthropic-ai/claude-code`).
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";
/// The SHA-256 of its linux-x64 binary (`bin/claude.exe`).
pub const CLAUDE_CODE_LINUX_X64_SHA256: &str =
    "a2df1f41bb00250992926420d0063f89b127cb81abdd284dbefb80c50ff1d026";
/// The pinned Codex CLI release (npm `@openai/codex`).
pub const CODEX_VERSION: &str = "0.171.0";
/// The SHA-256 of its linux-x64 binary (`vendor/x86_64-unknown-linux-musl/bin/codex`).
pub const CODEX_LINUX_X64_SHA256: &str =
    "b76a027d6b210f9a8da7aaf321dd235c700f0ef7a794d4a5314b9af6c134f0f0";

pub use claude::{CLAUDE_CODE_RUNTIME, ClaudeCodeAdapter, ClaudeCodeConfig};
pub use codex::{CODEX_RUNTIME, CodexAdapter, CodexConfig};
pub use error::ProtocolError;
pub use lines::{JsonLines, MAX_LINE_BYTES, Transcript};
pub use pinned::PinnedCli;
