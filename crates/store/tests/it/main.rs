//! The store's integration tests: one conformance suite run against `SQLite` and `PostgreSQL`.
#![expect(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a test fails loudly on any unexpected error and reads top to bottom"
)]

mod support;

mod agent_library;
mod ci_judging;
mod connection_edits;
mod errors;
mod execution;
mod fencing;
mod identity;
mod integrations;
mod journal;
mod leases;
mod library;
mod library_migration;
mod members;
mod memory;
mod queries;
mod queue;
mod relay;
mod repository_migration;
mod repository_owners;
mod runs;
mod runtime_pins;
mod scale;
mod secrets;
mod spend;
mod step_migration;
mod triggers;
mod visibility;
