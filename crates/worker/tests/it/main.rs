//! The worker's integration tests.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test fails loudly on any unexpected error"
)]

mod end_to_end;
mod reaper;
mod resume;
mod support;
mod templates;
