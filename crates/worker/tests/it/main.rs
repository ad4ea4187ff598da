//! The worker's integration tests.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test fails loudly on any unexpected error"
)]

mod budget;
mod budget_ask;
mod cancel;
mod end_to_end;
mod node_executors;
mod patterns;
mod reaper;
mod resume;
mod scm;
mod sign_off;
mod support;
mod telemetry;
mod templates;
