//! Harness adapter tests: the real pinned CLIs against the models crate's mock providers, and
//! a fake CLI for every failure mode.

#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

mod claude_real;
mod codex_real;
mod fake;
mod step_budget;
mod support;
