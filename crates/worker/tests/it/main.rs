//! The worker's integration tests.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test fails loudly on any unexpected error"
)]

mod resume;
mod support;
mod templates;
