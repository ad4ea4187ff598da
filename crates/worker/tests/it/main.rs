//! The worker's integration tests.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test fails loudly on any unexpected error"
)]

mod ambiguous;
mod budget;
mod budget_ask;
mod cancel;
mod egress;
mod end_to_end;
mod local_ci;
mod node_executors;
mod patterns;
mod reaper;
mod records;
mod results;
mod resume;
mod scm;
mod services;
mod sign_off;
mod spend;
mod starters;
mod support;
mod telemetry;
mod telemetry_scenario;
mod templates;
